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

Placed jobs: rank maps
----------------------
``rank_map=`` (in :func:`new_groups`, :func:`new_module_groups` and the
Megatron-Core drop-in) runs the layout on a job whose launcher chose its
own rank order: ``rank_map[r]`` is the ``torch.distributed`` rank of the
process that runs the layout's (logical) rank ``r``, a permutation of the
default group. :func:`gather_rank_map` builds it from a placement
(:func:`rank_layout.place`) and every process's host and local rank;
:func:`rank_layout.placement_rank_map` without torch. Each group is then
created with its members' torch ranks, in the layout's order, and every
rank still makes the same calls in the same order (the map is checked,
on every rank, before any group). torch's ``new_group`` sorts members by
torch rank unless told ``sort_ranks=False``, which rank-layout passes
where torch has it (2.15 does): group ranks are then what they are
without a map (the key). On a torch without it, group ranks follow torch
ranks and rank-layout warns. A whole-world kind is the default group only
under the identity map.

Multi-module models
-------------------
:func:`new_module_groups` (:mod:`rank_layout.torch.modules`) builds the
groups of a :class:`rank_layout.Modules` the same way: each module's groups
of the dim sets asked for, and every edge's bridge groups by kind.

After a failure
---------------
:func:`apply_relayout` (:mod:`rank_layout.torch.relayout`) applies a
:func:`rank_layout.relayout` plan to the groups :func:`new_groups` made:
kept groups stay the same objects, shrunk ones go through
``torch.distributed.shrink_group`` where the backend has it, new ones are
created by their members alone.

Moving tensors between layouts
------------------------------
:func:`apply_reshard` (:mod:`rank_layout.torch.reshard`) runs a
:func:`rank_layout.reshard` plan on this process's tensors: its sends and
receives in one ``batch_isend_irecv``, in the plan's order, its local
copies in memory.

Megatron-Core
-------------
:mod:`rank_layout.torch.megatron` builds Megatron-Core's groups this way and
installs them into ``megatron.core.parallel_state``
(``initialize_model_parallel``), or into a ``ParallelState`` object with
the same getters.

torch is imported by this package only: ``import rank_layout`` never needs it.
"""

# This package only re-exports. The implementation: _groups (GroupSpec,
# build_groups: how families of groups are built), _new_groups
# (new_groups), modules (new_module_groups), device_mesh, torchtitan,
# relayout, reshard (apply_reshard), and megatron (imported when asked
# for); each imports the others' names from where they are defined, never
# from this package. _groups comes first: it raises the ImportError saying
# torch is needed.
from rank_layout.torch._groups import METHODS, GroupSpec, build_groups, check_world  # noqa: F401
from rank_layout.torch._new_groups import ProcessGroups, gather_rank_map, new_groups  # noqa: F401
from rank_layout.torch.modules import ModuleGroups, new_module_groups
from rank_layout.torch.device_mesh import device_mesh  # the function shadows its module's name
from rank_layout.torch.torchtitan import torchtitan_meshes
from rank_layout.torch.relayout import AppliedRelayout, apply_relayout
from rank_layout.torch.reshard import apply_reshard

# GroupSpec, build_groups, check_world and ProcessGroups stay importable
# from here, as before, but are internal (rank_layout.torch.megatron's
# building blocks), so not in __all__.
__all__ = [
    "new_groups",
    "gather_rank_map",
    "METHODS",
    "new_module_groups",
    "ModuleGroups",
    "device_mesh",
    "torchtitan_meshes",
    "apply_relayout",
    "AppliedRelayout",
    "apply_reshard",
]
