"""rank_layout.Mesh from Python: every way to give dims, views, flattens,
coordinates and splits, and every malformed input a LayoutError naming the
value (the reference tests against HyperCommGrid, DeviceMesh and
torchtitan are in test_mesh_reference.py)."""

from __future__ import annotations

import numpy as np
import pytest

from rank_layout import Layout, LayoutError, Mesh, Split, torchtitan_mesh


def test_dims_as_pairs_lists_or_a_dict() -> None:
    a = Mesh([("tp", 2), ("cp", 2), ("dp", 4)])
    assert Mesh([["tp", 2], ["cp", 2], ["dp", 4]]) == a  # as JSON gives them
    assert Mesh({"tp": 2, "cp": 2, "dp": 4}) == a
    assert Mesh.from_device_mesh((4, 2, 2), ("dp", "cp", "tp")) == a
    assert Mesh.from_hyper_comm_grid([2, 2, 4], ["tp", "cp", "dp"]) == a
    assert a.dims == [("tp", 2), ("cp", 2), ("dp", 4)] and a.world_size == 16
    assert eval(repr(a), {"Mesh": Mesh}) == a


def test_groups_views_flattens_coordinates_and_splits() -> None:
    mesh = (Mesh([("tp", 2), ("cp", 2), ("dp", 2), ("pp", 2)], rank_offset=8)
            .view("expert", [("etp", 1), ("ep", 4), ("edp", 2), ("pp", 2)], shared=["pp"])
            .flatten("dp_cp", ["dp", "cp"]))
    assert mesh.groups(["dp", "cp"]) == mesh.groups("cp-dp") == mesh.groups("dp_cp")
    assert mesh.groups("cp-dp")[0] == [8, 10, 12, 14]
    assert mesh.groups("ep", view="expert") == mesh.groups("expert:ep")
    assert mesh.groups("expert:ep")[1] == [12, 13, 14, 15]
    assert np.array_equal(mesh.groups_array("pp"), np.array(mesh.groups("pp"), dtype=np.uint32))
    assert mesh.coord(13) == {"tp": 1, "cp": 0, "dp": 1, "pp": 0}
    assert mesh.coord(13, view="expert") == {"etp": 0, "ep": 1, "edp": 1, "pp": 0}
    assert mesh.coord(7) is None and mesh.coord(24) is None
    assert mesh.split(13, "cp-dp") == (1, 2) and mesh.split(13, "cp-dp").key == 2
    assert isinstance(mesh.split(13, "tp"), Split) and all(isinstance(s, Split) for s in mesh.splits(13, ["tp", "pp"]))
    assert mesh.splits(13, ["tp", "expert:ep"]) == [mesh.split(13, "tp"), mesh.split(13, "expert:ep")]
    assert mesh.views == [("expert", [("etp", 1), ("ep", 4), ("edp", 2), ("pp", 2)])]
    assert mesh.flattens == [("dp_cp", "cp-dp")]


def test_rank_map_and_layout_mesh() -> None:
    mesh = Mesh([("x", 2), ("y", 2)], rank_map=[0, 2, 1, 3])
    assert mesh.groups("x") == [[0, 2], [1, 3]] and mesh.coord(2) == {"x": 1, "y": 0}
    layout = Layout(tp=2, cp=2, ep=2, pp=2, world_size=16)
    m = layout.mesh()
    for kind, spec in (("dp-cp", "dp-cp"), ("tp-pp", "tp-pp"), ("ep", "expert:ep"), ("edp", "expert:edp")):
        assert m.groups(spec) == layout.groups(kind), kind
    t = torchtitan_mesh(dp_shard=-1, cp=2, tp=2, ep=4, world_size=16)
    assert t.groups("loss")[0] == [0, 2, 4, 6, 8, 10, 12, 14]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Mesh([("tp", 2), ("tp", 2)]), "tp is named twice in the mesh"),
        (lambda: Mesh([("", 2)]), 'dim name "" is not a name'),
        (lambda: Mesh([("dp-cp", 2)]), 'dim name "dp-cp" is not a name'),
        (lambda: Mesh([("tp", 0)]), "dim tp has size 0"),
        (lambda: Mesh([("tp", -1)]), "the size of tp must be at least 1, got -1"),
        (lambda: Mesh([("tp", 2.0)]), "the size of tp must be an int, got float 2.0"),
        (lambda: Mesh([("tp", 2, 3)]), "each dim is a (name, size) pair"),
        (lambda: Mesh("tp=2"), "dims must be a sequence of (name, size) pairs or a dict"),
        (lambda: Mesh([("a", 65536), ("b", 65536)]), "overflows u32 ranks"),
        (lambda: Mesh([("tp", 2)], rank_offset=-1), "rank_offset must be at least 0, got -1"),
        (lambda: Mesh([("tp", 2)], rank_map=[0, 0]), "rank_map holds 0 twice"),
        (lambda: Mesh([("tp", 2)], rank_map=[0, 1, 2]), "rank_map has 3 entries, the mesh 2 ranks"),
        (lambda: Mesh([("tp", 2), ("dp", 2)]).view("v", [("x", 3)]), "view v has 3 ranks"),
        (lambda: Mesh([("tp", 2), ("dp", 2)]).view("v", [("dp", 2), ("x", 2)], shared=["dp"]), "shares dim dp"),
        (lambda: Mesh([("tp", 2)]).groups("zz"), 'unknown dim "zz" in the mesh (known: tp)'),
        (lambda: Mesh([("tp", 2)]).groups("x:tp"), 'unknown view "x"'),
        (lambda: Mesh([("tp", 2)]).groups(["tp", "tp"]), "tp is named twice"),
        (lambda: Mesh([("tp", 2)]).flatten("tp", "tp"), "tp is named twice in the mesh"),
        (lambda: Mesh([("tp", 2)]).split(2, "tp"), "rank 2 is outside the layout (ranks 0..1, both included)"),
        (lambda: Layout(tp=2, encoder_tp=1).mesh(), "not one mesh"),
        (lambda: torchtitan_mesh(tp=2, ep=3, world_size=8), "ep (3) must divide dp_shard*cp*tp"),
        (lambda: torchtitan_mesh(tp=3, world_size=8), "is not world_size 8"),
        (lambda: torchtitan_mesh(world_size=8, spmd_backend="x"), "spmd_backend must be"),
    ],
)
def test_bad_input_is_a_layout_error_naming_the_value(make, message) -> None:
    with pytest.raises(LayoutError) as e:
        make()
    assert message in str(e.value)


NO_DIMS = "the mesh has no dims: give at least one (one rank is dp=1)"


@pytest.mark.parametrize(
    "make",
    [
        lambda: Mesh([]),
        lambda: Mesh({}),
        lambda: Mesh.from_device_mesh((), ()),
        lambda: Mesh.from_hyper_comm_grid([], [], 4),
    ],
)
def test_an_empty_mesh_is_refused_as_the_command_line_refuses_it(make) -> None:
    """Mesh([]) was a mesh of one rank and no dims, while the command line
    refused --mesh "": the library's one rule, its one message."""
    with pytest.raises(LayoutError) as e:
        make()
    assert str(e.value) == NO_DIMS


def test_meshes_pickle_with_views_flattens_offsets_and_rank_maps() -> None:
    import pickle

    meshes = [
        Mesh([("tp", 2), ("dp", 4)], rank_offset=3, rank_map=[1, 0, 3, 2, 5, 4, 7, 6])
        .view("expert", [("ep", 4), ("edp", 2)])
        .flatten("dp_tp", ["dp", "tp"]),
        torchtitan_mesh(dp_shard=-1, tp=2, ep=2, world_size=16),
        Layout(tp=2, cp=2, ep=2, world_size=16).mesh(),
    ]
    for mesh in meshes:
        back = pickle.loads(pickle.dumps(mesh))
        assert back == mesh and type(back) is Mesh
        assert back.views == mesh.views and back.flattens == mesh.flattens
        for name, _ in mesh.flattens:
            assert back.groups(name) == mesh.groups(name)
        assert back.coord(mesh.rank_offset + 5) == mesh.coord(mesh.rank_offset + 5)
