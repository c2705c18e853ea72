"""rank_layout.reshard: the plan of the crate's reshard module through the
bindings. Every case of the gloo tests (and a model from Megatron-LM's
arguments) is played out here in one process on NumPy arrays: each
process's source shards cut from the global tensors, each process's plan
(``plan_of``) applied, every element of every destination shard checked,
each filled exactly once. Then the plan's views agree (the whole plan is
every process's receives, a send is its receive), the values are plain
and picklable, a placement gives the same locality as its topology, and
bad input raises LayoutError with the library's message."""

from __future__ import annotations

import doctest
import pickle
from typing import Any

import numpy as np
import pytest
import reshard_worker as rw
from test_reshard_gloo import CASES

import rank_layout
from rank_layout import Layout, LayoutError, Relayout, Reshard, place, relayout, reshard


def simulate(plan: Reshard, arrays: dict[str, np.ndarray]) -> int:
    """Applies every process's plan to its shards; checks every element
    of every destination shard arrives exactly once, and equal. Returns
    the elements checked."""
    processes = set()
    for layout in (plan.from_layout, plan.to_layout):
        processes |= set(range(layout.rank_offset, layout.rank_offset + layout.world_size))
    sources: dict[tuple[int, str], np.ndarray] = {}
    for p in processes:
        for name in plan.tensor_names:
            shard = plan.source_shard(p, name)
            if shard is not None:
                sources[p, name] = rw.cut(shard, arrays[name])
    checked = 0
    for p in sorted(processes):
        mine = plan.plan_of(p)
        dst: dict[str, np.ndarray] = {}
        hits: dict[str, np.ndarray] = {}
        for name in plan.tensor_names:
            shard = plan.destination_shard(p, name)
            if shard is not None:
                dst[name] = np.full(shard["local_shape"], -1, dtype=arrays[name].dtype)
                hits[name] = np.zeros(shard["local_shape"], dtype=np.int64)
        for t in mine["recvs"] + mine["copies"]:
            assert t["dst"] == p
            src = sources[t["src"], t["tensor"]]
            there = tuple(slice(o, o + hi - lo) for o, (lo, hi) in zip(t["src_offset"], t["box"]))
            here = tuple(slice(o, o + hi - lo) for o, (lo, hi) in zip(t["dst_offset"], t["box"]))
            dst[t["tensor"]][here] = src[there]
            hits[t["tensor"]][here] += 1
        for name, got in dst.items():
            want = rw.cut(plan.destination_shard(p, name), arrays[name])
            assert (hits[name] == 1).all(), (p, name)
            np.testing.assert_array_equal(got, want, err_msg=f"{name} on process {p}")
            checked += got.size
    return checked


@pytest.mark.parametrize("world, case", [(w, c) for w, cases in CASES.items() for c in cases], ids=lambda x: x if isinstance(x, int) else x["label"])
def test_gloo_cases_move_every_element(world: int, case: dict[str, Any]) -> None:
    plan = rw.plan_of_case(case)
    assert simulate(plan, rw.global_arrays(rw.model())) > 0
    # The whole plan is every process's receives and copies; every send
    # is the receive of the same id.
    whole = plan.transfers()
    rows = [t for p in range(world) for t in (plan.plan_of(p)["recvs"] + plan.plan_of(p)["copies"] if rw._in_plan(plan, p) else [])]
    assert sorted(whole, key=lambda t: t["id"]) == sorted(rows, key=lambda t: t["id"])
    sends = sorted((t for p in range(world) if rw._in_plan(plan, p) for t in plan.plan_of(p)["sends"]), key=lambda t: t["id"])
    assert sends == sorted((t for t in whole if t["src"] != t["dst"]), key=lambda t: t["id"])
    for p in range(world):
        if rw._in_plan(plan, p):
            mine = plan.plan_of(p)
            for kind in ("sends", "recvs", "copies"):
                ids = [t["id"] for t in mine[kind]]
                assert ids == sorted(ids), (p, kind)


ARGS = (
    "--num-layers 4 --hidden-size 64 --num-attention-heads 8 --group-query-attention --num-query-groups 4 "
    "--ffn-hidden-size 128 --vocab-size 1000 --swiglu --normalization RMSNorm --position-embedding-type rope "
    "--disable-bias-linear --num-experts 4"
)


def test_megatron_model_refit() -> None:
    """A model from Megatron-LM's arguments (MoE, GQA, SwiGLU), training tp
    2 pp 2 ep 2 to inference tp 4 ep 4 on other ranks: every element of
    every tensor arrives; the plan names Megatron-Core's parameters."""
    plan = reshard(Layout(tp=2, pp=2, dp=2, ep=2, etp=1), Layout(tp=4, ep=4, etp=1, world_size=4, rank_offset=8), model_args=ARGS)
    names = plan.tensor_names
    assert "decoder.layers.3.mlp.experts.linear_fc1.weight3" in names
    assert "decoder.layers.0.mlp.router.weight" in names
    arrays = rw.global_arrays(plan.model)

    def copies(t: dict[str, Any]) -> int:
        # Split by tp (4 ranks, one replica) or held by one expert rank
        # (ep 4, etp 1): once; replicated: on each of the 4 ranks.
        return 1 if "tp_dim" in t or "expert" in t else 4

    tensors = plan.model["tensors"]
    assert simulate(plan, arrays) == sum(int(np.prod(t["shape"])) * copies(t) for t in tensors)
    cost = plan.cost()
    assert cost["local_bytes"] == 0
    assert cost["bytes"] == sum(int(np.prod(t["shape"])) * t["element_bytes"] * copies(t) for t in tensors)


def test_plain_values() -> None:
    plan = rw.plan_of_case(CASES[8][0])
    mine = plan.plan_of(3)
    assert pickle.loads(pickle.dumps(mine)) == mine
    assert set(mine) == {"process", "sends", "recvs", "copies"}
    t = mine["recvs"][0]
    assert set(t) == {"id", "tensor", "src", "dst", "box", "src_offset", "dst_offset", "bytes", "tier"}
    assert t["tier"] in ("local", "node", "domain", "any")
    cost = plan.cost()
    assert set(cost) == {"bytes", "local_bytes", "cross_node_bytes", "cross_domain_bytes", "max_send_bytes",
                         "max_recv_bytes", "messages", "local_copies"}
    # One process's cost is that of its transfers.
    assert plan.cost(3)["messages"] == len(mine["sends"]) + len(mine["recvs"])
    assert plan.cost(3)["local_copies"] == len(mine["copies"])
    # The model round-trips.
    again = reshard(plan.from_layout, plan.to_layout, tensors=plan.model, gpus_per_node=4)
    assert again.transfers() == plan.transfers()
    assert isinstance(relayout(Layout(tp=2, dp=2), [1], policy="drop-replica"), Relayout)
    assert "Reshard(" in repr(plan)
    assert plan.layers == {"from": [2, 2], "to": [4]}


def test_placement_gives_its_domains() -> None:
    """Hosts a0..a3 alternate between two domains; placed so that a0, a2
    (processes 0-7) share one: the same locality as 4 GPUs per node, 2
    nodes per domain, so the same plan. In the table's order each
    domain holds half of each side (processes 0-3 and 8-11 on r0), so
    less crosses domains than with the sides in a domain each."""
    hosts = "a0 r0 4\na1 r1 4\na2 r0 4\na3 r1 4\n"
    placed = place(Layout(tp=8, world_size=16), hosts, must_fit=["tp"])
    assert placed["node_hosts"] == ["a0", "a2", "a1", "a3"]
    case = dict(tensors=rw.model())
    a, b = Layout(tp=2, pp=2, dp=2, ep=2, etp=1, world_size=8), Layout(tp=4, dp=2, ep=4, etp=2, world_size=8, rank_offset=8)
    by_table = reshard(a, b, hosts=hosts, placement=placed, **case)
    by_list = reshard(a, b, hosts=hosts, placement=placed["node_hosts"], gpus_per_node=4, **case)
    by_topology = reshard(a, b, gpus_per_node=4, nodes_per_domain=2, **case)
    assert by_table.transfers() == by_topology.transfers() == by_list.transfers()
    plain = reshard(a, b, hosts=hosts, gpus_per_node=4, **case)
    assert by_table.cost()["cross_domain_bytes"] == by_table.cost()["bytes"]
    assert 0 < plain.cost()["cross_domain_bytes"] < by_table.cost()["cross_domain_bytes"]


def test_dead_and_processes() -> None:
    """A dead process sends nothing; its replica does; given processes
    renumber a side."""
    model = {"num_layers": 1, "tensors": [{"name": "w", "shape": [4, 4], "tp_dim": 0}]}
    a, b = Layout(tp=2, dp=2), Layout(world_size=1, rank_offset=4)
    plan = reshard(a, b, tensors=model, dead=[0])
    # Rows 0-1 (tp 0) from process 2, the live one of 0 and 2.
    assert [t["src"] for t in plan.transfers() if t["box"][0] == [0, 2]] == [2]
    assert all(t["src"] != 0 for t in plan.transfers())
    renumbered = reshard(a, b, tensors=model, to_processes=[9])
    assert [t["dst"] for t in renumbered.transfers()] == [9, 9]
    with pytest.raises(LayoutError, match="tensor w: no surviving process holds its source shard"):
        reshard(a, b, tensors=model, dead=[0, 2])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(tensors={"num_layers": 1, "tensors": [{"name": "w", "shape": [6], "tp_dim": 0}]}),
         "tensor w: dim 0 (6) is not divisible by 4 (tp 4) on the to side"),
        (dict(tensors={"num_layers": 1, "tensors": [{"name": "w"}]}),
         'invalid tensors file: tensors[0] (w): missing key "shape"'),
        (dict(tensors="{"), "invalid tensors file: not JSON: EOF while parsing an object at line 1 column 1"),
        (dict(tensors=[1]), "tensors must be a dict (a tensors file) or its JSON text, got list [1]"),
        (dict(), "give the model: tensors"),
        (dict(tensors={"num_layers": 1, "tensors": []}, model_args="--num-layers 1"), "give the model: tensors"),
        (dict(model_args="--num-layers 2 --hidden-size 8"), "model argument num_attention_heads: missing (give it)"),
        (dict(tensors={"num_layers": 2, "tensors": []}, from_layers=[1]), "the chunks hold 1 layers, the model has 2 on the from side"),
        (dict(tensors={"num_layers": 1, "tensors": []}, placement=["a"]), "placement needs hosts"),
        (dict(tensors={"num_layers": 1, "tensors": []}, hosts="a r0 8\nb r0 8\n", placement=["c"]),
         'placement: host "c" is not in the host table'),
        (dict(tensors={"num_layers": 1, "tensors": []}, from_processes=[0, 0, 1, 2]), "process 0 runs two ranks"),
        (dict(tensors={"num_layers": 1, "tensors": []}, dead=[-1]), "a process of dead must be at least 0, got -1"),
        (dict(tensors={"num_layers": 1, "tensors": []}, gpus_per_node=0), "gpus_per_node must be at least 1, got 0"),
    ],
)
def test_bad_input_raises_layout_error(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(LayoutError) as e:
        reshard(Layout(tp=2, world_size=4), Layout(tp=4, world_size=4), **kwargs)
    assert message in str(e.value)


def test_bad_calls() -> None:
    model = {"num_layers": 1, "tensors": [{"name": "w", "shape": [8], "tp_dim": 0}]}
    lost = relayout(Layout(tp=2, dp=2), [3], policy="drop-replica")
    with pytest.raises(LayoutError, match="reshard takes a Relayout alone"):
        reshard(lost, Layout(tp=2), tensors=model)
    with pytest.raises(LayoutError, match="dead comes from the Relayout"):
        reshard(lost, tensors=model, dead=[1])
    with pytest.raises(LayoutError, match="reshard takes two Layouts"):
        reshard(Layout(tp=2), tensors=model)
    with pytest.raises(LayoutError, match="target must be a Layout, got int 3"):
        reshard(Layout(tp=2), 3, tensors=model)
    plan = reshard(lost, tensors=model)
    assert plan.cost()["bytes"] == 0 and plan.cost()["local_copies"] == 2
    with pytest.raises(LayoutError, match="process 9 is in neither layout"):
        plan.plan_of(9)
    with pytest.raises(LayoutError, match='no tensor named "x" in the model'):
        plan.source_shard(0, "x")
    with pytest.raises(LayoutError, match="tensor 1 is past the model's 1 tensors"):
        plan.destination_shard(0, 1)
    with pytest.raises(LayoutError, match="process must be an int, got str '0'"):
        plan.plan_of("0")


@pytest.mark.parametrize("owner", [rank_layout._native.reshard, rank_layout._native.Reshard], ids=["reshard", "Reshard"])
def test_docstring_examples(owner: Any) -> None:
    """The docstring examples of reshard and Reshard; every method of
    Reshard has a docstring (with an example, but for the plain getters)."""
    parser = doctest.DocTestParser()
    examples = 0
    members = vars(owner).items() if isinstance(owner, type) else []
    for name, obj in [("", owner), *members]:
        if name.startswith("_") and name:
            continue
        doc = getattr(obj, "__doc__", None) or ""
        assert doc.strip(), name
        if ">>>" in doc:
            test = parser.get_doctest(doc, dict(vars(rank_layout)), f"{owner.__name__}.{name}", None, 0)
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
            runner.run(test)
            assert runner.failures == 0, f"{test.name}: see the output above"
            examples += 1
        else:
            assert name in ("to_layout", "process_bound"), name
    assert examples >= 1
