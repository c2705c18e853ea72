"""rank_layout.Modules: named modules, their edges and each edge's bridge
plan, as the Python API gives them (the plans are the crate's; these tests
check their shape and a few worked examples by hand)."""

from __future__ import annotations

import doctest
from typing import Any

import pytest

import rank_layout
from rank_layout import Layout, LayoutError, Mesh, Modules, Split

BASE_KEYS = ["src_leaders", "dst_leaders", "pairs", "src_broadcast", "dst_broadcast", "bridge_group"]


def vision_llm() -> Modules:
    # vision: tp 2 x dp 4 (ranks 0-7); llm: tp 4 x dp 2 (ranks 8-15).
    return Modules(
        [("vision", Mesh([("tp", 2), ("dp", 4)])), ("llm", Mesh([("tp", 4), ("dp", 2)]))],
        edges=[("vision", "llm")],
    )


def keys_in_order(plan: dict[str, Any], cp_reduce: bool = False, cp_gather: bool = False, colocated: bool = False) -> list[str]:
    keys = BASE_KEYS[:5] + (["dst_cp_reduce"] if cp_reduce else []) + (["src_cp_gather"] if cp_gather else [])
    return keys + ["bridge_group"] + (["colocated"] if colocated else [])


def test_worked_example_fan_in() -> None:
    modules = vision_llm()
    plan = modules.bridge("vision", "llm")
    assert list(plan) == keys_in_order(plan)
    assert plan["src_leaders"] == [1, 3, 5, 7]  # the last tp rank of each dp lane
    assert plan["dst_leaders"] == [8, 12]  # tp 0 of each llm lane
    assert plan["pairs"] == [(1, 8), (3, 8), (5, 12), (7, 12)]
    assert all(isinstance(p, tuple) for p in plan["pairs"])
    assert plan["src_broadcast"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert plan["dst_broadcast"] == [[8, 9, 10, 11], [12, 13, 14, 15]]
    assert plan["bridge_group"] == [1, 3, 5, 7, 8, 12]
    assert modules.bridges() == {("vision", "llm"): plan}
    assert modules.names == ["vision", "llm"] and modules.edges == [("vision", "llm")]
    assert (modules.world_size, modules.rank_offset, modules.colocated, modules.rounds) == (16, 0, False, 1)
    assert len(modules) == 2
    assert modules.bridge_kinds("vision", "llm") == ["bridge", "src_broadcast", "dst_broadcast"]


def test_roles_and_splits_agree_with_the_plan() -> None:
    modules = vision_llm()
    plan = modules.bridge("vision", "llm")
    role = modules.role(3, "vision", "llm")
    assert set(role) == {"src", "dst", "src_leader", "dst_leader", "sends_to", "receives_from", "slot", "splits"}
    assert role["src_leader"] and not role["dst_leader"] and role["sends_to"] == [8] and role["slot"] is None
    assert modules.role(12, "vision", "llm")["receives_from"] == [5, 7]
    assert modules.roles(12) == [modules.role(12, "vision", "llm")]
    for rank in range(16):
        role = modules.role(rank, "vision", "llm")
        assert role["src_leader"] == (rank in plan["src_leaders"])
        assert role["dst_leader"] == (rank in plan["dst_leaders"])
        assert role["sends_to"] == [d for s, d in plan["pairs"] if s == rank]
        assert role["receives_from"] == [s for s, d in plan["pairs"] if d == rank]
        for kind in modules.bridge_kinds("vision", "llm"):
            split = modules.bridge_split(rank, "vision", "llm", kind)
            assert role["splits"][kind] == split
            members = modules.bridge_members(rank, "vision", "llm", kind)
            if split is None:
                assert members is None
            else:
                assert isinstance(split, Split) and members[split.key] == rank
        groups = {"bridge": [plan["bridge_group"]], "src_broadcast": plan["src_broadcast"], "dst_broadcast": plan["dst_broadcast"]}
        for kind, gs in groups.items():
            mine = [g for g in gs if rank in g]
            members = modules.bridge_members(rank, "vision", "llm", kind)
            assert (sorted(members) if members else None) == (sorted(mine[0]) if mine else None)


def test_megatron_configs_and_layouts_as_modules() -> None:
    modules = Modules(
        [["vision", dict(tp=2, world_size=8)], ("llm", Layout(tp=4, world_size=8))],
        edges={"vision": ["llm"], "llm": []},
    )
    assert modules.module("llm").rank_offset == 8
    assert modules.module("vision") == Layout(tp=2, world_size=8).mesh()
    assert modules.bridge("vision", "llm")["pairs"] == [(1, 8), (3, 8), (5, 12), (7, 12)]
    # A dict of modules, name -> mesh, in its order; offsets from the first.
    offset = Modules({"a": Mesh([("dp", 2)], rank_offset=4), "b": Mesh([("tp", 2)])})
    assert offset.rank_offset == 4 and offset.module("b").rank_offset == 6 and offset.world_size == 4


def test_cp_keys_only_when_cp_is_more_than_one() -> None:
    modules = Modules(
        [("enc", Mesh([("tp", 2), ("dp", 2)])), ("llm", Mesh([("tp", 1), ("cp", 2), ("dp", 4), ("pp", 2)]))],
        [("enc", "llm")],
    )
    plan = modules.bridge("enc", "llm")
    assert list(plan) == keys_in_order(plan, cp_reduce=True)
    assert plan["dst_cp_reduce"] == [[4, 5], [6, 7], [8, 9], [10, 11]]
    assert plan["pairs"] == [(1, 4), (1, 6), (3, 8), (3, 10)]  # fan-out by 2
    back = Modules(
        [("llm", Mesh([("cp", 2), ("dp", 2)])), ("head", Mesh([("dp", 2)]))],
        [("llm", "head")],
    ).bridge("llm", "head")
    assert list(back) == keys_in_order(back, cp_gather=True)
    assert back["src_cp_gather"] == [[0, 1], [2, 3]] and back["src_leaders"] == [1, 3]


def test_stages() -> None:
    modules = Modules(
        [
            ("vision", Mesh([("tp", 2), ("dp", 2)])),  # ranks 0-3
            ("audio", Mesh([("dp", 4)])),  # ranks 4-7
            ("llm", Mesh([("tp", 2), ("dp", 2), ("pp", 2)])),  # ranks 8-15
        ],
        edges=[("vision", "llm"), ("audio", "llm")],
    )
    assert modules.total_stages == 3
    assert [modules.first_stage(n) for n in modules.names] == [0, 0, 1]
    assert [modules.stage(r) for r in range(16)] == [0] * 8 + [1] * 4 + [2] * 4
    assert modules.stage_in(13, "llm") == 2 and modules.module_of(9) == "llm"
    assert modules.modules_of(5) == ["audio"]
    assert modules.bridge("audio", "llm")["pairs"] == [(4, 8), (5, 8), (6, 10), (7, 10)]
    chain = Modules([("a", Mesh([("pp", 2)])), ("b", Mesh([("pp", 3)])), ("c", Mesh([("pp", 1)]))], [("a", "b"), ("b", "c")])
    assert chain.total_stages == 6 and chain.first_stage("c") == 5
    assert [chain.stage(r) for r in range(6)] == [0, 1, 2, 3, 4, 5]  # one rank per stage


def test_split_and_members() -> None:
    modules = Modules([("enc", Mesh([("tp", 2), ("dp", 2)])), ("llm", Mesh([("tp", 4)]))])
    assert modules.split(6, "tp") == Split(2, 2) and modules.split(3, "dp") == Split(1, 1)
    assert modules.split(3, ["tp", "dp"]) == modules.split(3, "tp-dp") == Split(0, 3)
    assert modules.members(6, "tp") == [4, 5, 6, 7] and modules.members(2, "dp") == [0, 2]
    assert modules.members(5, "dp") == [5]  # llm has no dp: a group of one
    for rank in range(8):
        for dims in ("tp", "dp", "tp-dp", "pp", "cp"):
            split, members = modules.split(rank, dims), modules.members(rank, dims)
            assert members[split.key] == rank


def test_colocated_collective_fan_in() -> None:
    modules = Modules(
        [("enc", Mesh([("cp", 2), ("dp", 4)])), ("llm", Mesh([("tp", 2), ("cp", 2), ("dp", 2)]))],
        [("enc", "llm")],
        colocated=True,
    )
    assert modules.colocated and modules.world_size == 8 and modules.rounds == 2
    assert modules.modules_of(3) == ["enc", "llm"] and modules.module_of(3) == "enc"
    plan = modules.bridge("enc", "llm")
    assert list(plan) == keys_in_order(plan, cp_reduce=True, cp_gather=True, colocated=True)
    c = plan["colocated"]
    assert list(c) == ["mode", "direction", "scale", "gather_groups", "slots", "reason", "src_cp_gather", "dst_cp_reduce"]
    assert (c["mode"], c["direction"], c["scale"], c["reason"]) == ("collective", "fan_in", 2, None)
    # enc: rank = cp + 2 dp (lane = dp); llm: rank = tp + 2 cp + 4 dp (lane = dp).
    # Each llm lane gathers enc's two lanes at each enc (tp, cp) position.
    assert c["gather_groups"] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert c["slots"] == [0, 0, 1, 1, 0, 0, 1, 1]  # enc lane mod 2
    assert c["src_cp_gather"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert c["dst_cp_reduce"] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert modules.bridge_kinds("enc", "llm") == ["gather", "colocated_cp_gather", "colocated_cp_reduce"]
    assert modules.role(2, "enc", "llm")["slot"] == 1
    for rank in range(8):
        g = modules.bridge_members(rank, "enc", "llm", "gather")
        assert g in c["gather_groups"] and g.index(rank) == c["slots"][rank]
    # Colocated: one round per module, each its module's groups.
    assert modules.members(1, "cp", 0) == [0, 1] and modules.members(1, "cp", 1) == [1, 3]
    with pytest.raises(LayoutError, match="round 2 does not exist"):
        modules.split(0, "tp", 2)


def test_colocated_p2p_when_lanes_do_not_line_up() -> None:
    modules = Modules(
        [("enc", Mesh([("dp", 2), ("tp", 2)])), ("llm", Mesh([("tp", 2), ("dp", 2)]))],
        {"enc": ["llm"], "llm": []},
        colocated=True,
    )
    plan = modules.bridge("enc", "llm")
    c = plan["colocated"]
    assert (c["mode"], c["direction"], c["scale"], c["gather_groups"], c["slots"]) == ("p2p", "equal", 1, [], [])
    assert "do not line up" in c["reason"]
    assert plan["pairs"] == [(2, 0), (3, 2)] and plan["bridge_group"] == [0, 2, 3]
    assert modules.bridge_kinds("enc", "llm") == ["bridge", "src_broadcast", "dst_broadcast"]
    assert modules.bridge_members(2, "enc", "llm", "bridge") == [0, 2, 3]
    # pp > 1 forces the leader plan too.
    pp = Modules([("a", Mesh([("dp", 2), ("pp", 2)])), ("b", Mesh([("dp", 4)]))], [("a", "b")], colocated=True)
    assert pp.bridge("a", "b")["colocated"]["mode"] == "p2p" and "pp" in pp.bridge("a", "b")["colocated"]["reason"]


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: Modules([("a", Mesh([("dp", 2)])), ("b", Mesh([("dp", 2)]))], [("a", "b"), ("b", "a")]), "cycle: a -> b -> a"),
        (lambda: Modules([("a", Mesh([("dp", 2)]))], [("a", "a")]), "cycle"),
        (lambda: Modules([("a", Mesh([("dp", 2)]))], [("a", "c")]), 'unknown module "c"'),
        (lambda: Modules([("a", Mesh([("dp", 2)])), ("b", Mesh([("dp", 3)]))], [("a", "b")]), "a has 2 data lanes .* b 3"),
        (lambda: Modules([("a", Mesh([("dp", 2)])), ("b", Mesh([("dp", 2)]))], {"a": ["b"]}), 'module "b" is not in the topology'),
        (lambda: Modules([("a", Mesh([("dp", 2)]))], {"a": [], "z": []}), 'module "z", which is not one'),
        (lambda: Modules([("a", Mesh([("dp", 2)]))], {"a": "b"}), 'topology\\["a"\\] must be a list'),
        (lambda: Modules([("a", Mesh([("ep", 2), ("dp", 2)]))]), 'module a has dim "ep"'),
        (lambda: Modules([("a", Mesh([("dp", 2)])), ("a", Mesh([("dp", 2)]))]), "a is named twice"),
        (lambda: Modules([]), "no modules"),
        (lambda: Modules("ab"), "modules must be a list"),
        (lambda: Modules([("a", 3)]), "module a: its mesh must be a Mesh, a Layout or a dict"),
        (lambda: Modules([("a", Mesh([("dp", 2)]), 1)]), "a \\(name, mesh\\) pair"),
        (lambda: Modules([("a", dict(tp=3, world_size=8))]), "module a: world_size \\(8\\) is not divisible"),
        (lambda: Modules([("a", dict(tpp=2))]), 'module a: .*unknown key "tpp"'),
        (lambda: Modules([("a", Mesh([("dp", 2)]))], [("a",)]), "each edge is a \\(src, dst\\) pair"),
        (lambda: Modules([("a", Mesh([("dp", 2)]))], colocated="yes"), "colocated must be a bool"),
        (lambda: Modules([("a", Mesh([("dp", 2)])), ("b", Mesh([("dp", 4)]))], colocated=True), "module b holds ranks 0..3"),
        (lambda: Modules([("a", Mesh([("dp", 2)])), ("b", Mesh([("dp", 2)], rank_offset=5))]), "must start at rank 2"),
    ],
)
def test_bad_input_raises_layout_error(build: Any, message: str) -> None:
    with pytest.raises(LayoutError, match=message):
        build()


def test_bad_questions_raise_layout_error() -> None:
    modules = vision_llm()
    for ask, message in [
        (lambda: modules.bridge("llm", "vision"), 'unknown edge "llm -> vision"'),
        (lambda: modules.bridge("vision", "x"), 'unknown module "x"'),
        (lambda: modules.module_of(16), "rank 16 is outside"),
        (lambda: modules.stage(-1), "rank -1 is outside the modules"),
        (lambda: modules.stage(2**40), "outside the modules"),
        (lambda: modules.stage("3"), "rank must be an int"),
        (lambda: modules.bridge_split(1, "vision", "llm", "gather"), "builds no gather groups"),
        (lambda: modules.bridge_split(1, "vision", "llm", "bridgee"), 'unknown bridge kind "bridgee"'),
        (lambda: modules.split(1, "ep"), '"ep"'),
        (lambda: modules.split(1, "tp", 1), "round 1 does not exist"),
        (lambda: modules.split(1, 3), "dims must be a str"),
        (lambda: modules.first_stage("x"), 'unknown module "x"'),
    ]:
        with pytest.raises(LayoutError, match=message):
            ask()


def test_value_semantics() -> None:
    assert vision_llm() == vision_llm() and hash(vision_llm()) == hash(vision_llm())
    assert vision_llm() != Modules([("vision", Mesh([("tp", 2), ("dp", 4)]))])
    assert repr(vision_llm()) == (
        "Modules([('vision', Mesh([('tp', 2), ('dp', 4)])), ('llm', Mesh([('tp', 4), ('dp', 2)], rank_offset=8))], "
        "edges=[('vision', 'llm')])"
    )
    assert eval(repr(vision_llm()), vars(rank_layout)) == vision_llm()
    assert rank_layout.Modules is rank_layout._native.Modules and "Modules" in rank_layout.__all__


def test_docstring_examples() -> None:
    parser = doctest.DocTestParser()
    owner = rank_layout._native.Modules
    count = 0
    for name, obj in [("", owner), *vars(owner).items()]:
        doc = getattr(obj, "__doc__", None)
        if doc and ">>>" in doc:
            test = parser.get_doctest(doc, dict(vars(rank_layout)), f"Modules.{name}", None, 0)
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
            runner.run(test)
            assert runner.failures == 0, f"Modules.{name}: see the output above"
            count += 1
    assert count >= 8


def test_stubs_name_every_public_method() -> None:
    from pathlib import Path

    stubs = (Path(rank_layout.__file__).parent / "_native.pyi").read_text()
    section = stubs[stubs.index("class Modules:") :]
    for name in vars(rank_layout._native.Modules):
        if not name.startswith("_"):
            assert f"def {name}(" in section, name


def test_a_plan_too_large_for_the_machine_is_a_memory_error():
    # Two modules of 2^31 ranks: their plan's Python lists would need
    # hundreds of GB; refused before anything is built.
    m = Modules([("a", Mesh([("dp", 1 << 31)])), ("b", Mesh([("dp", 1 << 31)]))], [("a", "b")])
    with pytest.raises(MemoryError, match="available"):
        m.bridge("a", "b")
    with pytest.raises(MemoryError):
        m.bridges()
    # Per-rank answers stay instant at that size.
    assert m.role(5, "a", "b")["sends_to"] == [(1 << 31) + 5]


def test_modules_pickle() -> None:
    import pickle

    for modules in [
        vision_llm(),
        Modules(
            [("a", Mesh([("tp", 2), ("dp", 2)])), ("b", Mesh([("tp", 4)]))],
            edges=[("a", "b")],
            colocated=True,
        ),
    ]:
        back = pickle.loads(pickle.dumps(modules))
        assert back == modules and type(back) is Modules
        assert repr(back) == repr(modules)
        assert back.bridges() == modules.bridges()
