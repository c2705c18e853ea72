"""rank_layout.Mesh against the real code it models (issue 14):

* Megatron-Core's ``HyperCommGrid`` (``get_rank_enum`` for every subset of
  dims, ``register_view`` -- or, before megatron-core 0.19, the same checks
  made on a second grid of the view's shape);
* torch's ``DeviceMesh`` on the ``fake`` backend, one process acting as
  rank ``r`` of a world ``W`` by re-initialising the default group
  (coordinates, local ranks, process groups, sub-meshes and their group
  order, ``_flatten``, ``_unflatten``, custom mesh tensors);
* torchtitan's ``ParallelDims.build_mesh`` (every named mesh it builds, for
  the three ``spmd_backend`` values).

Random meshes of 1-6 dims with sizes 1-5, rank offsets and worlds larger
than the mesh; every loop is seeded, and a failure names the mesh.

Conventions met on the way (written down in /work/notes/mesh_facts.md):
HyperCommGrid lists dims first fastest, DeviceMesh and torchtitan last
fastest; all three list a group's members ascending and groups by first
member. Without torch, megatron-core or torchtitan these tests are reported
as skipped with the reason; under CI they fail (conftest.require)."""

from __future__ import annotations

import itertools
import math
import random
import warnings
from typing import Any, Callable, Optional, Sequence, Union

import pytest
from conftest import require

torch = require("torch")
np = require("numpy")
import torch.distributed as dist  # noqa: E402

from rank_layout import LayoutError, Mesh  # noqa: E402

Dims = list[tuple[str, int]]

#: Dim names: those of the libraries, and a few more, all valid names.
NAMES = [
    "tp", "cp", "ep", "dp", "pp", "sp", "gtp", "etp", "edp", "dp_shard",
    "dp_replicate", "fsdp", "efsdp", "hsdp", "node", "gpu", "x1", "y_2",
]  # fmt: skip


# --------------------------------------------------------------- helpers


def random_dims(rng: random.Random, max_world: int, max_dims: int = 6, max_size: int = 5) -> Dims:
    """1-``max_dims`` distinct names with sizes 1-``max_size``, at most
    ``max_world`` ranks in all (redrawn until it fits)."""
    while True:
        k = rng.randint(1, max_dims)
        sizes = [rng.randint(1, max_size) for _ in range(k)]
        if math.prod(sizes) <= max_world:
            return list(zip(rng.sample(NAMES, k), sizes))


def subsets(names: Sequence[str]) -> list[tuple[str, ...]]:
    """Every non-empty subset of ``names``, each in ``names``' order."""
    return [c for k in range(1, len(names) + 1) for c in itertools.combinations(names, k)]


def spec(rng: random.Random, names: Sequence[str]) -> Union[str, list[str]]:
    """One of the ways to name a dim set in rank_layout, names in a random
    order: a list, a dash-joined string, or a bare name."""
    shuffled = rng.sample(list(names), len(names))
    if len(names) == 1 and rng.random() < 0.5:
        return names[0]
    return shuffled if rng.random() < 0.5 else "-".join(shuffled)


def containing(groups: list[list[int]], rank: int) -> tuple[int, int]:
    """(group number, position) of ``rank`` in ``groups``."""
    for color, group in enumerate(groups):
        if rank in group:
            return color, group.index(rank)
    raise AssertionError(f"rank {rank} is in no group of {groups}")


def factorisations(n: int, parts: int, rng: random.Random) -> list[int]:
    """``n`` as a product of ``parts`` random factors (1s allowed)."""
    out = []
    for _ in range(parts - 1):
        f = rng.choice([d for d in range(1, n + 1) if n % d == 0])
        out.append(f)
        n //= f
    out.append(n)
    rng.shuffle(out)
    return out


def check_split(mesh: Mesh, rank: int, dims: Any, groups: list[list[int]], view: Optional[str] = None, what: str = "") -> None:
    color, key = mesh.split(rank, dims, view=view) if view else mesh.split(rank, dims)
    assert (color, key) == containing(groups, rank), f"split({rank}, {dims!r}, view={view}) {what}"


# ------------------------------------------------- Megatron HyperCommGrid


@pytest.fixture(scope="module")
def HyperCommGrid() -> Any:
    require("einops")  # HyperCommGrid <= 0.18 enumerates with einops (not a declared dependency)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "absl.logging is not installed"
        mod = require("megatron.core.hyper_comm_grid")
    return mod.HyperCommGrid


def test_hyper_comm_grid_rank_enum_every_subset(HyperCommGrid: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Mesh.from_hyper_comm_grid(shape, names, offset).groups(S)`` is
    ``HyperCommGrid(shape, names, offset).get_rank_enum(S)`` for every
    subset S of dims, names given in any order (HyperCommGrid reorders
    them), groups and members in the same order; per-rank coordinates and
    splits are a rank's places in those enumerations."""
    rng = random.Random(14_01)
    for case in range(120):
        dims = random_dims(rng, max_world=1200)
        names = [n for n, _ in dims]
        shape = [s for _, s in dims]
        n = math.prod(shape)
        offset = rng.choice([0, 0, rng.randint(1, 9), rng.randint(10, 500)])
        world = offset + n + rng.choice([0, 0, rng.randint(1, 64)])
        monkeypatch.setenv("WORLD_SIZE", str(world))  # HyperCommGrid reads it without torch.distributed
        grid = HyperCommGrid(list(shape), list(names), rank_offset=offset)
        mesh = Mesh.from_hyper_comm_grid(shape, names, offset)
        what = f"case {case}: HyperCommGrid({shape}, {names}, rank_offset={offset}), world {world}"
        assert mesh.dims == dims, what
        assert (mesh.world_size, mesh.rank_offset) == (n, offset), what
        assert mesh.groups(list(names)) == grid.get_rank_enum(list(names)), what

        probes = rng.sample(range(offset, offset + n), min(3, n))
        for rank in probes:
            coord = mesh.coord(rank)
            for name in names:
                # A rank's coordinate along a dim is its place in its group of that dim.
                assert coord[name] == containing(grid.get_rank_enum(name), rank)[1], f"{what}: coord({rank})[{name}]"
        outside = [r for r in (offset - 1, offset + n, world + 3) if r >= 0]
        for rank in outside:
            assert mesh.coord(rank) is None, f"{what}: coord({rank}) outside the mesh"

        for subset in subsets(names):
            given = rng.sample(list(subset), len(subset))
            expected = grid.get_rank_enum(given)
            dims_spec = spec(rng, subset)
            got = mesh.groups(dims_spec)
            assert got == expected, f"{what}: groups({dims_spec!r}) != get_rank_enum({given})"
            array = mesh.groups_array(dims_spec)
            assert array.dtype == np.uint32 and array.shape == (len(expected), len(expected[0])), what
            assert array.tolist() == expected, f"{what}: groups_array({dims_spec!r})"
            for rank in probes[:1]:
                check_split(mesh, rank, dims_spec, expected, what=what)


def test_hyper_comm_grid_from_constructor_orders_agree(HyperCommGrid: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """HyperCommGrid's order is the Mesh's own (first fastest), and
    DeviceMesh's is the reverse: the three constructors name one mesh."""
    rng = random.Random(14_02)
    monkeypatch.setenv("WORLD_SIZE", str(10**6))
    for case in range(60):
        dims = random_dims(rng, max_world=400)
        names = [n for n, _ in dims]
        shape = [s for _, s in dims]
        offset = rng.randint(0, 40)
        a = Mesh(dims, rank_offset=offset)
        b = Mesh(dict(dims), rank_offset=offset)
        c = Mesh.from_hyper_comm_grid(shape, names, offset)
        d = Mesh.from_device_mesh(shape[::-1], names[::-1], rank_offset=offset)
        grid = HyperCommGrid(list(shape), list(names), rank_offset=offset)
        for subset in rng.sample(subsets(names), min(8, 2 ** len(names) - 1)):
            expected = grid.get_rank_enum(list(subset))
            for m in (a, b, c, d):
                assert m.groups(list(subset)) == expected, f"case {case}: {dims} offset {offset}: {subset}"


def random_view(rng: random.Random, dims: Dims) -> tuple[Dims, list[str]]:
    """Another factorisation of ``dims``' ranks (first fastest): each base dim
    is kept (same name, size and place: it enumerates as in the base) or
    merged with its neighbours into a run that is re-factored under fresh
    names. Returns the view's dims and the kept names."""
    fresh = iter(f"v{i}" for i in itertools.count())
    view: Dims = []
    kept: list[str] = []
    run = 1
    for name, size in dims:
        if rng.random() < 0.45:
            if run > 1 or (rng.random() < 0.3):
                for f in factorisations(run, rng.randint(1, 3), rng):
                    view.append((next(fresh), f))
            run = 1
            view.append((name, size))
            kept.append(name)
        else:
            run *= size
    if run > 1 or not view:
        for f in factorisations(run, rng.randint(1, 3), rng):
            view.append((next(fresh), f))
    return view, kept


def mutate_view(rng: random.Random, dims: Dims, view: Dims) -> tuple[Dims, Optional[str]]:
    """A view that may no longer share a dim: a kept dim swapped with a
    neighbour, or a fresh dim renamed after a base dim of its size. Returns
    the view and the base name it touched."""
    view = list(view)
    base = dict(dims)
    kept = [i for i, (n, _) in enumerate(view) if n in base]
    if kept and len(view) >= 2 and rng.random() < 0.5:
        i = rng.choice(kept)
        j = i + 1 if i + 1 < len(view) and (i == 0 or rng.random() < 0.5) else i - 1
        view[i], view[j] = view[j], view[i]
        return view, view[j][0]
    names = {n for n, _ in view}
    fresh = [i for i, (n, _) in enumerate(view) if n not in base]
    for i in rng.sample(fresh, len(fresh)):
        same = [n for n, s in dims if s == view[i][1] and n not in names]
        if same:
            view[i] = (rng.choice(same), view[i][1])
            return view, view[i][0]
    return view, None


def reference_view(HyperCommGrid: Any, grid: Any, shape: list[int], names: list[str], shared: list[str]) -> tuple[Optional[str], Callable[[list[str]], list[list[int]]]]:
    """HyperCommGrid's verdict on a view: (None, its get_rank_enum) when it
    accepts it, (the first shared dim that differs, None) when not.

    megatron-core >= 0.19 has ``register_view``; before it, the same checks
    as core_v0.19.0 are made on a second grid of the view's shape over the
    same ranks (each shared dim's enumeration equal, then all of them
    together)."""
    if hasattr(grid, "register_view"):
        try:
            grid.register_view("view1", list(shape), list(names), shared_dims=list(shared))
        except ValueError as e:
            bad = [d for d in shared if repr(d) in str(e)]
            return (bad[0] if bad else "?"), lambda dims: []
        return None, lambda dims: grid.get_rank_enum(dims, view="view1")
    view = HyperCommGrid(list(shape), list(names), rank_offset=grid.rank_offset)
    for d in shared:
        if grid.get_rank_enum([d]) != view.get_rank_enum([d]):
            return d, lambda dims: []
    if len(shared) > 1 and grid.get_rank_enum(list(shared)) != view.get_rank_enum(list(shared)):
        return "-".join(shared), lambda dims: []
    return None, view.get_rank_enum


def test_views_against_hyper_comm_grid_register_view(HyperCommGrid: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``mesh.view(name, dims, shared)`` accepts a view exactly when
    HyperCommGrid's ``register_view`` does (shared dims enumerate as in the
    base), names the dim otherwise, and then the view's groups of every dim
    subset are HyperCommGrid's, with ``view=`` and with ``"view1:a-b"``."""
    rng = random.Random(14_03)
    accepted = rejected = 0
    for case in range(160):
        dims = random_dims(rng, max_world=720)
        names = [n for n, _ in dims]
        shape = [s for _, s in dims]
        n = math.prod(shape)
        offset = rng.choice([0, rng.randint(1, 100)])
        monkeypatch.setenv("WORLD_SIZE", str(offset + n + rng.randint(0, 8)))
        vdims, kept = random_view(rng, dims)
        while len(vdims) > 6:  # at most 6 dims, as the base
            vdims, kept = random_view(rng, dims)
        touched = None
        if rng.random() < 0.5:
            vdims, touched = mutate_view(rng, dims, vdims)
        common = [d for d in names if d in dict(vdims)]
        shared = rng.sample(common, rng.randint(0, len(common)))
        if touched and touched not in shared and rng.random() < 0.8:
            shared.insert(rng.randint(0, len(shared)), touched)
        vnames = [v for v, _ in vdims]
        vshape = [s for _, s in vdims]
        what = f"case {case}: base {dims} offset {offset}, view {vdims} shared {shared}"

        grid = HyperCommGrid(list(shape), list(names), rank_offset=offset)
        bad, enum = reference_view(HyperCommGrid, grid, vshape, vnames, shared)
        mesh = Mesh(dims, rank_offset=offset)
        try:
            viewed = mesh.view("view1", vdims, shared=shared)
        except LayoutError as e:
            assert bad is not None, f"{what}: rank_layout refused a view HyperCommGrid registers: {e}"
            assert bad in str(e), f"{what}: the error should name {bad!r}: {e}"
            rejected += 1
            continue
        assert bad is None, f"{what}: rank_layout accepted a view HyperCommGrid refuses ({bad!r} differs)"
        accepted += 1
        assert viewed.groups(list(names)) == mesh.groups(list(names)), what  # the base is unchanged
        probe = rng.randrange(offset, offset + n)
        coord = viewed.coord(probe, view="view1")
        for subset in rng.sample(subsets(vnames), min(24, 2 ** len(vnames) - 1)):
            expected = enum(list(subset))
            dims_spec = spec(rng, subset)
            assert viewed.groups(dims_spec, view="view1") == expected, f"{what}: view groups {dims_spec!r}"
            if isinstance(dims_spec, list):
                dims_spec = "-".join(dims_spec)
            assert viewed.groups(f"view1:{dims_spec}") == expected, f"{what}: groups('view1:{dims_spec}')"
            check_split(viewed, probe, dims_spec, expected, view="view1", what=what)
            if len(subset) == 1:
                assert coord[subset[0]] == containing(expected, probe)[1], f"{what}: coord({probe}, view)"
        for d in shared:  # a shared dim is the same groups in the base and the view
            assert viewed.groups(d, view="view1") == mesh.groups(d), f"{what}: shared {d}"
    assert accepted > 40 and rejected > 10, (accepted, rejected)


# ------------------------------------------------------- torch DeviceMesh


@pytest.fixture
def fake_world() -> Any:
    """``init(rank, world)``: the default process group re-made on torch's
    ``fake`` backend as ``rank`` of ``world`` (no other process, no
    communication); destroyed after the test."""
    require("torch.testing._internal.distributed.fake_pg")  # registers the "fake" backend
    from torch.testing._internal.distributed.fake_pg import FakeStore

    def init(rank: int, world: int) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
        dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # slicing flattened dims from the root mesh is deprecated
        yield init
    if dist.is_initialized():
        dist.destroy_process_group()


def device_mesh(shape: Sequence[int], names: Sequence[str], offset: int) -> Any:
    """``init_device_mesh`` from rank 0, or a mesh tensor from ``offset``."""
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

    if offset == 0:
        return init_device_mesh("cpu", tuple(shape), mesh_dim_names=tuple(names))
    ranks = torch.arange(offset, offset + math.prod(shape)).reshape(tuple(shape))
    return DeviceMesh("cpu", ranks, mesh_dim_names=tuple(names))


def all_groups(sub: Any, root: Any) -> list[list[int]]:
    """Every group of a (sub-, flattened, unflattened) DeviceMesh, in the
    order DeviceMesh creates their process groups (``_init_one_process_group``)."""
    return sub._layout.remap_to_tensor(root._rank_map).reshape(-1, sub.size()).tolist()


def check_device_submesh(dm: Any, sub: Any, mesh: Mesh, rank: int, dims_spec: Any, view: Optional[str], what: str) -> None:
    """``sub`` (a DeviceMesh slice holding ``rank``) against ``mesh``'s groups of ``dims_spec``."""
    expected = mesh.groups(dims_spec, view=view) if view else mesh.groups(dims_spec)
    assert all_groups(sub, dm) == expected, f"{what}: all groups of {dims_spec!r}"
    mine = sub.mesh.flatten().tolist()
    color, key = mesh.split(rank, dims_spec, view=view) if view else mesh.split(rank, dims_spec)
    assert expected[color] == mine and mine[key] == rank, f"{what}: rank {rank}'s group of {dims_spec!r}"


def test_device_mesh_coordinates_groups_submeshes_flatten(fake_world: Any) -> None:
    """``Mesh.from_device_mesh(shape, names, rank_offset=o)`` against a
    DeviceMesh of the same shape on ranks o.. (identity rank map), as seen
    by several ranks r: ``get_coordinate``, ``get_local_rank`` and
    ``get_group`` per dim, sub-meshes ``dm[names]`` (the rank's group and
    every group in DeviceMesh's order) for every dim subset, ``_flatten``."""
    rng = random.Random(14_04)
    for case in range(110):
        dims = random_dims(rng, max_world=360)  # DeviceMesh order: last fastest
        names = [n for n, _ in dims]
        shape = [s for _, s in dims]
        n = math.prod(shape)
        offset = rng.choice([0, 0, rng.randint(1, 6), rng.randint(7, 64)])
        world = offset + n + rng.choice([0, 0, rng.randint(1, 16)])
        mesh = Mesh.from_device_mesh(shape, names, rank_offset=offset)
        what = f"case {case}: DeviceMesh{tuple(shape)} {names} from rank {offset}, world {world}"
        assert mesh.dims == dims[::-1], what
        assert (mesh.world_size, mesh.rank_offset) == (n, offset), what
        ranks = rng.sample(range(offset, offset + n), min(2, n))
        outside = [r for r in range(world) if not offset <= r < offset + n]
        if outside:
            ranks.append(rng.choice(outside))
        for i, rank in enumerate(ranks):
            fake_world(rank, world)
            dm = device_mesh(shape, names, offset)
            coord = dm.get_coordinate()
            if coord is None:
                assert not offset <= rank < offset + n, what
                assert mesh.coord(rank) is None, f"{what}: rank {rank} is outside"
                continue
            assert mesh.coord(rank) == dict(zip(names, coord)), f"{what}: coord({rank})"
            for name in names:
                group = mesh.groups(name)
                color, key = mesh.split(rank, name)
                assert dm.get_local_rank(name) == key, f"{what}: get_local_rank({name!r}) on {rank}"
                assert dist.get_process_group_ranks(dm.get_group(name)) == group[color], f"{what}: get_group({name!r})"
            chosen = subsets(names) if i == 0 else rng.sample(subsets(names), min(6, 2 ** len(names) - 1))
            for subset in chosen:
                sub = dm[subset]
                dims_spec = spec(rng, subset)
                check_device_submesh(dm, sub, mesh, rank, dims_spec, None, what)
                assert sub.get_coordinate() == tuple(mesh.coord(rank)[d] for d in subset), f"{what}: {subset}"
            for subset in rng.sample([s for s in subsets(names) if len(s) > 1], min(1, len(names) - 1)):
                flat = dm[subset]._flatten()  # named "a_b_c"
                name = "_".join(subset)
                flattened = mesh.flatten(name, spec(rng, subset))
                check_device_submesh(dm, flat, flattened, rank, name, None, f"{what}: _flatten of {subset}")
                assert flat.get_local_rank() == flattened.split(rank, name)[1], f"{what}: _flatten {subset}"
                assert flattened.groups(name) == mesh.groups(list(subset)), what


def test_device_mesh_unflatten_is_a_view(fake_world: Any) -> None:
    """``dm._unflatten(dim, sizes, names)`` is the view of the mesh whose
    dims are the DeviceMesh's with ``dim`` replaced (reversed: first
    fastest), sharing every other dim: coordinates, sub-meshes and local
    ranks of the unflattened mesh are that view's. Unflattening the 1-D
    world (torchtitan's way) is ``from_device_mesh`` of the new shape."""
    rng = random.Random(14_05)
    for case in range(100):
        dims = random_dims(rng, max_world=360, max_dims=5)
        names = [n for n, _ in dims]
        shape = [s for _, s in dims]
        n = math.prod(shape)
        offset = rng.choice([0, rng.randint(1, 40)])
        world = offset + n + rng.choice([0, rng.randint(1, 8)])
        at = rng.randrange(len(dims))
        new_sizes = factorisations(shape[at], rng.randint(1, 3), rng)
        new_names = [f"u{j}" for j in range(len(new_sizes))]
        un_names = names[:at] + new_names + names[at + 1 :]
        un_shape = shape[:at] + new_sizes + shape[at + 1 :]
        others = [d for d in names if d != names[at]]
        mesh = Mesh.from_device_mesh(shape, names, rank_offset=offset)
        view_dims = list(zip(un_names, un_shape))[::-1]
        viewed = mesh.view("unflat", view_dims, shared=rng.sample(others, len(others)))
        what = f"case {case}: DeviceMesh{tuple(shape)} {names} from {offset}: _unflatten({at}, {new_sizes})"
        for rank in rng.sample(range(offset, offset + n), min(2, n)):
            fake_world(rank, world)
            dm = device_mesh(shape, names, offset)
            un = dm._unflatten(at if rng.random() < 0.5 else names[at], tuple(new_sizes), tuple(new_names))
            assert un.mesh_dim_names == tuple(un_names), what
            assert viewed.coord(rank, view="unflat") == dict(zip(un_names, un.get_coordinate())), f"{what}: coord({rank})"
            for name in un_names:
                assert un.get_local_rank(name) == viewed.split(rank, name, view="unflat")[1], f"{what}: {name}"
            for subset in rng.sample(subsets(un_names), min(10, 2 ** len(un_names) - 1)):
                check_device_submesh(dm, un[subset], viewed, rank, spec(rng, subset), "unflat", what)
            for d in others:  # shared: the same groups as the base
                assert all_groups(un[d], dm) == mesh.groups(d), f"{what}: shared {d}"
        # The 1-D world unflattened.
        fake_world(offset, n + offset)
        world_mesh = device_mesh((n,), ("world",), offset)
        un = world_mesh._unflatten(0, tuple(shape), tuple(names))
        for subset in rng.sample(subsets(names), min(6, 2 ** len(names) - 1)):
            assert all_groups(un[subset], world_mesh) == mesh.groups(list(subset)), f"{what}: world unflatten {subset}"


def test_device_mesh_names_out_of_order(fake_world: Any) -> None:
    """DeviceMesh slices names in mesh order only (``KeyError``, unless the
    misplaced dims have size 1); rank_layout takes any order and answers as
    for the mesh order."""
    rng = random.Random(14_06)
    checked = 0
    for case in range(60):
        dims = random_dims(rng, max_world=200, max_dims=4)
        names = [n for n, _ in dims]
        shape = [s for _, s in dims]
        if len(names) < 2:
            continue
        fake_world(0, math.prod(shape))
        dm = device_mesh(shape, names, 0)
        mesh = Mesh.from_device_mesh(shape, names)
        for subset in subsets(names):
            if len(subset) < 2:
                continue
            reordered = tuple(reversed(subset))
            big = [d for d in subset if dict(dims)[d] > 1]
            if len(big) >= 2:
                with pytest.raises(KeyError, match="ascending order"):
                    dm[reordered]
                checked += 1
            assert mesh.groups(list(reordered)) == mesh.groups(list(subset)) == all_groups(dm[subset], dm), f"case {case}: {subset}"
    assert checked > 20


def test_device_mesh_custom_mesh_tensor_is_a_rank_map(fake_world: Any) -> None:
    """A DeviceMesh made from a permuted mesh tensor on ranks o.. is
    ``Mesh(reversed dims, rank_offset=o, rank_map=tensor.flatten() - o)``:
    coordinates, sub-mesh tensors (members in position order) and group
    order agree. DeviceMesh's process groups sort their ranks
    (``preserve_rank_order=False``), so ``get_local_rank`` is a rank's place
    among the sorted members, not its position."""
    from torch.distributed.device_mesh import DeviceMesh

    rng = random.Random(14_07)
    for case in range(40):
        dims = random_dims(rng, max_world=240, max_dims=4)
        names = [n for n, _ in dims]
        shape = [s for _, s in dims]
        n = math.prod(shape)
        offset = rng.choice([0, rng.randint(1, 20)])
        perm = list(range(n))
        rng.shuffle(perm)
        mesh = Mesh(list(zip(names, shape))[::-1], rank_offset=offset, rank_map=perm)
        what = f"case {case}: DeviceMesh{tuple(shape)} {names}, tensor {[offset + p for p in perm]}"
        for rank in rng.sample(range(offset, offset + n), min(2, n)):
            fake_world(rank, offset + n)
            dm = DeviceMesh("cpu", (torch.tensor(perm) + offset).reshape(tuple(shape)), mesh_dim_names=tuple(names))
            assert mesh.coord(rank) == dict(zip(names, dm.get_coordinate())), f"{what}: coord({rank})"
            for subset in rng.sample(subsets(names), min(6, 2 ** len(names) - 1)):
                check_device_submesh(dm, dm[subset], mesh, rank, list(subset), None, what)
            for name in names:
                group = mesh.groups(name)[mesh.split(rank, name)[0]]
                assert dm.get_local_rank(name) == sorted(group).index(rank), f"{what}: get_local_rank({name!r})"


# ---------------------------------------------------- torchtitan ParallelDims

#: Every name torchtitan 0.3.0's ParallelDims.get_mesh documents or builds;
#: which ones a ParallelDims accepts depends on its spmd_backend.
TORCHTITAN_NAMES = ["pp", "batch", "loss", "dp_replicate", "fsdp", "cp", "tp", "ep", "efsdp", "dp", "dp_shard"]
SPMD_BACKENDS = ["spmd_types", "partial_dtensor", "full_dtensor"]


@pytest.fixture(scope="module")
def ParallelDims() -> Any:
    return require("torchtitan.distributed.parallel_dims").ParallelDims


def random_parallel_dims(rng: random.Random, max_world: int = 96) -> dict[str, Any]:
    while True:
        dp_replicate, dp_shard, cp, tp, pp = (rng.choice([1, 1, 2, 2, 3, 4, 5]) for _ in range(5))
        world = dp_replicate * dp_shard * cp * tp * pp
        if world <= max_world:
            break
    dense = dp_shard * cp * tp
    ep = rng.choice([d for d in range(1, dense + 1) if dense % d == 0])
    return dict(
        dp_replicate=dp_replicate,
        dp_shard=-1 if rng.random() < 0.3 else dp_shard,
        cp=cp,
        tp=tp,
        pp=pp,
        ep=ep,
        world_size=world,
        spmd_backend=rng.choice(SPMD_BACKENDS),
    )


def test_torchtitan_parallel_dims_every_named_mesh(ParallelDims: Any, fake_world: Any) -> None:
    """``rank_layout.torchtitan_mesh(**kwargs).groups(name)`` is, for every
    name ``ParallelDims(**kwargs).get_optional_mesh`` accepts, the groups of
    the mesh ``build_mesh`` made (the rank's own group, ``get_local_rank``
    and every group in DeviceMesh's order), size-1 meshes included; so are
    the dims of its dense, dataloading and sparse (expert) meshes and their
    multi-dim sub-meshes."""
    rng = random.Random(14_08)
    seen: set[tuple[str, str]] = set()
    for case in range(100):
        kwargs = random_parallel_dims(rng)
        world = kwargs["world_size"]
        rank = rng.randrange(world)
        fake_world(rank, world + rng.choice([0, 0, 0, 1, 7]))
        pd = ParallelDims(**kwargs)
        pd.build_mesh()
        tt = rank_layout_torchtitan_mesh(**kwargs)
        what = f"case {case}: ParallelDims({kwargs}) on rank {rank}"
        assert tt.world_size == world and tt.rank_offset == 0, what

        def check(dm: Any, name: Any, view: Optional[str] = None, label: str = "") -> None:
            expected = tt.groups(name, view=view) if view else tt.groups(name)
            root = dm._get_root_mesh()
            assert all_groups(dm, root) == expected, f"{what}: all groups of {label or name!r}"
            mine = dm.mesh.flatten().tolist()
            color, key = tt.split(rank, name, view=view) if view else tt.split(rank, name)
            assert expected[color] == mine and mine[key] == rank, f"{what}: rank's group of {label or name!r}"
            if dm.ndim == 1:
                assert dm.get_local_rank() == key, f"{what}: get_local_rank of {label or name!r}"

        for name in TORCHTITAN_NAMES:
            try:
                enabled = pd.get_optional_mesh(name)
            except ValueError:  # not a name of this spmd_backend
                continue
            seen.add((kwargs["spmd_backend"], name))
            dm = pd.get_optional_mesh(name, include_singleton_axes=True)
            assert enabled is None or enabled is dm, what
            check(dm, name)
        for name, dm in pd.get_all_one_dimensional_meshes().items():
            assert dm.size() > 1, what
            check(dm, name)

        expert = expert_view(tt)
        for key, dm in pd._global_meshes.items():
            dim_names = list(dm.mesh_dim_names)
            if key == "loss":
                continue  # ("loss_mesh",): checked as "loss"
            view = expert if key in ("sparse", "spmd_sparse_for_fwdbwd") else None
            for name in dim_names:
                if view and name in ("ep", "efsdp"):
                    check(dm[name], name, view=view, label=f"{key}[{name}]")
                else:
                    check(dm[name], name, label=f"{key}[{name}]")
            if len(dim_names) > 1 and all(tt_has_dim(tt, d, view) for d in dim_names):
                for subset in subsets(dim_names):
                    if len(subset) > 1:
                        check(dm[subset], list(subset), view=view, label=f"{key}[{subset}]")
    names = {name for _, name in seen}
    assert names == set(TORCHTITAN_NAMES), f"names never checked: {set(TORCHTITAN_NAMES) - names}"


def rank_layout_torchtitan_mesh(**kwargs: Any) -> Mesh:
    import rank_layout

    return rank_layout.torchtitan_mesh(**kwargs)


def expert_view(mesh: Mesh) -> Optional[str]:
    """The name of the view holding ``ep`` (``Mesh.views``: (name, dims) pairs)."""
    for name, dims in getattr(mesh, "views", []):
        if "ep" in dict(dims):
            return name
    return None


def tt_has_dim(mesh: Mesh, name: str, view: Optional[str]) -> bool:
    if view is None:
        return name in dict(mesh.dims)
    return any(v == view and name in dict(dims) for v, dims in getattr(mesh, "views", []))


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(dp_replicate=1, dp_shard=2, cp=1, tp=3, pp=1, ep=1, world_size=8),  # product != world
        dict(dp_replicate=1, dp_shard=-1, cp=1, tp=3, pp=1, ep=1, world_size=8),  # -1 not a divisor
        dict(dp_replicate=1, dp_shard=-1, cp=1, tp=16, pp=1, ep=1, world_size=8),  # inferred 0
        dict(dp_replicate=0, dp_shard=2, cp=1, tp=2, pp=1, ep=1, world_size=4),
        dict(dp_replicate=1, dp_shard=0, cp=1, tp=2, pp=1, ep=1, world_size=4),
        dict(dp_replicate=1, dp_shard=2, cp=1, tp=0, pp=1, ep=1, world_size=4),
        dict(dp_replicate=1, dp_shard=2, cp=1, tp=2, pp=1, ep=0, world_size=4),
        dict(dp_replicate=1, dp_shard=2, cp=1, tp=2, pp=1, ep=3, world_size=4),  # ep does not divide 4
        dict(dp_replicate=2, dp_shard=2, cp=1, tp=2, pp=1, ep=16, world_size=8),  # ep > dp_shard*cp*tp
        dict(dp_replicate=1, dp_shard=3, cp=2, tp=2, pp=2, ep=8, world_size=24),
    ],
)
def test_torchtitan_invalid_parallel_dims(ParallelDims: Any, fake_world: Any, kwargs: dict[str, Any]) -> None:
    """What ParallelDims refuses (an assertion at construction, or
    DeviceMesh's ValueError in build_mesh for an ep that does not divide
    dp_shard * cp * tp), torchtitan_mesh refuses with a LayoutError."""
    fake_world(0, max(kwargs["world_size"], 1))
    with pytest.raises((AssertionError, ValueError)):
        ParallelDims(**kwargs).build_mesh()
    with pytest.raises(LayoutError):
        rank_layout_torchtitan_mesh(**kwargs)
