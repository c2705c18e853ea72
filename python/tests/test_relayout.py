"""rank_layout.relayout: the re-layout after a failure (the semantics,
section 11): the worked case's table, the same plan (hash) from Python and
from the command line, and ShiftRanks/FillGaps against the classes of the
installed nvidia-resiliency-ext on the same inputs."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from rank_layout import Layout, LayoutError, relayout
from test_one_vocabulary import command

WORKED = dict(tp=8, pp=4, dp=36, order="tp-dp-pp")


@pytest.mark.parametrize(
    "policy, spares, world, tp_new, dp_new, dp_shrunk, pp_new, total",
    [
        ("shift-ranks", 0, 1120, 115, 32, 0, 280, 427),
        ("fill-gaps", 0, 1120, 1, 32, 0, 280, 313),
        ("drop-replica", 0, 1120, 0, 0, 32, 0, 0),
        ("spare", 1, 1152, 1, 4, 0, 4, 9),
    ],
)
def test_worked_case(policy, spares, world, tp_new, dp_new, dp_shrunk, pp_new, total) -> None:
    plan = relayout(Layout(**WORKED), "200-203", policy=policy, gpus_per_node=4, spare_nodes=spares)
    assert plan.world_size == world
    k = plan.kinds
    assert (k["tp"]["new"], k["dp"]["new"], k["dp"]["shrunk"], k["pp"]["new"]) == (tp_new, dp_new, dp_shrunk, pp_new)
    assert plan.new_communicators == total == plan.cost["new_communicators"]
    assert len(plan.new_rank) == 1152 + 4 * spares
    assert plan.new_rank[200:204] == [None] * 4


def test_same_plan_from_python_and_the_command() -> None:
    for policy in ("drop-replica", "fill-gaps", "next-grid"):
        plan = relayout(Layout(**WORKED), [517, 200, 201, 202, 203], policy=policy, gpus_per_node=4)
        out = subprocess.run(
            [command(), "relayout", "--tp", "8", "--pp", "4", "--dp", "36", "--order", "tp-dp-pp",
             "--gpus-per-node", "4", "--failed-ranks", "200-203,517", "--policy", policy, "--format", "json"],
            capture_output=True, text=True, check=True,
        )
        theirs = json.loads(out.stdout)
        assert theirs["hash"] == f"{plan.hash:016x}"
        assert theirs["new_rank"] == plan.new_rank
        assert theirs["kinds"] == plan.kinds


def test_default_gpus_per_node_is_the_commands() -> None:
    """Without gpus_per_node, Python's nodes are the command's (8 GPUs):
    the spare node replaces rank 0's node of 8 ranks in both."""
    plan = relayout(Layout(tp=8, dp=2), [0], policy="spare", spare_nodes=1)
    out = subprocess.run(
        [command(), "relayout", "--tp", "8", "--dp", "2", "--failed-ranks", "0", "--spare-nodes", "1",
         "--policy", "spare", "--format", "json"],
        capture_output=True, text=True, check=True,
    )
    theirs = json.loads(out.stdout)
    assert plan.new_rank == theirs["new_rank"] and len(plan.new_rank) == 24
    # The hash is printed as the command prints it.
    assert theirs["hash"] == f"{plan.hash:016x}" and f"hash={theirs['hash']})" in repr(plan)


def test_on_hosts_as_the_command_plans() -> None:
    """relayout(hosts=..., hosts_format=...) is `relayout --hosts
    --hosts-format`: the job placed on a topology file, its failed host's
    node replaced by a spare host of the same block."""
    conf = Path(__file__).resolve().parents[2] / "tests" / "data" / "hosts" / "topology_block.conf"
    layout = Layout(tp=8, world_size=64)
    plan = relayout(
        layout, [], policy="spare", hosts=conf.read_text(), hosts_format="topology-conf",
        nodelist="node[1-20]", failed_hosts=["node3"], gpus_per_node=4,
    )
    out = subprocess.run(
        [command(), "relayout", "--tp", "8", "--world-size", "64", "--hosts", str(conf),
         "--hosts-format", "topology-conf", "--nodelist", "node[1-20]", "--failed-hosts", "node3",
         "--gpus-per-node", "4", "--policy", "spare", "--format", "json"],
        capture_output=True, text=True, check=True,
    )
    theirs = json.loads(out.stdout)
    assert theirs["hash"] == f"{plan.hash:016x}" and theirs["new_rank"] == plan.new_rank
    assert plan.kinds["tp"]["new"] == theirs["kinds"]["tp"]["new"]
    with pytest.raises(LayoutError, match="failed host \"gb99\""):
        relayout(layout, [], policy="spare", hosts=conf.read_text(), hosts_format="topology-conf",
                 failed_hosts=["gb99"], gpus_per_node=4)
    with pytest.raises(LayoutError, match="failed_hosts needs"):
        relayout(layout, [], policy="spare", failed_hosts=["node3"])


def test_errors_name_the_value() -> None:
    with pytest.raises(LayoutError, match="failed rank 1152"):
        relayout(Layout(**WORKED), [1152], policy="fill-gaps")
    with pytest.raises(LayoutError, match='"9-3"'):
        relayout(Layout(**WORKED), "9-3", policy="fill-gaps")
    with pytest.raises(LayoutError, match="unknown policy"):
        relayout(Layout(**WORKED), [1], policy="shiftranks")
    with pytest.raises(LayoutError, match="1 node\\(s\\) failed and there are 0 spare"):
        relayout(Layout(**WORKED), [1], policy="spare", gpus_per_node=4)
    # Rank 0 is a rank: a negative one is refused as "at least 0".
    with pytest.raises(LayoutError, match="a failed rank must be at least 0, got -1"):
        relayout(Layout(**WORKED), [-1], policy="fill-gaps")
    plan = relayout(Layout(**WORKED), [0], policy="drop-replica", kinds=["tp"])
    # A process the plan does not have, or a kind it did not classify, is
    # an error naming it, not None.
    with pytest.raises(LayoutError, match="process = 99999 \\(the plan has 1152\\)"):
        plan.split(99999, "dp")
    with pytest.raises(LayoutError, match="kind = dp"):
        plan.split(8, "dp")
    with pytest.raises(LayoutError, match="process must be at least 0, got -1"):
        plan.split(-1, "tp")
    assert plan.split(0, "tp") is None  # failed: no split


def test_a_process_alone_needs_no_communicator() -> None:
    """next-grid on tp 2, pp 2, 8 ranks with rank 3 lost and at least 2
    replicas: pp shrinks to 1, each pp group is one process alone, which
    is not a new communicator."""
    plan = relayout(Layout(tp=2, pp=2, world_size=8), [3], policy="next-grid", gpus_per_node=2, min_dp=2)
    assert plan.kinds["pp"] == {"kept": 0, "shrunk": 0, "new": 0, "alone": 6, "gone": 4}
    assert plan.changes("pp")["alone"] == [0, 1, 2, 3, 4, 5]
    assert plan.new_communicators == 4


def test_encoder_layout_drops_a_replica_from_both_grids() -> None:
    """Encoder tp 1, pp 2 feeding decoder tp 2, dp 4 (encoder ranks 0-7,
    decoder 8-15): rank 1 fails, drop-replica takes replica 1 from both
    grids (ranks 1, 5, 10, 11) and creates nothing; fill-gaps creates
    joined pipelines, whose splits come one per round."""
    layout = Layout(tp=2, encoder_tp=1, encoder_pp=2, dp=4)
    drop = relayout(layout, [1], policy="drop-replica", kinds=["tp", "pp", "dp"])
    assert [p for p, n in enumerate(drop.new_rank) if n is None] == [1, 5, 10, 11]
    assert drop.new_communicators == 0
    assert drop.layout.split_rounds("pp") == 2
    fill = relayout(layout, [1], policy="fill-gaps", kinds=["tp", "pp", "dp"])
    new_pp = set(fill.changes("pp")["new"])
    assert new_pp
    with pytest.raises(LayoutError, match="pp"):
        fill.split(0, "pp")
    with pytest.raises(LayoutError, match="round 2 does not exist"):
        fill.split(0, "pp", round=2)
    seen = set()
    for p, n in enumerate(fill.new_rank):
        for r in range(2):
            got = fill.split(p, "pp", round=r)
            want = None if n is None else fill.layout.split(n, "pp", round=r)
            assert got == (want if want is not None and want.color in new_pp else None)
            if got is not None:
                seen.add(got.color)
    assert seen == new_pp


NVRX = importlib.util.find_spec("nvidia_resiliency_ext") is not None


def nvrx_ranks(cls_name: str, total: int, failed: set[int], old_world: int, divisor: int, trim: bool = True) -> list:
    """Every process's active rank after the package's rank assignment
    ``cls_name``, then (``trim``) MaxActiveWorldSize(old_world) and
    ActiveWorldSizeDivisibleBy(divisor), applied as its Compose does;
    without ``trim``, the rank the assignment alone gives."""
    from nvidia_resiliency_ext.inprocess import rank_assignment as ra
    from nvidia_resiliency_ext.inprocess.state import State

    out = []
    for p in range(total):
        if p in failed:
            out.append(None)
            continue
        ctx = ra.RankAssignmentCtx(State(rank=p, world_size=total), None, set(failed))
        ctx = getattr(ra, cls_name)()(ctx)
        if not trim:
            out.append(ctx.state.rank)
            continue
        for step in (ra.MaxActiveWorldSize(old_world), ra.ActiveWorldSizeDivisibleBy(divisor)):
            ctx = step(ctx)
        out.append(ctx.state.active_rank)
    return out


@pytest.mark.skipif(not NVRX and not os.environ.get("CI"), reason="nvidia-resiliency-ext is not installed")
@pytest.mark.parametrize("cls_name, policy", [("ShiftRanks", "shift-ranks"), ("FillGaps", "fill-gaps")])
def test_rank_assignments_match_nvidia_resiliency_ext(cls_name: str, policy: str) -> None:
    """On random layouts (no experts: every multiple of the model size is a
    grid), failures and spares, the plan's new ranks are the package's.
    Where FillGaps' own code disagrees with its documented picture (a failed
    rank past the new world size: the package then hands out a rank outside
    its world and leaves a gap), rank-layout follows the picture, and the
    test asserts the package's own assignment (before the trim) is not a
    permutation of the survivors there."""
    rng = random.Random(24)
    diverged = 0
    for _ in range(150):
        tp, pp = rng.choice([1, 2, 4]), rng.choice([1, 2, 3])
        dp = rng.randint(2, 6)
        order = rng.choice(["tp-cp-ep-dp-pp", "tp-dp-pp", "tp-pp-dp", "dp-tp-pp"])
        layout = Layout(tp=tp, pp=pp, dp=dp, order=order)
        world = layout.world_size
        g = rng.choice([1, 2]) if world % 2 == 0 else 1
        spares = rng.randint(0, 2)
        failed = sorted(set(rng.sample(range(world), rng.randint(1, min(4, world - 1)))))
        try:
            plan = relayout(layout, failed, policy=policy, gpus_per_node=g, spare_nodes=spares)
        except LayoutError as e:
            assert "no grid" in str(e)
            continue
        theirs = nvrx_ranks(cls_name, world + spares * g, set(failed), world, tp * pp)
        if theirs == plan.new_rank:
            continue
        assert cls_name == "FillGaps", (layout, failed, spares, theirs, plan.new_rank)
        alive = world + spares * g - len(failed)
        assert any(f >= alive for f in failed)
        raw = [r for r in nvrx_ranks(cls_name, world + spares * g, set(failed), world, 1, trim=False) if r is not None]
        assert sorted(raw) != list(range(alive)), (failed, raw)
        diverged += 1
    if cls_name == "ShiftRanks":
        assert diverged == 0


@pytest.mark.skipif(not NVRX and not os.environ.get("CI"), reason="nvidia-resiliency-ext is not installed")
def test_fill_gaps_documented_picture() -> None:
    """The package's FillGaps docstring: 8 ranks, 1, 4 and 5 lost -> 0 6 2 3 7.
    rank-layout gives that; the package's code gives 6 -> 4 and 7 -> 5."""
    layout = Layout(world_size=8)
    plan = relayout(layout, [1, 4, 5], policy="fill-gaps")
    by_new = [plan.process(n) for n in range(plan.world_size)]
    assert by_new == [0, 6, 2, 3, 7]
    theirs = nvrx_ranks("FillGaps", 8, {1, 4, 5}, 8, 1, trim=False)
    assert theirs[6] == 4 and theirs[7] == 5
