"""rank_layout.torch.new_module_groups on real process groups: gloo, 8
processes on this machine (loopback only).

Each process builds every module group and every bridge group of each
job's Modules, checks each group's members and rank, and moves data along
each edge: on the leader plan, each source leader sends its lane number to
its paired destination leaders over the bridge group, and each destination
leader broadcasts what it received in its dst_broadcast group; on the
colocated gather plan, every rank all-gathers its source lane in its
gather group. Every destination rank must end with exactly the source
lanes the plan pairs with its lane.

Without torch these tests are reported as skipped, with the reason; under
CI they fail (conftest.require)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import require

torch = require("torch")

import modules_worker  # noqa: E402
import worlds  # noqa: E402

JOBS = [
    # enc dp 4 (ranks 0-3) -> llm tp 2 x dp 2 (ranks 4-7): fan-in by 2.
    ("fan_in", {"modules": [("enc", [("dp", 4)]), ("llm", [("tp", 2), ("dp", 2)])], "edges": [("enc", "llm")]}),
    # enc tp 2 x pp 2 (ranks 0-3, one lane, leader 3) -> llm cp 2 x dp 2
    # (ranks 4-7): fan-out by 2, with the destination's cp reduce groups.
    (
        "fan_out_cp_pp",
        {"modules": [("enc", [("tp", 2), ("pp", 2)]), ("llm", [("cp", 2), ("dp", 2)])], "edges": [("enc", "llm")]},
    ),
    # Colocated, lanes lined up: the gather plan (fan-in by 2, cp on both).
    (
        "colocated_collective",
        {
            "modules": [("enc", [("cp", 2), ("dp", 4)]), ("llm", [("tp", 2), ("cp", 2), ("dp", 2)])],
            "edges": [("enc", "llm")],
            "colocated": True,
        },
    ),
    # Colocated, lanes not lined up: the leader plan on the same ranks.
    (
        "colocated_p2p",
        {
            "modules": [("enc", [("dp", 4), ("tp", 2)]), ("llm", [("tp", 4), ("dp", 2)])],
            "edges": [("enc", "llm")],
            "colocated": True,
        },
    ),
]

# What each rank received along the edge (None: not a destination rank).
MOVED = {
    "fan_in": [None] * 4 + [[0, 1], [0, 1], [2, 3], [2, 3]],
    "fan_out_cp_pp": [None] * 4 + [[0]] * 4,
    "colocated_collective": [[0, 1]] * 4 + [[2, 3]] * 4,
    "colocated_p2p": [[0, 1]] * 4 + [[2, 3]] * 4,
}


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("GLOO_SOCKET_IFNAME", os.environ.get("GLOO_SOCKET_IFNAME", "lo"))
    monkeypatch.setenv("RES_OPTIONS", os.environ.get("RES_OPTIONS", "timeout:1 attempts:1"))


def memberships(spec: dict, rank: int) -> int:
    """How many groups ``rank`` is in, over the worker's dim sets and every
    bridge kind."""
    modules = modules_worker.build(spec)
    n = sum(
        modules.members(rank, dims, r) is not None for dims in modules_worker.DIMS for r in range(modules.rounds)
    )
    for src, dst in modules.edges:
        n += sum(modules.bridge_members(rank, src, dst, k) is not None for k in modules.bridge_kinds(src, dst))
    return n


def test_plans_of_the_jobs() -> None:
    """The plans the gloo run moves data along, checked by hand."""
    plans = {name: modules_worker.build(spec).bridge("enc", "llm") for name, spec in JOBS}
    assert plans["fan_in"]["pairs"] == [(0, 4), (1, 4), (2, 6), (3, 6)]
    assert plans["fan_out_cp_pp"]["pairs"] == [(3, 4), (3, 6)]
    assert plans["fan_out_cp_pp"]["dst_cp_reduce"] == [[4, 5], [6, 7]]
    assert plans["colocated_collective"]["colocated"]["gather_groups"] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert plans["colocated_p2p"]["colocated"]["mode"] == "p2p"
    assert plans["colocated_p2p"]["pairs"] == [(4, 0), (5, 0), (6, 4), (7, 4)]


def test_module_groups_gloo_8_processes(tmp_path: Path) -> None:
    import torch.distributed as dist

    assert dist.is_gloo_available()
    results = worlds.run_world(modules_worker.run, 8, JOBS, tmp_path, deadline_s=240)
    for r in results:
        assert r["checked"] == {name: memberships(spec, r["rank"]) for name, spec in JOBS}
        assert r["moved"] == {name: {"enc->llm": MOVED[name][r["rank"]]} for name, _ in JOBS}
