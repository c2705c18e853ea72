"""A real ``torch.distributed.device_mesh.DeviceMesh`` for a rank-layout
:class:`~rank_layout.Mesh`, built from members-only process groups.

>>> import torch.distributed as dist
>>> from rank_layout import Mesh
>>> from rank_layout.torch import device_mesh
>>> mesh = Mesh([("tp", 8), ("cp", 2), ("dp", 64)]).flatten("dp_cp", ["dp", "cp"])
>>> dm = device_mesh(mesh, "cuda")                              # doctest: +SKIP
>>> dm.mesh_dim_names, dm.shape                                 # doctest: +SKIP
(('dp', 'cp', 'tp'), (64, 2, 8))
>>> dm["tp"].get_group(), dm.get_local_rank("cp"), dm["dp_cp"].size()  # doctest: +SKIP
(<ProcessGroup ...>, 1, 128)

Every rank of the default process group calls :func:`device_mesh` with the
same arguments. It returns what ``init_device_mesh(device_type, shape,
mesh_dim_names=names)`` returns for the same ranks (a root ``DeviceMesh``,
dims in DeviceMesh's order: the slowest first, so the :class:`Mesh`'s dims
reversed), but made with ``DeviceMesh.from_group``: each rank creates its
own group of each dim, with ``torch.distributed.new_group(members,
use_local_synchronization=True)``, one call per dim (and per flattened
name), every rank in the same order, as :func:`rank_layout.torch.new_groups`
does. ``init_device_mesh`` instead creates every group of every dim on
every rank (``world / size`` calls per dim) unless the default group has a
bound device for ``split_group``.

What works as with ``init_device_mesh``: ``mesh_dim_names``, ``shape``,
``dm["dp"]``, ``dm["dp", "tp"]`` (names in mesh order, as DeviceMesh
requires), ``get_group(dim)``, ``get_local_rank(dim)``, ``get_coordinate()``,
``mesh`` (the full rank tensor at the root, the rank's group in a
sub-mesh), sub-meshes of sub-meshes, DTensor and FSDP2 on it. Groups list
their members in ascending order (DeviceMesh's default,
``preserve_rank_order=False``), so with a rank map a group rank is the
place in the sorted members, as with a DeviceMesh made from the same mesh
tensor.

Flattened names
---------------
Each flatten of the :class:`Mesh` (``mesh.flatten("dp_cp", ["dp", "cp"])``,
torchtitan's ``batch``, ``loss``, ``efsdp``, ...) becomes a flattened dim of
the root, as ``dm["dp", "cp"]._flatten("dp_cp")`` makes it: the root's
``dm["dp_cp"]`` and ``dm.get_group("dp_cp")`` work, and the group is made
members-only like the dims' (``_flatten`` itself would make every group of
the flattened dim on every rank). That takes DeviceMesh's private layout
bookkeeping (``_MeshLayout``, the ``_layout``/``_rank_map``/``_root_mesh``
constructor arguments and ``_flatten_mapping``, as ``_flatten`` fills
them), as torch 2.15 has it; a torch without it refuses flattens with a
:class:`~rank_layout.LayoutError`. More than ``_flatten`` allows:

- a flatten of any dims of the mesh, in any order (``_flatten`` needs a
  sub-mesh, so dims in mesh order); its members are in the mesh's order;
- a flatten of a view's dims (torchtitan's ``ep`` and ``efsdp`` of the
  expert view) on the DeviceMesh of the base dims, and the other way round:
  a DeviceMesh's layout can hold any group of a view, so it is a flattened
  dim like another (``dm["efsdp"]``). This needs the DeviceMesh's dims in
  the mesh's order (the default ``dims``), else only flattens of the chosen
  dims are possible.

Left out: a flatten named like a dim of the DeviceMesh (torch forbids the
name twice; torchtitan's ``ep`` on the expert view's DeviceMesh is that
dim). On a rank outside the mesh there are no flattened dims (torch cannot
make a sub-mesh there either). A flatten made later with ``_flatten`` works
too, torch's way (every group on every rank).

Bad input
---------
An unknown view, dim or flatten name, ``dims`` that do not cover the view's
dims exactly once, names given twice, a ``backend`` dict naming no dim, a
mesh whose ranks do not fit the world, no initialized ``torch.distributed``,
a torch without ``DeviceMesh.from_group`` or members-only ``new_group``:
:class:`~rank_layout.LayoutError`, raised on every rank before any group
exists (every rank sees the same arguments, so no rank waits for another).
A rank of the world outside the mesh (a smaller mesh, a rank offset) makes
the same calls, each a group of itself alone that it drops at once (so
every rank has made as many groups as every other, which members-only
groups made later rely on), and gets the ``DeviceMesh`` that
``init_device_mesh`` gives such a rank: ``get_coordinate()`` is ``None``,
and slicing it raises torch's ``RuntimeError``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, NamedTuple, Optional, Sequence, Union

import numpy as np
import torch
import torch.distributed as dist

from rank_layout import Layout, LayoutError, Mesh

__all__ = ["device_mesh"]

#: A dim of a DeviceMesh: one str (a dim, a flatten, ``"dp-cp"``) or names.
DimSpec = Union[str, Sequence[str]]


# --- torch ------------------------------------------------------------------


def check_torch(*, layouts: bool) -> None:
    """:class:`LayoutError` unless torch.distributed is initialized and has
    ``DeviceMesh.from_group``, members-only ``new_group`` and (``layouts``)
    DeviceMesh's layout bookkeeping."""
    if not dist.is_available() or not dist.is_initialized():
        raise LayoutError("torch.distributed is not initialized: call init_process_group first")
    try:
        from torch.distributed.device_mesh import DeviceMesh
    except ImportError as e:  # pragma: no cover - every torch >= 2.2 has it
        raise LayoutError(f"torch {torch.__version__} has no DeviceMesh ({e})") from None
    if not hasattr(DeviceMesh, "from_group"):
        raise LayoutError(f"torch {torch.__version__}'s DeviceMesh has no from_group")
    params = inspect.signature(dist.new_group).parameters
    wrapped = any(p.kind == p.VAR_KEYWORD for p in params.values())  # a wrapper passing keywords on
    if "use_local_synchronization" not in params and not wrapped:
        raise LayoutError(f"torch {torch.__version__}'s new_group has no use_local_synchronization")
    if layouts and _layout_classes() is None:
        raise LayoutError(
            f"torch {torch.__version__}'s DeviceMesh has no layouts (torch.distributed._mesh_layout): "
            "flattened dims and meshes sharing a root cannot be made members-only"
        )


def _layout_classes() -> Optional[tuple[Any, Any]]:
    """``(_FlatLayout, _MeshLayout)`` where DeviceMesh takes layouts."""
    try:
        from torch.distributed._mesh_layout import _FlatLayout, _MeshLayout
        from torch.distributed.device_mesh import DeviceMesh
    except ImportError:
        return None
    params = inspect.signature(DeviceMesh.__init__).parameters
    if not all(p in params for p in ("_layout", "_rank_map", "_root_mesh", "_init_backend")):
        return None
    return _FlatLayout, _MeshLayout


def backend_pair(value: Any, what: str) -> tuple[Optional[str], Any]:
    """``(backend, pg_options)`` from a backend name, options, or both (as
    DeviceMesh's ``backend_override`` takes them)."""
    if value is None:
        return None, None
    if isinstance(value, str):
        return value, None
    if isinstance(value, tuple):
        if len(value) == 2 and (value[0] is None or isinstance(value[0], str)):
            return value[0], value[1]
        raise LayoutError(f"{what} must be a backend name, options or a (name, options) pair, got {value!r}")
    return None, value


# --- families of groups -------------------------------------------------------


class Family(NamedTuple):
    """The groups of one dim: ``sizes`` and ``strides`` (the slowest first)
    over the root's rank tensor, the backend and options of its groups."""

    name: str
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    backend: Optional[str] = None
    options: Any = None

    @property
    def size(self) -> int:
        return math.prod(self.sizes)

    def key(self) -> tuple:
        """Equal for families with the same groups (as sets) and backend."""
        modes = sorted(((t, s) for s, t in zip(self.sizes, self.strides) if s > 1), reverse=True)
        merged: list[tuple[int, int]] = []
        for t, s in modes:  # strides descending: merge (s1, t1) (s2, t2) where t1 = t2 * s2
            if merged and merged[-1][0] == t * s:
                merged[-1] = (t, merged[-1][1] * s)
            else:
                merged.append((t, s))
        return tuple(merged), self.backend, None if self.options is None else id(self.options)

    def indices(self, index: int) -> np.ndarray:
        """The indices of the group with ``index`` in it, row-major over
        the sizes (the first size slowest)."""
        base = index
        for s, t in zip(self.sizes, self.strides):
            base -= ((index // t) % s) * t
        grid = np.zeros(1, dtype=np.int64)
        for s, t in zip(self.sizes, self.strides):
            grid = (grid[:, None] + np.arange(s, dtype=np.int64) * t).ravel()
        return base + grid


def make_groups(
    families: Sequence[Family], ranks: np.ndarray, index: Optional[int], timeout: Optional[timedelta]
) -> list[Any]:
    """One members-only ``new_group`` per distinct family, in order: this
    rank's group of each (``ranks[i]`` is the rank at index ``i``; ``index``
    is this rank's, ``None`` outside, where each call makes the group of
    this rank alone and drops it). Families with the same groups and backend
    share one; a family whose one group is every rank of the world (default
    backend) is the default group (no call). Every rank decides alike and
    makes the same calls in the same order."""
    world, me = dist.get_world_size(), dist.get_rank()
    made: dict[tuple, Any] = {}
    out = []
    for f in families:
        key = f.key()
        if key not in made:
            made[key] = _make_group(f, ranks, index, timeout, world, me)
        out.append(made[key])
    return out


def _make_group(
    f: Family, ranks: np.ndarray, index: Optional[int], timeout: Optional[timedelta], world: int, me: int
) -> Any:
    if f.size == world and f.backend is None and f.options is None:
        # Every rank of the world (the mesh covers it): the default group.
        return dist.distributed_c10d._get_default_group()
    kwargs: dict[str, Any] = {"use_local_synchronization": True, "group_desc": f"mesh_{f.name}"}
    if timeout is not None:
        kwargs["timeout"] = timeout
    if f.backend is not None:
        kwargs["backend"] = f.backend
        if f.backend == "fake":
            _register_fake()
    if f.options is not None:
        kwargs["pg_options"] = f.options
    if index is None:
        pg = dist.new_group([me], **kwargs)
        dist.destroy_process_group(pg)
        return None
    members = sorted(int(r) for r in ranks[f.indices(index)])
    return dist.new_group(members, **kwargs)


def _register_fake() -> None:
    """torch's ``fake`` backend (groups that never communicate, as
    torchtitan makes for its disabled dims) is registered by importing its
    module."""
    if "FAKE" not in dist.Backend._plugins:
        import torch.testing._internal.distributed.fake_pg  # noqa: F401


def sub_mesh(root: Any, names: Sequence[str], families: Sequence[Family], groups: Sequence[Any]) -> Any:
    """A DeviceMesh over ``root``'s ranks whose dims are ``families``
    (DeviceMesh's own way of holding sub-meshes, flattened and unflattened
    meshes: a layout over the root's rank map), with ``groups``."""
    from torch.distributed.device_mesh import DeviceMesh

    flat, mesh_layout = _layout_classes()  # type: ignore[misc]
    layout = mesh_layout([flat(tuple(f.sizes), tuple(f.strides)) for f in families])
    kwargs: dict[str, Any] = {}
    if "preserve_rank_order" in inspect.signature(DeviceMesh.__init__).parameters:
        kwargs["preserve_rank_order"] = root._preserve_rank_order
    sub = DeviceMesh(
        root.device_type,
        _layout=layout,
        _rank_map=root._rank_map,
        mesh_dim_names=tuple(names),
        _root_mesh=root,
        _init_backend=False,
        **kwargs,
    )
    sub._dim_group_names = [pg.group_name for pg in groups]
    for pg in groups:
        root._pg_registry[pg.group_name] = pg
    return sub


# --- the mesh -----------------------------------------------------------------


class Factorisation(NamedTuple):
    """The dims of a mesh or of one of its views: names first fastest, sizes,
    and strides over the mesh's positions (the first dim's 1)."""

    view: Optional[str]
    names: tuple[str, ...]
    sizes: tuple[int, ...]
    strides: tuple[int, ...]

    def modes(self, dims: Sequence[str]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Sizes and strides of ``dims``, the slowest first (the mesh's
        order reversed, so the members are in the mesh's order)."""
        picked = [i for i in reversed(range(len(self.names))) if self.names[i] in dims]
        return tuple(self.sizes[i] for i in picked), tuple(self.strides[i] for i in picked)


def factorisations(mesh: Mesh) -> dict[Optional[str], Factorisation]:
    """The mesh's dims (key ``None``) and each view's."""
    out = {}
    for view, dims in [(None, mesh.dims), *mesh.views]:
        names = tuple(n for n, _ in dims)
        sizes = tuple(int(s) for _, s in dims)
        strides = tuple(math.prod(sizes[:i]) for i in range(len(sizes)))
        out[view] = Factorisation(view, names, sizes, strides)
    return out


def parse_spec(spec: str) -> tuple[Optional[str], tuple[str, ...]]:
    """``"expert:ep-efsdp"`` -> ``("expert", ("ep", "efsdp"))``."""
    view, _, dims = spec.rpartition(":")
    return (view or None), tuple(dims.split("-"))


def as_mesh(mesh: Any) -> Mesh:
    if isinstance(mesh, Mesh):
        return mesh
    if isinstance(mesh, Layout):
        return mesh.mesh()
    raise LayoutError(f"mesh must be a rank_layout.Mesh or Layout, got {type(mesh).__name__}")


def positions(mesh: Mesh) -> np.ndarray:
    """The rank at each position of the mesh (first dim fastest)."""
    return mesh.groups_array([n for n, _ in mesh.dims])[0].astype(np.int64)


class _Plan:
    """Everything :func:`device_mesh` decides before making a group, the
    same on every rank (but ``index``)."""

    def __init__(
        self,
        mesh: Any,
        device_type: Any,
        mesh_dim_names: Optional[Sequence[str]],
        view: Optional[str],
        dims: Optional[Sequence[DimSpec]],
        backend: Any,
        flattens: Optional[Sequence[str]],
    ) -> None:
        if not isinstance(device_type, str):
            raise LayoutError(f"device_type must be a str ('cuda', 'cpu'), got {device_type!r}")
        self.device_type = device_type
        mesh = as_mesh(mesh)
        self.mesh = mesh
        facts = factorisations(mesh)
        if view is not None and view not in facts:
            known = ", ".join(v for v in facts if v is not None) or "none"
            raise LayoutError(f"unknown view {view!r} (views: {known})")
        self.view = view
        fact = facts[view]
        where = "the mesh" if view is None else f"view {view}"
        named = {name: parse_spec(spec) for name, spec in mesh.flattens}

        # The DeviceMesh's dims: entries of dims of the factorisation.
        given_names: dict[tuple[str, ...], str] = {}  # merged dims named by a flatten
        if dims is None:
            entries: list[tuple[str, ...]] = [(d,) for d in reversed(fact.names)]
        else:
            if isinstance(dims, str):
                dims = [dims]
            entries = []
            for e in dims:
                if isinstance(e, str) and e in named and named[e][0] == view and e not in fact.names:
                    names = named[e][1]
                    given_names[tuple(sorted(names, key=fact.names.index, reverse=True))] = e
                elif isinstance(e, str):
                    names = tuple(e.split("-"))
                else:
                    try:
                        names = tuple(e)
                    except TypeError:
                        raise LayoutError(f"dims: each entry is a dim name or names, got {e!r}") from None
                    if not names or not all(isinstance(n, str) for n in names):
                        raise LayoutError(f"dims: each entry is a dim name or names, got {e!r}")
                for n in names:
                    if n not in fact.names:
                        raise LayoutError(f"unknown dim {n!r} in {where} (known: {', '.join(fact.names)})")
                # The slowest first, as DeviceMesh lists them.
                entries.append(tuple(sorted(set(names), key=fact.names.index, reverse=True)))
            listed = [n for e in entries for n in e]
            missing = [n for n in fact.names if n not in listed]
            twice = sorted({n for n in listed if listed.count(n) > 1})
            if missing or twice:
                raise LayoutError(
                    f"dims must name every dim of {where} once ({', '.join(fact.names)}): "
                    + "; ".join(x for x in (missing and f"missing {', '.join(missing)}",
                                            twice and f"twice {', '.join(twice)}") if x)
                )
        expanded = [n for e in entries for n in e]
        istride = {n: math.prod(fact.sizes[fact.names.index(m)] for m in expanded[i + 1:]) for i, n in enumerate(expanded)}
        identity = all(istride[n] == fact.strides[i] for i, n in enumerate(fact.names))

        # Names of the DeviceMesh's dims.
        if mesh_dim_names is None:
            # A merged dim: the flatten it was named by, else the first
            # flatten of those dims, else DeviceMesh's _flatten default.
            by_set: dict[frozenset, str] = {}
            for name, (v, d) in named.items():
                if v == view:
                    by_set.setdefault(frozenset(d), name)
            names_out = [
                e[0] if len(e) == 1 else given_names.get(e) or by_set.get(frozenset(e), "_".join(e)) for e in entries
            ]
        else:
            if isinstance(mesh_dim_names, str) or not all(isinstance(n, str) for n in mesh_dim_names):
                raise LayoutError(f"mesh_dim_names must be a sequence of str, got {mesh_dim_names!r}")
            names_out = list(mesh_dim_names)
            if len(names_out) != len(entries):
                raise LayoutError(f"mesh_dim_names has {len(names_out)} names for {len(entries)} dims")
        twice = sorted({n for n in names_out if names_out.count(n) > 1})
        if twice:
            raise LayoutError(f"mesh_dim_names: {', '.join(twice)} named twice")
        self.names = tuple(names_out)
        self.shape = tuple(math.prod(fact.sizes[fact.names.index(n)] for n in e) for e in entries)
        dim_families = [
            Family(name, tuple(fact.sizes[fact.names.index(n)] for n in e), tuple(istride[n] for n in e))
            for name, e in zip(self.names, entries)
        ]

        # Flattened dims.
        wanted = list(named) if flattens is None else list(flattens)
        explicit = flattens is not None
        flat_families = []
        for name in wanted:
            if not isinstance(name, str) or name not in named:
                raise LayoutError(f"unknown flatten {name!r} (the mesh's: {', '.join(named) or 'none'})")
            v, d = named[name]
            if v == view:
                picked = [i for i in reversed(range(len(fact.names))) if fact.names[i] in d]
                f = Family(name, tuple(fact.sizes[i] for i in picked), tuple(istride[fact.names[i]] for i in picked))
            elif identity:
                f = Family(name, *facts[v].modes(d))
            elif explicit:
                raise LayoutError(
                    f"flatten {name!r} is of {'the mesh' if v is None else 'view ' + v}: with dims out of "
                    f"the mesh's order, only flattens of {where} are possible"
                )
            else:
                continue
            if name in self.names:
                if explicit:
                    raise LayoutError(f"flatten {name!r} has the name of a dim of the DeviceMesh")
                continue
            flat_families.append(f)
        if flat_families and _layout_classes() is None:
            check_torch(layouts=True)

        # Backends by name.
        backend_names = [f.name for f in dim_families + flat_families]
        if isinstance(backend, Mapping):
            unknown = [k for k in backend if k not in backend_names]
            if unknown:
                raise LayoutError(f"backend names no dim or flatten of the DeviceMesh: {', '.join(map(str, unknown))}")
            pairs = {k: backend_pair(backend.get(k), f"backend[{k!r}]") for k in backend_names}
        else:
            pair = backend_pair(backend, "backend")
            pairs = dict.fromkeys(backend_names, pair)
        self.dims = [f._replace(backend=pairs[f.name][0], options=pairs[f.name][1]) for f in dim_families]
        self.flattens = [f._replace(backend=pairs[f.name][0], options=pairs[f.name][1]) for f in flat_families]

        # The rank tensor, DeviceMesh's order.
        world = dist.get_world_size()
        end = mesh.rank_offset + mesh.world_size
        if end > world:
            raise LayoutError(
                f"the mesh's ranks {mesh.rank_offset}..{end - 1} do not fit torch.distributed's world of {world} ranks"
            )
        nd = positions(mesh).reshape(tuple(reversed(fact.sizes)))
        axes = [len(fact.names) - 1 - fact.names.index(n) for n in expanded]
        self.tensor = np.ascontiguousarray(nd.transpose(axes)).reshape(self.shape)
        self.ranks = self.tensor.ravel()
        coord = mesh.coord(dist.get_rank(), view=view)
        self.index = None if coord is None else sum(coord[n] * istride[n] for n in fact.names)

    def build(self, timeout: Optional[timedelta]) -> Any:
        from torch.distributed.device_mesh import DeviceMesh

        groups = make_groups(self.dims + self.flattens, self.ranks, self.index, timeout)
        tensor = torch.from_numpy(self.tensor).to(torch.int)
        if self.index is None:
            # As init_device_mesh on a rank outside its mesh: no groups, no
            # coordinate.
            dm = DeviceMesh(self.device_type, tensor, mesh_dim_names=self.names, _init_backend=False)
            dm._dim_group_names = []
            return dm
        k = len(self.dims)
        dm = DeviceMesh.from_group(list(groups[:k]), self.device_type, mesh=tensor, mesh_dim_names=self.names)
        for f, pg in zip(self.flattens, groups[k:]):
            dm._flatten_mapping[f.name] = sub_mesh(dm, (f.name,), [f], [pg])
        return dm


def device_mesh(
    mesh: Union[Mesh, Layout],
    device_type: str,
    *,
    mesh_dim_names: Optional[Sequence[str]] = None,
    view: Optional[str] = None,
    dims: Optional[Sequence[DimSpec]] = None,
    backend: Any = None,
    timeout: Optional[timedelta] = None,
    flattens: Optional[Sequence[str]] = None,
) -> Any:
    """A ``torch.distributed.device_mesh.DeviceMesh`` of ``mesh`` (a
    :class:`~rank_layout.Mesh`, or a :class:`~rank_layout.Layout` through
    ``layout.mesh()``), made with ``DeviceMesh.from_group`` over
    members-only groups (the module's documentation says how, and what it
    costs).

    Every rank of the default process group calls it with the same
    arguments.

    - ``view``: the DeviceMesh of that view's dims (``"expert"``) rather
      than the mesh's.
    - ``dims``: the DeviceMesh's dims, the slowest first (default: the
      mesh's, or the view's, dims reversed, as ``Mesh.from_device_mesh``
      takes them). Each is a dim, or several merged into one (names, a
      ``"dp-cp"`` spec or the name of a flatten of those dims); every dim
      once.
    - ``mesh_dim_names``: the DeviceMesh's names for them (default: the
      dim's name; for merged dims the flatten's name, else DeviceMesh's
      ``"_".join``).
    - ``flattens``: the flattens of the mesh to make flattened dims of
      (default: every one possible, see the module's documentation).
    - ``backend``: a backend name, options, or ``(name, options)``, for
      every group, or a dict of them by dim or flatten name
      (DeviceMesh's ``backend_override``); ``timeout`` goes to
      ``new_group``.

    Raises :class:`~rank_layout.LayoutError` before any group is made, on
    every rank, for anything it cannot build.
    """
    check_torch(layouts=False)
    plan = _Plan(mesh, device_type, mesh_dim_names, view, dims, backend, flattens)
    return plan.build(timeout)
