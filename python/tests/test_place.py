"""rank_layout.place: a layout or mesh on a host table, as the command
line's `place` (the worked GB200 cases of the semantics, section 10)."""

from __future__ import annotations

import pytest

from rank_layout import Layout, LayoutError, Mesh, place


def racks(sizes: list[int], interleave: bool = False) -> str:
    rows = []
    if interleave:
        n = 0
        for i in range(max(sizes)):
            for r, size in enumerate(sizes):
                if i < size:
                    rows.append(f"gb{n:04d} nvl72-{r:02d} 4")
                    n += 1
    else:
        n = 0
        for r, size in enumerate(sizes):
            for _ in range(size):
                rows.append(f"gb{n:04d} nvl72-{r:02d} 4")
                n += 1
    return "\n".join(rows) + "\n"


def test_sixteen_racks_and_a_short_one() -> None:
    full = place(Layout(tp=8, pp=4, ep=16, etp=1, world_size=1152), racks([18] * 16))
    assert full["unit_nodes"] == 4 and full["crossing"] == {"tp": 0, "cp": 0, "etp-ep": 8}
    short = place(Layout(tp=8, pp=4, ep=16, etp=1, dp=34), racks([16] + [18] * 15))
    assert short["crossing"]["etp-ep"] == 4 and short["plain_crossing"]["etp-ep"] == 7
    assert len(short["idle"]) == 14
    shrunk = place(Layout(tp=8, pp=4, ep=16, etp=1, dp=34), racks([16] + [18] * 15), on_shortfall="shrink")
    assert shrunk["target"].sizes["dp"] == 32 and shrunk["crossing"]["etp-ep"] == 0
    with pytest.raises(LayoutError, match="4 would straddle"):
        place(Layout(tp=8, pp=4, ep=16, etp=1, dp=34), racks([16] + [18] * 15), on_shortfall="fail")
    with pytest.raises(LayoutError, match="128 GPUs"):
        place(Layout(tp=8, pp=4, ep=16, etp=8, world_size=1024), racks([18] * 16))


def test_interleaved_racks_and_files() -> None:
    layout = Layout(tp=8, pp=4, ep=16, etp=1, world_size=1152)
    p = place(layout, racks([18] * 16, interleave=True))
    assert p["plain_crossing"] == {"tp": 144, "cp": 0, "etp-ep": 72}
    assert p["crossing"] == {"tp": 0, "cp": 0, "etp-ep": 8}
    hostfile = p["files"]["slurm-hostfile"].splitlines()
    domain = {line.split()[0]: line.split()[1] for line in racks([18] * 16, interleave=True).splitlines()}
    for group in layout.groups("tp"):
        assert len({domain[hostfile[r]] for r in group}) == 1


def test_hosts_as_dicts_and_a_mesh() -> None:
    hosts = [
        {"host": "n1", "keys": ["c", "r1"], "gpus": 4},
        {"host": "n2", "domain": "c/r2", "gpus": 4},
        {"host": "n3", "domain": "c/r1", "gpus": 4},
        {"host": "n4", "domain": "c/r2", "gpus": 4, "healthy": False},
        {"host": "n5", "domain": "c/r2", "gpus": 4},
    ]
    p = place(Mesh({"tp": 8, "dp": 2}), hosts)
    assert p["crossing"] == {"tp": 0} and p["unhealthy"] == ["n4"]
    assert sorted(p["node_hosts"][:2]) in (["n1", "n3"], ["n2", "n5"])


@pytest.mark.parametrize(
    ("hosts", "kwargs", "message"),
    [
        ("a r1 4\na r1 4\n", {}, "listed twice"),
        ([{"host": "a", "rack": 1}], {}, "unknown host key"),
        (42, {}, "plain table's text or a list of dicts"),
        ("a r1 4\nb r1 4\n", {"on_shortfall": "later"}, "on_shortfall"),
        ("a r1\nb r1\n", {}, "GPUs per node are unknown"),
    ],
)
def test_errors(hosts: object, kwargs: dict, message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        place(Layout(tp=2, world_size=4), hosts, **kwargs)
