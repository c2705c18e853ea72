"""The body of each process of test_relayout_gloo.py (a module of its own so
that processes can import it), and the harness that spawns them.

One world per test: the old layout's ranks, then the spare processes
(launched with the job, in no group of the old layout). Every process
builds the old layout's groups with new_groups (gloo) and checks them with
an all-reduce; then process ``failed`` says it is going (a store key, as a
launcher or nvidia-resiliency-ext would tell the survivors who died) and
ends with os._exit, mid-job. Each survivor computes the plan of every
policy from the same arguments, checks through the store that every
survivor holds the same plan hash (no collective: the default group has a
dead member), applies it with apply_relayout, and checks each of its new
groups: members in the plan's order, its group rank its key, and an
all-reduce of the new ranks giving their sum. Every policy is applied to
the same old groups (gloo cannot shrink, so apply_relayout rebuilds and,
with destroy_old=False, leaves them), the last one with destroy_old=True.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import worlds

#: Every wait of the processes: the store, each group's rendezvous and
#: collectives.
TIMEOUT = timedelta(seconds=60)
#: The exit code of the process that fails on purpose.
FAILED_EXIT = 17


def run(rank: int, world: int, rdzv: str, out: str, job: dict[str, Any]) -> None:
    """One process of the world; writes what it saw to ``out``/rank.json."""
    result: dict[str, Any] = {"rank": rank, "error": None, "policies": {}, "times": {}}
    failed = job["failed"]
    t0 = time.monotonic()

    def mark(what: str) -> None:
        result["times"][what] = round(time.monotonic() - t0, 2)

    try:
        import torch
        import torch.distributed as dist

        from rank_layout import Layout, LayoutError, relayout
        from rank_layout.torch import apply_relayout, new_groups

        torch.set_num_threads(1)
        mark("imported")
        store = worlds.init_gloo(rank, world, rdzv, TIMEOUT)
        mark("joined")
        layout = Layout(**job["layout"])
        kinds = job["kinds"]
        groups = new_groups(layout, kinds, backend="gloo", timeout=TIMEOUT)
        result["shared"] = sorted(k for k in kinds if any(groups[k] is groups[j] is not None for j in kinds if j < k))
        # The job runs: an all-reduce on each old group.
        result["old_checked"] = check_old(layout, groups, rank)
        mark("old groups")
        if rank == failed:
            Path(out, f"{rank}.json").write_text(json.dumps({**result, "exited": True}))
            store.set(f"gone/{rank}", "1")
            os._exit(FAILED_EXIT)
        # The survivors learn who died (here from the store key the dying
        # process wrote; the rank is the test's argument).
        store.wait([f"gone/{failed}"], TIMEOUT)
        mark("failure seen")
        survivors = [r for r in range(world) if r != failed]
        result["refused"] = check_refusals(layout, kinds, failed, groups, world)
        if job.get("told") is not None:
            # The survivors are told the wrong process died: groups with
            # the dead one in them must end in a LayoutError, not a hang.
            plan = relayout(layout, [job["told"]], policy="drop-replica", kinds=kinds)
            t = time.monotonic()
            try:
                apply_relayout(plan, groups, timeout=timedelta(seconds=job["timeout_s"]), destroy_old=False)
                result["wrong"] = {"error": None, "seconds": time.monotonic() - t}
            except LayoutError as e:
                result["wrong"] = {"error": str(e), "seconds": time.monotonic() - t}
        for i, (label, policy, spare_nodes, stand_in) in enumerate(job["policies"]):
            last = i == len(job["policies"]) - 1
            plan = relayout(layout, [failed], policy=policy, gpus_per_node=1, spare_nodes=spare_nodes, kinds=kinds)
            store.set(f"hash/{label}/{rank}", f"{plan.hash:016x}")
            keys = [f"hash/{label}/{r}" for r in survivors]
            store.wait(keys, TIMEOUT)
            hashes = {store.get(k).decode() for k in keys}
            assert hashes == {f"{plan.hash:016x}"}, (label, hashes)
            calls: list = []
            t = time.monotonic()
            with StandInShrink(calls) if stand_in else contextlib.nullcontext():
                applied = apply_relayout(plan, groups, timeout=TIMEOUT, destroy_old=last)
            seconds = time.monotonic() - t
            result["policies"][label] = {
                "seconds": seconds,
                "hash": f"{plan.hash:016x}",
                "rank": applied.rank,
                "destroyed": applied.destroyed,
                "shrink_calls": calls,
                "same_dp_dp_cp": "dp-cp" in kinds and applied.groups["dp"] is applied.groups["dp-cp"] is not None,
                **check_new(plan, groups, applied, rank),
            }
            if not last:
                # The groups this policy made (not the old ones, which the
                # next policy starts from).
                olds = {id(g) for v in groups.values() for g in as_list(v)}
                made = {id(g): g for v in applied.groups.values() for g in as_list(v) if id(g) not in olds}
                for pg in made.values():
                    dist.destroy_process_group(pg)
        mark("applied")
        # The store lives in rank 0: it goes last.
        store.set(f"done/{rank}", "1")
        if rank == 0:
            store.wait([f"done/{r}" for r in survivors], TIMEOUT)
        dist.destroy_process_group()
        mark("done")
    except BaseException:
        result["error"] = traceback.format_exc()
        raise
    finally:
        Path(out, f"{rank}.json").write_text(json.dumps(result))


class StandInShrink:
    """While active, apply_relayout sees every backend able to shrink, and
    torch.distributed.shrink_group is a stand-in (gloo has none): it
    records its arguments, flags included, and makes the old group's
    remaining members, in their order, a members-only group (one group
    made, as the real one makes one). The old group is left as it is."""

    def __init__(self, calls: list) -> None:
        self.calls = calls

    def __enter__(self) -> "StandInShrink":
        import torch.distributed as dist

        import rank_layout.torch.relayout as rl

        self.saved = (rl._can_shrink, dist.shrink_group)
        rl._can_shrink = lambda pg: True
        dist.shrink_group = self.shrink_group
        return self

    def __exit__(self, *exc: Any) -> None:
        import torch.distributed as dist

        import rank_layout.torch.relayout as rl

        rl._can_shrink, dist.shrink_group = self.saved

    def shrink_group(self, ranks_to_exclude: list[int], group: Any = None, shrink_flags: int = 0) -> Any:
        import torch.distributed as dist

        from rank_layout.torch._groups import _KEEP_ORDER

        old = dist.get_process_group_ranks(group)
        self.calls.append([old, list(ranks_to_exclude), shrink_flags])
        keep = [r for i, r in enumerate(old) if i not in set(ranks_to_exclude)]
        return dist.new_group(keep, use_local_synchronization=True, timeout=TIMEOUT, **_KEEP_ORDER)


def check_refusals(layout: Any, kinds: list[str], failed: int, groups: dict, world: int) -> int:
    """Refusals come on every process, before any group is made (so the
    next apply_relayout still meets its partners). How many were checked."""
    from rank_layout import relayout
    from rank_layout.torch import apply_relayout

    plan = relayout(layout, [failed], policy="drop-replica", kinds=kinds)
    cases = [
        (lambda: apply_relayout(plan, groups, shrink="always"), "shrink must be one of auto, never, got 'always'"),
        (lambda: apply_relayout(relayout(layout, [failed], policy="drop-replica", kinds=kinds[:1]), groups),
         "does not classify kind(s) " + ", ".join(kinds[1:])),
        (lambda: apply_relayout(plan, {**groups, kinds[0]: [groups[kinds[0]]]}), f"kind(s) {kinds[0]}: groups gives a list, but the kind's groups do not overlap"),
        (lambda: apply_relayout(plan, groups, backend={"ep": "gloo"}), "backend names kinds not in groups: ep"),
        (lambda: apply_relayout(plan, groups, timeout=60), "timeout must be a datetime.timedelta, got 60"),
        (lambda: apply_relayout(layout, groups), "takes a rank_layout.Relayout, got Layout"),
    ]
    spares = world - layout.world_size + 1
    cases.append((
        lambda: apply_relayout(relayout(layout, [failed], policy="spare", gpus_per_node=1, spare_nodes=spares, kinds=kinds), groups),
        f"torch ranks 0..{world + 1}, beyond torch.distributed's world of {world} ranks",
    ))
    return worlds.refusals(cases)


def check_old(layout: Any, groups: dict, rank: int) -> int:
    """Each old group: its members, and an all-reduce of the ranks (every
    split round of a kind whose groups overlap, where new_groups gives a
    list, by color). How many kinds were checked."""
    import torch
    import torch.distributed as dist

    checked = 0
    for kind, pg in groups.items():
        rounds = layout.split_rounds(kind)
        splits = [layout.split(rank, kind, round=r) for r in range(rounds)] if rank < layout.world_size else []
        colors = sorted(s.color for s in splits if s is not None)
        pgs = as_list(pg)
        assert len(pgs) == len(colors), (kind, rank, colors)
        for color, one in zip(colors, pgs):
            members = layout.group(kind, color)
            assert dist.get_process_group_ranks(one) == members, (kind, members)
            t = torch.tensor([rank], dtype=torch.int64)
            dist.all_reduce(t, group=one)
            assert t.item() == sum(members), (kind, members, t.item())
        checked += bool(colors)
    return checked


def check_new(plan: Any, old_groups: dict, applied: Any, rank: int) -> dict[str, Any]:
    """This process's groups of the new layout, against the plan: what
    happened to each kind (kept groups being the very objects new_groups
    made), the members in the plan's key order, the group rank, and an
    all-reduce of the members' new ranks."""
    new_rank = plan.new_rank[rank] if rank < len(plan.new_rank) else None
    assert applied.rank == new_rank
    seen: dict[str, Any] = {}
    for kind, old_pg in old_groups.items():
        if plan.old_layout.split_rounds(kind) > 1:
            seen[kind] = check_new_rounds(plan, kind, as_list(old_pg), applied, new_rank)
            continue
        pg, how = applied.groups[kind], applied.how[kind]
        split = None if new_rank is None else plan.layout.split(new_rank, kind)
        if split is None:
            assert pg is None and how == "none", (kind, how)
            seen[kind] = {"how": how}
            continue
        ch = plan.changes(kind)
        shrunk = {s["new"]: s for s in ch["shrunk"]}
        expected = "new" if split.color in ch["new"] + ch["alone"] else "shrunk" if split.color in shrunk else "kept"
        assert how == expected or (how, expected) == ("rebuilt", "shrunk"), (kind, how, expected)
        if how == "kept":
            assert pg is old_pg, kind  # the same ProcessGroup object
        else:
            assert pg is not old_pg, kind
        processes, total = check_group(plan, kind, split.color, pg, new_rank)
        if how in ("rebuilt", "shrunk"):
            # The old group without the positions the plan excludes, in order.
            import torch.distributed as dist

            old = dist.get_process_group_ranks(old_pg) if old_pg is not None else None
            s = shrunk[split.color]
            assert [r for i, r in enumerate(old) if i not in s["exclude"]] == processes, (kind, old, s)
        seen[kind] = {"how": how, "processes": processes, "sum": total}
    return {"kinds": seen}


def check_new_rounds(plan: Any, kind: str, old_pgs: list, applied: Any, new_rank: Any) -> dict[str, Any]:
    """A kind whose groups overlap: this process's new groups, one per
    split round it has a group in, by color; each the old object when the
    plan keeps it, else a group made anew."""
    pgs, how = as_list(applied.groups[kind]), applied.how[kind]
    rounds = plan.layout.split_rounds(kind)
    splits = [plan.layout.split(new_rank, kind, round=r) for r in range(rounds)] if new_rank is not None else []
    colors = sorted(s.color for s in splits if s is not None)
    assert len(pgs) == len(colors), (kind, colors)
    ch = plan.changes(kind)
    changed = set(ch["new"]) | set(ch["alone"]) | {s["new"] for s in ch["shrunk"]}
    out = []
    for color, pg in zip(colors, pgs):
        kept = any(pg is old for old in old_pgs)
        assert kept == (color not in changed), (kind, color, kept)
        processes, total = check_group(plan, kind, color, pg, new_rank)
        out.append({"how": "kept" if kept else "new", "processes": processes, "sum": total})
    assert how == ("none" if not colors else "kept" if all(g["how"] == "kept" for g in out) else "new"), (kind, how)
    return {"how": how, "groups": out}


def as_list(pg: Any) -> list:
    """new_groups' answer for a kind: its group, a list of several, or None."""
    return pg if isinstance(pg, list) else [] if pg is None else [pg]


def check_group(plan: Any, kind: str, color: int, pg: Any, new_rank: int) -> tuple[list[int], int]:
    """Group ``color`` of the new layout is ``pg``: its torch ranks in the
    plan's order, this process's group rank its key, and an all-reduce of
    the new ranks giving their sum. The torch ranks and the sum."""
    import torch
    import torch.distributed as dist

    members = plan.layout.group(kind, color)
    processes = [plan.process(m) for m in members]
    assert dist.get_process_group_ranks(pg) == processes, (kind, processes)
    assert dist.get_rank(pg) == members.index(new_rank), (kind, color)
    t = torch.tensor([new_rank], dtype=torch.int64)
    dist.all_reduce(t, group=pg)
    assert t.item() == sum(members), (kind, members, t.item())
    return processes, t.item()


def spawn(world: int, job: dict[str, Any], tmp_path: Path, deadline_s: float) -> list[dict[str, Any]]:
    """Runs :func:`run` in ``world`` processes (worlds.run_world):
    process ``job["failed"]`` must end with FAILED_EXIT, every other with
    0, within ``deadline_s`` (past it every process is killed: a hang
    fails the test). Each process's result, by rank."""
    return worlds.run_world(run, world, job, tmp_path, deadline_s, exit_codes={job["failed"]: FAILED_EXIT})
