"""rank_layout.torch.new_groups on real torch.distributed process groups:
gloo, several processes on this machine.

Without torch these tests are reported as skipped, with the reason; under
CI they fail (conftest.require)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import require

torch = require("torch")
import torch.distributed as dist  # noqa: E402

import dist_worker  # noqa: E402
import worlds  # noqa: E402
from rank_layout import Layout  # noqa: E402

pytestmark = pytest.mark.slow  # gloo worlds of 8 and 16 processes


def run_world(world: int, jobs: list, tmp_path: Path, deadline_s: float) -> list[dict[str, Any]]:
    """Runs dist_worker.run in ``world`` spawned processes (worlds.run_world)
    and checks every rank checked each of its groups of each job."""
    results = worlds.run_world(dist_worker.run, world, jobs, tmp_path, deadline_s)
    for r in results:  # each rank checked each of its groups of each job
        assert r["checked"] == {f"{name}/{method}": memberships(config, r["rank"]) for name, config, method in jobs}
    return results


def memberships(config: dict[str, Any], rank: int) -> int:
    """How many groups ``rank`` is in, over every kind of a layout."""
    layout = Layout(**config)
    if not layout.rank_offset <= rank < layout.rank_offset + layout.world_size:
        return 0
    return sum(len(layout.memberships(rank, kind)) for kind in layout.kinds)


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("GLOO_SOCKET_IFNAME", os.environ.get("GLOO_SOCKET_IFNAME", "lo"))
    # torch's store server resolves each new client by reverse DNS on its
    # only thread; a resolver that drops such queries stalls every rank for
    # its whole timeout (5 s) per connection. Bound it.
    monkeypatch.setenv("RES_OPTIONS", os.environ.get("RES_OPTIONS", "timeout:1 attempts:1"))


# Layouts that fit 8 ranks: fan-out and fan-in (a rank in several groups
# of one kind), distributed-optimizer groups, a layout that leaves ranks out.
EIGHT = {
    "dense_tp2_cp2_pp2": dict(tp=2, cp=2, pp=2),
    "dense_tp2_pp2_dp2_offset": dict(tp=2, pp=2, dp=1, rank_offset=4),
    "encdec_fan_out": dict(tp=2, cp=2, encoder_tp=1),
    "encdec_fan_in": dict(tp=1, cp=2, encoder_tp=2),
    "folded_dist_opt": dict(cp=2, dp=4, ep=2, etp=1, expert_layout="folded", dist_opt_instances=2),
}


def test_new_groups_gloo_8_processes(tmp_path: Path) -> None:
    assert dist.is_gloo_available()
    jobs = [(name, config, method) for name, config in EIGHT.items() for method in ("local", "global")]
    results = run_world(8, jobs, tmp_path, deadline_s=240)
    # The fan-out encoder's ranks are in two pp and two embd groups; ranks
    # 6 and 7 are outside the layout.
    fan_out = [r["checked"]["encdec_fan_out/local"] for r in results]
    assert fan_out[:2] == [18, 18] and fan_out[6:] == [0, 0]


def test_new_groups_gloo_dense_tp_cp_pp_dp(tmp_path: Path) -> None:
    """tp, cp, pp and dp all 2 need 16 ranks, so 16 processes."""
    jobs = [
        ("dense_tp2_cp2_pp2_dp2", dict(tp=2, cp=2, pp=2, dp=2), "local"),
        ("dense_tp2_cp2_pp2_dp2", dict(tp=2, cp=2, pp=2, dp=2), "global"),
        ("encdec_fan_out_12", dict(tp=4, cp=2, encoder_tp=2), "local"),
    ]
    run_world(16, jobs, tmp_path, deadline_s=400)
