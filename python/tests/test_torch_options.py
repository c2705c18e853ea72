"""rank_layout.torch.new_groups' options on real gloo process groups:
kinds with the same groups share one process group, ``backend`` and
``pg_options`` by kind. (No megatron-core needed.)"""

from __future__ import annotations

from pathlib import Path

import pytest

import megatron_core_worker as mcw

pytestmark = pytest.mark.slow  # a gloo world of 8 processes


def test_shared_groups_backend_and_options_8_processes(tmp_path: Path) -> None:
    results = mcw.spawn(8, [("options", "options", {})], tmp_path, deadline_s=240)
    got = {(r["results"]["options"]["calls_shared"], r["results"]["options"]["calls_separate"]) for r in results}
    # tp=2, pp=2 on 8 ranks (cp = ep = 1): 16 kinds, 7 process groups: tp
    # (also tp-cp, tp-ep), pp (also embd: first and last of 2 stages), dp
    # (dp-cp, dp-mod-ep, dp-cp-mod-ep), cp (ep: every rank alone), tp-pp
    # (tp-ep-pp), tp-dp (tp-dp-cp), pos-embd.
    assert got == {(7, 16)}, got
    # Distinct group objects a rank holds: 7, or 6 off the first stage (no pos-embd group).
    assert {r["results"]["options"]["distinct"] for r in results} == {6, 7}
