"""rank_layout.resiliency.LayoutRankAssignment under the classes of the
installed nvidia-resiliency-ext (State, RankAssignmentCtx, Compose,
RankDiscarded, ShiftRanks, FillGaps): every process of a simulated wrapper
world holds its own assignment and state, as in a job; faults are fed as
the wrapper does (terminated ranks in the current numbering).

Without the package these tests are reported as skipped, with the reason;
under CI they fail (conftest.require)."""

from __future__ import annotations

import dataclasses
import pickle
import random
import subprocess
import sys
from typing import Any, Callable

import pytest
from conftest import require

require("nvidia_resiliency_ext.inprocess")
from nvidia_resiliency_ext.inprocess import Compose  # noqa: E402
from nvidia_resiliency_ext.inprocess import rank_assignment as ra  # noqa: E402
from nvidia_resiliency_ext.inprocess.state import Mode, State  # noqa: E402

from rank_layout import Layout, LayoutError, relayout  # noqa: E402
from rank_layout.resiliency import LayoutRankAssignment  # noqa: E402

WORKED = Layout(tp=8, pp=4, dp=36, order="tp-dp-pp")


def simulate(make: Callable[[], Any], total: int, faults: list[set[int]]) -> list[dict[int, tuple]]:
    """A wrapper world of ``total`` processes, each with its own assignment
    ``make()``: the first call (no fault), then one per fault (a set of
    processes, named by their initial rank). After each call, initial rank
    -> (rank, world_size, active_rank, active_world_size, mode) of every
    live process; the processes of the fault must raise RankDiscarded."""
    assignments = [make() for _ in range(total)]
    states = {p: State(rank=p, world_size=total) for p in range(total)}
    out = []
    for fault in [set()] + faults:
        terminated = {states[p].rank for p in fault}
        new = {}
        for p, state in states.items():
            ctx = ra.RankAssignmentCtx(state, None, set(terminated))
            if p in fault:
                with pytest.raises(ra.RankDiscarded):
                    assignments[p](ctx)
                continue
            ctx = assignments[p](ctx)
            assert ctx.terminated_ranks == set()
            new[p] = ctx.state
        states = new
        out.append({p: (s.rank, s.world_size, s.active_rank, s.active_world_size, s.mode) for p, s in states.items()})
    return out


def check_world(step: dict[int, tuple]) -> None:
    """Wrapper ranks are a permutation of the live processes; active ranks
    of the active world; active processes first, wrapper rank = active rank."""
    (world,) = {s[1] for s in step.values()}
    (active_world,) = {s[3] for s in step.values()}
    assert sorted(s[0] for s in step.values()) == list(range(world)) == list(range(len(step)))
    active = sorted(s[2] for s in step.values() if s[4] == Mode.ACTIVE)
    assert active == list(range(active_world))
    for rank, _, active_rank, _, mode in step.values():
        assert (mode == Mode.ACTIVE) == (active_rank is not None)
        if mode == Mode.ACTIVE:
            assert rank == active_rank


@pytest.mark.parametrize(
    "policy, spare_nodes, active_world",
    [("drop-replica", 0, 1120), ("spare", 1, 1152), ("shift-ranks", 0, 1120), ("fill-gaps", 0, 1120)],
)
def test_worked_case(policy: str, spare_nodes: int, active_world: int) -> None:
    """tp 8, pp 4, dp 36 (Megatron order), 4 GPUs per node, one spare node
    for the spare policy; the node of ranks 200-203 fails. Every active
    rank is the plan's new rank of its process."""
    total = WORKED.world_size + 4 * spare_nodes
    steps = simulate(lambda: LayoutRankAssignment(WORKED, policy, gpus_per_node=4), total, [{200, 201, 202, 203}])
    start, after = steps
    check_world(start)
    assert {p: s[2] for p, s in start.items()} == {p: (p if p < 1152 else None) for p in range(total)}
    check_world(after)
    plan = relayout(WORKED, "200-203", policy=policy, gpus_per_node=4, spare_nodes=spare_nodes)
    assert {s[3] for s in after.values()} == {active_world} == {plan.world_size}
    assert {p: s[2] for p, s in after.items()} == {p: plan.new_rank[p] for p in after}
    assert len(after) == total - 4


def test_worked_case_under_compose() -> None:
    """The package's Compose runs a fault-widening assignment first: one
    dead GPU reported, the whole node (4 wrapper ranks) terminated; the
    result is that of the node's four ranks reported."""

    class WholeNode(ra.RankAssignment):
        def __call__(self, ctx: Any) -> Any:
            ctx.terminated_ranks = {r // 4 * 4 + i for r in ctx.terminated_ranks for i in range(4)}
            return ctx

    def make() -> Any:
        composed = Compose(LayoutRankAssignment(WORKED, "drop-replica", gpus_per_node=4), WholeNode())
        assert isinstance(composed, ra.RankAssignment)
        return composed

    total = WORKED.world_size
    # Process 201 reported; 200, 202 and 203 are discarded with it.
    assignments = [make() for _ in range(total)]
    states = [a(ra.RankAssignmentCtx(State(rank=p, world_size=total), None, set())).state for p, a in enumerate(assignments)]
    plan = relayout(WORKED, "200-203", policy="drop-replica", gpus_per_node=4)
    for p in range(total):
        ctx = ra.RankAssignmentCtx(states[p], None, {201})
        if 200 <= p < 204:
            with pytest.raises(ra.RankDiscarded):
                assignments[p](ctx)
            continue
        s = assignments[p](ctx).state
        assert (s.active_rank, s.active_world_size, s.world_size) == (plan.new_rank[p], 1120, 1148)
        assert s.mode == (Mode.ACTIVE if plan.new_rank[p] is not None else Mode.INACTIVE)


def package_steps(cls_name: str, total: int, old_world: int, divisor: int, faults: list[set[int]]) -> list[dict]:
    """The package's own assignment: cls_name, then MaxActiveWorldSize and
    ActiveWorldSizeDivisibleBy, composed as its documentation shows."""

    def make() -> Any:
        return Compose(ra.ActiveWorldSizeDivisibleBy(divisor), ra.MaxActiveWorldSize(old_world), getattr(ra, cls_name)())

    return simulate(make, total, faults)


@pytest.mark.parametrize("cls_name, policy", [("ShiftRanks", "shift-ranks"), ("FillGaps", "fill-gaps")])
def test_matches_the_package_over_several_faults(cls_name: str, policy: str) -> None:
    """Random layouts (no experts), spare processes and one to three
    successive faults: every process's state (wrapper rank and world,
    active rank and world, mode) after each fault is the package's, but
    where FillGaps' code leaves a gap (a failed wrapper rank past the new
    world: rank-layout follows the package's documented picture, see
    test_relayout.py), or where a standby dies (the package moves the last
    standby into its place; rank-layout's failures are ranks of the layout,
    so the standby leaves the pool and the others keep their order)."""
    rng = random.Random(2024)
    compared = 0
    diverged = {True: 0, False: 0}
    for _ in range(60):
        tp, pp = rng.choice([1, 2, 4]), rng.choice([1, 2, 3])
        layout = Layout(tp=tp, pp=pp, dp=rng.randint(2, 5), order=rng.choice(["tp-dp-pp", "tp-pp-dp", "dp-tp-pp"]))
        total = layout.world_size + rng.randint(0, 3)
        alive = list(range(total))
        faults = []
        for _ in range(rng.randint(1, 3)):
            if len(alive) <= tp * pp + 3:
                break
            fault = set(rng.sample(alive, rng.randint(1, 3)))
            alive = [p for p in alive if p not in fault]
            faults.append(fault)
        try:
            ours = simulate(lambda: LayoutRankAssignment(layout, policy), total, faults)
        except LayoutError as e:
            assert "no grid" in str(e) or "no re-layout" in str(e), e
            continue
        for step, a in enumerate(ours):
            check_world(a)
            # Step by step: past a gap, the package's next FillGaps fails
            # (IndexError), so it is never run past a divergence.
            b = package_steps(cls_name, total, layout.world_size, tp * pp, faults[:step])[step]
            if a == b:
                compared += 1
                continue
            assert cls_name == "FillGaps", (layout, total, faults, step)
            # Either the package's FillGaps handed some process a rank
            # outside its world, or a standby died: the package then moves
            # the last standby into its place, rank-layout (whose failures
            # are ranks of the layout) takes it out of the pool.
            gap = any(s[0] >= s[1] for s in b.values()) or len({s[0] for s in b.values()}) < len(b)
            standby_died = any(ours[step - 1][p][4] == Mode.INACTIVE for p in faults[step - 1])
            assert gap or standby_died, (layout, total, faults, step)
            diverged[gap] += 1
            break
    print(cls_name, "steps equal:", compared, "diverged (gap, standby died):", diverged[True], diverged[False])
    assert compared > 80
    if cls_name == "ShiftRanks":
        assert diverged == {True: 0, False: 0}


def test_second_fault_uses_the_standbys() -> None:
    """drop-replica, then a second fault: the first fault's dropped replica
    survivors are standbys; spare with them as a spare node brings the
    world back."""
    layout = Layout(tp=2, pp=2, dp=3, order="tp-dp-pp")  # 12 ranks, nodes of 2
    steps = simulate(lambda: LayoutRankAssignment(layout, "drop-replica", gpus_per_node=2), 12, [{5}, {8}])
    for step in steps:
        check_world(step)
    assert [next(iter(s.values()))[3] for s in steps] == [12, 8, 4]
    # The assignment's layout is a rank_layout.Layout (it pickles, for
    # multiprocessing), after a fault too.
    a = LayoutRankAssignment(layout, "drop-replica", gpus_per_node=2)
    ctx = a(ra.RankAssignmentCtx(State(rank=0, world_size=12), None, set()))
    a(ra.RankAssignmentCtx(ctx.state, None, {5}))
    assert isinstance(a.layout, Layout) and pickle.loads(pickle.dumps(a.layout)) == a.layout == a.plan.layout
    assert a.layout.world_size == 8 and a.plans == [a.plan]
    # Spare policy, two spare nodes (12-13, 14-15): each fault takes one;
    # the dead process's node partner waits, a node of its own alone.
    steps = simulate(lambda: LayoutRankAssignment(layout, "spare", gpus_per_node=2), 16, [{5}, {8}])
    for step in steps:
        check_world(step)
    assert [next(iter(s.values()))[3] for s in steps] == [12, 12, 12]
    first, second = steps[1], steps[2]
    assert [first[p][2] for p in (12, 13, 4, 14, 15)] == [4, 5, None, None, None]
    assert [second[p][2] for p in (14, 15, 4, 9)] == [8, 9, None, None]
    # A third fault: no whole standby node is left (4 and 9 are halves).
    with pytest.raises(LayoutError, match="0 spare node"):
        simulate(lambda: LayoutRankAssignment(layout, "spare", gpus_per_node=2), 16, [{5}, {8}, {0}])


def test_state_fields_and_refusals() -> None:
    a = LayoutRankAssignment(Layout(tp=2, world_size=4), "shift-ranks")
    state = State(rank=1, world_size=5, iteration=3)
    out = a(ra.RankAssignmentCtx(state, None, set())).state
    assert (out.rank, out.world_size, out.active_rank, out.active_world_size, out.mode) == (1, 5, 1, 4, Mode.ACTIVE)
    assert (out.iteration, out.initial_rank) == (3, 1)  # untouched, as the package's classes leave them
    assert dataclasses.is_dataclass(out) and out is not state
    with pytest.raises(LayoutError, match="rank_offset 4"):
        LayoutRankAssignment(Layout(tp=2, world_size=4, rank_offset=4), "spare")
    with pytest.raises(LayoutError, match="unknown policy 'shiftranks'"):
        LayoutRankAssignment(Layout(tp=2, world_size=4), "shiftranks")
    with pytest.raises(LayoutError, match="only 3 processes"):
        LayoutRankAssignment(Layout(tp=2, world_size=4), "spare")(ra.RankAssignmentCtx(State(rank=0, world_size=3), None, set()))
    with pytest.raises(LayoutError, match="spare_nodes=2"):
        LayoutRankAssignment(Layout(tp=2, world_size=4), "spare", spare_nodes=2)(
            ra.RankAssignmentCtx(State(rank=0, world_size=5), None, set())
        )


def test_import_needs_no_package() -> None:
    """nvidia-resiliency-ext is imported when an assignment is made, not by
    ``import rank_layout.resiliency``."""
    code = "import sys, rank_layout.resiliency; print('nvidia_resiliency_ext' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "False"
    a = LayoutRankAssignment(Layout(tp=2, world_size=4), "spare")
    assert isinstance(a, ra.RankAssignment) and isinstance(a, LayoutRankAssignment)
