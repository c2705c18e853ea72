"""rank_layout.torch.apply_relayout on real gloo process groups: 8 and 16
processes (plus one spare process launched idle), one of which exits
mid-job; the survivors compute the plans of drop-replica, spare and
shift-ranks, agree on each plan's hash through the store, apply it to the
groups new_groups made, and check every group of the new layout with an
all-reduce (relayout_worker says how). No process may hang: every wait has
a 60 s timeout, and the harness kills the world past its deadline and fails
the test.

Without torch these tests are reported as skipped, with the reason; under
CI they fail (conftest.require)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import require

torch = require("torch")

import relayout_worker  # noqa: E402
from rank_layout import Layout, relayout  # noqa: E402

pytestmark = pytest.mark.slow  # gloo worlds of 8 and 16 processes

#: (label, policy, spare nodes, with relayout_worker.StandInShrink): each
#: applied in turn to the same old groups.
POLICIES = [
    ("drop-replica", "drop-replica", 0, False),
    ("drop-replica/stand-in shrink_group", "drop-replica", 0, True),
    ("shift-ranks", "shift-ranks", 0, False),
    ("spare", "spare", 1, False),
]


@pytest.fixture(autouse=True)
def quiet_world(monkeypatch: pytest.MonkeyPatch) -> None:
    """One thread per process (2 cores for up to 17 processes), loopback
    only, and a bounded resolver (see test_torch.py)."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.setenv(name, "1")
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("GLOO_SOCKET_IFNAME", os.environ.get("GLOO_SOCKET_IFNAME", "lo"))
    monkeypatch.setenv("RES_OPTIONS", os.environ.get("RES_OPTIONS", "timeout:1 attempts:1"))


def run_case(config: dict[str, Any], kinds: list[str], failed: int, tmp_path: Path, deadline_s: float) -> list[dict]:
    layout = Layout(**config)
    world = layout.world_size + 1  # one spare process, idle in the old layout
    job = {"layout": config, "kinds": kinds, "failed": failed, "policies": POLICIES}
    results = relayout_worker.spawn(world, job, tmp_path, deadline_s)
    survivors = [r for r in results if r["rank"] != failed]
    assert results[failed].get("exited") is True
    for r in results:
        # Every process checked its old groups (the spare is in none).
        assert r["old_checked"] == (len(kinds) if r["rank"] < layout.world_size else 0)
    assert {r["refused"] for r in survivors} == {7}
    if "dp-cp" in kinds and config.get("cp", 1) == 1:
        # dp-cp shares dp's group on every process of the old layout.
        assert [r["shared"] for r in results if r["rank"] < layout.world_size] == [["dp-cp"]] * layout.world_size
    for label, policy, spares, stand_in in POLICIES:
        plan = relayout(layout, [failed], policy=policy, gpus_per_node=1, spare_nodes=spares, kinds=kinds)
        seen = [r["policies"][label] for r in survivors]
        assert {s["hash"] for s in seen} == {f"{plan.hash:016x}"}
        # Every new rank is run by one survivor, the plan's process.
        ranks = {r["rank"]: r["policies"][label]["rank"] for r in survivors}
        assert ranks == {p: plan.new_rank[p] if p < len(plan.new_rank) else None for p in ranks}
        for kind in kinds:
            # The groups seen kept, shrunk (rebuilt: gloo cannot shrink) or
            # new, counted over every process, are the plan's counts.
            shrunk = "shrunk" if stand_in else "rebuilt"
            by_how: dict[str, set] = {"kept": set(), shrunk: set(), "new": set()}
            overlapping = layout.split_rounds(kind) > 1
            for s in seen:
                k = s["kinds"][kind]
                # A kind whose groups overlap: each of a process's groups
                # is kept or made anew (shrunk ones too).
                for g in k["groups"] if overlapping else [k] if k["how"] != "none" else []:
                    by_how[g["how"]].add(tuple(g["processes"]))
            counts = plan.kinds[kind]
            assert len(by_how["kept"]) == counts["kept"], (policy, kind)
            if overlapping:
                assert len(by_how["new"]) == counts["new"] + counts["alone"] + counts["shrunk"], (policy, kind)
            else:
                assert len(by_how[shrunk]) == counts["shrunk"], (policy, kind)
                # A process alone gets a group of itself: made, not counted new.
                assert len(by_how["new"]) == counts["new"] + counts["alone"], (policy, kind)
            # Every group of the new layout was checked.
            assert sum(map(len, by_how.values())) == len(plan.layout.groups(kind))
        if stand_in:
            # shrink_group once per old group shrunk on this process (dp-cp,
            # sharing dp's group, shares the shrunk one), with the plan's
            # positions; no call elsewhere.
            shared = "dp-cp" in kinds and config.get("cp", 1) == 1
            for s in seen:
                shrinking = [k for k in kinds if s["kinds"][k]["how"] == "shrunk"]
                assert len(s["shrink_calls"]) == len(shrinking) - (shared and "dp-cp" in shrinking)
                assert s["same_dp_dp_cp"] == (shared and s["rank"] is not None)
                for old, exclude, flags in s["shrink_calls"]:
                    # NCCL_SHRINK_ABORT: the parent may have work in flight.
                    assert flags == torch.distributed.distributed_c10d.SHRINK_ABORT
                    left = [r for i, r in enumerate(old) if i not in exclude]
                    assert left in [s["kinds"][k]["processes"] for k in shrinking]
        else:
            assert all(s["shrink_calls"] == [] for s in seen)
        print(label, "apply_relayout, slowest process: %.2f s" % max(s["seconds"] for s in seen))
    print("slowest process, seconds since start:", {k: max(r["times"].get(k, 0) for r in survivors) for k in survivors[0]["times"]})
    # The last policy destroyed the old groups no kind kept.
    assert any(r["policies"][POLICIES[-1][0]]["destroyed"] > 0 for r in survivors)
    assert any(s["shrink_calls"] for r in survivors for s in r["policies"].values())
    return results


@pytest.mark.parametrize(
    "config, kinds, failed",
    [
        (dict(tp=2, pp=2, dp=2, order="tp-dp-pp"), ["tp", "dp", "pp"], 5),
        # With cp = 1, new_groups gives dp-cp dp's process group (shared).
        (dict(tp=2, pp=2, dp=2, order="pp-dp-tp"), ["tp", "dp", "pp", "dp-cp", "tp-pp"], 2),
    ],
    ids=["tp-dp-pp_rank5", "pp-dp-tp_shared_rank2"],
)
def test_relayout_gloo_8_processes(config: dict, kinds: list[str], failed: int, tmp_path: Path) -> None:
    run_case(config, kinds, failed, tmp_path, deadline_s=300)


def test_relayout_gloo_encoder_fan_out(tmp_path: Path) -> None:
    """An encoder of tp 1 feeding decoder tp 2: each encoder rank is in two
    joined pipelines (pp groups overlap; new_groups gives it a list, one
    group per split round). Decoder rank 5 (replica 0) exits; drop-replica
    keeps replica 1's pipelines as the same objects, shift-ranks and spare
    make the changed ones anew, round by round."""
    config = dict(tp=2, encoder_tp=1, encoder_pp=2, dp=2)
    layout = Layout(**config)
    assert layout.split_rounds("pp") == 2
    # Both ways a process's overlapping groups go are taken: kept (the
    # same objects) and made anew.
    assert relayout(layout, [5], policy="drop-replica", kinds=["pp"]).kinds["pp"]["kept"] == 2
    assert relayout(layout, [5], policy="shift-ranks", kinds=["pp"]).kinds["pp"]["new"] > 0
    run_case(config, ["tp", "pp", "dp"], 5, tmp_path, deadline_s=300)


def test_relayout_gloo_16_processes(tmp_path: Path) -> None:
    config = dict(tp=2, cp=2, pp=2, dp=2, order="tp-cp-dp-pp")
    run_case(config, ["tp", "cp", "dp", "pp", "dp-cp"], 11, tmp_path, deadline_s=600)


def test_relayout_gloo_told_the_wrong_rank(tmp_path: Path) -> None:
    """Process 5 dies, but the survivors are told 2 did: the plan drops 2's
    replica (2 and 3 go idle), keeps tp group [4, 5] and shrinks the dp
    groups to [0, 4, 6] and [1, 5, 7]. Process 4 waits for the dead one's
    report on the kept group and ends with a LayoutError naming tp and the
    ranks; the members of the dp groups that wait for 4 (which made no
    group) or 5 end with one naming dp; each after the 5 s timeout; the
    idle processes go on; nothing hangs."""
    config, kinds, failed, told = dict(tp=2, dp=4, order="tp-dp-pp"), ["tp", "dp"], 5, 2
    layout = Layout(**config)
    job = {"layout": config, "kinds": kinds, "failed": failed, "policies": [], "told": told, "timeout_s": 5}
    results = relayout_worker.spawn(layout.world_size, job, tmp_path, deadline_s=300)
    plan = relayout(layout, [told], policy="drop-replica", kinds=kinds)
    groups = {k: [[plan.process(n) for n in g] for g in plan.layout.groups(k)] for k in kinds}
    assert groups == {"tp": [[0, 1], [4, 5], [6, 7]], "dp": [[0, 4, 6], [1, 5, 7]]}
    assert plan.changes("tp")["new"] == [] and plan.changes("dp")["kept"] == 0
    expected = {
        4: "kind tp: the members of the group the plan keeps (torch ranks [4, 5]) did not all say within 0:00:05",
        **{p: "kind dp: making the group of torch ranks [0, 4, 6] failed" for p in (0, 6)},
        **{p: "kind dp: making the group of torch ranks [1, 5, 7] failed" for p in (1, 7)},
        **{p: None for p in (2, 3)},
    }
    assert sorted(expected) == [r["rank"] for r in results if r["rank"] != failed]
    for r in results:
        if r["rank"] == failed:
            continue
        wrong, message = r["wrong"], expected[r["rank"]]
        if message is None:
            assert wrong["error"] is None, (r["rank"], wrong)
        else:
            assert wrong["error"].startswith(message), (r["rank"], wrong)
            assert 4 < wrong["seconds"] < 30, wrong
