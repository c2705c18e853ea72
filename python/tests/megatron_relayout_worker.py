"""The body of each process of test_megatron_relayout.py (a module of its
own so that spawned processes can import it).

Every process installs the Megatron-Core drop-in's parallel state
(rank_layout.torch.megatron.initialize_model_parallel, gloo) and checks it
with an all-reduce on its tensor-parallel group; then process ``failed``
says it is going (a store key) and ends with os._exit. Each survivor
computes the plan; those with a rank in the new layout call
relayout_model_parallel with the new layout's arguments and check, through
megatron.core.parallel_state's own getters, that they answer for the new
layout: sizes, ranks, the groups' members (torch ranks) and an all-reduce
of the new ranks on each, the kept groups the same objects as before, and
the pipeline neighbours as torch ranks. The others (idle) only wait.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

#: Every wait of the processes.
TIMEOUT = timedelta(seconds=60)
#: The exit code of the process that fails on purpose.
FAILED_EXIT = 17


def run(rank: int, world: int, rdzv: str, out: str, job: dict[str, Any]) -> None:
    import worlds

    result: dict[str, Any] = {"rank": rank, "error": None}
    with worlds.recorded(out, rank, result):
        import torch
        import torch.distributed as dist
        from megatron.core import parallel_state as ps

        from rank_layout import relayout
        from rank_layout.torch import megatron as mg

        torch.set_num_threads(1)
        failed = job["failed"]
        store = worlds.init_gloo(rank, world, rdzv, TIMEOUT)
        args = dict(job["args"], distributed_timeout_minutes=1)
        state = mg.initialize_model_parallel(**args)
        t = torch.ones(1)
        dist.all_reduce(t, group=ps.get_tensor_model_parallel_group())
        assert t.item() == ps.get_tensor_model_parallel_world_size()
        old = {
            "tp": ps.get_tensor_model_parallel_group(),
            "pp": ps.get_pipeline_model_parallel_group(),
            "dp": ps.get_data_parallel_group(),
        }
        if rank == failed:
            Path(out, f"{rank}.json").write_text(json.dumps({**result, "exited": True}))
            store.set(f"gone/{rank}", "1")
            os._exit(FAILED_EXIT)
        store.wait([f"gone/{failed}"], TIMEOUT)
        survivors = [r for r in range(world) if r != failed]
        plan = relayout(state.layout, [failed], policy=job["policy"], kinds=["tp", "pp", "dp"])
        result["hash"] = f"{plan.hash:016x}"
        new_rank = plan.new_rank[rank]
        result["new_rank"] = new_rank
        if new_rank is not None:
            new_args = dict(args, **job.get("new_args", {}))
            mg.relayout_model_parallel(plan, state=state, **new_args)
            result["checked"] = check(plan, new_rank, old, ps, dist, torch)
        store.set(f"done/{rank}", "1")
        if rank == 0:
            store.wait([f"done/{r}" for r in survivors], TIMEOUT)
        dist.destroy_process_group()


def check(plan: Any, n: int, old: dict[str, Any], ps: Any, dist: Any, torch: Any) -> dict[str, Any]:
    """Checks the installed parallel state against the plan's new layout at
    new rank ``n``; returns what it saw."""
    layout = plan.layout
    sizes = layout.sizes
    assert ps.get_tensor_model_parallel_world_size() == sizes["tp"]
    assert ps.get_pipeline_model_parallel_world_size() == sizes["pp"]
    assert ps.get_data_parallel_world_size() == sizes["dp"], (ps.get_data_parallel_world_size(), sizes)
    seen: dict[str, Any] = {}
    getters = {
        "tp": (ps.get_tensor_model_parallel_group, ps.get_tensor_model_parallel_rank),
        "pp": (ps.get_pipeline_model_parallel_group, ps.get_pipeline_model_parallel_rank),
        "dp": (ps.get_data_parallel_group, ps.get_data_parallel_rank),
    }
    for kind, (group_of, rank_of) in getters.items():
        color, key = layout.split(n, kind)
        members = [plan.process(m) for m in layout.group(kind, color)]
        pg = group_of()
        assert dist.get_process_group_ranks(pg) == members, (kind, dist.get_process_group_ranks(pg), members)
        assert rank_of() == key, (kind, rank_of(), key)
        t = torch.tensor([float(n)])
        dist.all_reduce(t, group=pg)
        assert t.item() == sum(layout.group(kind, color)), (kind, t.item())
        changes = plan.changes(kind)
        made = changes["new"] + changes["alone"]
        kept = color not in made and all(s["new"] != color for s in changes["shrunk"])
        assert (pg is old[kind]) == kept, (kind, kept)
        seen[kind] = "kept" if kept else "made"
    # The pipeline neighbours are torch ranks of the new layout's stages.
    nxt, prv = layout.pipeline_next(n), layout.pipeline_prev(n)
    if nxt:
        assert ps.get_pipeline_model_parallel_next_rank() == plan.process(nxt[0])
    if prv:
        assert ps.get_pipeline_model_parallel_prev_rank() == plan.process(prv[0])
    return seen
