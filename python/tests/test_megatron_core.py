"""rank_layout.torch.megatron.initialize_model_parallel against the real
megatron-core, on real gloo process groups: 8 and 16 spawned processes over
loopback, a deadline failing a hang.

For each layout, Megatron-Core's own initialize_model_parallel, then the
drop-in's, in the same processes: every getter of parallel_state (listed
from the module, called with every combination of its flags), every global
of the module, and the getters of the returned ParallelState must answer
the same on every process (groups compared by their ranks, the rank's place
and size, and backend); an all-reduce on each group rank-layout made;
Megatron-Core's destroy_model_parallel after it. Then the refusals: each a
LayoutError on every rank, with no group made."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import megatron_core_worker as mcw

parallel_state = mcw.require_megatron()

pytestmark = pytest.mark.slow  # gloo worlds of 8 and 16 processes

EIGHT = {
    "tp2_pp2_cp2": dict(tensor_model_parallel_size=2, pipeline_model_parallel_size=2, context_parallel_size=2),
    "tp2_ep4_etp1": dict(tensor_model_parallel_size=2, expert_model_parallel_size=4, expert_tensor_parallel_size=1),
    "hierarchical_cp": dict(context_parallel_size=4, hierarchical_context_parallel_sizes=[2, 2]),
    "dist_opt_ep2": dict(expert_model_parallel_size=2, num_distributed_optimizer_instances=2),
    "order_tp_pp_dp": dict(tensor_model_parallel_size=2, pipeline_model_parallel_size=2, order="tp-cp-ep-pp-dp"),
    "vpp_no_gloo": dict(pipeline_model_parallel_size=4, virtual_pipeline_model_parallel_size=2,
                        create_gloo_process_groups=False),
}
SIXTEEN = {
    "tp2_pp2_cp2_ep2_etp1_dist_opt": dict(
        tensor_model_parallel_size=2, pipeline_model_parallel_size=2, context_parallel_size=2,
        expert_model_parallel_size=2, expert_tensor_parallel_size=1, num_distributed_optimizer_instances=2),
    "tp2_pp2_hierarchical_cp": dict(tensor_model_parallel_size=2, pipeline_model_parallel_size=2,
                                    context_parallel_size=4, hierarchical_context_parallel_sizes=[2, 2]),
    "tp2_pp4_order_pp_dp": dict(tensor_model_parallel_size=2, pipeline_model_parallel_size=4, order="tp-cp-ep-pp-dp"),
    "hybrid_cp": dict(context_parallel_size=2, hybrid_context_parallel=True),
}


if mcw.version() == "0.16.1":
    EIGHT["vpp_all_gather_no_gloo"] = dict(pipeline_model_parallel_size=4, virtual_pipeline_model_parallel_size=2,
                                           create_all_gather_group=True, create_gloo_process_groups=False)
else:
    # 0.19's weight-shard axes, with and without experts.
    EIGHT["gtp2_tp2"] = dict(tensor_model_parallel_size=2, gtp_remat_size=2)
    EIGHT["gtp2_pp2_ep2_egtp2"] = dict(pipeline_model_parallel_size=2, gtp_remat_size=2,
                                       expert_model_parallel_size=2, expert_gtp_remat_size=2)
    # Under 0.19.2 the 16-process run is the weight-shard layouts only (the
    # others run under 0.16.1, and 16 processes on few cores are slow).
    SIXTEEN.clear()
    SIXTEEN["tp2_gtp2_cp2_ep4_etp1_egtp2"] = dict(
        tensor_model_parallel_size=2, gtp_remat_size=2, context_parallel_size=2, expert_model_parallel_size=4,
        expert_tensor_parallel_size=1, expert_gtp_remat_size=2)
    SIXTEEN["tp2_pp2_gtp2_egtp2_order_pp_dp"] = dict(tensor_model_parallel_size=2, pipeline_model_parallel_size=2,
                                                    gtp_remat_size=2, expert_gtp_remat_size=2, order="tp-cp-ep-pp-dp")
    SIXTEEN["offset8_local8_tp2_gtp2"] = dict(tensor_model_parallel_size=2, gtp_remat_size=2, rank_offset=8,
                                             local_world_size=8)


def check(results: list[dict[str, Any]], layouts: dict[str, dict]) -> None:
    for r in results:
        for name in layouts:
            got = r["results"][name]
            assert not got["diffs"], f"rank {r['rank']} {name}:\n" + "\n".join(got["diffs"][:20])
            # A rank outside 0.19's rank_offset..+local_world_size is in no group.
            assert got["calls"] > 100 and (got["all_reduced"] > 0) == got["inside"]
    for name in layouts:
        made = {tuple(r["results"][name]["new_group_calls"]) for r in results}
        print(name, "new_group calls per rank (megatron-core, rank-layout):", sorted(made))


def test_megatron_core_8_processes(tmp_path: Path) -> None:
    jobs = [(name, "compare", {"args": args}) for name, args in EIGHT.items()] + [("bad", "bad", {})]
    results = mcw.spawn(8, jobs, tmp_path, deadline_s=600)
    check(results, EIGHT)
    assert {len(r["results"]["bad"]["refused"]) for r in results} == {results[0]["results"]["bad"]["cases"]}
    assert results[0]["results"]["bad"]["cases"] >= 12


def test_megatron_core_16_processes(tmp_path: Path) -> None:
    jobs = [(name, "compare", {"args": args}) for name, args in SIXTEEN.items()]
    results = mcw.spawn(16, jobs, tmp_path, deadline_s=900)
    check(results, SIXTEEN)
