"""Real ``torch.distributed`` process groups of a layout.

>>> import torch.distributed as dist
>>> from rank_layout import Layout
>>> from rank_layout.torch import new_groups
>>> dist.init_process_group("nccl", device_id=device)         # doctest: +SKIP
>>> layout = Layout(tp=8, pp=4, world_size=dist.get_world_size())  # doctest: +SKIP
>>> groups = new_groups(layout)                               # doctest: +SKIP
>>> dist.all_reduce(grad, group=groups["dp"])                 # doctest: +SKIP

Every rank of the default process group calls :func:`new_groups` with the
same layout and kinds (ranks outside the layout too: they get ``None``
everywhere). It returns, by kind, the rank's process group, a list of them
(by color) where the rank is in several groups of the kind (encoder fan-out
and fan-in), or ``None`` where it is in none. A group's ranks are its
members in rank-layout's order, so a rank's group rank is its ``key``
(:meth:`rank_layout.Layout.split`); torch versions whose ``new_group`` has
no ``sort_ranks`` sort the members first (rank-layout lists most groups
in ascending order, but not every ``dist-opt-instance`` group).

What a rank costs
-----------------
``method="local"`` (the default): one
``torch.distributed.new_group(members, use_local_synchronization=True)``
per kind and split round (``Layout.split_rounds``: 1, or the fan-out or
fan-in of an encoder + decoder layout), each rank passing its own group,
computed from its own coordinates. A rank in no group of a round (``embd``
off the first and last stages, ``pos-embd`` off the first, a decoder rank in
a fan-out round that is not its own, a rank outside the layout) creates the
group of itself alone, and drops it at once. So per rank:

- O(kinds) calls and O(sum of its own group sizes) work, whatever the world
  size (16 calls, 0.02 s of Python per rank at 131,072 ranks, measured
  with torch's fake backend);
- communication among the members of its own groups only: on gloo a
  rendezvous of O(group size) keys through the store connection the rank
  already has (no new connection); on NCCL a lazily created communicator,
  or, with a device bound to the default group
  (``init_process_group(device_id=...)``), one ``ncclCommSplit`` of the
  world per kind and round, in which every rank takes part once.

It cannot hang, for any layout, because every rank makes exactly one call
per (kind, round), in the same order: torch names a members-only group
after its ranks and the count of groups the calling rank created before, and
that count is then equal on every rank, so the members of a group always
meet under one name; the groups of one round are disjoint, so a call waits
only for its own members, who all make it in the same step. (torch's
documented hang, members-only groups created by ranks with different group
histories, cannot arise.) The one precondition is torch's own: before the
call, every rank has created the same number of process groups.

``method="global"``: every rank calls ``torch.distributed.new_group(members)``
for every group of every kind, in the layout's order, as Megatron-LM does:
``sum over kinds of world / group size`` calls per rank (137,776 calls, 8.3
s of Python per rank at 131,072 ranks); a call for a group without the rank
only checks the ranks and counts the group; the members set the group up as
above; with a device bound to NCCL every call is a world-wide split.

On 8 gloo processes sharing 2 CPU cores, either method builds every kind
of a layout in 0.2 to 0.9 s (``python/README.md`` has the figures). Not
offered:
``torch.distributed.split_group``, one call per kind and round like
``local``, because torch opens one or two new store connections per call on
every rank (kept for the group's life), and torch 2.15's store server
resolves each new client's address by reverse DNS on its only thread: where
that lookup is slow, every rank waits (here 5 s stalls, 20 to 66 s per
layout on the same 8 processes).

Backends, options and shared groups
-----------------------------------
``backend`` and ``pg_options`` are one value for every kind or a dict by
kind (``backend={"dp": "gloo"}``; a kind left out gets ``None``: the
default group's backend, no options). Gloo groups beside NCCL ones, as
Megatron-Core's ``create_gloo_process_groups``:
``new_groups(layout, ["dp", "dp-cp"], backend="gloo")``.

With ``share=True`` (the default), kinds whose groups are the same, member
for member and in the same order, get one process group, the first kind's
(with cp = 1, ``dp-cp`` is ``dp``; with pp = 1, ``tp-pp`` is ``tp``;
folded experts with etp = tp make ``etp`` ``tp``; every kind of groups of
one rank shares one group of one): fewer communicators, each costing
memory and, on NCCL, a set-up. Two kinds share only with the same backend
and the same ``pg_options`` object, and only kinds built in one round.
The decision is made over the whole layout, not rank by rank, so it is the
same on every rank and every rank still makes the same calls in the same
order (a rank deciding alone could skip a call its partners make, and
torch's group names would no longer agree: a hang). Each kind's
``groups_array`` is put in one order and compared with those of the same
shape, O(world) in NumPy (``python/README.md`` has the figures); ``share=False``
skips it and builds every kind's groups. A kind whose one group is every
rank of the default group, in order (with the default backend and no
options), is the default group itself: no call, and no second world-wide
communicator; its timeout is then ``init_process_group``'s. Do not share where two kinds must
progress independently (the reason for Megatron-Core's second data-parallel
group, ``create_all_gather_group``): a communicator runs its operations in
order.

Multi-module models
-------------------
:func:`new_module_groups` (:mod:`rank_layout.torch.modules`) builds the
groups of a :class:`rank_layout.Modules` the same way: each module's groups
of the dim sets asked for, and every edge's bridge groups by kind.

Megatron-Core
-------------
:mod:`rank_layout.torch.megatron` builds Megatron-Core's groups this way and
installs them into ``megatron.core.parallel_state``
(``initialize_model_parallel``), or into a ``ParallelState`` object with
the same getters.

torch is imported by this module only: ``import rank_layout`` never needs it.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Sequence, Union

try:
    import torch.distributed as dist
except ImportError as e:  # torch is an optional dependency
    raise ImportError(
        "rank_layout.torch needs PyTorch: pip install torch (or the rank-layout[torch] extra)"
    ) from e

import numpy as np

from rank_layout import Layout, LayoutError

if TYPE_CHECKING:
    from rank_layout import Modules
    from rank_layout.torch.modules import ModuleGroups

__all__ = ["new_groups", "METHODS"]

#: The constructions of :func:`new_groups`.
METHODS = ("local", "global")

ProcessGroups = Union["dist.ProcessGroup", list["dist.ProcessGroup"], None]

# Keep the members' order (group rank = key) where torch can.
_KEEP_ORDER = (
    {"sort_ranks": False} if "sort_ranks" in inspect.signature(dist.new_group).parameters else {}
)


def new_groups(
    layout: Union[Layout, "Modules"],
    kinds: Optional[Sequence[str]] = None,
    *,
    method: str = "local",
    timeout: Optional[timedelta] = None,
    pg_options: Any = None,
    backend: Any = None,
    share: bool = True,
) -> Union[dict[str, ProcessGroups], "ModuleGroups"]:
    """Builds the process groups of ``kinds`` (default: every kind of the
    layout) and returns, by kind, this rank's group, a list of its groups
    (by color) where it is in several, or ``None`` where it is in none.
    Given a :class:`rank_layout.Modules`, builds its modules' groups of the
    dim sets ``kinds`` and every bridge's groups, and returns
    :func:`new_module_groups`'s :class:`ModuleGroups`.

    Every rank of the default process group calls it, with the same
    arguments. ``method`` is ``"local"`` (the default: O(kinds) calls per
    rank) or ``"global"`` (every rank creates every group, as Megatron-LM
    does); the module's documentation says what each costs. ``timeout``
    goes to ``torch.distributed.new_group``; ``backend`` and
    ``pg_options`` too, each one value for every kind or a dict by kind.
    With ``share`` (the default), kinds whose groups are the same get one
    process group (the module's documentation says when).

    >>> new_groups(layout, ["dp", "dp-cp"], backend="gloo")    # doctest: +SKIP
    {'dp': <ProcessGroup ...>, 'dp-cp': <ProcessGroup ...>}

    Raises :class:`rank_layout.LayoutError`, on every rank and before any
    group is made, for an unknown kind or method, a backend or options
    dict naming a kind not asked for, or a layout whose ranks do not fit
    the default group.
    """
    from rank_layout import Modules

    if isinstance(layout, Modules):
        # Modules and their bridges: `kinds` are the modules' dim sets.
        from rank_layout.torch.modules import DEFAULT_DIMS, new_module_groups

        if method != "local":
            raise LayoutError(f'method {method!r}: modules build their groups with method "local" only')
        return new_module_groups(
            layout,
            DEFAULT_DIMS if kinds is None else kinds,
            backend=backend,
            pg_options=pg_options,
            timeout=timeout,
        )
    asked = list(dict.fromkeys(layout.kinds if kinds is None else kinds))
    for name, per_kind in (("backend", backend), ("pg_options", pg_options)):
        if isinstance(per_kind, Mapping):
            unknown = [k for k in per_kind if k not in asked]
            if unknown:
                raise LayoutError(f"{name} names kinds not built here: {', '.join(map(str, unknown))}")
    specs = [
        GroupSpec(kind, kind=kind, backend=_by_kind(backend, kind), pg_options=_by_kind(pg_options, kind))
        for kind in asked
    ]
    built = build_groups(layout, specs, method=method, timeout=timeout, share=share)
    return {kind: _one_or_list(built[kind]) for kind in asked}


def _by_kind(value: Any, kind: str) -> Any:
    return value.get(kind) if isinstance(value, Mapping) else value


def _one_or_list(pgs: list) -> ProcessGroups:
    return pgs[0] if len(pgs) == 1 else (pgs or None)


class GroupSpec(NamedTuple):
    """One family of groups to build (internal; used by
    :mod:`rank_layout.torch.megatron`).

    Either ``kind``, a kind of the layout (split in its rounds), or
    ``mine``, a function of this rank (``None`` outside the layout)
    returning its members or ``None``, in one round, which every member
    answers alike; ``partition`` (a function returning every group as a
    2-D array) lets such a family share or be built by ``method="global"``.
    ``sort``: members in ascending order (torch's default, Megatron-Core's
    groups) rather than the layout's. ``share``: may share another
    family's groups (see the module's documentation). ``everyone``: one
    group, every rank of the layout in ascending order (``mine`` and
    ``partition`` then unused)."""

    label: str
    kind: Optional[str] = None
    mine: Optional[Callable[[Optional[int]], Optional[list[int]]]] = None
    partition: Optional[Callable[[], np.ndarray]] = None
    backend: Optional[str] = None
    pg_options: Any = None
    sort: bool = False
    share: bool = True
    desc: Optional[str] = None
    everyone: bool = False


def check_world(layout: Layout) -> tuple[int, Optional[int]]:
    """This rank, and its rank in the layout (``None`` when outside);
    :class:`LayoutError` when the layout does not fit the default group."""
    world, me = dist.get_world_size(), dist.get_rank()
    end = layout.rank_offset + layout.world_size
    if end > world:
        raise LayoutError(
            f"the layout's ranks {layout.rank_offset}..{end} do not fit "
            f"torch.distributed's world of {world} ranks"
        )
    return me, (me if layout.rank_offset <= me < end else None)


def build_groups(
    layout: Layout,
    specs: Sequence[GroupSpec],
    *,
    method: str = "local",
    timeout: Optional[timedelta] = None,
    share: bool = True,
    on_create: Optional[Callable[[Any, GroupSpec], None]] = None,
) -> dict[str, list]:
    """Builds ``specs`` in order; by label, this rank's process groups (by
    color). Every check is made, on every rank, before the first group.
    ``on_create(pg, spec)`` is called for each group created with this
    rank in it (shared ones once)."""
    if method not in METHODS:
        raise LayoutError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    me, rank = check_world(layout)
    rounds = {s.label: (layout.split_rounds(s.kind) if s.kind is not None else 1) for s in specs}
    if method == "global":
        custom = [s.label for s in specs if s.kind is None and s.partition is None and not s.everyone]
        if custom:
            raise LayoutError(f"method='global' cannot build {', '.join(custom)} (no list of all groups)")
    aliases, world_wide = _aliases(layout, specs, rounds) if share else ({}, set())
    out: dict[str, list] = {}
    for i, spec in enumerate(specs):
        if i in aliases:
            out[spec.label] = out[specs[aliases[i]].label]
            continue
        if i in world_wide:
            # The one group is every rank of the default group, in order:
            # the default group itself (no call, no communicator).
            default = dist.distributed_c10d._get_default_group()
            out[spec.label] = [default]
            if on_create is not None:
                on_create(default, spec)
            continue
        build = _local if method == "local" else _global
        out[spec.label] = build(layout, spec, rounds[spec.label], rank, me, timeout, on_create)
    return out


def _aliases(
    layout: Layout, specs: Sequence[GroupSpec], rounds: dict[str, int]
) -> tuple[dict[int, int], set[int]]:
    """Spec index -> the earlier spec whose groups it takes: same backend,
    same options object, same members in the same order, over the whole
    layout (so every rank decides alike). And the specs (default backend,
    no options) whose one group is the default group's ranks in order.

    Every group of each spec, as ``groups_array`` fills it in Rust, put in
    one order and compared in NumPy: O(world) per spec."""
    world = dist.get_world_size()
    whole = layout.rank_offset == 0 and layout.world_size == world
    world_wide: set[int] = set()
    buckets: dict[tuple, list[tuple[int, np.ndarray]]] = {}
    for i, s in enumerate(specs):
        if not s.share or rounds[s.label] != 1:
            continue
        default = whole and s.backend is None and s.pg_options is None
        if s.everyone and default:
            world_wide.add(i)
            continue
        if s.kind is None and s.partition is None and not s.everyone:
            continue
        try:
            arr = _partition(layout, s)
        except (LayoutError, TypeError):
            continue
        if arr is None or arr.ndim != 2 or arr.size == 0:
            continue
        if default and arr.shape == (1, world) and (s.sort or bool(np.all(arr[0, 1:] > arr[0, :-1]))):
            world_wide.add(i)
            continue
        buckets.setdefault((s.backend, id(s.pg_options), s.sort, arr.shape), []).append((i, arr))
    aliases: dict[int, int] = {}
    for (_, _, sort, _), alike in buckets.items():
        if len(alike) < 2:
            continue  # the usual case: nothing to compare, nothing sorted
        kept: list[tuple[int, np.ndarray]] = []
        for i, arr in alike:
            arr = _canonical(arr, sort, layout)
            for j, other in kept:
                if np.array_equal(arr, other):
                    aliases[i] = j
                    break
            else:
                kept.append((i, arr))
    return aliases, world_wide


def _partition(layout: Layout, spec: GroupSpec) -> Optional[np.ndarray]:
    """Every group of ``spec``, as a 2-D array."""
    if spec.everyone:
        first = layout.rank_offset
        return np.arange(first, first + layout.world_size, dtype=np.uint32)[None, :]
    return layout.groups_array(spec.kind) if spec.partition is None else spec.partition()


def _mine(layout: Layout, spec: GroupSpec, rank: Optional[int]) -> Optional[list[int]]:
    if spec.everyone:
        return None if rank is None else list(range(layout.rank_offset, layout.rank_offset + layout.world_size))
    return spec.mine(rank)


def _canonical(arr: np.ndarray, sort: bool, layout: Layout) -> np.ndarray:
    """The groups in one order: members ascending if ``sort``, groups by
    first member (rows are disjoint, so a scatter by first member sorts
    them in O(world)); checks first, as rank-layout's arrays are mostly in
    that order already."""
    if sort and arr.shape[1] > 1 and not bool(np.all(arr[:, 1:] > arr[:, :-1])):
        arr = np.sort(arr, axis=1)
    if arr.shape[0] > 1 and not bool(np.all(arr[1:, 0] > arr[:-1, 0])):
        first = arr[:, 0].astype(np.int64) - layout.rank_offset
        slot = np.full(layout.world_size, -1, dtype=np.int64)
        slot[first] = np.arange(len(arr))
        arr = arr[slot[slot >= 0]]
    return arr


def _new_group(members: list[int], spec: GroupSpec, desc: str, timeout: Any, local: bool) -> Any:
    kwargs: dict[str, Any] = dict(timeout=timeout, pg_options=spec.pg_options, group_desc=desc, **_KEEP_ORDER)
    if spec.backend is not None:
        kwargs["backend"] = spec.backend
    if local:
        kwargs["use_local_synchronization"] = True
    return dist.new_group(members, **kwargs)


def _local(
    layout: Layout,
    spec: GroupSpec,
    rounds: int,
    rank: Optional[int],
    me: int,
    timeout: Optional[timedelta],
    on_create: Optional[Callable[[Any, GroupSpec], None]],
) -> list[dist.ProcessGroup]:
    """One members-only ``new_group`` per round: this rank's group of the
    round, or itself alone (dropped at once). This rank's groups, by
    color."""
    name = spec.desc or spec.label
    found = []
    for round in range(rounds):
        if spec.kind is None:
            members = _mine(layout, spec, rank)
            color = 0
        else:
            split = None if rank is None else layout.split(rank, spec.kind, round=round)
            members = None if split is None else layout.group(spec.kind, split[0])
            color = None if split is None else split[0]
        if members is not None and spec.sort:
            members = sorted(members)
        desc = f"{name}/round-{round}/none" if members is None else f"{name}/{color}"
        pg = _new_group([me] if members is None else list(members), spec, desc, timeout, local=True)
        if members is None:
            dist.destroy_process_group(pg)
        else:
            found.append((color, pg))
            if on_create is not None:
                on_create(pg, spec)
    return [pg for _, pg in sorted(found, key=lambda color_pg: color_pg[0])]


def _global(
    layout: Layout,
    spec: GroupSpec,
    rounds: int,
    rank: Optional[int],
    me: int,
    timeout: Optional[timedelta],
    on_create: Optional[Callable[[Any, GroupSpec], None]],
) -> list[dist.ProcessGroup]:
    """``new_group`` for every group of the family, by color, on every rank;
    this rank's groups."""
    del rounds
    if spec.kind is None:
        groups = [list(map(int, row)) for row in _partition(layout, spec)]
    else:
        groups = layout.groups(spec.kind)
    name = spec.desc or spec.label
    mine = []
    for color, members in enumerate(groups):
        members = sorted(members) if spec.sort else members
        pg = _new_group(members, spec, f"{name}/{color}", timeout, local=False)
        if me in members:
            mine.append(pg)
            if on_create is not None:
                on_create(pg, spec)
    del rank
    return mine

from rank_layout.torch.device_mesh import device_mesh  # noqa: E402,F401  (a DeviceMesh of a Mesh)
from rank_layout.torch.torchtitan import torchtitan_meshes  # noqa: E402,F401  (torchtitan's meshes)
from rank_layout.torch.modules import ModuleGroups, new_module_groups  # noqa: E402,F401  (groups of Modules)
