"""rank_layout.torch.apply_reshard on real gloo process groups, 8 and 16
processes, each world running three reshards in turn on the default
group: collocated (both layouts on every process), disjoint (the source
layout on the first half, the destination on the second) and, last,
after a killed process (it SIGKILLs itself; the survivors plan the
reshard of the re-layout without it, ``Side::before`` to
``Side::after``, and run it among themselves). The model
(reshard_worker.model) has every kind of sharding; every element of
every destination tensor is checked against the global tensors
(reshard_worker says how); none may be wrong or missing, and no process
may hang: the harness kills the world past its deadline and fails the
test.

Without torch these tests are reported as skipped, with the reason;
under CI they fail (conftest.require)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import require

#: The cases of each world, in order (the killed process's case last).
CASES: dict[int, list[dict[str, Any]]] = {
    8: [
        {"label": "collocated tp2 pp2 dp2 ep2 -> tp4 dp2 ep4 etp2", "gpus_per_node": 4,
         "from": dict(tp=2, pp=2, dp=2, ep=2, etp=1), "to": dict(tp=4, dp=2, ep=4, etp=2)},
        {"label": "disjoint 0-3 tp2 pp2 ep2 -> 4-7 tp2 dp2 ep4", "gpus_per_node": 2, "allocate": "executor",
         "from": dict(tp=2, pp=2, ep=2, etp=1, world_size=4),
         "to": dict(tp=2, dp=2, ep=4, etp=1, world_size=4, rank_offset=4)},
        {"label": "process 5 killed, shift-ranks", "gpus_per_node": 4,
         "from": dict(tp=2, pp=2, dp=2, ep=2, etp=1), "failed": 5, "policy": "shift-ranks"},
    ],
    16: [
        {"label": "collocated tp2 pp4 dp2 ep2 -> tp4 dp4 ep4 etp2", "gpus_per_node": 4,
         "from": dict(tp=2, pp=4, dp=2, ep=2, etp=1), "to": dict(tp=4, dp=4, ep=4, etp=2)},
        {"label": "disjoint 0-7 tp2 pp2 dp2 ep4 -> 8-15 tp4 dp2 ep2 etp2", "gpus_per_node": 4, "allocate": "executor",
         "from": dict(tp=2, pp=2, dp=2, ep=4, etp=1, world_size=8),
         "to": dict(tp=4, dp=2, ep=2, etp=2, world_size=8, rank_offset=8)},
        {"label": "process 9 killed, fill-gaps", "gpus_per_node": 4,
         "from": dict(tp=2, pp=2, dp=4, ep=2, etp=1), "failed": 9, "policy": "fill-gaps"},
    ],
}


@pytest.fixture(autouse=True)
def quiet_world(monkeypatch: pytest.MonkeyPatch) -> None:
    """One thread per process, loopback only, a bounded resolver (see
    test_torch.py)."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.setenv(name, "1")
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("GLOO_SOCKET_IFNAME", os.environ.get("GLOO_SOCKET_IFNAME", "lo"))
    monkeypatch.setenv("RES_OPTIONS", os.environ.get("RES_OPTIONS", "timeout:1 attempts:1"))


@pytest.mark.parametrize("world", sorted(CASES))
def test_apply_reshard_gloo(world: int, tmp_path: Path) -> None:
    require("torch")
    import reshard_worker
    from worlds import run_world

    cases = CASES[world]
    killed = {c["failed"]: -signal.SIGKILL for c in cases if "failed" in c}
    results = run_world(reshard_worker.run, world, {"cases": cases}, tmp_path, deadline_s=240, exit_codes=killed)
    for case in cases:
        plan = reshard_worker.plan_of_case(case)
        seen = {r["rank"]: r["cases"][case["label"]] for r in results if case["label"] in r["cases"]}
        # Every process of the plan ran it (the killed one is in no case
        # after its death); each checked every destination tensor it holds.
        survivors = [p for p in range(world) if p not in killed or "failed" not in case]
        assert sorted(seen) == survivors, case["label"]
        for p, s in seen.items():
            held = sum(plan.destination_shard(p, n) is not None for n in plan.tensor_names) if reshard_worker._in_plan(plan, p) else 0
            assert s["checked"] == held, (case["label"], p)
        total = sum(s["elements"] for s in seen.values())
        moved = plan.cost()
        assert moved["messages"] == sum(s["recvs"] for s in seen.values()) == sum(s["sends"] for s in seen.values())
        assert total > 0 and moved["messages"] > 0, case["label"]
        if "failed" in case:
            # The dead process holds, sends and receives nothing.
            assert all(case["failed"] not in (t["src"], t["dst"]) for t in plan.transfers())
        print(f"{case['label']}: {total} elements checked, {moved['messages']} messages, "
              f"{moved['local_copies']} local copies, slowest apply {max(s.get('seconds', 0) for s in seen.values()):.2f} s")
    assert all(r.get("killed") for r in results if r["rank"] in killed)


def test_apply_reshard_checks_before_any_message() -> None:
    """Tensors that do not fit the plan raise LayoutError naming them,
    before any message (no process group is needed to see it)."""
    torch = require("torch")
    from rank_layout import Layout, LayoutError, reshard
    from rank_layout.torch import apply_reshard

    model = {"num_layers": 1, "tensors": [
        {"name": "w", "shape": [8, 4], "element_bytes": 4, "tp_dim": 0},
        {"name": "b", "shape": [4], "element_bytes": 4, "layer": 0},
    ]}
    plan = reshard(Layout(tp=2, world_size=2), Layout(world_size=2), tensors=model)
    w, b = torch.zeros(4, 4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
    cases = [
        ({"w": torch.zeros(8, 4, dtype=torch.int32), "b": b}, {}, "tensor w: process 0's source shard has shape [4, 4], got a tensor of shape [8, 4]"),
        ({"w": w.double(), "b": b}, {}, "tensor w: 4 bytes per element in the model, got torch.float64 (8 bytes)"),
        ({"w": w}, {}, "process 0 sends tensor b: it is missing from sources"),
        ({"w": w, "b": b, "x": b}, {}, "no tensor named 'x' in the model"),
        ({"w": w, "b": b}, {"destinations": {"w": torch.zeros(4, 4, dtype=torch.int32)}},
         "tensor w: process 0's destination shard has shape [8, 4], got a tensor of shape [4, 4]"),
    ]
    for sources, kwargs, message in cases:
        with pytest.raises(LayoutError) as e:
            apply_reshard(plan, sources, process=0, **kwargs)
        assert str(e.value) == message
    disjoint = reshard(Layout(tp=2, world_size=2), Layout(world_size=1, rank_offset=2), tensors=model)
    with pytest.raises(LayoutError, match="tensor w: give its dtype"):
        apply_reshard(disjoint, {}, process=2)
    with pytest.raises(LayoutError, match="process 2 holds no source shard of tensor w"):
        apply_reshard(disjoint, {"w": w}, process=2)
