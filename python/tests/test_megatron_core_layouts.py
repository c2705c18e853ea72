"""rank_layout.torch.megatron against the real megatron-core, in this
process, on torch's fake backend (one process acts as one rank of a world).

For hundreds of argument sets: Megatron-Core's initialize_model_parallel
creates every group of the world on every rank, so one run, recorded at
``torch.distributed.new_group``, lists all of them; the drop-in's plan of
each rank of the world must be exactly that rank's groups, family by family
(Megatron-Core's group descriptions). Where Megatron-Core refuses the
arguments, the drop-in must refuse them too (LayoutError), and the reverse.
For some ranks of some worlds, both initializations run and every getter of
parallel_state, every global, and ParallelState's getters must answer alike.

The same comparisons on real gloo process groups, 8 and 16 processes:
test_megatron_core.py."""

from __future__ import annotations

import inspect
import json
import random
import re
import warnings
from collections import defaultdict
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

import megatron_core_worker as mcw

parallel_state = mcw.require_megatron()

import torch.distributed as dist  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402

from rank_layout import LayoutError  # noqa: E402
from rank_layout.torch import megatron as rl_megatron  # noqa: E402

# A gloo group on the fake backend crashes torch (its store is fake): both
# initializations get fake groups instead, recorded with the backend asked.
_new_group = dist.new_group


@contextmanager
def fake_world(world: int, rank: int, record: list | None = None) -> Iterator[None]:
    dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())

    def new_group(ranks: Any = None, *args: Any, backend: Any = None, group_desc: Any = None, **kwargs: Any) -> Any:
        if record is not None:
            record.append((group_desc, sorted(ranks), backend))
        return _new_group(ranks, *args, backend=None if backend == "gloo" else backend, group_desc=group_desc, **kwargs)

    dist.new_group = new_group
    try:
        yield
    finally:
        dist.new_group = _new_group
        mcw.reset(parallel_state)
        dist.destroy_process_group()


def megatron_init(**kwargs: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parallel_state.initialize_model_parallel(**kwargs)


# Megatron-Core makes this group and never keeps it.
UNUSED = {"HIERARCHICAL_EXPERT_DATA_PARALLEL_GROUP_GLOO_L1"}

ORDERS = ["tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-pp-dp", "dp-tp-cp-ep-pp", "TP-CP-EP-DP-PP", "ep-tp-dp-cp-pp"]


def fixed_sets() -> list[dict[str, Any]]:
    """Argument sets written out (world size under "world"), the refused
    ones included."""
    out: list[dict[str, Any]] = [
        dict(world=8),
        dict(world=16, tensor_model_parallel_size=2, pipeline_model_parallel_size=2, context_parallel_size=2),
        dict(world=16, context_parallel_size=4, hierarchical_context_parallel_sizes=[2, 2]),
        dict(world=16, tensor_model_parallel_size=2, context_parallel_size=4, hierarchical_context_parallel_sizes=[2, 2]),
        dict(world=32, context_parallel_size=8, hierarchical_context_parallel_sizes=[2, 2, 2]),
        dict(world=16, expert_model_parallel_size=4, expert_tensor_parallel_size=1, tensor_model_parallel_size=2,
             num_distributed_optimizer_instances=2),
        dict(world=16, context_parallel_size=2, num_distributed_optimizer_instances=4, expert_model_parallel_size=2),
        dict(world=16, hybrid_context_parallel=True, context_parallel_size=2),
        dict(world=24, hybrid_context_parallel=True, tensor_model_parallel_size=2),
        dict(world=40, hybrid_context_parallel=True, tensor_model_parallel_size=2),
        dict(world=16, pipeline_model_parallel_size=4, virtual_pipeline_model_parallel_size=2),
        dict(world=16, pipeline_model_parallel_size=4,
             get_embedding_ranks=lambda p: [p[0], p[2], p[-1]] if len(p) > 2 else list(p),
             get_position_embedding_ranks=lambda p: p[:2]),
        # Refused by both:
        dict(world=12, tensor_model_parallel_size=8),
        dict(world=16, pipeline_model_parallel_size=1, virtual_pipeline_model_parallel_size=2),
        dict(world=16, expert_model_parallel_size=32),
        dict(world=16, context_parallel_size=4, hierarchical_context_parallel_sizes=[2, 4]),
        dict(world=16, tensor_model_parallel_size=2, context_parallel_size=2, order="tp-pp-dp"),
        dict(world=16, pipeline_model_parallel_size=2, expert_model_parallel_size=2, order="tp-cp-ep-pp-dp"),
        dict(world=16, num_distributed_optimizer_instances=3),
        dict(world=16, pipeline_model_parallel_comm_backend="mpi"),
    ]
    if VERSION == "0.16.1":
        out.append(dict(world=16, pipeline_model_parallel_size=2, create_all_gather_group=True,
                        create_gloo_process_groups=False))
    else:
        out += [
            # 0.19's weight-shard axes; refused with several optimizer instances.
            dict(world=64, tensor_model_parallel_size=2, pipeline_model_parallel_size=2, gtp_remat_size=4),
            dict(world=16, gtp_remat_size=2, expert_model_parallel_size=2, expert_gtp_remat_size=4),
            dict(world=16, gtp_remat_size=2, num_distributed_optimizer_instances=2),
            dict(world=16, gtp_remat_size=3),
            dict(world=16, tensor_model_parallel_size=2, gtp_remat_size=2, rank_offset=8, local_world_size=8),
            dict(world=16, gtp_remat_size=2, order="tp-gtp_remat-cp-ep-dp-pp"),
            dict(world=16, gtp_remat_size=2, order="gtp_remat-tp-cp-ep-dp-pp"),
        ]
    return out


def random_sets() -> list[dict[str, Any]]:
    """600 random argument sets (some refused)."""
    rng = random.Random(16)
    out: list[dict[str, Any]] = []
    for _ in range(600):
        world = rng.choice([8, 16, 32])
        args = dict(
            world=world,
            tensor_model_parallel_size=rng.choice([1, 1, 2, 4]),
            pipeline_model_parallel_size=rng.choice([1, 2, 4]),
            context_parallel_size=rng.choice([1, 1, 2, 4]),
            expert_model_parallel_size=rng.choice([1, 2, 4]),
            expert_tensor_parallel_size=rng.choice([None, None, 1, 2]),
            num_distributed_optimizer_instances=rng.choice([1, 1, 2]),
            order=rng.choice(ORDERS),
            create_gloo_process_groups=rng.choice([True, False]),
        )
        if VERSION != "0.16.1":
            # Mostly sizes that fit (the refusals are few and written out above).
            model = args["tensor_model_parallel_size"] * args["pipeline_model_parallel_size"]
            gtp = rng.choice([1, 2, 2, 4])
            args["gtp_remat_size"] = gtp if world % (model * args["context_parallel_size"] * gtp) == 0 else 1
            etp = args["expert_tensor_parallel_size"] or args["tensor_model_parallel_size"]
            egtp = rng.choice([1, 2, 2])
            expert = etp * args["expert_model_parallel_size"] * args["pipeline_model_parallel_size"] * egtp
            args["expert_gtp_remat_size"] = egtp if world % expert == 0 else 1
            if args["gtp_remat_size"] > 1 or args["expert_gtp_remat_size"] > 1:
                args["num_distributed_optimizer_instances"] = 1
            if rng.random() < 0.1:
                args["local_world_size"] = world // 2
                args["rank_offset"] = rng.choice([0, world // 2])
        if args["context_parallel_size"] == 4 and rng.random() < 0.5:
            args["hierarchical_context_parallel_sizes"] = [2, 2]
        out.append(args)
    return out


VERSION = mcw.version()
FIXED_SETS = fixed_sets()
ARGUMENT_SETS = FIXED_SETS + random_sets()
#: Megatron-Core's defaults, for the plan (which takes every argument).
DEFAULTS = {
    name: p.default for name, p in inspect.signature(parallel_state.initialize_model_parallel).parameters.items()
}


def refusal(f: Any) -> str | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f()
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"
    return None


def test_plans_are_megatron_cores_groups_for_every_rank() -> None:
    """Every argument set: the same refusals; for every rank, every family's
    members as Megatron-Core makes them."""
    mismatches: list[str] = []
    checked = refused = stricter = 0
    for args in ARGUMENT_SETS:
        args = dict(args)
        world = args.pop("world")
        record: list = []
        with fake_world(world, 0, record):
            theirs = refusal(lambda: megatron_init(**args))
        ours = refusal(lambda: rl_megatron._Plan(world, 0, {**DEFAULTS, **args}, VERSION))
        if ours is not None and not ours.startswith("LayoutError"):
            mismatches.append(f"{world} {args}: not a LayoutError: {ours}")
        if theirs is None and ours is not None and "span several optimizer instances" in ours:
            # rank-layout refuses what Megatron-Core builds inconsistently:
            # an intra-instance data-parallel group across instances.
            instances = [set(r) for d, r, _ in record if d == "INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP"]
            intra = [set(r) for d, r, _ in record if d == "INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP"]
            if not any(all(not g <= i for i in instances) for g in intra):
                mismatches.append(f"{world} {args}: refused, but Megatron-Core's groups are consistent")
            stricter += 1
            continue
        if theirs is None and ours is not None and "would leave its dp-cp group" in ours:
            # Or an inter-instance group (Megatron-Core's is the expert
            # data-parallel group's level 1, which the dense optimizer uses
            # too) that leaves the data-parallel group with cp.
            dp_cp = [set(r) for d, r, _ in record if d == "DATA_PARALLEL_GROUP_WITH_CP"]
            inter = [set(r) for d, r, _ in record if d == "HIERARCHICAL_EXPERT_DATA_PARALLEL_GROUP_L1"]
            if not any(all(not g <= d for d in dp_cp) for g in inter):
                mismatches.append(f"{world} {args}: refused, but Megatron-Core's groups are consistent")
            stricter += 1
            continue
        if (theirs is None) != (ours is None):
            mismatches.append(f"{world} {args}: megatron-core {theirs or 'accepts'}; rank-layout {ours or 'accepts'}")
            continue
        if theirs is not None:
            refused += 1
            continue
        by_rank: dict[int, dict[str, list]] = defaultdict(lambda: defaultdict(list))
        for desc, ranks, _ in record:
            if desc not in UNUSED:
                for r in ranks:
                    by_rank[r][desc].append(ranks)
        descs = {desc for desc, _, _ in record} - UNUSED
        for rank in range(world):
            plan = rl_megatron._Plan(world, rank, {**DEFAULTS, **args}, VERSION).planned()
            if set(plan) != descs:
                mismatches.append(f"{world} {args}: families {sorted(descs ^ set(plan))} made by one only")
                break
            for desc in descs:
                want = by_rank[rank].get(desc, [])
                got = [] if plan[desc] is None else [plan[desc]]
                if want != got:
                    mismatches.append(f"{world} {args} rank {rank}: {desc} megatron-core {want} rank-layout {got}")
        checked += 1
    assert not mismatches, "\n".join(mismatches[:20])
    assert checked > 300 and refused > 8 and stricter > 0, (checked, refused, stricter)
    print(f"{checked} argument sets alike, {refused} refused by both, {stricter} refused by rank-layout only")


def test_same_arguments_as_megatron_core() -> None:
    """The drop-in binds the installed release's arguments: names, order,
    defaults; another release's argument is a TypeError, as there."""
    theirs = inspect.signature(parallel_state.initialize_model_parallel).parameters
    ours = rl_megatron.SIGNATURES[VERSION].parameters
    assert [(p.name, p.default) for p in theirs.values()] == [(p.name, p.default) for p in ours.values()]
    other = "create_all_gather_group" if VERSION != "0.16.1" else "gtp_remat_size"
    with pytest.raises(TypeError, match=other):
        rl_megatron.ParallelState.create(megatron_core=VERSION, **{other: 1})
    with pytest.raises(TypeError):
        rl_megatron.ParallelState.create(*range(len(ours) + 1), megatron_core=VERSION)


def accepted(args: dict[str, Any]) -> bool:
    args = dict(args)
    return refusal(lambda: rl_megatron._Plan(args.pop("world"), 0, {**DEFAULTS, **args}, VERSION)) is None


GETTER_SETS = [a for a in FIXED_SETS if accepted(a)] + [
    a for a in ARGUMENT_SETS[len(FIXED_SETS):] if a["world"] == 16 and accepted(a)
][:12]


@pytest.mark.parametrize("args", GETTER_SETS, ids=lambda a: ",".join(f"{k}={v}" for k, v in a.items())[:90])
def test_getters_answer_as_megatron_cores_fake_world(args: dict[str, Any]) -> None:
    """Some ranks of the world: Megatron-Core's initialization, then the
    drop-in's; every getter, every global, and ParallelState's getters."""
    args = dict(args)
    world = args.pop("world")
    calls = mcw.getter_calls(parallel_state)
    diffs: list[str] = []
    for rank in sorted({0, 1, world // 2 + 1, world - 1}):
        with fake_world(world, rank):
            if refusal(lambda: megatron_init(**args)) is not None:
                pytest.skip("refused by megatron-core")
            theirs = mcw.answers(parallel_state, calls)
            their_globals = mcw.module_globals(parallel_state)
            mcw.reset(parallel_state)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                state = rl_megatron.initialize_model_parallel(**args)
            ours = mcw.answers(parallel_state, calls)
            our_globals = mcw.module_globals(parallel_state)
            on_state = [(n, kw) for n, kw in calls if n not in mcw.NOT_ON_PARALLEL_STATE]
            from_state = mcw.answers(state, on_state)
        diffs += mcw.compare(theirs, ours, f"rank {rank} getters")
        diffs += mcw.compare(their_globals, our_globals, f"rank {rank} globals")
        diffs += mcw.compare({k: theirs[k] for k in from_state}, from_state, f"rank {rank} ParallelState")
    assert not diffs, "\n".join(diffs[:30])


def test_parallel_state_offers_every_getter() -> None:
    names = set(mcw.getter_names(parallel_state))
    missing = {n for n in names if not hasattr(rl_megatron.ParallelState, n)}
    assert missing == set(mcw.NOT_ON_PARALLEL_STATE) & names


def remap(value: Any, rank_map: list[int], ranks: bool) -> Any:
    """A normalized answer of Megatron-Core's at logical rank r, as the
    drop-in with ``rank_map`` answers at torch rank ``rank_map[r]``: a
    group's members (and, where ``ranks``, every int: a global rank) become
    torch ranks; group ranks, sizes and everything else stay."""
    if isinstance(value, list) and value[:1] == ["group"]:
        return ["group", [rank_map[r] for r in value[1]], *value[2:]]
    if isinstance(value, list) and value[:1] == ["raises"]:
        return value
    if isinstance(value, list):
        return [remap(v, rank_map, ranks) for v in value]
    if ranks and isinstance(value, int) and not isinstance(value, bool):
        return rank_map[value]
    return value


RANK_VALUED = re.compile(r"(_src_rank|_first_rank|_last_rank|_next_rank|_prev_rank|_global_ranks)\(|_RANKS")


@pytest.mark.parametrize("args", GETTER_SETS[:12], ids=lambda a: ",".join(f"{k}={v}" for k, v in a.items())[:90])
def test_rank_map_answers_as_megatron_core_at_the_logical_rank(args: dict[str, Any]) -> None:
    """With a shuffled rank map, the drop-in on torch rank rank_map[r]
    answers every getter and holds every global as Megatron-Core's own
    initialization on rank r, its global ranks through the map."""
    args = dict(args)
    world = args.pop("world")
    rank_map = list(range(world))
    random.Random(world).shuffle(rank_map)
    calls = mcw.getter_calls(parallel_state)
    with fake_world(world, 0):
        mcw.reset(parallel_state)  # every global present, as after any test
    diffs: list[str] = []
    moved = 0
    for logical in sorted({0, 1, world // 2 + 1, world - 1}):
        with fake_world(world, logical):
            megatron_init(**args)
            theirs = mcw.answers(parallel_state, calls)
            their_globals = mcw.module_globals(parallel_state)
        with fake_world(world, rank_map[logical]):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rl_megatron.initialize_model_parallel(**args, rank_map=rank_map)
            ours = mcw.answers(parallel_state, calls)
            our_globals = mcw.module_globals(parallel_state)
        want = {k: remap(v, rank_map, bool(RANK_VALUED.search(k))) for k, v in theirs.items()}
        want_globals = {k: remap(v, rank_map, bool(RANK_VALUED.search(k))) for k, v in their_globals.items()}
        pgs = their_globals["_global_process_group_list"]
        if pgs is not None:
            want_globals["_global_process_group_list"] = sorted(
                json.dumps(remap(json.loads(g), rank_map, False)) for g in pgs
            )
        diffs += mcw.compare(want, ours, f"logical rank {logical} getters")
        diffs += mcw.compare(want_globals, our_globals, f"logical rank {logical} globals")
        moved += our_globals != their_globals  # the map did move ranks
    assert not diffs, "\n".join(diffs[:30])
    assert moved
