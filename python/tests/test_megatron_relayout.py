"""rank_layout.torch.megatron.relayout_model_parallel on real gloo process
groups, with megatron-core installed: 8 and 16 processes under the
Megatron-Core drop-in, one of which exits mid-job; the survivors install
the parallel state of the plan's new layout, keep the kept groups (the
same objects) and answer through megatron.core.parallel_state's getters
for the new layout (megatron_relayout_worker says how). No process may
hang: every wait has a 60 s timeout, and the harness kills the world past
its deadline and fails the test."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import require

torch = require("torch")
require("megatron.core")

import megatron_relayout_worker  # noqa: E402
import worlds  # noqa: E402
from rank_layout import Layout, relayout  # noqa: E402

pytestmark = pytest.mark.slow  # gloo worlds of 8 and 16 processes


@pytest.fixture(autouse=True)
def quiet_world(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.setenv(name, "1")
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("GLOO_SOCKET_IFNAME", os.environ.get("GLOO_SOCKET_IFNAME", "lo"))


CASES = [
    # 8 processes: tp 2, pp 2, dp 2; process 5 fails.
    ("8 drop-replica", 8, dict(tensor_model_parallel_size=2, pipeline_model_parallel_size=2), 5, "drop-replica"),
    ("8 shift-ranks", 8, dict(tensor_model_parallel_size=2, pipeline_model_parallel_size=2), 5, "shift-ranks"),
    # 16 processes: tp 2, cp 2, pp 2, dp 2; process 9 fails.
    (
        "16 drop-replica",
        16,
        dict(tensor_model_parallel_size=2, context_parallel_size=2, pipeline_model_parallel_size=2),
        9,
        "drop-replica",
    ),
]


@pytest.mark.parametrize("label, world, args, failed, policy", CASES, ids=[c[0] for c in CASES])
def test_relayout_model_parallel(label: str, world: int, args: dict[str, Any], failed: int, policy: str, tmp_path: Path) -> None:
    job = {"args": args, "failed": failed, "policy": policy}
    results = worlds.run_world(
        megatron_relayout_worker.run, world, job, tmp_path, 240.0, exit_codes={failed: megatron_relayout_worker.FAILED_EXIT}
    )
    assert results[failed].get("exited") is True
    layout = Layout(
        tp=args["tensor_model_parallel_size"],
        cp=args.get("context_parallel_size", 1),
        pp=args["pipeline_model_parallel_size"],
        world_size=world,
    )
    plan = relayout(layout, [failed], policy=policy, kinds=["tp", "pp", "dp"])
    survivors = [r for r in results if r["rank"] != failed]
    assert {r["hash"] for r in survivors} == {f"{plan.hash:016x}"}
    placed = [r for r in survivors if r["new_rank"] is not None]
    assert sorted(r["new_rank"] for r in placed) == list(range(plan.world_size))
    # Kept and made groups, counted over the processes, are the plan's.
    for kind in ("tp", "pp", "dp"):
        kept = sum(1 for r in placed if r["checked"][kind] == "kept")
        sizes = plan.layout.sizes
        per_group = {"tp": sizes["tp"], "pp": sizes["pp"], "dp": sizes["dp"]}[kind]
        assert kept == plan.kinds[kind]["kept"] * per_group, (kind, kept, plan.kinds[kind])
    if policy == "drop-replica":
        # Nothing new: every tp and pp group is kept, the dp groups are
        # made again (gloo cannot shrink).
        assert plan.kinds["tp"]["new"] == plan.kinds["pp"]["new"] == 0
        assert all(r["checked"]["tp"] == "kept" and r["checked"]["pp"] == "kept" for r in placed)
