"""rank_layout.place: a layout or mesh on a host table, as the command
line's `place` (the worked GB200 cases of the semantics, section 10), from
every host table format the command reads (the same placement as the
command's), with a nodelist, and bad tables refused."""

from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path

import pytest

from rank_layout import Layout, LayoutError, Mesh, place
from test_one_vocabulary import command

HOSTS = Path(__file__).resolve().parents[2] / "tests" / "data" / "hosts"


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
        ([{"host": "a", "rack": 1}], {}, 'unknown key "rack"'),
        ([{"host": "a", "gpus": 4.5}], {}, "gpus = 4.5"),
        ([{"host": "a\x00b", "gpus": 4}], {}, "control characters"),
        ("a\x1bb r1 4\n", {}, "control characters"),
        (42, {}, "a host table's text"),
        ("a r1 4\nb r1 4\n", {"on_shortfall": "later"}, "on_shortfall"),
        ("a r1 4\nb r1 4\n", {"hosts_format": "yaml"}, "hosts_format"),
        ("a r1\nb r1\n", {}, "GPUs per node are unknown"),
        ("BlockName=b1 BlockSize=four Nodes=a[1-2]\n", {"hosts_format": "scontrol"}, "BlockSize=four"),
    ],
)
def test_errors(hosts: object, kwargs: dict, message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        place(Layout(tp=2, world_size=4), hosts, **kwargs)


def command_place(path: Path, fmt: str, flags: list[str]) -> dict:
    out = subprocess.run(
        [command(), "place", "--hosts", str(path), "--hosts-format", fmt, "--format", "json", *flags],
        capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout)


@pytest.mark.parametrize(
    ("fixture", "fmt", "kwargs", "flags"),
    [
        ("topology_block.conf", "topology-conf", {"nodelist": "node[1-72]", "gpus_per_node": 4},
         ["--nodelist", "node[1-72]", "--gpus-per-node", "4"]),
        ("topology.yaml", "topology-yaml", {"topology": "topo2", "gpus_per_node": 4},
         ["--topology", "topo2", "--gpus-per-node", "4"]),
        ("scontrol_tree.txt", "scontrol", {"gpus_per_node": 4}, ["--gpus-per-node", "4"]),
        ("slurm_topology_addr.txt", "slurm-topology-addr", {"gpus_per_node": 4}, ["--gpus-per-node", "4"]),
        ("nvidia_smi.txt", "nvidia-smi", {}, []),
        ("kubectl_nodes.json", "kubectl", {"clique_label": "nvidia.com/gpu.clique"},
         ["--clique-label", "nvidia.com/gpu.clique"]),
    ],
)
def test_every_format_the_command_reads(fixture: str, fmt: str, kwargs: dict, flags: list[str]) -> None:
    """Each format by hosts_format= places the job as `rank-layout place
    --hosts-format` does (hosts, crossings, files)."""
    layout = Layout(tp=4, pp=2, world_size=16)
    path = HOSTS / fixture
    mine = place(layout, path.read_text(), hosts_format=fmt, **kwargs)
    theirs = command_place(path, fmt, ["--tp", "4", "--pp", "2", "--world-size", "16", *flags])
    assert mine["node_hosts"] == theirs["node_hosts"]
    assert mine["crossing"] == theirs["crossing"] and mine["plain_crossing"] == theirs["plain_crossing"]
    assert mine["gpus_per_node"] == theirs["gpus_per_node"] == 4


def test_nvidia_smi_as_a_dict_of_outputs_and_json_text() -> None:
    text = (HOSTS / "nvidia_smi.txt").read_text()
    outputs = {}
    for section in text.split("==> nvidia-smi/")[1:]:
        name, body = section.split(" <==\n", 1)
        outputs[name.removesuffix(".txt")] = body
    layout = Layout(tp=8, world_size=16)
    by_text = place(layout, text, hosts_format="nvidia-smi")
    by_dict = place(layout, outputs, hosts_format="nvidia-smi")
    assert by_dict["node_hosts"] == by_text["node_hosts"] and by_dict["unhealthy"] == ["gb07"]
    rows = [{"host": f"n{i}", "domain": f"r{i % 2}", "gpus": 4} for i in range(4)]
    as_text, as_list = place(layout, json.dumps(rows), hosts_format="json"), place(layout, rows)
    assert as_text["node_hosts"] == as_list["node_hosts"] and as_text["files"] == as_list["files"]


def test_a_nodelist_the_table_lacks() -> None:
    conf = (HOSTS / "topology_block.conf").read_text()
    layout = Layout(tp=8, world_size=16)
    with pytest.warns(UserWarning, match="not in the host table.*gpu7"):
        p = place(layout, conf, hosts_format="topology-conf", nodelist="node[1-3],gpu7", gpus_per_node=4)
    assert "gpu7" in p["node_hosts"]
    with pytest.raises(LayoutError, match="no host of the nodelist"):
        place(layout, conf, hosts_format="topology-conf", nodelist="gpu[1-4]", gpus_per_node=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        place(layout, conf, hosts_format="topology-conf", nodelist="node[1-4]", gpus_per_node=4)
