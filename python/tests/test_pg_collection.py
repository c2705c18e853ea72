"""rank_layout.torch.megatron's ProcessGroupCollection against the real
megatron-core's, on real gloo process groups: 8 and 16 spawned processes
over loopback, a deadline failing a hang.

The training layout: for each layout, Megatron-Core's own
initialize_model_parallel and ``ProcessGroupCollection.use_mpu_process_groups()``,
then, in the same processes, the drop-in's initialize_model_parallel and
``pg_collection`` (of the returned state, and of the installed
parallel_state): on every rank, the same fields set (every field of the
installed class, listed by ``dataclasses.fields``), each holding a group
with the same ranks in the same order (``get_process_group_ranks``), or
None where Megatron-Core's is None; the same for a few ``required_pgs``;
an all-reduce on every group of rank-layout's collection. Over the
layouts, every field but the two Megatron-Core always leaves None is
compared on a group at least once. A rank outside 0.19's
``rank_offset``..``+local_world_size`` gets an AssertionError from
Megatron-Core's and a LayoutError naming the field from rank-layout's.

The inference shards (megatron-core 0.19.2): for each spec (prefill and
decode roles, shards of different tp, pp, ep, expt_tp and dp, both
mappings), Megatron-Core's build_inference_pg_collections_for_shards, then
rank-layout's, in the same processes: on every rank the same list of
shards (spec, rank offset, world size), the collection in the rank's own
shard only, with the same fields set, each the group with the same ranks;
an all-reduce on each of rank-layout's groups; rank-layout's new_group
calls the same on every rank, at most one per kind, and fewer than
Megatron-Core's.

Under megatron-core 0.16.1 (python/ci.sh's first environment) the same
training comparisons, with 0.16.1's fields and without 0.19's
weight-shard layouts; 0.16.1 has no inference shards
(megatron.core.inference.shards), and the test asserts that rank-layout's
build_inference_pg_collections_for_shards raises ImportError saying so on
every rank, with no group made. The refusals
(an unknown field of a later release, a state of another release, an
uninitialized parallel_state, an unknown required field) run in this
process on torch's fake backend."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Iterator

import pytest

import megatron_core_worker as mcw

mcw.require_megatron()
RELEASE = mcw.version()

import pg_collection_worker  # noqa: E402
import worlds  # noqa: E402

EIGHT: dict[str, dict[str, Any]] = {
    "tp2_pp2_cp2": dict(tensor_model_parallel_size=2, pipeline_model_parallel_size=2, context_parallel_size=2),
    "hierarchical_cp4_ep2_dist_opt2": dict(
        context_parallel_size=4, hierarchical_context_parallel_sizes=[2, 2], expert_model_parallel_size=2,
        num_distributed_optimizer_instances=2),
    "tp2_ep4_etp1_order_pp_dp": dict(tensor_model_parallel_size=2, expert_model_parallel_size=4,
                                     expert_tensor_parallel_size=1, order="tp-cp-ep-pp-dp"),
}
SIXTEEN: dict[str, dict[str, Any]] = {
    "tp2_pp2_cp2_ep2_etp1_dist_opt2": dict(
        tensor_model_parallel_size=2, pipeline_model_parallel_size=2, context_parallel_size=2,
        expert_model_parallel_size=2, expert_tensor_parallel_size=1, num_distributed_optimizer_instances=2),
}
if RELEASE != "0.16.1":
    # 0.19's weight-shard axes, and a layout on half the world.
    EIGHT["gtp2_pp2_ep2_egtp2"] = dict(pipeline_model_parallel_size=2, gtp_remat_size=2,
                                       expert_model_parallel_size=2, expert_gtp_remat_size=2)
    SIXTEEN["tp2_gtp2_cp2_ep4_etp1_egtp2"] = dict(
        tensor_model_parallel_size=2, gtp_remat_size=2, context_parallel_size=2, expert_model_parallel_size=4,
        expert_tensor_parallel_size=1, expert_gtp_remat_size=2)
    SIXTEEN["offset8_local8_tp2_gtp2"] = dict(tensor_model_parallel_size=2, gtp_remat_size=2, rank_offset=8,
                                             local_world_size=8)

#: Inference shards: (spec, use_tp_pp_dp_mapping), by name.
EIGHT_SHARDS: dict[str, tuple[str, bool]] = {
    "prefill_tp2_pp2+decode_dp4_ep2": ("tp=2,pp=2,role=prefill+tp=1,dp=4,ep=2,role=decode", False),
    "tp2_dp2_ep4_etp1;tp4_mapping": ("tp=2,dp=2,ep=4,expt_tp=1;tp=4", True),
}
SIXTEEN_SHARDS: dict[str, tuple[str, bool]] = {
    "prefill_tp2_pp2_dp2_ep2+decode_tp4_pp2": ("tp=2,pp=2,dp=2,ep=2,role=prefill+tp=4,pp=2,role=decode", False),
    "three_mapping": ("tp=4,pp=2,ep=2,expt_tp=2,role=prefill;tp=1,dp=4,ep=4;tp=2,pp=2,role=decode", True),
}
#: The fields Megatron-Core 0.19.2's build_inference_pg_collection sets.
SHARD_FIELDS = {"tp", "cp", "pp", "dp", "mp", "tp_cp", "dp_cp", "tp_dp_cp", "ep", "expt_tp", "expt_dp", "tp_ep",
                "tp_ep_pp", "embd", "pos_embd"}

#: The fields Megatron-Core's use_mpu_process_groups sets to None whatever
#: the layout (0.19.2's separate all-gather groups).
ALWAYS_NONE = {"dp_cp_ag", "expt_dp_ag"}


def diffs(theirs: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    keys = sorted(set(theirs) | set(ours))
    return [f"{k}: megatron-core {theirs.get(k, '<unset>')}, rank-layout {ours.get(k, '<unset>')}"
            for k in keys if theirs.get(k, "<unset>") != ours.get(k, "<unset>")]


def check_training(results: list[dict[str, Any]], layouts: dict[str, dict]) -> set[str]:
    """Every rank's collections alike; the fields compared on a group."""
    with_group: set[str] = set()
    for r in results:
        rank = r["rank"]
        for name in layouts:
            got = r["results"][name]
            theirs, ours = got["theirs"], got["ours"]
            if "raises" in theirs:
                # Outside 0.19's local world: Megatron-Core's dp getter asserts.
                assert theirs["raises"] == "AssertionError", (rank, name, theirs)
                for mine in (ours, got["installed"], got["ours_some"]):
                    assert mine["raises"] == "LayoutError", (rank, name, mine)
                    assert mine["message"].startswith(f"ProcessGroupCollection.dp: rank {rank}: "), mine
                continue
            assert sorted(theirs["fields"]) == sorted(got["class_fields"]), (rank, name)
            assert not diffs(theirs["fields"], ours["fields"]), (rank, name, diffs(theirs["fields"], ours["fields"]))
            assert got["installed"] == ours, (rank, name)
            assert got["ours_some"] == got["theirs_some"] and len(ours_some_fields(got)) == 4, (rank, name)
            assert got["all_reduced"] >= 5, (rank, name, got["all_reduced"])
            with_group |= {k for k, v in theirs["fields"].items() if v is not None}
    return with_group


def ours_some_fields(got: dict[str, Any]) -> dict[str, Any]:
    return got["ours_some"]["fields"]


def check_shards(results: list[dict[str, Any]], specs: dict[str, tuple[str, bool]]) -> None:
    """Every rank's shards alike, and rank-layout's calls O(kinds)."""
    world = len(results)
    for name in specs:
        got = [r["results"][name] for r in results]
        if RELEASE == "0.16.1":
            for g in got:
                assert "has no inference shards" in g["refused"] and g["made"] == 0, g
            continue
        pos_embd_none = set()
        for rank, g in enumerate(got):
            theirs, ours = g["theirs"], g["ours"]
            assert [s["spec"] for s in ours] == [s["spec"] for s in theirs], (name, rank)
            assert [(s["rank_offset"], s["world_size"]) for s in ours] == [
                (s["rank_offset"], s["world_size"]) for s in theirs], (name, rank)
            own = [i for i, s in enumerate(theirs) if s["pg_collection"] is not None]
            assert len(own) == 1, (name, rank, own)
            assert theirs[own[0]]["rank_offset"] <= rank < theirs[own[0]]["rank_offset"] + theirs[own[0]]["world_size"]
            assert [s["pg_collection"] is not None for s in ours] == [s["pg_collection"] is not None for s in theirs]
            mine, megatron = ours[own[0]]["pg_collection"], theirs[own[0]]["pg_collection"]
            assert set(megatron) == SHARD_FIELDS, (name, rank, sorted(megatron))
            assert not diffs(megatron, mine), (name, rank, diffs(megatron, mine))
            assert g["all_reduced"] >= 3, (name, rank, g["all_reduced"])
            pos_embd_none.add(megatron["pos_embd"] is None)
        # Off a pipeline's first stage, pos_embd is None (both sides).
        assert pos_embd_none == ({False, True} if "pp=2" in specs[name][0] else {False}), (name, pos_embd_none)
        calls = {tuple(g["calls"]) for g in got}
        assert len({c[1] for c in calls}) == 1, (name, calls)  # torch's group count stays in step
        ours_calls = next(iter(calls))[1]
        assert ours_calls <= len(SHARD_FIELDS) and all(c[0] > 2 * ours_calls for c in calls), (name, calls)
        print(name, f"{world} ranks: new_group calls per rank, megatron-core {sorted({c[0] for c in calls})}, "
                    f"rank-layout {ours_calls}")


def spawn(world: int, layouts: dict[str, dict], shards: dict[str, tuple[str, bool]], tmp_path: Path,
          deadline_s: float) -> list[dict[str, Any]]:
    jobs = [(name, "training", {"args": args}) for name, args in layouts.items()]
    jobs += [(name, "shards", {"spec": spec, "mapping": mapping}) for name, (spec, mapping) in shards.items()]
    return worlds.run_world(pg_collection_worker.run, world, jobs, tmp_path, deadline_s)


def test_training_and_shards_8_processes(tmp_path: Path) -> None:
    results = spawn(8, EIGHT, EIGHT_SHARDS, tmp_path, deadline_s=600)
    check_shards(results, EIGHT_SHARDS)
    with_group = check_training(results, EIGHT)
    fields = results[0]["results"][next(iter(EIGHT))]["class_fields"]
    if RELEASE == "0.16.1":
        assert len(fields) == 20, fields
    else:
        assert len(fields) == 27, fields
    # Every field Megatron-Core can fill was compared on a real group.
    assert with_group == set(fields) - ALWAYS_NONE, sorted(set(fields) - ALWAYS_NONE - with_group)


def test_training_and_shards_16_processes(tmp_path: Path) -> None:
    results = spawn(16, SIXTEEN, SIXTEEN_SHARDS, tmp_path, deadline_s=900)
    check_shards(results, SIXTEEN_SHARDS)
    check_training(results, SIXTEEN)
    if RELEASE != "0.16.1":
        outside = [r["rank"] for r in results if "raises" in r["results"]["offset8_local8_tp2_gtp2"]["theirs"]]
        assert outside == list(range(8)), outside


# -- the refusals, in this process ----------------------------------------------------


@pytest.fixture
def fake_world() -> Iterator[None]:
    """Rank 3 of a fake world of 8 (torch's fake backend: no peers)."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", rank=3, world_size=8, store=FakeStore())
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_a_field_rank_layout_does_not_know_is_refused(fake_world: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A later release's field is named, not left unset."""
    from megatron.core import process_groups_config

    from rank_layout import LayoutError
    from rank_layout.torch import megatron as rl_megatron

    base = process_groups_config.ProcessGroupCollection

    @dataclasses.dataclass
    class Later(base):  # type: ignore[misc, valid-type]
        future_pg: Any = dataclasses.field(init=False)

        def __init__(self, **kwargs: Any) -> None:
            base.__init__(self, **kwargs)

    state = rl_megatron.ParallelState.create(tensor_model_parallel_size=2, create_gloo_process_groups=False,
                                             megatron_core=RELEASE)
    assert rl_megatron.pg_collection(state).tp.size() == 2
    monkeypatch.setattr(process_groups_config, "ProcessGroupCollection", Later)
    with pytest.raises(LayoutError, match=f"megatron-core {RELEASE}'s ProcessGroupCollection has fields "
                                          "rank-layout does not fill: future_pg$"):
        rl_megatron.pg_collection(state)


def test_other_refusals(fake_world: None) -> None:
    from megatron.core import parallel_state as ps

    from rank_layout import LayoutError
    from rank_layout.torch import megatron as rl_megatron

    mcw.reset(ps)
    with pytest.raises(LayoutError, match="^ProcessGroupCollection.dp: rank 3: data parallel group is not initialized"):
        rl_megatron.pg_collection()
    state = rl_megatron.ParallelState.create(create_gloo_process_groups=False, megatron_core=RELEASE)
    with pytest.raises(LayoutError, match="has no field tensor_parallel, dp_cp_ag" if RELEASE == "0.16.1"
                       else "has no field tensor_parallel$"):
        rl_megatron.pg_collection(state, ["tp", "tensor_parallel", "dp_cp_ag"])
    other = next(v for v in rl_megatron.MEGATRON_CORE_VERSIONS if v != RELEASE)
    foreign = rl_megatron.ParallelState.create(create_gloo_process_groups=False, megatron_core=other)
    with pytest.raises(LayoutError, match=f"follows megatron-core {other}'s parallel_state; "
                                          f"the installed release is {RELEASE}"):
        rl_megatron.pg_collection(foreign)
