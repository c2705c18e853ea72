"""A ``RankAssignment`` for ``nvidia_resiliency_ext.inprocess`` whose ranks
follow a re-layout policy (:func:`rank_layout.relayout`).

>>> from nvidia_resiliency_ext import inprocess                 # doctest: +SKIP
>>> from rank_layout import Layout
>>> from rank_layout.resiliency import LayoutRankAssignment
>>> assignment = LayoutRankAssignment(Layout(tp=8, pp=4, dp=36, order="tp-dp-pp"),
...                                   "drop-replica", gpus_per_node=4)
>>> wrapper = inprocess.Wrapper(rank_assignment=assignment)    # doctest: +SKIP

The package's own assignments (``ShiftRanks``, ``FillGaps``, ``Tree``)
renumber a flat list of ranks; this one renumbers them so that the job
goes on with a valid layout of the same kinds, chosen by the policy
(``drop-replica``, ``spare``, ``next-grid``, ``shift-ranks``,
``fill-gaps``), and keeps the plan (:attr:`LayoutRankAssignment.plan`)
for the wrapped function to rebuild its groups from
(:attr:`LayoutRankAssignment.layout`).

How the package's state is set
------------------------------
The wrapper calls the assignment once at the start (no terminated ranks)
and after every fault, with ``ctx.terminated_ranks`` in the numbering of
``ctx.state.rank`` (the wrapper's rank of every live process,
``0..world_size``). Each call sets ``ctx.state`` as the package's classes
do, with ``dataclasses.replace``, and empties ``ctx.terminated_ranks``:

- ``rank``, ``world_size``: the live processes renumbered
  ``0..world_size``: the active ones first, wrapper rank = rank in the
  layout, then the inactive ones in their previous order (under
  ``shift-ranks`` and ``fill-gaps``, the package's own numbering, which
  agrees with it on the active ones);
- ``active_rank``, ``active_world_size``: the rank in the current layout
  and its world size; ``mode`` ``ACTIVE`` for a process with a rank, else
  ``INACTIVE`` (a standby);
- a terminated process raises the package's ``RankDiscarded``.

At the start, the layout's ranks ``0..W`` are active and the processes
after them (``world_size - W``) are standbys. A node is ``gpus_per_node``
processes of consecutive wrapper ranks at the start (``initial_rank //
gpus_per_node``, as launchers place them). At each fault, the standby
nodes whose every process is alive and idle are the plan's spare nodes,
in wrapper order (other standbys wait); failed layout ranks go to
:func:`rank_layout.relayout`, whose nodes are the current layout's ranks
``// gpus_per_node`` (the physical nodes at the first fault; after a
policy that renumbers, not necessarily). Processes left out of a plan (a
dropped replica's survivors, a trimmed world) become standbys. Every process holds the same
history, so every process computes the same plan, with no communication.

With ``shift-ranks`` and ``fill-gaps`` the active ranks, world sizes and
modes are those of the package's ``ShiftRanks`` and ``FillGaps`` followed
by ``MaxActiveWorldSize(W)`` and ``ActiveWorldSizeDivisibleBy`` of the
model size, over any number of faults, standbys' wrapper ranks included
(tests check it), with two exceptions under ``fill-gaps``: where the
package's code leaves a gap (a failed rank past the new world size), this
follows the package's documented picture, as :func:`rank_layout.relayout`
does; and where a standby dies, the package moves the last standby into
its place, while here (the plan's failures are ranks of the layout) the
dead standby leaves the pool and the others keep their order.

Compose it only after assignments that add terminated ranks (such as
``FilterCountGroupedByKey``, which runs first in
``Compose(LayoutRankAssignment(...), FilterCountGroupedByKey(...))``):
a rank filter after it would override the layout's active ranks.

nvidia-resiliency-ext is imported when an assignment is made (or
:func:`rank_assignment_base` is asked for): ``import
rank_layout.resiliency`` does not need it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence

from rank_layout import Layout, LayoutError, Relayout, relayout
from rank_layout._native import Layout as _NativeLayout


#: The policies of :func:`rank_layout.relayout`.
POLICIES = ("drop-replica", "spare", "next-grid", "shift-ranks", "fill-gaps")


def _nvrx() -> tuple[Any, Any]:
    try:
        from nvidia_resiliency_ext.inprocess import rank_assignment, state
    except ImportError as e:
        raise ImportError(
            "rank_layout.resiliency needs nvidia-resiliency-ext: pip install nvidia-resiliency-ext"
        ) from e
    return rank_assignment, state


def rank_assignment_base() -> type:
    """The package's ``RankAssignment`` class."""
    return _nvrx()[0].RankAssignment


class LayoutRankAssignment:
    """Assigns the ranks of ``nvidia_resiliency_ext.inprocess`` by
    ``policy``; see :mod:`rank_layout.resiliency`.

    ``layout`` is the job's layout at the start (``rank_offset`` 0);
    ``gpus_per_node``, ``min_dp``, ``global_batch``, ``micro_batch`` and
    ``kinds`` go to :func:`rank_layout.relayout`; ``spare_nodes``, when
    given, is checked against the world the wrapper reports (``world_size
    - W`` standbys must make that many nodes, a remainder left idle).

    An instance of the package's ``RankAssignment`` (created on first use,
    so that the package is imported only then), so the wrapper and
    ``Compose`` accept it."""

    def __new__(cls, *args: Any, **kwargs: Any) -> "LayoutRankAssignment":
        base = rank_assignment_base()
        if not issubclass(cls, base):
            cls = _subclass(cls, base)
        return object.__new__(cls)

    def __init__(
        self,
        layout: Layout,
        policy: str,
        *,
        gpus_per_node: int = 1,
        spare_nodes: Optional[int] = None,
        min_dp: int = 1,
        global_batch: Optional[int] = None,
        micro_batch: int = 1,
        kinds: Optional[Sequence[str]] = None,
    ) -> None:
        if not isinstance(layout, _NativeLayout):
            raise LayoutError(f"LayoutRankAssignment takes a Layout, got {type(layout).__name__}")
        if layout.rank_offset != 0:
            raise LayoutError(
                f"LayoutRankAssignment needs a layout from rank 0 (the wrapper's ranks), got rank_offset {layout.rank_offset}"
            )
        if not isinstance(gpus_per_node, int) or gpus_per_node < 1:
            raise LayoutError(f"gpus_per_node must be a positive int, got {gpus_per_node!r}")
        if policy not in POLICIES:
            raise LayoutError(f"unknown policy {policy!r} (one of {', '.join(POLICIES)})")
        self.policy = policy
        self.gpus_per_node = gpus_per_node
        self.spare_nodes = spare_nodes
        self.min_dp, self.global_batch, self.micro_batch = min_dp, global_batch, micro_batch
        self.kinds = None if kinds is None else list(kinds)
        #: The current layout (the one the active ranks run).
        self.layout: Layout = _python_layout(layout)
        #: The last plan (``None`` before the first fault).
        self.plan: Optional[Relayout] = None
        #: Every plan so far, in order.
        self.plans: list[Relayout] = []
        # Wrapper rank -> rank in self.layout (None: standby); None before
        # the first call.
        self._ranks: Optional[list[Optional[int]]] = None
        # Wrapper rank -> the process's wrapper rank at the start (its node:
        # that // gpus_per_node).
        self._initial: list[int] = []

    def __call__(self, ctx: Any) -> Any:
        ra, st = _nvrx()
        state = ctx.state
        terminated = set(ctx.terminated_ranks)
        if self._ranks is None:
            self._start(state.world_size)
        ranks = self._ranks
        assert ranks is not None
        if len(ranks) != state.world_size:
            raise LayoutError(
                f"the wrapper reports a world of {state.world_size} processes; this assignment "
                f"holds {len(ranks)} (is every process calling it, with one history?)"
            )
        bad = sorted(r for r in terminated if not 0 <= r < len(ranks))
        if bad:
            raise LayoutError(f"terminated ranks {bad} are not ranks of the wrapper's world of {len(ranks)}")
        if state.rank in terminated:
            raise ra.RankDiscarded(f"rank={state.rank} terminated_ranks={sorted(terminated)}")
        if terminated:
            ranks = self._relayout(ranks, terminated)
        order = self._order(ranks, terminated)
        self._ranks = [ranks[w] for w in order]
        self._initial = [self._initial[w] for w in order]
        mine = ranks[state.rank]
        ctx.state = dataclasses.replace(
            state,
            rank=order.index(state.rank),
            world_size=len(order),
            active_rank=mine,
            active_world_size=self.layout.world_size,
            mode=st.Mode.ACTIVE if mine is not None else st.Mode.INACTIVE,
        )
        ctx.terminated_ranks = set()
        return ctx

    def _order(self, ranks: list[Optional[int]], terminated: set[int]) -> list[int]:
        """The live processes (current wrapper ranks) in their new order:
        the package's own numbering under shift-ranks and fill-gaps where
        it gives every active process its active rank, else the active
        processes by layout rank, then the standbys in their order."""
        alive = [w for w in range(len(ranks)) if w not in terminated]
        if terminated and self.policy in ("shift-ranks", "fill-gaps"):
            gone = sorted(terminated)
            n = len(alive)
            if self.policy == "shift-ranks":
                theirs = {w: w - sum(t < w for t in gone) for w in alive}
            else:
                theirs = {w: (w if w < n else gone[w - n]) for w in alive}
            if sorted(theirs.values()) == list(range(n)) and all(
                ranks[w] is None or ranks[w] == theirs[w] for w in alive
            ):
                return sorted(alive, key=theirs.__getitem__)
        active = sorted((ranks[w], w) for w in alive if ranks[w] is not None)
        return [w for _, w in active] + [w for w in alive if ranks[w] is None]

    def _start(self, world_size: int) -> None:
        w = self.layout.world_size
        if world_size < w:
            raise LayoutError(f"the layout has {w} ranks but the wrapper's world only {world_size} processes")
        if self.spare_nodes is not None and (world_size - w) // self.gpus_per_node != self.spare_nodes:
            raise LayoutError(
                f"spare_nodes={self.spare_nodes} but the wrapper's world of {world_size} processes leaves "
                f"{world_size - w} standbys ({(world_size - w) // self.gpus_per_node} nodes of {self.gpus_per_node})"
            )
        self._ranks = list(range(w)) + [None] * (world_size - w)
        self._initial = list(range(world_size))

    def _relayout(self, ranks: list[Optional[int]], terminated: set[int]) -> list[Optional[int]]:
        """The plan for ``terminated`` (wrapper ranks); each wrapper rank's
        rank in the new layout."""
        w = self.layout.world_size
        by_rank = {r: wr for wr, r in enumerate(ranks) if r is not None}
        failed = sorted(r for wr, r in enumerate(ranks) if wr in terminated and r is not None)
        spares = self._spares(ranks, terminated)
        nodes = len(spares) // self.gpus_per_node
        if not failed:
            return ranks  # only standbys terminated: the layout stays
        plan = relayout(self.layout, failed, policy=self.policy, gpus_per_node=self.gpus_per_node,
                        spare_nodes=nodes, min_dp=self.min_dp, global_batch=self.global_batch,
                        micro_batch=self.micro_batch, kinds=self.kinds)
        processes = [by_rank[n] for n in range(w)] + spares
        out: list[Optional[int]] = [None] * len(ranks)
        for p, new in enumerate(plan.new_rank):
            if new is not None:
                out[processes[p]] = new
        self.layout, self.plan = _python_layout(plan.layout), plan
        self.plans.append(plan)
        return out

    def _spares(self, ranks: list[Optional[int]], terminated: set[int]) -> list[int]:
        """The standbys that make whole nodes (every process of the node at
        the start alive and a standby), node by node in wrapper order."""
        g = self.gpus_per_node
        by_node: dict[int, list[int]] = {}
        for wr, r in enumerate(ranks):
            if r is None and wr not in terminated:
                by_node.setdefault(self._initial[wr] // g, []).append(wr)
        whole = [sorted(ws) for ws in by_node.values() if len(ws) == g]
        return [wr for ws in sorted(whole) for wr in ws]

    def __repr__(self) -> str:
        return f"LayoutRankAssignment({self.layout!r}, {self.policy!r}, gpus_per_node={self.gpus_per_node})"


def _python_layout(layout: Any) -> Layout:
    """``layout`` as a :class:`rank_layout.Layout` (a plan's layouts are the
    native class, which does not pickle)."""
    return layout if isinstance(layout, Layout) else Layout(**layout.config)


_SUBCLASSES: dict[tuple[type, type], type] = {}


def _subclass(cls: type, base: type) -> type:
    """``cls`` made a subclass of the package's ``RankAssignment`` (once)."""
    key = (cls, base)
    if key not in _SUBCLASSES:
        _SUBCLASSES[key] = type(cls.__name__, (cls, base), {"__module__": cls.__module__, "__doc__": cls.__doc__})
    return _SUBCLASSES[key]


__all__ = ["LayoutRankAssignment", "rank_assignment_base"]
