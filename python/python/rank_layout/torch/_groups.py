"""How families of process groups are built: :class:`GroupSpec` (one
family) and :func:`build_groups` (every family, by ``method="local"`` or
``"global"``, with shared groups), used by :func:`rank_layout.torch.new_groups`,
:func:`rank_layout.torch.new_module_groups` and
:mod:`rank_layout.torch.megatron`. :mod:`rank_layout.torch`'s documentation
says what each method costs, why it cannot hang, and when kinds share a
group."""

from __future__ import annotations

import inspect
import operator
import warnings
from datetime import timedelta
from typing import Any, Callable, NamedTuple, Optional, Sequence

try:
    import torch.distributed as dist
except ImportError as e:  # torch is an optional dependency
    raise ImportError(
        "rank_layout.torch needs PyTorch: pip install torch (or the rank-layout[torch] extra)"
    ) from e

import numpy as np

from rank_layout import LayoutError
from rank_layout._native import Layout  # the base: a re-layout plan's layouts are typed as it

#: The constructions of :func:`build_groups` (and :func:`rank_layout.torch.new_groups`).
METHODS = ("local", "global")

# Keep the members' order (group rank = key) where torch can.
_KEEP_ORDER = (
    {"sort_ranks": False} if "sort_ranks" in inspect.signature(dist.new_group).parameters else {}
)


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
    family's groups (see :mod:`rank_layout.torch`). ``everyone``: one
    group, every rank of the layout in ascending order (``mine`` and
    ``partition`` then unused)."""

    label: str
    kind: Optional[str] = None
    mine: Optional[Callable[[Optional[int]], Optional[list[int]]]] = None
    partition: Optional[Callable[[], Optional[np.ndarray]]] = None
    backend: Optional[str] = None
    pg_options: Any = None
    sort: bool = False
    share: bool = True
    desc: Optional[str] = None
    everyone: bool = False


class RankMap:
    """A rank map checked against the default group: ``torch_rank[logical]``
    is the ``torch.distributed`` rank of logical rank ``logical`` (the rank
    the layout speaks of), ``logical[torch]`` the inverse. Without a map
    (``None``) both are the identity. A ``partial`` map (after a
    re-layout) may name fewer ranks than the world: the torch ranks it
    leaves out (failed or idle processes) have logical rank -1 and no
    group."""

    def __init__(self, rank_map: Any, world: int, partial: bool = False) -> None:
        if rank_map is None:
            self.torch_rank: Optional[list[int]] = None
            self.logical: Optional[list[int]] = None
            return
        if isinstance(rank_map, (str, bytes)):
            raise LayoutError(f"rank_map must be a sequence of ints, got {type(rank_map).__name__}")
        try:
            ranks = [operator.index(r) for r in rank_map]
        except TypeError:
            raise LayoutError("rank_map must be a sequence of ints (logical rank -> torch rank)") from None
        if len(ranks) > world or (len(ranks) != world and not partial):
            raise LayoutError(
                f"rank_map has {len(ranks)} entries; torch.distributed's world has {world} ranks "
                "(one entry per logical rank 0..world-1)"
            )
        inverse = [-1] * world
        for logical, r in enumerate(ranks):
            if not 0 <= r < world:
                raise LayoutError(f"rank_map[{logical}] = {r} is not a rank of the world of {world}")
            if inverse[r] >= 0:
                raise LayoutError(f"rank_map names torch rank {r} twice (logical ranks {inverse[r]} and {logical})")
            inverse[r] = logical
        identity = len(ranks) == world and all(r == i for i, r in enumerate(ranks))
        self.torch_rank = None if identity else ranks
        self.logical = None if identity else inverse

    def of(self, members: Sequence[int]) -> list[int]:
        """Logical members as torch ranks, in the same order."""
        m = self.torch_rank
        return [int(r) for r in members] if m is None else [m[int(r)] for r in members]


def check_world(layout: Layout, rank_map: Optional[RankMap] = None) -> tuple[int, Optional[int]]:
    """This process's torch rank, and its logical rank in the layout
    (``None`` when outside; through ``rank_map`` when given);
    :class:`LayoutError` when the layout does not fit the default group."""
    world, me = dist.get_world_size(), dist.get_rank()
    end = layout.rank_offset + layout.world_size
    if end > world:
        raise LayoutError(
            f"the layout's ranks {layout.rank_offset}..{end} do not fit "
            f"torch.distributed's world of {world} ranks"
        )
    logical = me if rank_map is None or rank_map.logical is None else rank_map.logical[me]
    if rank_map is not None and rank_map.torch_rank is not None and end > len(rank_map.torch_rank):
        raise LayoutError(
            f"the layout's ranks {layout.rank_offset}..{end} do not fit the rank map's {len(rank_map.torch_rank)} ranks"
        )
    return me, (logical if layout.rank_offset <= logical < end else None)


def build_groups(
    layout: Layout,
    specs: Sequence[GroupSpec],
    *,
    method: str = "local",
    timeout: Optional[timedelta] = None,
    share: bool = True,
    on_create: Optional[Callable[[Any, GroupSpec], None]] = None,
    rank_map: Any = None,
    reuse: Optional[dict[tuple[int, ...], Any]] = None,
) -> dict[str, list]:
    """Builds ``specs`` in order; by label, this rank's process groups (by
    color). Every check is made, on every rank, before the first group.
    ``on_create(pg, spec)`` is called for each group created with this
    rank in it (shared ones once). ``rank_map`` (logical rank -> torch
    rank, a permutation of the world): the layout's ranks are logical, each
    group is created with its members' torch ranks in the same order (a
    ``sort`` family sorted by logical rank first). ``reuse`` (method
    ``"local"``): existing process groups by their members (torch ranks, in
    group order); a group with those members is that object, not a new
    one (a re-layout's kept groups)."""
    if method not in METHODS:
        raise LayoutError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    rmap = rank_map if isinstance(rank_map, RankMap) else RankMap(rank_map, dist.get_world_size())
    me, rank = check_world(layout, rmap)
    rounds = {s.label: (layout.split_rounds(s.kind) if s.kind is not None else 1) for s in specs}
    if reuse is not None and method != "local":
        raise LayoutError("reuse takes method='local'")
    if method == "global":
        custom = [s.label for s in specs if s.kind is None and s.partition is None and not s.everyone]
        if custom:
            raise LayoutError(f"method='global' cannot build {', '.join(custom)} (no list of all groups)")
    if rmap.torch_rank is not None and not _KEEP_ORDER:
        warnings.warn(
            "this torch's new_group has no sort_ranks: it sorts every group's members by torch rank, "
            "so with a rank map a rank's group rank follows torch ranks, not the layout's order",
            stacklevel=3,
        )
    aliases, world_wide = _aliases(layout, specs, rounds, rmap) if share else ({}, set())
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
        if method == "local":
            out[spec.label] = _local(layout, spec, rounds[spec.label], rank, me, timeout, on_create, rmap, reuse)
        else:
            out[spec.label] = _global(layout, spec, rounds[spec.label], rank, me, timeout, on_create, rmap)
    return out


def _aliases(
    layout: Layout, specs: Sequence[GroupSpec], rounds: dict[str, int], rmap: Optional[RankMap] = None
) -> tuple[dict[int, int], set[int]]:
    """Spec index -> the earlier spec whose groups it takes: same backend,
    same options object, same members in the same order, over the whole
    layout (so every rank decides alike). And the specs (default backend,
    no options) whose one group is the default group's ranks in order
    (after the rank map: a map is a bijection, so it keeps two families
    equal or different, but only the identity keeps a whole-world group
    in torch's order).

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
        if rmap is not None and rmap.torch_rank is not None:
            default = False  # the layout's order is not torch's: a group of its own
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
    if spec.partition is not None:
        return spec.partition()
    if spec.kind is None:
        raise LayoutError(f"{spec.label}: no list of all groups (a family of neither a kind nor a partition)")
    return layout.groups_array(spec.kind)


def _mine(layout: Layout, spec: GroupSpec, rank: Optional[int]) -> Optional[list[int]]:
    if spec.everyone:
        return None if rank is None else list(range(layout.rank_offset, layout.rank_offset + layout.world_size))
    if spec.mine is None:
        raise LayoutError(f"{spec.label}: a family needs a kind, a function of the rank or everyone")
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
    rmap: RankMap,
    reuse: Optional[dict[tuple[int, ...], Any]] = None,
) -> list[dist.ProcessGroup]:
    """One members-only ``new_group`` per round: this rank's group of the
    round, or itself alone (dropped at once). This rank's groups, by
    color. ``rank`` is logical, ``me`` the torch rank. A group whose
    members are a key of ``reuse`` is that group (every member finds it
    there alike: each makes a group of itself instead, dropped at once)."""
    name = spec.desc or spec.label
    found = []
    for round in range(rounds):
        if spec.kind is None:
            members = _mine(layout, spec, rank)
            color = 0
        else:
            split = None if rank is None else layout.split(rank, spec.kind, round=round)
            members = None if split is None else layout.group(spec.kind, split[0])
            color = 0 if split is None else split[0]  # without a split: no group, no color
        if members is not None:
            members = rmap.of(sorted(members) if spec.sort else members)
        desc = f"{name}/round-{round}/none" if members is None else f"{name}/{color}"
        kept = None if members is None or reuse is None else reuse.get(tuple(members))
        if kept is not None:
            # Torch salts members-only group names with a count of the
            # groups made: a group of itself, dropped at once, keeps this
            # process's count in step with its peers'.
            dist.destroy_process_group(_new_group([me], spec, f"{desc}/kept", timeout, local=True))
            found.append((color, kept))
            if on_create is not None:
                on_create(kept, spec)
            continue
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
    rmap: RankMap,
) -> list[dist.ProcessGroup]:
    """``new_group`` for every group of the family, by color, on every rank;
    this rank's groups."""
    del rounds
    if spec.kind is None:
        every = _partition(layout, spec)
        if every is None:
            raise LayoutError(f"method='global' cannot build {spec.label} (no list of all groups)")
        groups = [list(map(int, row)) for row in every]
    else:
        groups = layout.groups(spec.kind)
    name = spec.desc or spec.label
    mine = []
    for color, members in enumerate(groups):
        members = rmap.of(sorted(members) if spec.sort else members)
        pg = _new_group(members, spec, f"{name}/{color}", timeout, local=False)
        if me in members:
            mine.append(pg)
            if on_create is not None:
                on_create(pg, spec)
    del rank
    return mine
