"""rank_layout.torch.device_mesh against torch's own DeviceMesh, on torch's
``fake`` backend: one process acting as rank ``r`` of a world ``W`` (the
default group re-made for each), so worlds and ranks are cheap to walk.

For random meshes (1-4 dims of sizes 1-4, worlds larger than the mesh, rank
offsets, rank maps) the DeviceMesh made from members-only groups is
compared with ``init_device_mesh`` (or a DeviceMesh of the same mesh
tensor) on every rank of the world: dim names, shape, the full rank tensor,
layout and rank map, ``get_coordinate()``, and per dim ``get_group``'s ranks
and ``get_local_rank``; every sub-mesh ``dm[names]`` (its rank tensor,
coordinate and groups); each flatten against ``dm[names]._flatten(name)``.
Each rank makes as many ``new_group`` calls as every other, whatever the
world. Bad input is a ``LayoutError`` before any group exists.

The gloo runs (several processes, real groups) are in
test_device_mesh_gloo.py; torchtitan in test_device_mesh_torchtitan.py.
Without torch these tests are reported as skipped; under CI they fail
(conftest.require)."""

from __future__ import annotations

import itertools
import math
import random
import sys
import warnings
from typing import Any, Sequence

import pytest
from conftest import require

torch = require("torch")
import numpy as np  # noqa: E402
import torch.distributed as dist  # noqa: E402

from rank_layout import Layout, LayoutError, Mesh, torchtitan_mesh  # noqa: E402
from rank_layout.torch import device_mesh  # noqa: E402

NAMES = ["tp", "cp", "ep", "dp", "pp", "sp", "dp_shard", "dp_replicate", "node", "gpu"]


@pytest.fixture
def fake_world() -> Any:
    """``init(rank, world)``: the default group re-made on the ``fake``
    backend as ``rank`` of ``world``; destroyed after the test."""
    require("torch.testing._internal.distributed.fake_pg")
    from torch.testing._internal.distributed.fake_pg import FakeStore

    def init(rank: int, world: int) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
        dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # slicing a flattened dim from the root is deprecated
        yield init
    if dist.is_initialized():
        dist.destroy_process_group()


class Calls:
    """Counts ``torch.distributed.new_group`` calls (monkeypatched)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        real = dist.new_group

        def counting(*args: Any, **kwargs: Any) -> Any:
            self.n += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(dist, "new_group", counting)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    return Calls(monkeypatch)


def group_ranks(dm: Any, dim: str) -> list[int]:
    return dist.get_process_group_ranks(dm.get_group(dim))


def describe(dm: Any, flattens: Sequence[str] = ()) -> dict[str, Any]:
    """Everything a DeviceMesh user sees of ``dm`` on this rank."""
    out: dict[str, Any] = {
        "names": dm.mesh_dim_names,
        "shape": tuple(dm.shape),
        "mesh": dm.mesh.tolist(),
        "coord": dm.get_coordinate(),
        "layout": dm._layout,
        "rank_map": dm._rank_map.tolist(),
    }
    if dm.get_coordinate() is None:
        return out
    names = list(dm.mesh_dim_names)
    for n in names:
        out[f"group {n}"] = group_ranks(dm, n)
        out[f"local {n}"] = dm.get_local_rank(n)
    for k in range(1, len(names) + 1):
        for sub_names in itertools.combinations(names, k):
            sub = dm[sub_names]
            out[f"sub {sub_names}"] = (sub.mesh.tolist(), sub.get_coordinate(), sub._layout,
                                       [group_ranks(sub, n) for n in sub_names])
    for f in flattens:
        flat = dm[f]
        out[f"flat {f}"] = (flat.mesh.tolist(), flat.get_coordinate(), flat._layout, group_ranks(dm, f),
                            group_ranks(flat, f), flat.get_local_rank())
    return out


def random_dims(rng: random.Random, max_world: int) -> list[tuple[str, int]]:
    while True:
        k = rng.randint(1, 4)
        sizes = [rng.randint(1, 4) for _ in range(k)]
        if math.prod(sizes) <= max_world:
            return list(zip(rng.sample(NAMES, k), sizes))


def ranks_of(rng: random.Random, world: int) -> list[int]:
    return list(range(world)) if world <= 12 else sorted(rng.sample(range(world), 12))


def test_against_init_device_mesh(fake_world: Any, calls: Calls) -> None:
    """Random meshes and flattens (dims in mesh order, as ``_flatten``
    needs them), worlds up to 3 ranks larger than the mesh, every rank
    (ranks outside the mesh included): the same DeviceMesh as
    ``init_device_mesh`` + ``_flatten``; every rank the same calls."""
    from torch.distributed.device_mesh import init_device_mesh

    rng = random.Random(16_01)
    for case in range(40):
        dims = random_dims(rng, 48)
        n = math.prod(s for _, s in dims)
        world = n + rng.choice([0, 0, 1, 3])
        shape = tuple(s for _, s in reversed(dims))
        names = tuple(d for d, _ in reversed(dims))
        mesh = Mesh.from_device_mesh(shape, names)
        flattens = []
        for k in range(2, len(names) + 1):  # flattens of dims in DeviceMesh order
            for sub in itertools.combinations(names, k):
                if rng.random() < 0.4:
                    flattens.append(("f_" + "_".join(sub), sub))
        for f, sub in flattens:
            mesh = mesh.flatten(f, list(sub))
        counts = set()
        for rank in ranks_of(rng, world):
            what = f"case {case}: {dims} on rank {rank} of {world}"
            fake_world(rank, world)
            ref = init_device_mesh("cpu", shape, mesh_dim_names=names)
            inside = rank < n
            if inside:
                for f, sub in flattens:
                    ref[sub]._flatten(f)
            before = calls.n
            dm = device_mesh(mesh, "cpu")
            counts.add(calls.n - before)
            assert describe(dm, [f for f, _ in flattens] if inside else ()) == describe(
                ref, [f for f, _ in flattens] if inside else ()), what
            assert (dm.get_coordinate() is None) == (not inside), what
        assert len(counts) == 1, f"case {case}: every rank makes the same calls, got {counts}"


def test_rank_offset_and_rank_map(fake_world: Any) -> None:
    """A mesh past rank 0 and a mesh with a rank map, against a DeviceMesh
    of the same mesh tensor (its groups sorted, as ours)."""
    from torch.distributed.device_mesh import DeviceMesh

    rng = random.Random(16_02)
    for case in range(16):
        dims = random_dims(rng, 24)
        n = math.prod(s for _, s in dims)
        offset = rng.randint(0, 5)
        world = offset + n + rng.choice([0, 2])
        perm = list(range(n))
        if case % 2:
            rng.shuffle(perm)
        mesh = Mesh(dims, rank_offset=offset, rank_map=perm if case % 2 else None)
        # DeviceMesh's tensor: the rank at each position, the last dim fastest.
        tensor = torch.tensor(perm).reshape(tuple(s for _, s in reversed(dims))) + offset
        names = tuple(d for d, _ in reversed(dims))
        for rank in ranks_of(rng, world):
            fake_world(rank, world)
            ref = DeviceMesh("cpu", tensor, mesh_dim_names=names)
            dm = device_mesh(mesh, "cpu")
            assert describe(dm) == describe(ref), f"case {case}: {mesh!r} on rank {rank}"


def test_groups_are_the_meshs(fake_world: Any) -> None:
    """Every dim, flatten and view dim: the rank's group (by
    ``get_group``) is its group in ``Mesh.groups``, sorted; flattens of
    any dims in any order, and of the expert view on the base DeviceMesh."""
    rng = random.Random(16_03)
    meshes = [
        torchtitan_mesh(dp_replicate=2, dp_shard=2, cp=2, tp=2, pp=2, ep=4, world_size=32),
        torchtitan_mesh(dp_shard=-1, tp=4, ep=2, world_size=16),
        Mesh([("tp", 2), ("cp", 3), ("dp", 2)]).flatten("tp_dp", "dp-tp").flatten("cpdp", ["dp", "cp"]),
        Mesh([("a", 4), ("b", 3)]).view("v", [("x", 2), ("y", 6)]).flatten("y", "v:y"),
        Layout(tp=2, cp=2, ep=2, pp=2, world_size=16).mesh(),
    ]
    for mesh in meshes:
        for view in [None] + [v for v, _ in mesh.views]:
            for rank in ranks_of(rng, mesh.world_size):
                fake_world(rank, mesh.world_size)
                dm = device_mesh(mesh, "cpu", view=view)
                dims = mesh.dims if view is None else dict(mesh.views)[view]
                assert dm.mesh_dim_names == tuple(d for d, _ in reversed(dims))
                for d, _ in dims:
                    color, key = mesh.split(rank, d, view=view)
                    assert group_ranks(dm, d) == sorted(mesh.groups(d, view=view)[color]), (mesh, view, d)
                for f, spec in mesh.flattens:
                    if f in dm.mesh_dim_names:
                        continue
                    color, _ = mesh.split(rank, f)
                    members = mesh.groups(f)[color]
                    assert group_ranks(dm, f) == sorted(members), (mesh, view, f)
                    assert dm[f].mesh.tolist() == members, (mesh, view, f)  # the mesh's order


def test_layout(fake_world: Any) -> None:
    """A Layout is its mesh: each dim's group is the layout's group of that
    kind."""
    layout = Layout(tp=2, cp=2, pp=2, world_size=16)
    for rank in range(16):
        fake_world(rank, 16)
        dm = device_mesh(layout, "cpu")
        assert dm.mesh_dim_names == ("pp", "dp", "cp", "tp")
        for kind in ("tp", "cp", "dp", "pp"):
            color, _ = layout.split(rank, kind)
            assert group_ranks(dm, kind) == sorted(layout.group(kind, color)), (rank, kind)


def test_merged_and_reordered_dims(fake_world: Any) -> None:
    """``dims`` merging dims (a spec, names, a flatten's name) and out of
    the mesh's order, against a DeviceMesh of the same mesh tensor."""
    from torch.distributed.device_mesh import DeviceMesh

    mesh = torchtitan_mesh(dp_replicate=2, dp_shard=2, cp=2, tp=2, world_size=16)
    pos = np.arange(16).reshape(2, 2, 2, 2)  # (dp_replicate, dp_shard, cp, tp), pp = 1
    cases = [
        (["pp", "batch", "cp", "tp"], None, ("pp", "batch", "cp", "tp"), pos.reshape(1, 4, 2, 2)),
        (["pp", ("dp_replicate",), "cp-dp_shard", "tp"], None, ("pp", "dp_replicate", "fsdp", "tp"),
         pos.reshape(1, 2, 4, 2)),
        (["tp", "pp", "dp_replicate", "dp_shard", "cp"], ["t", "p", "r", "s", "c"], ("t", "p", "r", "s", "c"),
         pos.transpose(3, 0, 1, 2).reshape(2, 1, 2, 2, 2)),
        (["cp-tp", "dp_shard", "pp", "dp_replicate"], None, ("cp_tp", "dp_shard", "pp", "dp_replicate"),
         pos.transpose(2, 3, 1, 0).reshape(4, 2, 1, 2)),
    ]
    for dims, names, want_names, tensor in cases:
        for rank in range(16):
            fake_world(rank, 16)
            dm = device_mesh(mesh, "cpu", dims=dims, mesh_dim_names=names, flattens=[])
            ref = DeviceMesh("cpu", torch.tensor(tensor), mesh_dim_names=want_names)
            assert describe(dm) == describe(ref), (dims, rank)
            if dims[0] == "tp":  # out of order: only the flattens of the chosen dims
                dm = device_mesh(mesh, "cpu", dims=dims, mesh_dim_names=names)
                assert set(dm._flatten_mapping) == {"batch", "dp", "loss", "fsdp"}
                color, _ = mesh.split(rank, "loss")
                assert group_ranks(dm, "loss") == sorted(mesh.groups("loss")[color])


def test_calls_do_not_grow_with_the_world(fake_world: Any, calls: Calls) -> None:
    """One call per distinct group family (the dims, then the flattens not
    equal to one of them), at 64 and at 16,384 ranks alike; none for a dim
    that is the whole world."""
    for world in (128, 16384):
        fake_world(world // 2 + 1, world)
        mesh = torchtitan_mesh(dp_replicate=2, cp=2, tp=8, pp=2, ep=4, world_size=world)
        before = calls.n
        dm = device_mesh(mesh, "cpu")
        # 5 dims; flattens batch (= dp), loss, fsdp, ep, efsdp
        assert calls.n - before == 5 + 5, world
        assert group_ranks(dm, "dp") == group_ranks(dm, "batch")
        before = calls.n
        device_mesh(Mesh([("all", world)]), "cpu")
        assert calls.n == before  # the default group


@pytest.mark.parametrize("backend", [None, "fake", {"tp": "fake"}, {"loss": ("fake", None)}])
def test_backend(fake_world: Any, backend: Any) -> None:
    fake_world(3, 16)
    dm = device_mesh(torchtitan_mesh(tp=2, cp=2, world_size=16), "cpu", backend=backend)
    assert group_ranks(dm, "tp") == [2, 3]
    assert group_ranks(dm, "loss") == [1, 3, 5, 7, 9, 11, 13, 15]


def refusals() -> list[tuple[str, Any, str]]:
    mesh = torchtitan_mesh(tp=2, cp=2, world_size=8)
    return [
        ("unknown view", lambda: device_mesh(mesh, "cpu", view="moe"), "unknown view 'moe'"),
        ("unknown dim", lambda: device_mesh(mesh, "cpu", dims=["pp", "tp", "xx"]), "unknown dim 'xx'"),
        ("dim missing", lambda: device_mesh(mesh, "cpu", dims=["pp", "tp", "cp", "dp_shard"]), "missing dp_replicate"),
        ("dim twice", lambda: device_mesh(mesh, "cpu", dims=["pp", "batch", "cp-tp", "tp"]), "twice tp"),
        ("names count", lambda: device_mesh(mesh, "cpu", mesh_dim_names=["a", "b"]), "2 names for 5 dims"),
        ("names twice", lambda: device_mesh(mesh, "cpu", mesh_dim_names=["a", "b", "a", "c", "d"]), "a named twice"),
        ("unknown flatten", lambda: device_mesh(mesh, "cpu", flattens=["fsdp", "hsdp"]), "unknown flatten 'hsdp'"),
        ("flatten name taken", lambda: device_mesh(mesh, "cpu", mesh_dim_names=["pp", "dp_replicate", "loss", "cp", "tp"],
                                                   flattens=["loss"]), "has the name of a dim"),
        ("flatten out of order", lambda: device_mesh(mesh, "cpu", dims=["tp", "cp", "dp_shard", "dp_replicate", "pp"],
                                                     flattens=["ep"]), "only flattens of the mesh"),
        ("backend key", lambda: device_mesh(mesh, "cpu", backend={"tpp": "gloo"}), "backend names no dim"),
        ("backend value", lambda: device_mesh(mesh, "cpu", backend=("a", "b", "c")), "backend must be"),
        ("too big", lambda: device_mesh(Mesh([("tp", 2)], rank_offset=7), "cpu"), "do not fit"),
        ("not a mesh", lambda: device_mesh({"tp": 2}, "cpu"), "must be a rank_layout.Mesh or Layout"),
        ("device type", lambda: device_mesh(mesh, 0), "device_type must be a str"),
        ("encoder layout", lambda: device_mesh(Layout(tp=2, encoder_tp=1, world_size=8), "cpu"), ""),
    ]


@pytest.mark.parametrize("name, call, message", refusals(), ids=[r[0] for r in refusals()])
def test_refusals_before_any_group(fake_world: Any, calls: Calls, name: str, call: Any, message: str) -> None:
    fake_world(1, 8)
    with pytest.raises(LayoutError, match=message):
        call()
    assert calls.n == 0, name


def test_duplicate_dim_name() -> None:
    with pytest.raises(LayoutError, match="named twice"):
        Mesh([("tp", 2), ("tp", 2)])


def test_without_from_group(fake_world: Any, calls: Calls, monkeypatch: pytest.MonkeyPatch) -> None:
    from torch.distributed.device_mesh import DeviceMesh

    fake_world(0, 8)
    monkeypatch.delattr(DeviceMesh, "from_group")
    with pytest.raises(LayoutError, match="no from_group"):
        device_mesh(Mesh([("tp", 8)]), "cpu")
    assert calls.n == 0


def test_without_layouts(fake_world: Any, calls: Calls, monkeypatch: pytest.MonkeyPatch) -> None:
    """A torch whose DeviceMesh takes no layouts: a mesh without flattens
    still works; flattens are refused before any group."""
    module = sys.modules["rank_layout.torch.device_mesh"]  # (the package's device_mesh is the function)

    fake_world(1, 8)
    monkeypatch.setattr(module, "_layout_classes", lambda: None)
    dm = device_mesh(Mesh([("tp", 2), ("dp", 4)]), "cpu")
    assert group_ranks(dm, "dp") == [1, 3, 5, 7]
    before = calls.n
    with pytest.raises(LayoutError, match="has no layouts"):
        device_mesh(Mesh([("tp", 2), ("dp", 4)]).flatten("all", "tp-dp"), "cpu")
    assert calls.n == before


def test_not_initialized() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
    with pytest.raises(LayoutError, match="not initialized"):
        device_mesh(Mesh([("tp", 2)]), "cpu")


def test_outside_rank(fake_world: Any, calls: Calls) -> None:
    """A rank past the mesh: as init_device_mesh's, no coordinate, and the
    same number of calls as a rank inside."""
    mesh = Mesh([("tp", 2), ("dp", 2)], rank_offset=2).flatten("all", "tp-dp")
    counts = []
    for rank in range(8):
        fake_world(rank, 8)
        before = calls.n
        dm = device_mesh(mesh, "cpu")
        counts.append(calls.n - before)
        assert (dm.get_coordinate() is None) == (rank not in (2, 3, 4, 5))
        assert dm.mesh.tolist() == [[2, 3], [4, 5]]
        if dm.get_coordinate() is None:
            with pytest.raises(RuntimeError):
                dm["tp"]
        else:
            assert group_ranks(dm, "all") == [2, 3, 4, 5]
    assert counts == [3] * 8
