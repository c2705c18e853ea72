"""The body of each process of test_relayout_kill.py (a module of its own so
that processes can import it; worlds.run_world runs them).

A training loop on gloo: the old layout's groups from new_groups (the
spare processes, after the old layout's ranks, are in none of them); each
step all-reduces the process's rank on every kind's group with
``async_op=True``, then waits for the step's work. The victim kills itself
with SIGKILL in step ``KILL_STEP``: it issues the all-reduces of the kinds
before ``job["kind"]`` and waits until they are done on every member
(so that which work completes afterwards does not depend on how fast the
kill lands), waits until the other members of its group of that kind
have issued theirs (they are then inside that all-reduce, waiting for
it), says it is going (a store key, as a launcher or nvidia-resiliency-ext
would tell the survivors) and kills itself.

A survivor runs on as far as its work completes: a step whose work all
completes is followed by the next, up to ``STEPS``, so the processes
around the dead one leave collectives issued on groups whose other
members never issue them (the way a real job stops). It stops at the
first work that fails, or at work on a group a member of which never
issues it (the dead one past its last all-reduce, or a survivor stopped
at an earlier step); it says where it stopped through the store, stops waiting,
and keeps the Work objects, as a job that gives up on them does. So
where each survivor stops follows from the groups alone, not from
timing.

Then each survivor checks the refusals of apply_relayout's new arguments,
computes the plan of every policy of the job (the same arguments on every
process), checks through the store that every survivor holds the same
plan hash, applies it with apply_relayout to the same old groups
(``destroy_old`` only for the last; ``keep`` and ``unfinished`` as the job
says) and all-reduces its new rank on each of its new groups, with a
deadline: the sum (or the error, or "timeout") is recorded for the test to
compare with the plan's.
"""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import worlds

#: The store's and the old groups' timeout.
TIMEOUT = timedelta(seconds=60)
#: apply_relayout's timeout: every rendezvous and collective of the groups it makes.
APPLY_TIMEOUT = timedelta(seconds=30)
#: The step the victim dies in, and the most steps a process runs.
KILL_STEP, STEPS = 3, 6
#: How long a survivor waits with no work completing before it gives up
#: (a safety net: the rule of the module's doc stops every survivor first).
STALL_S = 30.0
#: How long a new group's all-reduce may take before it counts as hung.
CHECK_S = 20.0


def run(rank: int, world: int, rdzv: str, out: str, job: dict[str, Any]) -> None:
    """One process of the world; writes what it saw to ``out``/rank.json."""
    result: dict[str, Any] = {"rank": rank, "error": None, "policies": {}, "times": {}}
    victim = job["victim"]
    t0 = time.monotonic()

    def mark(what: str) -> None:
        result["times"][what] = round(time.monotonic() - t0, 2)

    with worlds.recorded(out, rank, result):
        import torch
        import torch.distributed as dist

        from rank_layout import Layout
        from rank_layout.torch import new_groups

        torch.set_num_threads(1)
        store = worlds.init_gloo(rank, world, rdzv, TIMEOUT)
        layout = Layout(**job["layout"])
        kinds = job["kinds"]
        groups = new_groups(layout, kinds, backend="gloo", timeout=TIMEOUT)
        mark("groups")
        if rank == victim:
            # Written first: a process killed leaves no result of its own.
            Path(out, f"{rank}.json").write_text(json.dumps({**result, "killed": True}))
        result["train"], pending = train(layout, groups, kinds, rank, store, job)
        mark("trained")
        if any(as_list(g) for g in groups.values()):  # not the spare, in no group
            result["refused"] = check_refusals(layout, groups, kinds, victim)
        apply_policies(layout, groups, kinds, rank, world, store, job, result, [pg for _, pg, _ in pending])
        mark("applied")
        # The store lives in rank 0: it goes last.
        survivors = [r for r in range(world) if r != victim]
        store.set(f"done/{rank}", "1")
        if rank == 0:
            store.wait([f"done/{r}" for r in survivors], TIMEOUT)
        t = time.monotonic()
        del pending
        dist.destroy_process_group()
        result["teardown_s"] = round(time.monotonic() - t, 2)
        mark("done")


def train(layout: Any, groups: dict, kinds: list[str], rank: int, store: Any, job: dict) -> tuple[dict, list]:
    """The training loop (see the module's doc): what this process did (the
    step it stopped in, each kind's work done right, failed or left
    pending), and the work it gave up on: (kind, group, Work)."""
    import torch
    import torch.distributed as dist

    victim, kill_kind = job["victim"], job["kind"]
    seen: dict[str, Any] = {"steps": 0, "wrong": [], "failed": [], "abandoned": []}
    gone_key = f"gone/{victim}"
    stopped: dict[int, int] = {}  # the last step of the survivors that stopped

    def never(kind: str, pg: Any, step: int) -> bool:
        """Whether a member of ``pg`` never issues this step's all-reduce
        on it: a survivor that stopped before ``step``, or the dead one
        past its last all-reduce (its work fails, or, where the member
        waited for is a survivor that gave up, waits)."""
        ranks = dist.get_process_group_ranks(pg)
        past = step > KILL_STEP or (step == KILL_STEP and kinds.index(kind) >= kinds.index(kill_kind))
        if victim in ranks and past and store.check([gone_key]):
            return True
        for r in ranks:
            if r not in stopped and r not in (rank, victim) and store.check([f"stopped/{r}"]):
                stopped[r] = int(store.get(f"stopped/{r}"))
        return any(stopped.get(r, step) < step for r in ranks)

    # Every group of this process, by kind (a kind whose groups overlap, an
    # encoder's fan-out pp, gives a list).
    mine = [(kind, pg) for kind in kinds for pg in as_list(groups[kind])]
    if not mine:
        return seen, []  # a spare: in no group of the old layout
    for step in range(1, STEPS + 1):
        works = []
        for kind, pg in mine:
            if rank == victim and step == KILL_STEP and kind == kill_kind:
                # The kinds before this one done on every member (so which
                # work completes does not depend on how fast the kill is),
                # then every peer of this kind inside its all-reduce.
                for _, g, _, w in works:
                    w.wait()
                    others = [r for r in dist.get_process_group_ranks(g) if r != rank]
                    store.wait([f"completed/{KILL_STEP}/{g.group_name}/{r}" for r in others], TIMEOUT)
                peers = {r for k, g in mine if k == kind for r in dist.get_process_group_ranks(g)} - {rank}
                store.wait([f"issued/{KILL_STEP}/{r}" for r in sorted(peers)], TIMEOUT)
                store.set(gone_key, "1")
                os.kill(os.getpid(), signal.SIGKILL)
            t = torch.tensor([float(rank)])
            works.append((kind, pg, t, dist.all_reduce(t, group=pg, async_op=True)))
        if step == KILL_STEP:
            store.set(f"issued/{KILL_STEP}/{rank}", "1")
        last = time.monotonic()
        left = list(works)
        stop = False
        while left:
            done = [w for w in left if w[3].is_completed()]
            for kind, pg, t, work in done:
                left.remove((kind, pg, t, work))
                last = time.monotonic()
                try:
                    work.wait()
                except Exception as e:  # the dead peer's group
                    seen["failed"].append([step, kind, str(e).splitlines()[0][:200]])
                    stop = True
                    continue
                want = float(sum(dist.get_process_group_ranks(pg)))
                if t.item() != want:
                    seen["wrong"].append([step, kind, t.item(), want])
                if step == KILL_STEP:
                    store.set(f"completed/{KILL_STEP}/{pg.group_name}/{rank}", "1")
            if not left:
                break
            hopeless = [w for w in left if never(w[0], w[1], step)]
            if time.monotonic() - last > STALL_S:
                seen["stalled"] = step  # the rule below left work waiting: the test fails
                hopeless = left
            if stop or hopeless:
                seen["abandoned"] = [[step, kind, dist.get_process_group_ranks(pg)] for kind, pg, _, _ in left]
                stop = True
                break
            time.sleep(0.01)
        seen["steps"] = step
        if stop:
            store.set(f"stopped/{rank}", str(step))
            return seen, [(kind, pg, work) for kind, pg, _, work in left]
    store.set(f"stopped/{rank}", str(STEPS))
    return seen, []


def apply_policies(
    layout: Any, groups: dict, kinds: list[str], rank: int, world: int, store: Any, job: dict, result: dict,
    abandoned: list,
) -> None:
    """Every policy of the job, in turn, on the same old groups: the plan
    (its hash agreed through the store), apply_relayout (with the job's
    ``keep``, and ``unfinished=`` the groups this process gave up work on
    where the job says so), and an all-reduce of the new rank on each of
    this process's new groups."""
    import torch.distributed as dist

    from rank_layout import relayout
    from rank_layout.torch import apply_relayout

    victim = job["victim"]
    survivors = [r for r in range(world) if r != victim]
    store.wait([f"gone/{victim}"], TIMEOUT)
    for i, (label, policy, spare_nodes, options) in enumerate(job["policies"]):
        last = i == len(job["policies"]) - 1
        plan = relayout(layout, [victim], policy=policy, gpus_per_node=1, spare_nodes=spare_nodes, kinds=kinds)
        store.set(f"hash/{label}/{rank}", f"{plan.hash:016x}")
        keys = [f"hash/{label}/{r}" for r in survivors]
        store.wait(keys, TIMEOUT)
        assert {store.get(k).decode() for k in keys} == {f"{plan.hash:016x}"}, label
        unfinished = abandoned if options.get("unfinished") else ()
        t = time.monotonic()
        applied = apply_relayout(plan, groups, timeout=APPLY_TIMEOUT, destroy_old=last,
                                 keep=options.get("keep", "agreed"), unfinished=unfinished)
        seen: dict[str, Any] = {"apply_s": round(time.monotonic() - t, 3), "rank": applied.rank, "kinds": {}}
        seen["unsettled"] = list(getattr(applied, "unsettled", []))
        for kind in kinds:
            seen["kinds"][kind] = check(plan, kind, applied, rank)
        result["policies"][label] = seen
        if not last:
            # The groups this policy made (the old ones stay for the next).
            olds = {id(g) for v in groups.values() for g in as_list(v)}
            for pg in {id(g): g for v in applied.groups.values() for g in as_list(v) if id(g) not in olds}.values():
                dist.destroy_process_group(pg)


def check_refusals(layout: Any, groups: dict, kinds: list[str], victim: int) -> int:
    """The new arguments' refusals come on every process before any group
    is made (so the next apply_relayout still meets its partners). How
    many were checked."""
    from rank_layout import relayout
    from rank_layout.torch import apply_relayout
    from rank_layout.torch.relayout import settled_groups

    plan = relayout(layout, [victim], policy="drop-replica", kinds=kinds)
    pg = next(g for v in groups.values() for g in as_list(v))
    cases = [
        (lambda: apply_relayout(plan, groups, keep="always"), "keep must be one of agreed, never, got 'always'"),
        (lambda: apply_relayout(plan, groups, unfinished=pg),
         f"unfinished must be a list of process groups, got {type(pg).__name__}"),
        (lambda: settled_groups(layout, []), "settled_groups takes a rank_layout.Relayout, got Layout"),
        (lambda: settled_groups(plan, [], timeout=5), "timeout must be a datetime.timedelta, got 5"),
    ]
    return worlds.refusals(cases)


def check(plan: Any, kind: str, applied: Any, rank: int) -> dict[str, Any]:
    """This process's new groups of ``kind`` (several where the kind's
    groups overlap): how apply_relayout got them, and for each, by color,
    its torch ranks and the sum of an all-reduce of the new ranks
    (``None`` with ``error`` when it failed or did not complete in
    CHECK_S)."""
    import torch
    import torch.distributed as dist

    out: dict[str, Any] = {"how": applied.how[kind], "groups": []}
    for pg in as_list(applied.groups[kind]):
        seen: dict[str, Any] = {"processes": dist.get_process_group_ranks(pg), "sum": None, "error": None}
        out["groups"].append(seen)
        t = torch.tensor([float(applied.rank)])
        start = time.monotonic()
        try:
            work = dist.all_reduce(t, group=pg, async_op=True)
            while not work.is_completed():
                if time.monotonic() - start > CHECK_S:
                    seen["error"] = "timeout"
                    break
                time.sleep(0.01)
            else:
                work.wait()
                seen["sum"] = t.item()
        except Exception as e:
            seen["error"] = str(e).splitlines()[0][:300]
    del plan, rank
    return out


def as_list(pg: Any) -> list:
    """new_groups' answer for a kind: its group, a list of several, or None."""
    return pg if isinstance(pg, list) else [] if pg is None else [pg]


def settle(rank: int, world: int, rdzv: str, out: str, job: dict[str, Any]) -> None:
    """One of 3 processes checking settled_groups alone, on groups A = [0, 1]
    and B = [1, 2] (process 1 in both): each check's answer, by step, in
    ``out``/rank.json. Steps: "fresh" (no operation yet); "ahead" (process
    0 issued an all-reduce on A that 1 has not, and checks a second later,
    so a check reading a report of the first would see 0 and 1 agree);
    "matched" (1 issued it too, and names B unfinished); "alone" (0 checks
    A, 1 does not: the LayoutError after 1 s)."""
    result: dict[str, Any] = {"rank": rank, "error": None, "steps": {}}
    with worlds.recorded(out, rank, result):
        import torch
        import torch.distributed as dist

        from rank_layout import Layout, LayoutError, relayout
        from rank_layout.torch.relayout import settled_groups

        torch.set_num_threads(1)
        store = worlds.init_gloo(rank, world, rdzv, TIMEOUT)
        a, b = dist.new_group([0, 1]), dist.new_group([1, 2])
        plan = relayout(Layout(**job["layout"]), job["failed"], policy="drop-replica")
        mine = {"A": a, "B": b} if rank == 1 else {"A": a} if rank == 0 else {"B": b}

        def check(step: str, **kwargs: Any) -> None:
            kept = settled_groups(plan, list(mine.values()), **kwargs)
            result["steps"][step] = sorted(name for name, pg in mine.items() if any(pg is k for k in kept))

        check("fresh")
        t = torch.tensor([float(rank)])
        work = dist.all_reduce(t, group=a, async_op=True) if rank == 0 else None
        if rank == 0:
            time.sleep(1.0)
        check("ahead")
        if rank == 1:
            work = dist.all_reduce(t, group=a, async_op=True)
        if work is not None:
            work.wait(timedelta(seconds=30))
            result["sum"] = t.item()
        check("matched", unfinished=[b] if rank == 1 else [])
        if rank == 0:
            try:
                settled_groups(plan, [a], timeout=timedelta(seconds=1))
            except LayoutError as e:
                result["steps"]["alone"] = str(e)
        store.set(f"done/{rank}", "1")
        if rank == 0:
            store.wait([f"done/{r}" for r in range(world)], TIMEOUT)
        dist.destroy_process_group()
