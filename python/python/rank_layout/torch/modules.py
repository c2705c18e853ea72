"""Real ``torch.distributed`` process groups of a :class:`rank_layout.Modules`:
each module's groups of the dim sets asked for, and every edge's bridge
groups (Megatron-Core MIMO's communicators).

>>> import torch.distributed as dist
>>> from rank_layout import Mesh, Modules
>>> from rank_layout.torch import new_module_groups
>>> modules = Modules([("vision", Mesh([("tp", 2), ("dp", 2)])),
...                    ("llm", Mesh([("tp", 2), ("dp", 2)]))], [("vision", "llm")])
>>> groups = new_module_groups(modules)                       # doctest: +SKIP
>>> groups.group("tp")                                      # doctest: +SKIP
>>> groups.bridge("vision", "llm", "dst_broadcast")          # doctest: +SKIP

Built as :func:`rank_layout.torch.new_groups` builds a layout's groups
(``method="local"``): every rank of the default group calls
:func:`new_module_groups` with the same arguments, and makes exactly one
members-only ``new_group(members, use_local_synchronization=True)`` per
(dim set, round of :attr:`Modules.rounds`) and then per (edge, bridge kind
of :meth:`Modules.bridge_kinds`), in the same order, each rank passing its
own group (:meth:`Modules.members`, :meth:`Modules.bridge_members`: the
members in key order, so a rank's group rank is its key). A rank in no
group of a call creates the group of itself alone and drops it at once.
The groups of one call are disjoint (a round holds every module's groups
on separate spans, one module's when colocated; a bridge kind's groups
never share a rank), so a call waits only for its own members: it cannot
hang, given torch's precondition that every rank has created the same
number of process groups before.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Optional, Sequence, Union

import torch.distributed as dist

from rank_layout import LayoutError, Modules
from rank_layout.torch._groups import GroupSpec, RankMap, _new_group

__all__ = ["ModuleGroups", "new_module_groups"]

#: The dim sets :func:`new_module_groups` builds by default.
DEFAULT_DIMS = ("tp", "cp", "dp", "pp")


class ModuleGroups:
    """This rank's process groups of a :class:`Modules`, from
    :func:`new_module_groups`.

    - ``groups[dims][module]``: this rank's group of the dim set ``dims``
      (as given, ``"tp"`` or ``"tp-dp"``) in module ``module``, ``None``
      where the rank is not in that module;
    - ``bridges[(src, dst)][kind]``: this rank's group of the bridge kind
      ``kind`` on the edge ``src -> dst``, ``None`` where it is in none;
    - :meth:`group` and :meth:`bridge` ask for one of them.
    """

    def __init__(
        self,
        modules: Modules,
        rank: Optional[int],
        groups: dict[str, dict[str, Any]],
        bridges: dict[tuple[str, str], dict[str, Any]],
    ) -> None:
        self.modules = modules
        #: This rank in the modules (``None`` when outside them; the logical
        #: rank under a rank map).
        self.rank = rank
        self.groups = groups
        self.bridges = bridges

    def group(self, dims: Union[str, Sequence[str]], module: Optional[str] = None) -> Any:
        """This rank's group of ``dims`` in ``module`` (default: the first
        module the rank belongs to), or ``None``."""
        spec = _spec(dims)
        if spec not in self.groups:
            raise LayoutError(f"no groups of {spec!r} were built (built: {', '.join(self.groups)})")
        if module is None:
            if self.rank is None:
                return None
            module = self.modules.module_of(self.rank)
        if module not in self.groups[spec]:
            raise LayoutError(f"unknown module {module!r} (known: {', '.join(self.modules.names)})")
        return self.groups[spec][module]

    def bridge(self, src: str, dst: str, kind: str) -> Any:
        """This rank's group of ``kind`` on the edge ``src -> dst``, or
        ``None``."""
        if (src, dst) not in self.bridges:
            known = ", ".join(f"{s} -> {d}" for s, d in self.bridges)
            raise LayoutError(f"unknown edge {src} -> {dst} (known: {known})")
        by_kind = self.bridges[(src, dst)]
        if kind not in by_kind:
            raise LayoutError(f"edge {src} -> {dst} builds no {kind} groups (it builds {', '.join(by_kind)})")
        return by_kind[kind]

    def __repr__(self) -> str:
        return f"ModuleGroups(rank={self.rank}, dims={list(self.groups)}, edges={list(self.bridges)})"


def _spec(dims: Union[str, Sequence[str]]) -> str:
    if isinstance(dims, str):
        return dims
    try:
        names = list(dims)
    except TypeError:
        raise LayoutError(f"dims must be a str or a sequence of str, got {dims!r}") from None
    if not all(isinstance(n, str) for n in names):
        raise LayoutError(f"dims must be a str or a sequence of str, got {dims!r}")
    return "-".join(names)


def new_module_groups(
    modules: Modules,
    dims: Sequence[Union[str, Sequence[str]]] = DEFAULT_DIMS,
    *,
    backend: Any = None,
    pg_options: Any = None,
    timeout: Optional[timedelta] = None,
    rank_map: Optional[Sequence[int]] = None,
) -> ModuleGroups:
    """Builds the process groups of ``modules``: for each dim set of
    ``dims`` (``"tp"``, ``"tp-dp"`` or a list of names; a dim a module
    lacks has size 1 there) each module's groups, then every edge's bridge
    groups of each kind it needs. Returns a :class:`ModuleGroups`.

    Every rank of the default process group calls it with the same
    arguments (ranks outside the modules get ``None`` everywhere).
    ``backend`` and ``pg_options`` are one value for every group, or a dict
    by dim set or bridge kind name (a name left out gets ``None``: the
    default group's backend). ``timeout`` goes to ``new_group``. The module's
    documentation says how the groups are made and why it cannot hang.
    ``rank_map`` (logical rank -> torch rank) places the modules' ranks
    as :func:`rank_layout.torch.new_groups` does.

    Raises :class:`rank_layout.LayoutError`, on every rank and before any
    group is made, for modules that do not fit the default group, a dim set
    no module has, or a backend or options dict naming something not built.
    """
    if not isinstance(modules, Modules):
        raise LayoutError(f"modules must be a rank_layout.Modules, got {type(modules).__name__}")
    specs = list(dict.fromkeys(_spec(d) for d in ([dims] if isinstance(dims, str) else dims)))
    world, me = dist.get_world_size(), dist.get_rank()
    first, end = modules.rank_offset, modules.rank_offset + modules.world_size
    if end > world:
        raise LayoutError(f"the modules' ranks {first}..{end} do not fit torch.distributed's world of {world} ranks")
    rmap = RankMap(rank_map, world)
    logical = me if rmap.logical is None else rmap.logical[me]
    rank = logical if first <= logical < end else None
    for spec in specs:  # a dim set no module has: refused by every rank alike
        modules.split(first, spec, 0)
    kinds = {e: modules.bridge_kinds(*e) for e in modules.edges}
    names_built = set(specs) | {k for ks in kinds.values() for k in ks}
    for label, per_name in (("backend", backend), ("pg_options", pg_options)):
        if isinstance(per_name, Mapping):
            unknown = [k for k in per_name if k not in names_built]
            if unknown:
                raise LayoutError(f"{label} names groups not built here: {', '.join(map(str, unknown))}")

    def make(members: Optional[list[int]], name: str, desc: str) -> Any:
        spec = GroupSpec(
            name,
            backend=backend.get(name) if isinstance(backend, Mapping) else backend,
            pg_options=pg_options.get(name) if isinstance(pg_options, Mapping) else pg_options,
        )
        pg = _new_group([me] if members is None else rmap.of(members), spec, desc, timeout, local=True)
        if members is None:
            dist.destroy_process_group(pg)
            return None
        return pg

    names = modules.names
    groups: dict[str, dict[str, Any]] = {}
    for spec in specs:
        groups[spec] = dict.fromkeys(names)
        for r in range(modules.rounds):
            members = None if rank is None else modules.members(rank, spec, r)
            pg = make(members, spec, f"modules/{spec}/round-{r}" + ("/none" if members is None else ""))
            if pg is not None:
                if modules.colocated:
                    module = names[r]
                else:
                    assert rank is not None  # members, so a group, only for a rank of the layout
                    module = modules.module_of(rank)
                groups[spec][module] = pg
    bridges: dict[tuple[str, str], dict[str, Any]] = {}
    for (src, dst), edge_kinds in kinds.items():
        bridges[(src, dst)] = {}
        for kind in edge_kinds:
            members = None if rank is None else modules.bridge_members(rank, src, dst, kind)
            desc = f"modules/{src}->{dst}/{kind}" + ("/none" if members is None else "")
            bridges[(src, dst)][kind] = make(members, kind, desc)
    return ModuleGroups(modules, rank, groups, bridges)
