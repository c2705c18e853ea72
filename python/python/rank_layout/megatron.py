"""Megatron-LM's vocabulary: its ``RankGenerator`` (commit 4ff9e66, the same
arguments and lists, as keywords too), its parallelism arguments read
through the crate's one table (:func:`megatron_config`), and the audit of
its encoder joins (:func:`audit`).

>>> from rank_layout.megatron import RankGenerator
>>> RankGenerator(tp=2, ep=1, dp=3, pp=4, cp=1, order="tp-dp-pp").get_ranks("dp")[0]
[0, 2, 4]
"""

from rank_layout import MEGATRON_ARGS, MEGATRON_REFUSED, megatron_config
from rank_layout._native import RankGenerator, audit

__all__ = ["RankGenerator", "MEGATRON_ARGS", "MEGATRON_REFUSED", "audit", "megatron_config"]
