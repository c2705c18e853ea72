""":func:`new_groups`: the process groups of a :class:`rank_layout.Layout`
by kind, or of a :class:`rank_layout.Modules` (through
:func:`rank_layout.torch.new_module_groups`). :mod:`rank_layout.torch`'s
documentation says how they are built."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Optional, Sequence, Union

import torch.distributed as dist

from rank_layout import Layout, LayoutError, Modules, placement_rank_map
from rank_layout.torch._groups import GroupSpec, build_groups
from rank_layout.torch.modules import DEFAULT_DIMS, ModuleGroups, new_module_groups

#: What :func:`new_groups` returns for a kind: this rank's group, its groups
#: (by color) where it is in several, or ``None``.
ProcessGroups = Union["dist.ProcessGroup", list["dist.ProcessGroup"], None]


def new_groups(
    layout: Union[Layout, Modules],
    kinds: Optional[Sequence[str]] = None,
    *,
    method: str = "local",
    timeout: Optional[timedelta] = None,
    pg_options: Any = None,
    backend: Any = None,
    share: bool = True,
    rank_map: Optional[Sequence[int]] = None,
) -> Union[dict[str, ProcessGroups], ModuleGroups]:
    """Builds the process groups of ``kinds`` (default: every kind of the
    layout) and returns, by kind, this rank's group, a list of its groups
    (by color) where it is in several, or ``None`` where it is in none.
    Given a :class:`rank_layout.Modules`, builds its modules' groups of the
    dim sets ``kinds`` and every bridge's groups, and returns
    :func:`new_module_groups`'s :class:`ModuleGroups`.

    Every rank of the default process group calls it, with the same
    arguments. ``method`` is ``"local"`` (the default: O(kinds) calls per
    rank) or ``"global"`` (every rank creates every group, as Megatron-LM
    does); :mod:`rank_layout.torch`'s documentation says what each costs. ``timeout``
    goes to ``torch.distributed.new_group``; ``backend`` and
    ``pg_options`` too, each one value for every kind or a dict by kind.
    With ``share`` (the default), kinds whose groups are the same get one
    process group (:mod:`rank_layout.torch`'s documentation says when).

    ``rank_map`` (a placement, e.g. from :func:`rank_layout.placement_rank_map`):
    ``rank_map[r]`` is the ``torch.distributed`` rank that runs the
    layout's rank ``r``, a permutation of the world. The layout's ranks are
    then logical: this process is the logical rank ``r`` with
    ``rank_map[r] == dist.get_rank()``, and each group is created with its
    members' torch ranks, ``[rank_map[m] for m in members]``, in the
    layout's order, so a rank's group rank is still its ``key``. Where
    torch's ``new_group`` has no ``sort_ranks`` it sorts the members by
    torch rank, and group ranks then follow torch ranks (a warning says
    so); :mod:`rank_layout.torch`'s documentation has more.

    >>> new_groups(layout, ["dp", "dp-cp"], backend="gloo")    # doctest: +SKIP
    {'dp': <ProcessGroup ...>, 'dp-cp': <ProcessGroup ...>}

    Raises :class:`rank_layout.LayoutError`, on every rank and before any
    group is made, for an unknown kind or method, a backend or options
    dict naming a kind not asked for, a layout whose ranks do not fit
    the default group, or a rank map that is not a permutation of it.
    """
    if isinstance(layout, Modules):
        # Modules and their bridges: `kinds` are the modules' dim sets.
        if method != "local":
            raise LayoutError(f'method {method!r}: modules build their groups with method "local" only')
        return new_module_groups(
            layout,
            DEFAULT_DIMS if kinds is None else kinds,
            backend=backend,
            pg_options=pg_options,
            timeout=timeout,
            rank_map=rank_map,
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
    built = build_groups(layout, specs, method=method, timeout=timeout, share=share, rank_map=rank_map)
    return {kind: _one_or_list(built[kind]) for kind in asked}


def _by_kind(value: Any, kind: str) -> Any:
    return value.get(kind) if isinstance(value, Mapping) else value


def _one_or_list(pgs: list) -> ProcessGroups:
    return pgs[0] if len(pgs) == 1 else (pgs or None)


def gather_rank_map(
    placement: Union[dict[str, Any], Sequence[str]],
    host: Optional[str] = None,
    local_rank: Optional[int] = None,
    gpus_per_node: Optional[int] = None,
) -> list[int]:
    """The rank map of ``placement`` for the running job, from every
    process's host and local rank: an ``all_gather_object`` over the
    default group (every rank calls it), then
    :func:`rank_layout.placement_rank_map`. ``host`` defaults to
    ``socket.gethostname()`` (spelled as in the placement's host table),
    ``local_rank`` to ``$LOCAL_RANK`` (torchrun's; Open MPI's
    ``$OMPI_COMM_WORLD_LOCAL_RANK``, Slurm's ``$SLURM_LOCALID`` otherwise).

    For a job started by a launcher that ordered hosts itself (torchrun's
    c10d rendezvous sorts them by address): the groups of
    ``new_groups(layout, rank_map=gather_rank_map(placement))`` are then
    those of the placement, with no second launch.
    """
    if host is None:
        host = socket.gethostname()
    if local_rank is None:
        for name in ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"):
            if name in os.environ:
                local_rank = int(os.environ[name])
                break
        else:
            raise LayoutError(
                "no local rank: pass local_rank (none of LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID is set)"
            )
    got: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(got, (host, int(local_rank)))
    return placement_rank_map(placement, [tuple(x) for x in got], gpus_per_node)
