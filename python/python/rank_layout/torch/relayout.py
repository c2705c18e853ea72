"""Applies a re-layout plan (:func:`rank_layout.relayout`) to live
``torch.distributed`` process groups: keeps what the plan keeps, shrinks
what it shrinks, creates what it says is new, on the surviving processes
only.

>>> from rank_layout import relayout
>>> from rank_layout.torch import new_groups
>>> from rank_layout.torch.relayout import apply_relayout
>>> groups = new_groups(layout, ["tp", "dp", "pp"])           # doctest: +SKIP
>>> # ... a process dies; every survivor learns which (see below) ...
>>> plan = relayout(layout, failed, policy="drop-replica", kinds=list(groups))  # doctest: +SKIP
>>> applied = apply_relayout(plan, groups)                    # doctest: +SKIP
>>> applied.groups["dp"], applied.how["tp"]                   # doctest: +SKIP
(<ProcessGroup ...>, 'kept')

Who runs what
-------------
torch cannot renumber a live world: a process keeps its global rank for
the life of the default group. So the plan's processes are torch global
ranks: process ``p`` (the old layout's rank ``p``, or a spare) is torch
global rank ``p + old_layout.rank_offset``, and the spares are the torch
processes right after the old layout's last rank (launched with the job,
in no group of the old layout, e.g. idle in it). The new layout's rank
``n`` runs on torch global rank ``plan.process(n) + rank_offset``
(:func:`torch_rank`). The torch world must hold every process of the
plan (old ranks and spares), else :class:`rank_layout.LayoutError`.

Which processes failed is an input: in a real job the launcher or
nvidia-resiliency-ext's in-process restart says which ranks died
(``RankAssignmentCtx.terminated_ranks``; see
:mod:`rank_layout.resiliency`); every survivor then computes the same plan
with no communication, and can compare :attr:`rank_layout.Relayout.hash`
through the store before going on.

What happens to each kind
-------------------------
For every kind of ``groups`` (each must be one the plan classified: pass
``kinds=list(groups)`` to :func:`rank_layout.relayout`), this process's
group of the new layout is

- **kept**: the same ``ProcessGroup`` object, untouched (the plan keeps a
  group only with the same members in the same order), where its members
  agree that none of them has an unfinished operation on it (below);
  otherwise a new group of the same members in the same order (how
  ``"rebuilt"``, the kind listed in ``unsettled``);
- **shrunk**: ``torch.distributed.shrink_group(old_group, exclude)``, the
  plan's ``exclude`` being positions in the old group, where the old
  group's backend supports shrinking (torch 2.15: NCCL 2.27 and later;
  gloo does not, ``supports_shrinking`` is ``False``) and ``shrink`` is
  ``"auto"``; otherwise (or with ``shrink="never"``) a new group of the
  same members in the same order (how ``"rebuilt"``).
  ``shrink_group`` keeps the survivors' order, which is the new group's
  order in the plan; the default group is never shrunk (torch would
  destroy every other group), and neither is a group another kind keeps;
- **new**: ``torch.distributed.new_group(members,
  use_local_synchronization=True)``, members the torch ranks of the new
  group in the plan's key order: only the members take part, so the dead
  do not have to;
- **none**: this process has no rank in the new layout (alive but idle,
  or left out), or no group of the kind: ``None``.

A kind whose groups overlap (an encoder's fan-out ``pp`` or ``embd``,
where :func:`rank_layout.torch.new_groups` gives a process a list of
groups when it is in several) is made as ``new_groups`` makes it, one
members-only call per split round of the new layout: each of this
process's new groups is the old group object with the same members in
the same order where there is one, else a new group (a shrunk one is
made anew, not shrunk). Its ``groups`` entry is as ``new_groups`` gives
it (one group, a list by color, or ``None``), its ``how`` ``"kept"``
(every one kept), ``"new"`` (some made) or ``"none"`` (no group).

Old groups that no kind keeps or shrank are ended (``destroy_old=True``,
the default): destroyed on gloo, which is local and closes the group's
connections, so that an operation a peer left on it fails at once instead
of holding the group's worker thread until its timeout; aborted on NCCL
(``_abort_process_group``: a destroy finalizes the communicator, which
waits for operations in flight that will never finish).

Keeping a group after a death mid-collective
--------------------------------------------
A process that dies while its peers are inside collectives leaves more
than its own groups unfinished: the survivors around it run on as far as
their work completes, so a survivor may have issued operations on a group
the plan keeps that its partner in that group never will (the partner was
stuck on the dead process's group). Such a group carries an operation one
member is still inside; the next collective of its other members would
match it: a wrong sum, or "Connection closed by peer" when the first
member's operation times out. So a group the plan keeps stays only where
its members agree that none of them has an unfinished operation on it:

- each member reports the count of operations it issued on the group,
  torch's sequence number of the group
  (``ProcessGroup._get_sequence_number_for_group``: on gloo every
  collective and point-to-point operation, counted when issued; on NCCL
  the collectives), or ``"unfinished"`` where the caller names the group
  in ``unfinished=``, or ``"unknown"`` on a backend without the count;
- the reports go through the store every process already has (the
  default group's, ``_get_default_store()``), under keys of the plan's
  hash, the group's name (alike on every member, unique to the group) and
  how many times this process checked the group before (alike on every
  member, as every member checks it in the same calls, so every check has
  keys of its own); every member writes its reports first, then reads its
  partners', each wait bounded by ``timeout`` (default: the store's):
  past it, or when the store cannot be reached,
  :class:`rank_layout.LayoutError` naming the kind and ranks;
- the group is kept when every report is the same count; then every
  operation one member issued on it, every other member issued too, and
  as they are all alive, they all complete. Otherwise it is made anew
  (members only, same order). Every member reads the same reports, so
  they all decide alike, with one count-advancing call per kind as
  before.

The count cannot see two members each leaving an operation the other
never matches (on gloo, two point-to-point sends each without its
receive), nor, on NCCL, point-to-point operations at all (torch counts
them apart and does not expose that count): a process that stopped
waiting for work on a group, saw work on it fail, or may have left a
point-to-point operation unmatched, names the group in ``unfinished=``;
``keep="never"`` makes every group anew. A survivor blocked in a wait
without a bound (``work.wait()``, a collective without ``async_op``)
reaches the call only when that wait ends, at the old group's timeout; its
partners wait for its reports at most ``timeout``, then fail with the
:class:`rank_layout.LayoutError`: wait on work with a bound
(``work.wait(timeout)``, or ``is_completed()``) after a failure. An
overlapping kind's old groups are kept on the same terms.
:func:`settled_groups` is the check alone, for a caller that reuses old
groups itself.

The Work objects a survivor stopped waiting on are its own to drop: on a
group that is ended (above), they fail at once (gloo, all members
destroying it) or are aborted (NCCL); on an old group kept by the caller
(``destroy_old=False``) a gloo operation still waiting for a partner
holds one of the group's worker threads until the group's timeout, and
dropping the group's last reference waits for it; ``work.wait(timeout)``
is bounded. On NCCL a survivor that waited on such work has its current
stream wait for it, and a kept group's next collective queues behind
that stream until the old group is aborted (``destroy_old=True`` does
it; with ``destroy_old=False``, abort those groups before using the kept
ones).

Order of members
----------------
torch sorts a new group's ranks by global rank unless ``new_group`` is
given ``sort_ranks=False``; torch 2.15 has it, and apply_relayout passes
it, so a new or rebuilt group's ranks (``get_process_group_ranks``) are the
plan's members in key order, and this process's group rank is its key
(:meth:`rank_layout.Relayout.split`). On a torch without ``sort_ranks`` the
members are sorted first: the group rank is then the position among the
sorted torch ranks, which differs from the key where the plan renumbers
(``shift-ranks``, ``fill-gaps``, ``spare``).

Why it cannot hang, and what it costs
-------------------------------------
torch names a members-only group after its ranks and the count of groups
the calling process created before, so members only meet if their counts
agree. Every process calling apply_relayout makes exactly one
count-advancing call per kind (per split round of the new layout for a
kind whose groups overlap), in ``groups``' order, whatever happens to
its group: ``shrink_group`` or ``new_group`` of its new group, or, when
the group is kept or the process has none, a group of itself alone,
destroyed at once (as :func:`rank_layout.torch.new_groups` does). So the
precondition is torch's own: before the call, every surviving process has
created the same number of groups (true after ``new_groups`` on every
process, spares included). No call involves a process outside the new
group, and nothing is sent on the default group (the agreement on kept
groups goes through its store). Per process: O(kinds)
calls and O(its group sizes) work.

Every wait is bounded: a new group's rendezvous and its collectives, and
the members' reports on a kept group, wait at most ``timeout`` (default:
torch's, 30 minutes on gloo, 10 on NCCL; the store's for the reports);
a member that never comes (dead, or told it has no place) ends the call
with :class:`rank_layout.LayoutError` naming the kind and the ranks
(tested: survivors told the wrong rank died). Refusals (a plan kind
missing, a world too small, a bad argument) come on every process, before
any call; ``groups`` that do not match the plan's old layout are refused
on the processes that see it, before any call (their partners then wait
out ``timeout``).

One plan per world: after a plan, rank ``n`` of the new layout runs on
torch rank ``plan.process(n)``, not ``n`` (every policy moves some
ranks), and a second plan made from the new layout would number its
processes by the new layout's ranks, not by torch ranks; such a job
restarts its world (nvidia-resiliency-ext's in-process restart does) and
builds its groups anew with :func:`rank_layout.torch.new_groups`.

NCCL (not run here: the tests use gloo on CPU): a default group with a
bound device makes torch create new groups with ``ncclCommSplit`` of the
whole world, where the dead rank would be needed; apply_relayout asks for
``lazy_init`` NCCL options on new groups of an NCCL backend so that each
group's communicator is made by its members alone. A shrunk group is
``shrink_group(exclude, group=old, shrink_flags=SHRINK_ABORT)``:
``ncclCommShrink`` with ``NCCL_SHRINK_ABORT``, which first ends the
parent's operations in flight (after a death some never finish; the
default flag needs none in flight), then makes the child of the members
left, a communicator of its own with nothing in flight. torch 2.15's
``shrink_group`` then destroys the parent itself (``destroy_process_group``,
a ``ncclCommFinalize``, with nothing left to wait for once the flag has
ended the parent's operations); the other old groups are aborted, not
destroyed (above). A kept group stays on the members' agreement (above):
its collectives are counted (``seqCollective_``), its point-to-point
operations are not, so pipeline traffic left unfinished is named in
``unfinished=``, or ``keep="never"``.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any, Optional

import torch
import torch.distributed as dist

from rank_layout import LayoutError, Relayout
from rank_layout.torch._groups import _KEEP_ORDER, GroupSpec, RankMap, _local

#: Values of ``apply_relayout(shrink=...)``.
SHRINK = ("auto", "never")
#: Values of ``apply_relayout(keep=...)``.
KEEP = ("agreed", "never")

# How many times this process checked each group for :func:`_settle`:
# alike on every member, so each check has keys of its own.
_CHECKS: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

# shrink_group's flag that ends the parent's operations in flight first
# (NCCL_SHRINK_ABORT), where torch has it.
_SHRINK_ABORT: dict[str, Any] = (
    {"shrink_flags": dist.distributed_c10d.SHRINK_ABORT} if hasattr(dist.distributed_c10d, "SHRINK_ABORT") else {}
)


@dataclasses.dataclass
class AppliedRelayout:
    """What :func:`apply_relayout` did on this process.

    ``groups``: kind -> this process's group of the new layout (or
    ``None``; a list where the process is in several groups of a kind whose
    groups overlap); ``how``: kind -> ``"kept"``, ``"shrunk"`` (by
    ``shrink_group``), ``"rebuilt"`` (shrunk or kept in the plan, created
    anew), ``"new"`` or ``"none"``; ``rank``: this process's rank in the new
    layout (``None`` when it has none); ``destroyed``: old groups destroyed
    (aborted, on NCCL); ``unsettled``: the kinds with a group the plan
    keeps whose members did not agree that none of them had an unfinished
    operation on it, so it was created anew (see "Keeping a group after a
    death mid-collective" in :mod:`rank_layout.torch.relayout`)."""

    plan: Relayout
    groups: dict[str, Optional[Any]]
    how: dict[str, str]
    rank: Optional[int]
    destroyed: int = 0
    unsettled: list[str] = dataclasses.field(default_factory=list)

    def kinds(self, how: str) -> list[str]:
        """The kinds whose group fared ``how``."""
        return [k for k, h in self.how.items() if h == how]


def torch_rank(plan: Relayout, rank: int) -> int:
    """The torch global rank that runs ``rank`` of the plan's new layout:
    ``plan.process(rank) + plan.old_layout.rank_offset``."""
    return plan.process(rank) + plan.old_layout.rank_offset


def apply_relayout(
    plan: Relayout,
    groups: Mapping[str, Any],
    *,
    backend: Any = None,
    timeout: Optional[timedelta] = None,
    shrink: str = "auto",
    pg_options: Any = None,
    destroy_old: bool = True,
    keep: str = "agreed",
    unfinished: Iterable[Any] = (),
) -> AppliedRelayout:
    """Applies ``plan`` to ``groups`` (what :func:`rank_layout.torch.new_groups`
    returned on this process for the plan's old layout: kind -> this
    process's group or ``None``) and returns an :class:`AppliedRelayout`.

    Every surviving process of the torch world calls it with the same plan
    (spares too, with the ``None`` groups ``new_groups`` gave them);
    :mod:`rank_layout.torch.relayout` says what is kept, shrunk or
    created, and why it cannot hang. ``backend`` and ``pg_options`` (one
    value, or a dict by kind) go to the groups created (default: the
    default group's backend); ``timeout`` bounds every rendezvous and
    collective of them, and the members' agreement on a kept group;
    ``shrink`` is ``"auto"`` (``shrink_group`` where the backend supports
    it) or ``"never"`` (always a new group). ``keep`` is ``"agreed"`` (a
    group the plan keeps stays only where its members agree, through the
    store, that none of them has an unfinished operation on it; else it is
    created anew) or ``"never"`` (every group is created anew); ``unfinished``
    names old groups on which this process stopped waiting for work, saw
    work fail, or may have left a point-to-point operation unmatched: they
    are never kept.
    """
    _check_args(plan, groups, shrink, timeout, backend, pg_options, keep)
    unfinished_ids = _ids(unfinished)
    old, new = plan.old_layout, plan.layout
    off, new_off = old.rank_offset, new.rank_offset
    me = dist.get_rank()
    processes = plan.new_rank
    p = me - off
    rank = processes[p] if 0 <= p < len(processes) else None
    # Every shrink plan and new-group list of the plan's kinds, looked up
    # by the new group's number.
    changes = {k: plan.changes(k) for k in groups}
    # Decide first (no group made yet), so that a refusal comes before any group.
    decisions: list[tuple[str, str, Any, Any, list]] = []
    for kind, old_pg in groups.items():
        if plan.old_layout.split_rounds(kind) > 1 or plan.layout.split_rounds(kind) > 1:
            # Overlapping groups (an encoder's fan-out): by split rounds.
            olds = list(old_pg) if isinstance(old_pg, (list, tuple)) else [] if old_pg is None else [old_pg]
            decisions.append((kind, "rounds", olds, _reusable(plan, kind, olds, rank), []))
        else:
            decisions.append(_decide(plan, kind, old_pg, changes[kind], rank, new_off))
    # The groups the plan keeps stay only where their members agree that
    # none has an unfinished operation on them (one exchange through the
    # store, before any group is made).
    candidates = [(d[0], d[2]) for d in decisions if d[1] == "kept"]
    candidates += [(d[0], pg) for d in decisions if d[1] == "rounds" for pg in d[3]]
    labels = {id(pg): f"kind {kind}" for kind, pg in candidates}
    settled = _settle(plan, [(labels[id(pg)], pg) for _, pg in candidates], timeout, keep, unfinished_ids)
    unsettled = [kind for kind, pg in candidates if id(pg) not in settled]
    decisions = [(k, "rebuild", pg, m, x) if a == "kept" and id(pg) not in settled else (k, a, pg, m, x)
                 for k, a, pg, m, x in decisions]
    kept_pgs = {id(d[2]) for d in decisions if d[1] == "kept"}
    out: dict[str, Any] = {}
    how: dict[str, str] = {}
    # Kinds that shared one old group (new_groups' share=True decides that
    # over the whole layout, so alike on every member) and shrink it alike
    # get one shrunk group: shrink_group destroys the old one.
    shrunk: dict[tuple, Any] = {}
    for kind, action, old_pg, members, exclude in decisions:
        kb = _by_kind(backend, kind)
        opts = _by_kind(pg_options, kind)
        if action == "rounds":
            reuse = [pg for pg in members if id(pg) in settled]
            out[kind], how[kind] = _rounds(plan, kind, old_pg, reuse, rank, me, kb, opts, timeout)
            continue
        if action in ("kept", "none"):
            _advance(me, kb, timeout, kind)
            out[kind] = old_pg if action == "kept" else None
            how[kind] = action
            continue
        if action == "shrink":
            default = dist.distributed_c10d._get_default_group()
            key = (id(old_pg), tuple(exclude))
            if key in shrunk:
                _advance(me, kb, timeout, kind)
                out[kind], how[kind] = shrunk[key], "shrunk"
            elif shrink == "auto" and old_pg is not default and id(old_pg) not in kept_pgs and _can_shrink(old_pg):
                pg = _call(kind, members, lambda: dist.shrink_group(list(exclude), group=old_pg, **_SHRINK_ABORT))
                out[kind], how[kind] = pg, "shrunk"
                shrunk[key] = pg
            else:
                out[kind], how[kind] = _new(kind, members, kb, opts, timeout), "rebuilt"
        elif action == "rebuild":
            out[kind], how[kind] = _new(kind, members, kb, opts, timeout), "rebuilt"
        else:
            out[kind], how[kind] = _new(kind, members, kb, opts, timeout), "new"
    destroyed = 0
    if destroy_old:
        destroyed = _destroy_unused(groups, out, how)
    unsettled = sorted(set(unsettled), key=list(groups).index)
    return AppliedRelayout(plan=plan, groups=out, how=how, rank=rank, destroyed=destroyed, unsettled=unsettled)


def settled_groups(
    plan: Relayout, pgs: Iterable[Any], *, timeout: Optional[timedelta] = None, unfinished: Iterable[Any] = ()
) -> list[Any]:
    """Of ``pgs`` (old process groups this process would keep after
    ``plan``), the ones whose members agree that none of them has an
    unfinished operation on it: every member reports the same count of
    operations issued on the group (torch's sequence number of the group)
    and none names it in ``unfinished``. The members exchange their
    reports through the default group's store (no collective), once per
    call; every member of every group of ``pgs`` must call with that group
    among its ``pgs`` (and check it as often as the others), and they all
    get the same answer.
    Waits at most ``timeout`` (default: the store's) for the members'
    reports, else :class:`rank_layout.LayoutError` naming the group.
    :func:`apply_relayout` uses it for the groups the plan keeps; a caller
    that reuses old groups itself (as
    :func:`rank_layout.torch.megatron.relayout_model_parallel` does) can
    use it to keep only the safe ones."""
    if not isinstance(plan, Relayout):
        raise LayoutError(f"settled_groups takes a rank_layout.Relayout, got {type(plan).__name__}")
    if timeout is not None and not isinstance(timeout, timedelta):
        raise LayoutError(f"timeout must be a datetime.timedelta, got {timeout!r}")
    pgs = list(pgs)
    settled = _settle(plan, [(f"group {pg.group_name}", pg) for pg in pgs], timeout, "agreed", _ids(unfinished))
    return [pg for pg in pgs if id(pg) in settled]


def _check_args(plan: Any, groups: Any, shrink: Any, timeout: Any, backend: Any, pg_options: Any, keep: Any) -> None:
    """Every refusal, alike on every process, before any call."""
    if not isinstance(plan, Relayout):
        raise LayoutError(f"apply_relayout takes a rank_layout.Relayout, got {type(plan).__name__}")
    if not isinstance(groups, Mapping):
        raise LayoutError(f"groups must be a dict of kind -> process group (new_groups' answer), got {type(groups).__name__}")
    if shrink not in SHRINK:
        raise LayoutError(f"shrink must be one of {', '.join(SHRINK)}, got {shrink!r}")
    if keep not in KEEP:
        raise LayoutError(f"keep must be one of {', '.join(KEEP)}, got {keep!r}")
    if timeout is not None and not isinstance(timeout, timedelta):
        raise LayoutError(f"timeout must be a datetime.timedelta, got {timeout!r}")
    classified = plan.kinds
    missing = [str(k) for k in groups if k not in classified]
    if missing:
        raise LayoutError(
            f"the plan does not classify kind(s) {', '.join(missing)} (it has {', '.join(classified)}): "
            "pass kinds=list(groups) to rank_layout.relayout"
        )
    several = [str(k) for k, g in groups.items() if isinstance(g, (list, tuple)) and plan.old_layout.split_rounds(k) == 1]
    if several:
        raise LayoutError(
            f"kind(s) {', '.join(several)}: groups gives a list, but the kind's groups do not overlap "
            "(new_groups gives one group or None): pass new_groups' answer"
        )
    for name, per_kind in (("backend", backend), ("pg_options", pg_options)):
        if isinstance(per_kind, Mapping):
            unknown = [str(k) for k in per_kind if k not in groups]
            if unknown:
                raise LayoutError(f"{name} names kinds not in groups: {', '.join(unknown)}")
    world = dist.get_world_size()
    end = plan.old_layout.rank_offset + len(plan.new_rank)
    if end > world:
        raise LayoutError(
            f"the plan's processes (old ranks and spares) are torch ranks {plan.old_layout.rank_offset}..{end}, "
            f"beyond torch.distributed's world of {world} ranks"
        )


def _decide(
    plan: Relayout, kind: str, old_pg: Any, ch: dict, rank: Optional[int], new_off: int
) -> tuple[str, str, Any, list[int], list[int]]:
    """(kind, action, old group, torch members in the new group's order,
    positions to exclude) for this process: action "kept", "shrink",
    "new" or "none"."""
    if rank is None:
        return kind, "none", old_pg, [], []
    split = plan.layout.split(rank + new_off, kind)
    if split is None:
        return kind, "none", old_pg, [], []
    color = split[0]
    members = [torch_rank(plan, m - new_off) for m in plan.layout.group(kind, color)]
    if color in set(ch["new"]) or color in set(ch["alone"]):
        # New, or alone (one process: a group of itself, made by itself).
        return kind, "new", old_pg, members, []
    s = next((s for s in ch["shrunk"] if s["new"] == color), None)
    if s is not None:
        if old_pg is None:
            raise LayoutError(f"kind {kind}: the plan shrinks this process's old group {s['old']}, but groups has none")
        return kind, "shrink", old_pg, members, s["exclude"]
    # Kept: the old group, the same members in the same order.
    if old_pg is None or dist.get_process_group_ranks(old_pg) != members:
        have = None if old_pg is None else dist.get_process_group_ranks(old_pg)
        raise LayoutError(
            f"kind {kind}: the plan keeps this process's group (torch ranks {members}), "
            f"but groups has {have}: groups are not new_groups' for the plan's old layout"
        )
    return kind, "kept", old_pg, members, []


def _rounds(
    plan: Relayout, kind: str, old_pgs: list, settled: list, rank: Optional[int], me: int,
    backend: Any, pg_options: Any, timeout: Optional[timedelta],
) -> tuple[Any, str]:
    """A kind whose groups overlap: this process's groups of the new
    layout, one members-only call per split round (as new_groups makes
    them), each an old group of ``settled`` (those of :func:`_reusable`
    whose members agreed) of the same members in the same order where
    there is one (kept), else a new group (a shrunk one is made anew).
    ``how`` is ``"none"`` (no group), ``"kept"`` (every one kept) or
    ``"new"`` (some made)."""
    new, off = plan.layout, plan.layout.rank_offset
    # Logical ranks of the new layout -> torch ranks (those below its
    # offset are not the plan's and map to themselves).
    rmap = RankMap(
        [*range(off), *(torch_rank(plan, n) for n in range(new.world_size))], dist.get_world_size(), partial=True
    )
    reuse = {tuple(dist.get_process_group_ranks(pg)): pg for pg in settled}
    options = _kwargs(backend, pg_options, timeout, "").get("pg_options")
    spec = GroupSpec(label=kind, kind=kind, backend=backend, pg_options=options, desc=f"relayout/{kind}")
    logical = None if rank is None else rank + off
    try:
        pgs = _local(new, spec, new.split_rounds(kind), logical, me, timeout, None, rmap, reuse)
    except Exception as e:
        raise LayoutError(f"kind {kind}: making this process's groups of the new layout failed: {e}") from e
    kept = {id(pg) for pg in old_pgs}
    if not pgs:
        return None, "none"
    how = "kept" if all(id(pg) in kept for pg in pgs) else "new"
    # As new_groups gives them: one group, or a list of several.
    return (pgs[0] if len(pgs) == 1 else pgs), how


def _by_kind(value: Any, kind: str) -> Any:
    return value.get(kind) if isinstance(value, Mapping) else value


def _reusable(plan: Relayout, kind: str, old_pgs: list, rank: Optional[int]) -> list:
    """A kind whose groups overlap: this process's old groups whose
    members (torch ranks, in order) are those of one of its new groups, in
    any split round (the groups :func:`_rounds` would keep)."""
    if rank is None or not old_pgs:
        return []
    new, off = plan.layout, plan.layout.rank_offset
    mine = set()
    for r in range(new.split_rounds(kind)):
        split = new.split(rank + off, kind, round=r)
        if split is not None:
            mine.add(tuple(torch_rank(plan, m - off) for m in new.group(kind, split[0])))
    return [pg for pg in old_pgs if tuple(dist.get_process_group_ranks(pg)) in mine]


def _ids(unfinished: Any) -> set[int]:
    """``unfinished`` (process groups) as a set of object ids."""
    if isinstance(unfinished, (str, bytes, Mapping)) or not isinstance(unfinished, Iterable):
        raise LayoutError(f"unfinished must be a list of process groups, got {type(unfinished).__name__}")
    return {id(pg) for pg in unfinished if pg is not None}


def _settle(
    plan: Relayout, candidates: list[tuple[str, Any]], timeout: Optional[timedelta], keep: str, unfinished: set[int]
) -> set[int]:
    """The ids of the candidate groups ((label for errors, group) pairs)
    that stay:
    none with ``keep="never"``; else those whose members all report the
    same count of operations issued on the group and none names it
    unfinished. Each member writes its report under a key of the plan,
    the group (its name, which torch gives alike on every member and to no
    other group) and the number of this process's earlier checks of the
    group (alike on every member, which checks it in the same calls, so
    each check has keys of its own: a member never reads a report of an
    earlier check); then reads every member's. Every member reads the same
    reports and decides alike."""
    if keep == "never" or not candidates:
        return set()
    store = dist.distributed_c10d._get_default_store()
    # Store.timeout exists at run time; torch's stubs do not list it.
    wait = timeout if timeout is not None else store.timeout  # type: ignore[attr-defined]
    me = dist.get_rank()
    unique = list({id(pg): (label, pg) for label, pg in candidates}.values())
    prefix = {}
    for _, pg in unique:
        check = _CHECKS.get(pg, 0)
        _CHECKS[pg] = check + 1
        prefix[id(pg)] = f"rank_layout/relayout/keep/{plan.hash:016x}/{pg.group_name}/{check}/"
    # Every report first, then every read: no member waits for another's
    # report before writing its own.
    for label, pg in unique:
        _store(label, pg, wait, store.set, prefix[id(pg)] + str(me), _report(pg, unfinished))
    settled = set()
    for label, pg in unique:
        keys = [prefix[id(pg)] + str(r) for r in dist.get_process_group_ranks(pg)]
        _store(label, pg, wait, store.wait, keys, wait)
        reports = {v.decode() for v in _store(label, pg, wait, store.multi_get, keys)}
        if len(reports) == 1 and next(iter(reports)).isdigit():
            settled.add(id(pg))
    return settled


def _store(label: str, pg: Any, wait: timedelta, call: Any, *args: Any) -> Any:
    """``call(*args)``, a store call of the members' agreement on ``pg``;
    its failure (a member's report missing after ``wait``, or the store out
    of reach) as a LayoutError naming ``label`` and the group's torch ranks."""
    try:
        return call(*args)
    except Exception as e:
        raise LayoutError(
            f"{label}: the members of the group the plan keeps (torch ranks {dist.get_process_group_ranks(pg)}) "
            f"did not all say within {wait} how many operations they issued on it: {e}"
        ) from e


def _report(pg: Any, unfinished: set[int]) -> str:
    """This member's report on ``pg``: ``"unfinished"``, the count of
    operations issued on it (torch's sequence number of the group: on
    gloo every collective and point-to-point operation; on NCCL the
    collectives), or ``"unknown"`` where the backend has none."""
    if id(pg) in unfinished:
        return "unfinished"
    try:
        return str(int(pg._get_sequence_number_for_group()))
    except Exception:
        return "unknown"


def _can_shrink(pg: Any) -> bool:
    """Whether ``pg``'s backend implements ``shrink_group`` (looked up as
    torch 2.15's shrink_group does); ``False`` on a torch without it."""
    if not hasattr(dist, "shrink_group"):
        return False
    try:
        device = getattr(pg, "bound_device_id", None)
        if device is None:
            accel = getattr(torch, "accelerator", None)
            device = (accel.current_accelerator() if accel is not None else None) or torch.device("cpu")
        try:
            impl = pg._get_backend(device)
        except RuntimeError:
            impl = pg._get_backend(torch.device("cpu"))
        return bool(getattr(impl, "supports_shrinking", False))
    except Exception:
        return False


def _call(kind: str, members: list[int], f: Any) -> Any:
    try:
        return f()
    except Exception as e:
        raise LayoutError(f"kind {kind}: making the group of torch ranks {members} failed: {e}") from e


def _new(kind: str, members: list[int], backend: Any, pg_options: Any, timeout: Optional[timedelta]) -> Any:
    """A members-only group of ``members``, in that order."""
    if not _KEEP_ORDER:
        members = sorted(members)
    kwargs = _kwargs(backend, pg_options, timeout, f"relayout/{kind}")
    return _call(kind, members, lambda: dist.new_group(members, **kwargs))


def _advance(me: int, backend: Any, timeout: Optional[timedelta], kind: str) -> None:
    """The one call of a kind whose group needs none: a group of this
    process alone, destroyed at once, so that torch's count of groups moves
    on as on the processes that do create one."""
    kwargs = _kwargs(backend, None, timeout, f"relayout/{kind}/none")
    pg = _call(kind, [me], lambda: dist.new_group([me], **kwargs))
    dist.destroy_process_group(pg)


def _kwargs(backend: Any, pg_options: Any, timeout: Optional[timedelta], desc: str) -> dict[str, Any]:
    """new_group's arguments: members only, in the order given."""
    kwargs: dict[str, Any] = dict(timeout=timeout, use_local_synchronization=True, group_desc=desc, **_KEEP_ORDER)
    if backend is not None:
        kwargs["backend"] = backend
    name = backend if backend is not None else dist.get_backend()
    if str(name).lower() == "nccl":
        # No ncclCommSplit of the whole world, which would need the dead.
        if pg_options is None:
            pg_options = dist.ProcessGroupNCCL.Options()
        if hasattr(pg_options, "lazy_init"):
            pg_options.lazy_init = True
    if pg_options is not None:
        kwargs["pg_options"] = pg_options
    return kwargs


def _destroy_unused(groups: Mapping[str, Any], out: dict[str, Any], how: dict[str, str]) -> int:
    """Ends the old groups no kind uses any more (shrink_group destroyed
    the shrunk ones), never the default group: aborted on NCCL (a destroy
    would wait for operations that will never finish), destroyed elsewhere
    (on gloo that closes the group's connections, so a peer's operation
    left on it fails at once). How many."""
    default = dist.distributed_c10d._get_default_group()
    used = {id(pg) for pg in _flat(out.values())}
    shrunk_from = {id(groups[k]) for k, h in how.items() if h == "shrunk"}
    seen: set[int] = set()
    n = 0
    for pg in _flat(groups.values()):
        if pg is None or pg is default or id(pg) in used or id(pg) in shrunk_from or id(pg) in seen:
            continue
        seen.add(id(pg))
        if _is_nccl(pg) and hasattr(dist.distributed_c10d, "_abort_process_group"):
            dist.distributed_c10d._abort_process_group(pg)
        else:
            dist.destroy_process_group(pg)
        n += 1
    return n


def _is_nccl(pg: Any) -> bool:
    """Whether ``pg``'s backend is NCCL (``False`` where torch cannot say)."""
    try:
        return "nccl" in str(dist.get_backend(pg)).lower()
    except Exception:
        return False


def _flat(values: Any) -> list:
    """Process groups, each kind's one or list (overlapping kinds)."""
    out: list[Any] = []
    for v in values:
        out.extend(v if isinstance(v, (list, tuple)) else [v])
    return [pg for pg in out if pg is not None]


__all__ = ["apply_relayout", "AppliedRelayout", "settled_groups", "torch_rank", "SHRINK", "KEEP"]
