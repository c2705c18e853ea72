"""One process of a launched job (test_launch.py: mpirun with a rankfile,
torchrun agents, agents in network namespaces), and the checks of a rank
map's groups shared with test_rank_map.py's spawned gloo worlds.

Run as ``python launch_worker.py SPEC.json``: SPEC holds the layout
(``layout``: Layout keywords), the placement (``node_hosts``,
``gpus_per_node``), each host's domain (``domains``), the must-fit kinds
(``must_fit``), whether the launcher was told the placement (``planned``:
its rank must then be the planned logical rank) or the rank map is
gathered (``gather``), and ``out``, where each process writes
``<torch rank>.json``. The process learns its host from ``RL_HOST`` (set
by the test's ssh stand-in or agent environment) and its rank and local
rank from the launcher's variables."""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any, Optional, Sequence

import worlds

TIMEOUT = timedelta(seconds=60)


def check_groups(layout: Any, groups: dict, logical: Optional[int], rank_map: Sequence[int]) -> int:
    """This process (logical rank ``logical``, torch rank ``rank_map[logical]``)
    is in exactly its planned groups of every kind built: each process
    group's torch ranks are its logical members through the map, in the
    layout's order, its group rank is its key, and an all-reduce of the
    logical ranks over it gives the sum of the logical members. Returns
    how many groups were checked."""
    import torch
    import torch.distributed as dist

    checked = 0
    for kind, got in groups.items():
        pgs = [] if got is None else (got if isinstance(got, list) else [got])
        want = [] if logical is None else layout.memberships(logical, kind)
        assert len(pgs) == len(want), (kind, logical, want, got)
        for m, pg in zip(want, pgs):
            members = list(m["members"])
            assert dist.get_process_group_ranks(pg) == [rank_map[r] for r in members], (kind, m)
            assert dist.get_rank(pg) == members.index(logical), (kind, m)
            t = torch.tensor([logical], dtype=torch.int64)
            dist.all_reduce(t, group=pg)
            assert t.item() == sum(members), (kind, m, t.item())
            checked += 1
    return checked


def crossing(layout: Any, kinds: Sequence[str], rank_map: Sequence[int], hosts: Sequence[str], domains: dict) -> dict:
    """Kind -> how many of its groups span more than one domain when
    logical rank r runs where torch rank ``rank_map[r]`` runs
    (``hosts[torch rank]``)."""
    out = {}
    for kind in kinds:
        out[kind] = sum(
            len({domains[hosts[rank_map[r]]] for r in group}) > 1 for group in layout.groups(kind)
        )
    return out


def run_spawned(rank: int, world: int, rdzv: str, out: str, jobs: list) -> None:
    """One spawned process: joins the gloo world as ``rank``, builds each
    job's groups under its rank map and checks them (check_groups: torch
    ranks, group ranks, all-reduces of the logical ranks); then the
    Megatron-Core drop-in's ParallelState with a rank map (gloo groups
    included), its pipeline ring exercised by send/recv."""
    import torch
    import torch.distributed as dist

    from rank_layout import Layout
    from rank_layout.torch import gather_rank_map, new_groups
    from rank_layout.torch import megatron as rl_megatron

    result: dict[str, Any] = {"rank": rank, "checked": {}, "error": None}
    with worlds.recorded(out, rank, result):
        torch.set_num_threads(1)
        timeout = TIMEOUT
        worlds.init_gloo(rank, world, rdzv, timeout)
        for name, config, rank_map, method in jobs:
            layout = Layout(**config)
            groups = new_groups(layout, method=method, rank_map=rank_map, timeout=timeout)
            logical = rank_map.index(rank)
            inside = layout.rank_offset <= logical < layout.rank_offset + layout.world_size
            result["checked"][f"{name}/{method}"] = check_groups(layout, groups, logical if inside else None, rank_map)
        # The gathered map of a placement: each process says where it runs.
        placement = {"node_hosts": ["n0", "n2", "n1", "n3"], "gpus_per_node": 2}
        host, local = f"n{rank // 2}", rank % 2
        assert gather_rank_map(placement, host=host, local_rank=local) == [0, 1, 4, 5, 2, 3, 6, 7]
        # Megatron-Core's groups under a rank map.
        rank_map = jobs[0][2]
        logical = rank_map.index(rank)
        state = rl_megatron.ParallelState.create(
            tensor_model_parallel_size=2, pipeline_model_parallel_size=2, rank_map=rank_map
        )
        n = 0
        for label, pg in state.groups.items():
            if pg is None:
                continue
            t = torch.tensor([logical], dtype=torch.int64)
            dist.all_reduce(t, group=pg)
            ranks = dist.get_process_group_ranks(pg)
            assert t.item() == sum(rank_map.index(r) for r in ranks), label
            n += 1
        result["checked"]["megatron"] = n
        # Send the logical rank down the pipeline: it arrives from the
        # previous stage's logical rank.
        nxt, prev = state.get_pipeline_model_parallel_next_rank(), state.get_pipeline_model_parallel_prev_rank()
        send = torch.tensor([logical], dtype=torch.int64)
        got = torch.zeros(1, dtype=torch.int64)
        reqs = [dist.isend(send, nxt), dist.irecv(got, prev)]
        for r in reqs:
            r.wait()
        layout = state.layout
        pipeline = layout.group("pp", layout.split(logical, "pp").color)
        stage = state.get_pipeline_model_parallel_rank()
        assert pipeline[stage] == logical
        assert got.item() == pipeline[(stage - 1) % len(pipeline)]
        worlds.closing_all_reduce(world)


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    out = Path(spec["out"])
    env = os.environ
    if "OMPI_COMM_WORLD_RANK" in env:
        rank, world = int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"])
        local = int(env["OMPI_COMM_WORLD_LOCAL_RANK"])
        launcher = "mpirun"
    else:
        rank, world, local = int(env["RANK"]), int(env["WORLD_SIZE"]), int(env["LOCAL_RANK"])
        launcher = "torchrun"
    host = env["RL_HOST"]
    result: dict[str, Any] = {"rank": rank, "host": host, "local_rank": local, "launcher": launcher, "error": None}
    with worlds.recorded(out, rank, result):
        import torch
        import torch.distributed as dist

        from rank_layout import Layout, placement_rank_map
        from rank_layout.torch import gather_rank_map, new_groups

        torch.set_num_threads(1)
        if "RL_RDZV" in env:  # mpirun: a rendezvous file (worlds.join)
            worlds.init_gloo(rank, world, env["RL_RDZV"], TIMEOUT)
        else:  # torchrun: its MASTER_ADDR and MASTER_PORT
            dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world, timeout=TIMEOUT)
        layout = Layout(**spec["layout"])
        assert layout.world_size == world, (layout.world_size, world)
        placement = {"node_hosts": spec["node_hosts"], "gpus_per_node": spec["gpus_per_node"]}
        g = spec["gpus_per_node"]
        seen: list[Any] = [None] * world
        dist.all_gather_object(seen, (host, local))
        hosts = [h for h, _ in seen]
        result["hosts"] = hosts
        if spec["gather"]:
            rank_map = gather_rank_map(placement, host=host, local_rank=local)
            assert rank_map == placement_rank_map(placement, [tuple(x) for x in seen])
        else:
            # The launcher was given the placement: this process runs the
            # planned logical rank, on the planned host and GPU.
            assert host == spec["node_hosts"][rank // g] and local == rank % g, (rank, host, local)
            rank_map = list(range(world))
        logical = rank_map.index(rank)
        result["logical"] = logical
        result["rank_map"] = rank_map
        # Where the launcher's own order puts each group (torch rank =
        # logical rank), and where the map puts it.
        result["crossing_launcher_order"] = crossing(layout, spec["must_fit"], list(range(world)), hosts, spec["domains"])
        result["crossing"] = crossing(layout, spec["must_fit"], rank_map, hosts, spec["domains"])
        groups = new_groups(layout, rank_map=rank_map, timeout=TIMEOUT)  # the identity is no map
        result["checked"] = check_groups(layout, groups, logical, rank_map)
        worlds.closing_all_reduce(world)


if __name__ == "__main__":
    main(sys.argv[1])
