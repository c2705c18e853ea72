"""The body of each process of test_modules_gloo.py (a module of its own so
that spawned processes can import it)."""

from __future__ import annotations

import json
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import worlds

TIMEOUT = timedelta(seconds=60)
DIMS = ("tp", "cp", "dp", "pp", "tp-dp")


def build(spec: dict[str, Any]) -> Any:
    """The Modules of a job: modules as (name, [(dim, size), ...])."""
    from rank_layout import Mesh, Modules

    return Modules(
        [(name, Mesh(dims)) for name, dims in spec["modules"]],
        [tuple(e) for e in spec["edges"]],
        colocated=spec.get("colocated", False),
    )


def ranks_of(pg: Any) -> list[int]:
    import torch.distributed as dist

    return dist.get_process_group_ranks(pg)


def expect_order(members: list[int]) -> list[int]:
    from rank_layout.torch._groups import _KEEP_ORDER

    return list(members) if _KEEP_ORDER else sorted(members)


def lane_of(groups: list[list[int]], rank: int) -> int:
    """The lane of ``rank``: the index of its broadcast group (pp = 1)."""
    return next(i for i, g in enumerate(groups) if rank in g)


def check_groups(modules: Any, built: Any, rank: int) -> int:
    """Every group built is this rank's group, members in key order; an
    all-reduce of the ranks on each gives the sum of its members."""
    import torch
    import torch.distributed as dist

    checked = 0
    for dims in DIMS:
        for r in range(modules.rounds):
            name = modules.names[r] if modules.colocated else modules.module_of(rank)
            members = modules.members(rank, dims, r)
            pg = built.group(dims, name)
            assert (pg is None) == (members is None), (dims, r)
            if pg is None:
                continue
            assert ranks_of(pg) == expect_order(members), (dims, name, members)
            t = torch.tensor([rank], dtype=torch.int64)
            dist.all_reduce(t, group=pg)
            assert t.item() == sum(members), (dims, name)
            checked += 1
    for src, dst in modules.edges:
        for kind in modules.bridge_kinds(src, dst):
            members = modules.bridge_members(rank, src, dst, kind)
            pg = built.bridge(src, dst, kind)
            assert (pg is None) == (members is None), (src, dst, kind)
            if pg is not None:
                assert ranks_of(pg) == expect_order(members), (src, dst, kind, members)
                assert dist.get_rank(pg) == expect_order(members).index(rank)
                checked += 1
    return checked


def move_leader_plan(modules: Any, built: Any, rank: int, src: str, dst: str) -> list[int] | None:
    """The leader plan: each source leader sends its lane number to each
    paired destination leader over the bridge group (a pair of one rank is
    a copy); each destination leader broadcasts what it received in its
    dst_broadcast group. What this rank received (None: not a destination
    rank at the first stage)."""
    import torch
    import torch.distributed as dist

    plan = modules.bridge(src, dst)
    role = modules.role(rank, src, dst)
    bridge_pg = built.bridge(src, dst, "bridge")
    sends, recvs, local = [], [], {}
    if role["src_leader"]:
        lane = plan["src_leaders"].index(rank)
        for d in role["sends_to"]:
            t = torch.full((1,), lane, dtype=torch.int64)
            if d == rank:
                local[rank] = t
            else:
                sends.append(dist.isend(t, dst=d, group=bridge_pg))
    got: list[Any] = []
    if role["dst_leader"]:
        for s in role["receives_from"]:
            if s == rank:
                got.append(None)  # filled from the local copy below
            else:
                t = torch.empty(1, dtype=torch.int64)
                recvs.append(dist.irecv(t, src=s, group=bridge_pg))
                got.append(t)
    for w in sends + recvs:
        w.wait()
    got = [local[rank] if t is None else t for t in got]
    bcast_pg = built.bridge(src, dst, "dst_broadcast")
    if bcast_pg is None:
        return None
    lane = lane_of(plan["dst_broadcast"], rank)
    leader = plan["dst_leaders"][lane]
    count = sum(1 for _, d in plan["pairs"] if d == leader)
    buf = torch.cat(got) if rank == leader else torch.empty(count, dtype=torch.int64)
    dist.broadcast(buf, src=leader, group=bcast_pg)
    return buf.tolist()


def check_moves(modules: Any, built: Any, rank: int) -> dict[str, Any]:
    """Moves lane numbers along every edge and checks what arrived."""
    import torch
    import torch.distributed as dist

    seen: dict[str, Any] = {}
    for src, dst in modules.edges:
        plan = modules.bridge(src, dst)
        kinds = modules.bridge_kinds(src, dst)
        key = f"{src}->{dst}"
        if "bridge" in kinds:  # the leader plan (separate spans, or colocated p2p)
            got = move_leader_plan(modules, built, rank, src, dst)
            if got is not None:
                leader = plan["dst_leaders"][lane_of(plan["dst_broadcast"], rank)]
                want = [plan["src_leaders"].index(s) for s, d in plan["pairs"] if d == leader]
                assert got == want, (key, got, want)
            seen[key] = got
        else:  # colocated, collective: all-gather in the gather groups
            c = plan["colocated"]
            assert c["mode"] == "collective" and c["direction"] == "fan_in", c
            k = c["scale"]
            mine = lane_of(plan["src_broadcast"], rank)
            pg = built.bridge(src, dst, "gather")
            out = [torch.empty(1, dtype=torch.int64) for _ in range(k)]
            dist.all_gather(out, torch.full((1,), mine, dtype=torch.int64), group=pg)
            got = [t.item() for t in out]
            block = lane_of(plan["dst_broadcast"], rank)
            assert got == list(range(block * k, (block + 1) * k)), (key, got)
            assert got[c["slots"][rank - modules.rank_offset]] == mine
            if "colocated_cp_gather" in kinds:
                cp_pg = built.bridge(src, dst, "colocated_cp_gather")
                members = modules.bridge_members(rank, src, dst, "colocated_cp_gather")
                out = [torch.empty(1, dtype=torch.int64) for _ in members]
                dist.all_gather(out, torch.full((1,), rank, dtype=torch.int64), group=cp_pg)
                assert [t.item() for t in out] == expect_order(members)
            seen[key] = got
    return seen


def run(rank: int, world: int, rdzv: str, out: str, jobs: list) -> None:
    """Joins the gloo world; for each job (name, spec) builds every module
    group and bridge group with new_module_groups, checks them and moves
    data along each edge; writes what it saw to ``out``/rank.json."""
    result: dict[str, Any] = {"rank": rank, "checked": {}, "moved": {}, "error": None}
    try:
        import torch
        import torch.distributed as dist

        from rank_layout import LayoutError
        from rank_layout.torch import new_groups, new_module_groups

        torch.set_num_threads(1)
        worlds.init_gloo(rank, world, rdzv, TIMEOUT)
        for i, (name, spec) in enumerate(jobs):
            modules = build(spec)
            # new_groups takes Modules too, as new_module_groups does.
            make = new_groups if i % 2 else new_module_groups
            built = make(modules, DIMS, timeout=TIMEOUT)
            result["checked"][name] = check_groups(modules, built, rank)
            result["moved"][name] = check_moves(modules, built, rank)
        # Refusals come on every rank before any group is made: no hang.
        modules = build(jobs[0][1])
        for bad, message in (
            (lambda: new_module_groups(modules, ["tp", "ep"]), '"ep"'),
            (lambda: new_module_groups(modules, backend={"tpp": "gloo"}), "not built here"),
            (lambda: new_module_groups("modules"), "must be a rank_layout.Modules"),
        ):
            try:
                bad()
            except LayoutError as e:
                assert message in str(e), e
            else:
                raise AssertionError(f"no LayoutError ({message})")
        t = torch.ones(1)
        dist.all_reduce(t)
        assert t.item() == world
        dist.destroy_process_group()
    except BaseException:
        result["error"] = traceback.format_exc()
        raise
    finally:
        Path(out, f"{rank}.json").write_text(json.dumps(result))
