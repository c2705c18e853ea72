"""Rank maps: :func:`rank_layout.placement_rank_map` (a placement and the
launcher's view of each process -> logical rank to torch rank), and the
``rank_map=`` of ``new_groups``, ``new_module_groups`` and the
Megatron-Core drop-in: with a shuffled map every process gets the groups
planned for its logical rank, with the members' torch ranks in the
layout's order.

On torch's fake backend (one process acting as each rank of a world in
turn) for every rank, and on 8 gloo processes (real groups, all-reduces).
Without torch these tests are reported as skipped; under CI they fail
(conftest.require)."""

from __future__ import annotations

import os
import random
import sys
import warnings
from pathlib import Path
from typing import Any, Iterator

import pytest
from conftest import require

from rank_layout import Layout, LayoutError, Mesh, Modules, place, placement_rank_map

torch = require("torch")
import torch.distributed as dist  # noqa: E402

import worlds  # noqa: E402
import launch_worker  # noqa: E402
from rank_layout.torch import gather_rank_map, new_groups, new_module_groups  # noqa: E402
from rank_layout.torch import megatron as rl_megatron  # noqa: E402


def shuffled(world: int, seed: int) -> list[int]:
    m = list(range(world))
    random.Random(seed).shuffle(m)
    assert m != list(range(world))
    return m


# -- placement_rank_map ---------------------------------------------------------


def test_placement_rank_map_from_a_placement() -> None:
    """c10d sorted the hosts by name; the placement keeps each rack's pair
    together: logical rank r runs where the launcher's rank map[r] runs."""
    hosts = "a1 rackA 2\nb1 rackB 2\na2 rackA 2\nb2 rackB 2\n"
    p = place(Layout(tp=4, world_size=8), hosts, must_fit=["tp"])
    assert p["node_hosts"] == ["a1", "a2", "b1", "b2"]
    launcher = ["a1", "a1", "a2", "a2", "b1", "b1", "b2", "b2"]
    assert placement_rank_map(p, launcher) == list(range(8))
    by_address = ["a1", "a1", "b1", "b1", "a2", "a2", "b2", "b2"]
    rank_map = placement_rank_map(p, by_address)
    assert rank_map == [0, 1, 4, 5, 2, 3, 6, 7]
    for group in Layout(tp=4, world_size=8).groups("tp"):
        assert len({by_address[rank_map[r]][0] for r in group}) == 1  # one rack
    # (host, local rank) pairs, in any order of local ranks.
    pairs = [("b2", 1), ("b2", 0), ("a1", 0), ("a1", 1), ("a2", 1), ("a2", 0), ("b1", 0), ("b1", 1)]
    assert placement_rank_map(p["node_hosts"], pairs, 2) == [2, 3, 5, 4, 6, 7, 1, 0]


@pytest.mark.parametrize(
    ("placement", "launcher", "gpus", "message"),
    [
        (["a", "b"], ["a", "b"], None, "gpus_per_node is needed"),
        (["a", "b"], ["a", "b", "a"], 1, "the launcher has 3 processes; the placement runs 2"),
        (["a", "b"], ["a", "c"], 1, "'c', a host the placement does not use"),
        (["a", "b"], [("a", 0), ("b", 1)], 1, "local rank 1 is not below 1"),
        (["a", "b"], [("a", 0), ("a", 0), ("b", 0), ("b", 1)], 2, "both local rank 0 of 'a'"),
        (["a", "a"], ["a", "a"], 1, "holds nodes 0 and 1"),
        ("ab", ["a", "b"], 1, "got a str"),
        ({"gpus_per_node": 1}, ["a"], None, "no node_hosts"),
        (["a"], [("a", "0")], 1, "local rank must be an int"),
        (["a"], [3], 1, "expected a host name or"),
    ],
)
def test_placement_rank_map_refuses(placement: Any, launcher: Any, gpus: Any, message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        placement_rank_map(placement, launcher, gpus)


# -- the fake backend: every rank of a world --------------------------------------


@pytest.fixture
def fake() -> Iterator[Any]:
    """``init(rank, world)``: the default group re-made on torch's fake
    backend as ``rank`` of ``world``."""
    require("torch.testing._internal.distributed.fake_pg")
    from torch.testing._internal.distributed.fake_pg import FakeStore

    def init(rank: int, world: int) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
        dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())

    yield init
    if dist.is_initialized():
        dist.destroy_process_group()


def fake_check(layout: Layout, groups: dict, logical: Any, rank_map: list[int]) -> int:
    """check_groups without the all-reduce (the fake backend's collectives
    do nothing)."""
    n = 0
    for kind, got in groups.items():
        pgs = [] if got is None else (got if isinstance(got, list) else [got])
        want = [] if logical is None else layout.memberships(logical, kind)
        assert len(pgs) == len(want), (kind, logical)
        for m, pg in zip(want, pgs):
            assert dist.get_process_group_ranks(pg) == [rank_map[r] for r in m["members"]], (kind, m)
            assert dist.get_rank(pg) == m["members"].index(logical)
            n += 1
    return n


# Layouts and the worlds they run in: fan-out (a rank in several groups of
# a kind), folded experts, a layout that leaves ranks out on both sides.
FAKE_LAYOUTS = {
    "dense_tp2_cp2_pp2_dp2": (dict(tp=2, cp=2, pp=2, dp=2), 16),
    "folded_ep": (dict(tp=2, pp=2, ep=4, etp=1, world_size=16, expert_layout="folded"), 16),
    "encdec_fan_out": (dict(tp=2, cp=2, encoder_tp=1, world_size=12), 12),
    "offset": (dict(tp=2, pp=2, dp=2, rank_offset=4), 14),
}


@pytest.mark.parametrize("method", ["local", "global"])
@pytest.mark.parametrize("name", list(FAKE_LAYOUTS))
def test_new_groups_with_a_shuffled_rank_map_fake(fake: Any, name: str, method: str) -> None:
    config, world = FAKE_LAYOUTS[name]
    layout = Layout(**config)
    rank_map = shuffled(world, seed=len(name))
    total = 0
    for me in range(world):
        fake(me, world)
        groups = new_groups(layout, method=method, rank_map=rank_map)
        logical = rank_map.index(me)
        inside = layout.rank_offset <= logical < layout.rank_offset + layout.world_size
        total += fake_check(layout, groups, logical if inside else None, rank_map)
    want = sum(
        len(layout.memberships(r, k))
        for r in range(layout.rank_offset, layout.rank_offset + layout.world_size)
        for k in layout.kinds
    )
    assert total == want


def test_identity_rank_map_changes_nothing(fake: Any) -> None:
    """The identity map is no map: the whole-world kinds are still the
    default group (no new communicator)."""
    layout = Layout(tp=4, world_size=4)
    fake(1, 4)
    groups = new_groups(layout, ["tp"], rank_map=[0, 1, 2, 3])
    assert groups["tp"] is dist.distributed_c10d._get_default_group()
    groups = new_groups(layout, ["tp"], rank_map=[1, 0, 2, 3])
    assert groups["tp"] is not dist.distributed_c10d._get_default_group()
    assert dist.get_process_group_ranks(groups["tp"]) == [1, 0, 2, 3] and dist.get_rank(groups["tp"]) == 0


@pytest.mark.parametrize(
    ("rank_map", "message"),
    [
        ([0, 1, 2], "has 3 entries; torch.distributed's world has 4"),
        ([0, 1, 2, 2], "names torch rank 2 twice"),
        ([0, 1, 2, 4], "rank_map\\[3\\] = 4 is not a rank"),
        ("0123", "sequence of ints"),
        ([0, 1, 2, 3.0], "sequence of ints"),
    ],
)
def test_bad_rank_maps_refused_before_any_group(fake: Any, rank_map: Any, message: str) -> None:
    fake(0, 4)
    made = dist.distributed_c10d._world.group_count
    with pytest.raises(LayoutError, match=message):
        new_groups(Layout(tp=2, world_size=4), rank_map=rank_map)
    with pytest.raises(LayoutError, match=message):
        rl_megatron.ParallelState.create(tensor_model_parallel_size=2, rank_map=rank_map)
    assert dist.distributed_c10d._world.group_count == made


def test_new_module_groups_with_a_rank_map_fake(fake: Any) -> None:
    modules = Modules(
        [("vision", Mesh([("tp", 2), ("dp", 2)])), ("llm", Mesh([("tp", 2), ("dp", 2)], rank_offset=4))],
        [("vision", "llm")],
    )
    world = 8
    rank_map = shuffled(world, seed=3)
    for me in range(world):
        fake(me, world)
        got = new_module_groups(modules, ["tp", "dp"], rank_map=rank_map)
        logical = rank_map.index(me)
        assert got.rank == logical
        for dims in ("tp", "dp"):
            pg = got.group(dims)
            members = modules.members(logical, dims, 0 if modules.colocated else None)
            assert dist.get_process_group_ranks(pg) == [rank_map[r] for r in members]
            assert dist.get_rank(pg) == members.index(logical)
        for kind, pg in got.bridges[("vision", "llm")].items():
            members = modules.bridge_members(logical, "vision", "llm", kind)
            if members is None:
                assert pg is None
            else:
                assert dist.get_process_group_ranks(pg) == [rank_map[r] for r in members]


MEGATRON_ARGS = dict(
    tensor_model_parallel_size=2,
    pipeline_model_parallel_size=2,
    expert_model_parallel_size=2,
    expert_tensor_parallel_size=1,
    create_gloo_process_groups=False,  # a gloo group on the fake backend crashes torch
)


def test_megatron_parallel_state_with_a_rank_map_fake(fake: Any) -> None:
    """Every family's group of every rank: the members of its logical
    rank's group (ascending logical, as Megatron-Core's), as torch ranks;
    the pipeline getters follow the logical stage; the global rank lists
    are torch ranks."""
    world = 16
    rank_map = shuffled(world, seed=7)
    version = rl_megatron.MEGATRON_CORE_VERSION
    for me in range(world):
        fake(me, world)
        state = rl_megatron.ParallelState.create(**MEGATRON_ARGS, rank_map=rank_map)
        logical = rank_map.index(me)
        plan = rl_megatron._Plan(world, logical, rl_megatron._bind(version, (), MEGATRON_ARGS), version)
        assert state.rank == me and state.rank_map == rank_map
        for label, pg in state.groups.items():
            members = plan.members(label)
            assert (pg is None) == (members is None), label
            if members is None:
                continue
            assert dist.get_process_group_ranks(pg) == [rank_map[r] for r in members], label
            assert dist.get_rank(pg) == members.index(logical), label
        layout = state.layout
        stage = layout.split(logical, "pp").key
        assert state.get_pipeline_model_parallel_rank() == stage
        assert state.is_pipeline_first_stage() == layout.is_first_stage(logical)
        pipeline = layout.group("pp", layout.split(logical, "pp").color)
        assert state.values["_PIPELINE_GLOBAL_RANKS"] == [rank_map[r] for r in pipeline]
        assert state.get_pipeline_model_parallel_next_rank() == rank_map[pipeline[(stage + 1) % len(pipeline)]]
        assert state.get_tensor_model_parallel_src_rank() == rank_map[layout.group("tp", layout.split(logical, "tp").color)[0]]
        assert state.is_rank_in_embedding_group() == layout.is_embedding_rank(logical)


# -- gloo: 8 processes ----------------------------------------------------------


@pytest.fixture
def loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("GLOO_SOCKET_IFNAME", os.environ.get("GLOO_SOCKET_IFNAME", "lo"))
    monkeypatch.setenv("RES_OPTIONS", os.environ.get("RES_OPTIONS", "timeout:1 attempts:1"))


def test_rank_map_gloo_8_processes(loopback: None, tmp_path: Path) -> None:
    rank_map = shuffled(8, seed=11)
    jobs = [
        ("tp2_cp2_pp2", dict(tp=2, cp=2, pp=2), rank_map, "local"),
        ("tp2_cp2_pp2", dict(tp=2, cp=2, pp=2), rank_map, "global"),
        ("folded_ep4", dict(tp=2, ep=4, etp=1, world_size=8, expert_layout="folded"), rank_map[::-1], "local"),
        ("offset", dict(tp=2, pp=2, dp=1, rank_offset=4), rank_map, "local"),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = worlds.run_world(launch_worker.run_spawned, 8, jobs, tmp_path, deadline_s=240)
    for r in results:
        for name, config, rmap, method in jobs:
            layout = Layout(**config)
            logical = rmap.index(r["rank"])
            inside = layout.rank_offset <= logical < layout.rank_offset + layout.world_size
            want = sum(len(layout.memberships(logical, k)) for k in layout.kinds) if inside else 0
            assert r["checked"][f"{name}/{method}"] == want
        assert r["checked"]["megatron"] > 10
