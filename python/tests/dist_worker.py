"""The body of each process of test_torch.py (a module of its own so that
spawned processes can import it)."""

from __future__ import annotations

import json
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import worlds

TIMEOUT = timedelta(seconds=60)


def check(layout: Any, groups: dict, rank: int) -> int:
    """Every kind: the rank's process groups are its groups, and an
    all-reduce of the ranks on each gives the sum of the members. Every rank
    walks the kinds, and its groups by color, in the same order."""
    import torch
    import torch.distributed as dist

    from rank_layout.torch._groups import _KEEP_ORDER

    inside = layout.rank_offset <= rank < layout.rank_offset + layout.world_size
    checked = 0
    assert list(groups) == layout.kinds
    for kind in layout.kinds:
        got = groups[kind]
        pgs = [] if got is None else (got if isinstance(got, list) else [got])
        want = layout.memberships(rank, kind) if inside else []
        assert len(pgs) == len(want), (kind, want, got)
        assert isinstance(got, list) == (len(want) > 1), (kind, got)
        for m, pg in zip(want, pgs):
            members = m["members"] if _KEEP_ORDER else sorted(m["members"])
            assert dist.get_process_group_ranks(pg) == members, (kind, m)
            assert dist.get_rank(pg) == members.index(rank), (kind, m)
            t = torch.tensor([rank], dtype=torch.int64)
            dist.all_reduce(t, group=pg)
            assert t.item() == sum(m["members"]), (kind, m, t.item())
            checked += 1
    return checked


def run(rank: int, world: int, rdzv: str, out: str, jobs: list) -> None:
    """Joins the gloo world, builds and checks the groups of every job
    (layout keywords, method), and writes what it saw to ``out``/rank.json."""
    result: dict[str, Any] = {"rank": rank, "checked": {}, "error": None}
    try:
        import torch
        import torch.distributed as dist

        from rank_layout import Layout, LayoutError
        from rank_layout.torch import new_groups

        torch.set_num_threads(1)
        worlds.init_gloo(rank, world, rdzv, TIMEOUT)
        for name, config, method in jobs:
            layout = Layout(**config)
            groups = new_groups(layout, method=method, timeout=TIMEOUT)
            result["checked"][f"{name}/{method}"] = check(layout, groups, rank)
        # Refusals come on every rank before any group is made: no hang.
        for bad, message in (
            (lambda: new_groups(Layout(tp=2, world_size=world), ["tp", "tpp"]), "unknown kind"),
            (lambda: new_groups(Layout(tp=2, world_size=2 * world)), "do not fit"),
            (lambda: new_groups(Layout(tp=2, world_size=world), method="split"), "method must be"),
        ):
            try:
                bad()
            except LayoutError as e:
                assert message in str(e), e
            else:
                raise AssertionError(f"no LayoutError ({message})")
        # After all that, the world still works: a last all-reduce.
        t = torch.ones(1)
        dist.all_reduce(t)
        assert t.item() == world
        dist.destroy_process_group()
    except BaseException:
        result["error"] = traceback.format_exc()
        raise
    finally:
        Path(out, f"{rank}.json").write_text(json.dumps(result))
