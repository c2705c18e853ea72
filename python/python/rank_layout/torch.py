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

torch is imported by this module only: ``import rank_layout`` never needs it.
"""

from __future__ import annotations

import inspect
from datetime import timedelta
from typing import Any, Optional, Sequence, Union

try:
    import torch.distributed as dist
except ImportError as e:  # torch is an optional dependency
    raise ImportError(
        "rank_layout.torch needs PyTorch: pip install torch (or the rank-layout[torch] extra)"
    ) from e

from rank_layout import Layout, LayoutError

__all__ = ["new_groups", "METHODS"]

#: The constructions of :func:`new_groups`.
METHODS = ("local", "global")

ProcessGroups = Union["dist.ProcessGroup", list["dist.ProcessGroup"], None]

# Keep the members' order (group rank = key) where torch can.
_KEEP_ORDER = (
    {"sort_ranks": False} if "sort_ranks" in inspect.signature(dist.new_group).parameters else {}
)


def new_groups(
    layout: Layout,
    kinds: Optional[Sequence[str]] = None,
    *,
    method: str = "local",
    timeout: Optional[timedelta] = None,
    pg_options: Any = None,
) -> dict[str, ProcessGroups]:
    """Builds the process groups of ``kinds`` (default: every kind of the
    layout) and returns, by kind, this rank's group, a list of its groups
    (by color) where it is in several, or ``None`` where it is in none.

    Every rank of the default process group calls it, with the same
    arguments. ``method`` is ``"local"`` (the default: O(kinds) calls per
    rank) or ``"global"`` (every rank creates every group, as Megatron-LM
    does); the module's documentation says what each costs. ``timeout``
    and ``pg_options`` go to ``torch.distributed.new_group``.

    Raises :class:`rank_layout.LayoutError`, on every rank and before any
    group is made, for an unknown kind or method, or a layout whose ranks
    do not fit the default group.
    """
    if method not in METHODS:
        raise LayoutError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    world, me = dist.get_world_size(), dist.get_rank()
    end = layout.rank_offset + layout.world_size
    if end > world:
        raise LayoutError(
            f"the layout's ranks {layout.rank_offset}..{end} do not fit "
            f"torch.distributed's world of {world} ranks"
        )
    asked = list(dict.fromkeys(layout.kinds if kinds is None else kinds))
    # Every kind is checked, on every rank, before the first group is made.
    rounds = {kind: layout.split_rounds(kind) for kind in asked}
    rank = me if layout.rank_offset <= me < end else None
    build = _local if method == "local" else _global
    out: dict[str, ProcessGroups] = {}
    for kind in asked:
        mine = build(layout, kind, rounds[kind], rank, me, timeout, pg_options)
        out[kind] = mine[0] if len(mine) == 1 else (mine or None)
    return out


def _local(
    layout: Layout,
    kind: str,
    rounds: int,
    rank: Optional[int],
    me: int,
    timeout: Optional[timedelta],
    pg_options: Any,
) -> list[dist.ProcessGroup]:
    """One members-only ``new_group`` per round of ``kind``: this rank's
    group of the round, or itself alone (dropped at once). This rank's
    groups, by color."""
    found = []
    for round in range(rounds):
        split = None if rank is None else layout.split(rank, kind, round=round)
        members = [me] if split is None else layout.group(kind, split[0])
        desc = f"{kind}/round-{round}/none" if split is None else f"{kind}/{split[0]}"
        pg = dist.new_group(
            members,
            timeout=timeout,
            pg_options=pg_options,
            use_local_synchronization=True,
            group_desc=desc,
            **_KEEP_ORDER,
        )
        if split is None:
            dist.destroy_process_group(pg)
        else:
            found.append((split[0], pg))
    return [pg for _, pg in sorted(found, key=lambda color_pg: color_pg[0])]


def _global(
    layout: Layout,
    kind: str,
    rounds: int,
    rank: Optional[int],
    me: int,
    timeout: Optional[timedelta],
    pg_options: Any,
) -> list[dist.ProcessGroup]:
    """``new_group`` for every group of ``kind``, by color, on every rank;
    this rank's groups."""
    del rounds, me
    colors = set() if rank is None else {m["color"] for m in layout.memberships(rank, kind)}
    mine = []
    for color, members in enumerate(layout.groups(kind)):
        pg = dist.new_group(
            members,
            timeout=timeout,
            pg_options=pg_options,
            group_desc=f"{kind}/{color}",
            **_KEEP_ORDER,
        )
        if color in colors:
            mine.append(pg)
    return mine
