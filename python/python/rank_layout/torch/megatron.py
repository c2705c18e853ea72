"""Megatron-Core's process groups, built by rank-layout: a drop-in for
``megatron.core.parallel_state.initialize_model_parallel``.

>>> from rank_layout.torch import megatron as rl_megatron
>>> from megatron.core import parallel_state                   # doctest: +SKIP
>>> rl_megatron.initialize_model_parallel(                     # doctest: +SKIP
...     tensor_model_parallel_size=8, pipeline_model_parallel_size=8,
...     context_parallel_size=2, expert_model_parallel_size=8)
>>> parallel_state.get_data_parallel_group()                   # doctest: +SKIP
<torch.distributed.distributed_c10d.ProcessGroup object at ...>

:func:`initialize_model_parallel` takes the arguments of the installed
Megatron-Core's (0.16.1 or 0.19.2, ``MEGATRON_CORE_VERSIONS``; ``SIGNATURES``
holds each release's), builds the layout Megatron-Core would
(``order``, folded experts with ``expert_tensor_parallel_size`` defaulting
to ``tensor_model_parallel_size``, hierarchical context parallel,
distributed-optimizer instances, 0.19's weight-shard axes
``gtp_remat_size`` and ``expert_gtp_remat_size`` with its
``rank_offset`` and ``local_world_size``, the whole ``torch.distributed``
world or the part 0.19's ``rank_offset``/``local_world_size`` name),
creates only this rank's groups (one members-only ``new_group`` per group
family, as :func:`rank_layout.torch.new_groups`; Megatron-Core creates
every group of the world on every rank), and sets every global of
``megatron.core.parallel_state`` that its getters read, so that Megatron-Core
code runs unchanged: groups, global rank lists, gloo groups, embedding
ranks, pipeline ranks (Megatron's next and previous pipeline ranks wrap
around, rank-layout's ``pipeline_next`` does not: the getters are
Megatron's, reading ``_PIPELINE_GLOBAL_RANKS``, so they answer as after
Megatron-Core's own initialization). ``parallel_state.destroy_model_parallel()``
works after it; :func:`destroy_model_parallel` here also clears what
Megatron-Core's leaves behind.

:meth:`ParallelState.create` builds the same groups without touching
Megatron-Core (which need not be installed), as an object with the getters
of ``parallel_state`` as methods.

:func:`pg_collection` gives Megatron-Core's ``ProcessGroupCollection`` of
a state (or of the installed ``parallel_state``), every field of the
installed release's class as ``ProcessGroupCollection.use_mpu_process_groups()``
fills it, from the groups already made.
:func:`build_inference_pg_collections_for_shards` is Megatron-Core
0.19.2's, for ``--inference-shards``: one collection per shard, with
this rank's groups only (one members-only ``new_group`` per kind, where
Megatron-Core makes every group of every shard on every rank).

Every group has its members in ascending order (Megatron-Core's groups are
made by ``new_group``, which sorts); the ``*_GLOBAL_RANKS`` lists are in
Megatron-Core's order. With ``rank_map=`` (a placed job: Megatron-Core's
rank ``r`` runs on torch rank ``rank_map[r]``), ascending by Megatron-Core's
(logical) rank, as torch ranks: every getter answers at torch rank
``rank_map[r]`` as Megatron-Core's at rank ``r``, its global ranks mapped. Group families with the same members on every rank
share one process group (``share=True``, see :mod:`rank_layout.torch`); a
gloo group never shares with a group of the default backend, and
``create_all_gather_group``'s group never shares.

Arguments it cannot honour (``use_sharp``, ``sharp_enabled_group``), and
every argument Megatron-Core would refuse, raise :class:`rank_layout.LayoutError`
naming them, on every rank, before any group exists; so does a layout that
does not fit the world, or an initialized ``parallel_state``.
``python/README.md`` lists every choice.
"""

# This module is the public face; the implementation is in
# rank_layout.torch._megatron, one concept a module: release (each
# release's signature and globals, which one is installed), nccl
# (Megatron-Core's NCCL communicator configuration), plan (_Plan: the
# checks, the layout, the group families), state (ParallelState, how it
# is built from a plan, and the calls that install it) and collection
# (Megatron-Core's ProcessGroupCollection, of a state or of each inference
# shard).
from rank_layout.torch._megatron.collection import (
    SHARD_FIELDS,
    TRAINING_FIELDS,
    build_inference_pg_collections_for_shards,
    pg_collection,
)
from rank_layout.torch._megatron.plan import _Plan  # noqa: F401 (the tests plan any rank of a world with it)
from rank_layout.torch._megatron.release import (  # noqa: F401 (_bind: the tests bind arguments as the calls do)
    GLOBALS,
    MEGATRON_CORE_VERSION,
    MEGATRON_CORE_VERSIONS,
    SIGNATURES,
    _bind,
    globals_of,
    installed_release,
)
from rank_layout.torch._megatron.state import (
    ParallelState,
    destroy_model_parallel,
    initialize_model_parallel,
    relayout_model_parallel,
)

__all__ = [
    "initialize_model_parallel",
    "relayout_model_parallel",
    "destroy_model_parallel",
    "ParallelState",
    "pg_collection",
    "TRAINING_FIELDS",
    "build_inference_pg_collections_for_shards",
    "SHARD_FIELDS",
    "MEGATRON_CORE_VERSION",
    "MEGATRON_CORE_VERSIONS",
    "SIGNATURES",
    "GLOBALS",
    "globals_of",
    "installed_release",
]
