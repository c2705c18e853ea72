"""Megatron's vocabulary: its two generations of ``RankGenerator``, its
parallelism arguments read through the crate's one table
(:func:`megatron_config`), and the audit of Megatron-LM's encoder joins
(:func:`audit`).

- :class:`RankGenerator`: Megatron-LM's 2024 generator (commit 4ff9e66):
  ``ep`` carved out of ``dp`` (``world_size = tp*dp*pp*cp``), and
  ``get_ranks(token, independent_ep=False)``.
- :class:`CoreRankGenerator`: Megatron-Core's (releases 0.16.1 to 0.19.2):
  ``ep`` an axis of its own (``world_size = tp*dp*pp*cp*ep*gtp_remat``),
  ``gtp_remat`` (0.19's weight shards, default 1), ``get_ranks(token)``
  and ``get_gtp_ranks(n)``. Its signature is Megatron-Core 0.19's
  ``RankGenerator(tp, ep, dp, pp, cp, order, rank_offset=0, gtp_remat=1)``.

Two classes rather than one switched by ``gtp_remat``: the two grids differ
whenever ``ep > 1`` whether or not ``gtp_remat`` is given, so code ported
from Megatron-Core 0.16 (which has no ``gtp_remat``) would silently get the
2024 groups from a switch.

>>> from rank_layout.megatron import CoreRankGenerator, RankGenerator
>>> RankGenerator(tp=2, ep=1, dp=3, pp=4, cp=1, order="tp-dp-pp").get_ranks("dp")[0]
[0, 2, 4]
>>> RankGenerator(1, 2, 4, 1, 1, "tp-cp-ep-dp-pp").get_ranks("ep", independent_ep=True)
[[0, 1], [2, 3]]
>>> CoreRankGenerator(1, 2, 4, 1, 1, "tp-cp-ep-dp-pp").get_ranks("ep")[:2]  # 8 ranks: ep x dp
[[0, 1], [2, 3]]
>>> CoreRankGenerator(2, 1, 2, 1, 1, "tp-gtp_remat-cp-ep-dp-pp", gtp_remat=2).get_ranks("gtp_remat")[:2]
[[0, 2], [1, 3]]
"""

from rank_layout import MEGATRON_ARGS, MEGATRON_REFUSED, megatron_config
from rank_layout._native import CoreRankGenerator, RankGenerator, audit

__all__ = [
    "RankGenerator",
    "CoreRankGenerator",
    "MEGATRON_ARGS",
    "MEGATRON_REFUSED",
    "audit",
    "megatron_config",
]
