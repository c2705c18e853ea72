"""Megatron-Core's ``ProcessGroupCollection`` from rank-layout's groups:
:func:`pg_collection` (the training layout's, from a
:class:`~rank_layout.torch._megatron.state.ParallelState` or from the
installed ``parallel_state``) and :func:`build_inference_pg_collections_for_shards`
(one per inference shard, members-only).

The collection's class is the installed Megatron-Core's
(``megatron.core.process_groups_config.ProcessGroupCollection``); its
fields are read from that class with ``dataclasses.fields``, never listed
here alone, so a field a later release adds is refused by name rather
than left unset.
"""

from __future__ import annotations

import dataclasses
import operator
from datetime import timedelta
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np
import torch.distributed as dist

from rank_layout import InferenceShards, Layout, LayoutError
from rank_layout.torch._groups import GroupSpec, build_groups
from rank_layout.torch._megatron.release import _parallel_state, globals_of, installed_release
from rank_layout.torch._megatron.state import ParallelState

#: How each field of Megatron-Core's ``ProcessGroupCollection`` is read
#: from a :class:`ParallelState`, as ``ProcessGroupCollection.use_mpu_process_groups()``
#: reads it from ``parallel_state`` after ``initialize_model_parallel``
#: (0.16.1's fields and 0.19.2's; ``None``: Megatron-Core sets the field to
#: ``None``). A field of the installed class missing here is refused.
TRAINING_FIELDS: dict[str, Callable[[ParallelState], Any]] = {
    # The model-parallel groups.
    "tp": lambda s: s.get_tensor_model_parallel_group(check_initialized=False),
    "pp": lambda s: s.get_pipeline_model_parallel_group(check_initialized=False),
    "mp": lambda s: s.get_model_parallel_group(check_initialized=False),
    "embd": lambda s: s.get_embedding_group(check_initialized=False),
    "pos_embd": lambda s: s.get_position_embedding_group(check_initialized=False),
    "cp": lambda s: s.get_context_parallel_group(check_initialized=False),
    "tp_cp": lambda s: s.get_tensor_and_context_parallel_group(check_initialized=False),
    "hcp": lambda s: s.get_hierarchical_context_parallel_groups(check_initialized=False),
    # The expert groups.
    "ep": lambda s: s.get_expert_model_parallel_group(check_initialized=False),
    "expt_tp": lambda s: s.get_expert_tensor_parallel_group(check_initialized=False),
    "tp_ep": lambda s: s.get_expert_tensor_and_model_parallel_group(check_initialized=False),
    "tp_ep_pp": lambda s: s.get_expert_tensor_model_pipeline_parallel_group(check_initialized=False),
    "tp_ep_pp_with_egtp_remat": lambda s: s.get_expert_tensor_model_pipeline_parallel_group(
        check_initialized=False, with_egtp_remat=True
    ),
    "tp_dp_cp": lambda s: s.get_tensor_and_data_parallel_group(check_initialized=False, with_context_parallel=True),
    # The data-parallel groups: without the weight-shard axis, then with it
    # (0.19; under 0.16.1 ParallelState reads with_gtp_remat as nothing).
    "dp": lambda s: s.get_data_parallel_group(with_gtp_remat=False),
    "dp_cp": lambda s: s.get_data_parallel_group(with_context_parallel=True, with_gtp_remat=False),
    "dp_cp_gtp_remat": lambda s: s.get_data_parallel_group(with_context_parallel=True),
    "dp_cp_ag": lambda s: None,
    "gtp_remat": lambda s: s.get_gtp_weight_remat_group(check_initialized=False),
    "expt_gtp_remat": lambda s: s.get_expert_gtp_weight_remat_group(check_initialized=False),
    "expt_dp": lambda s: s.get_expert_data_parallel_group(check_initialized=False, with_gtp_remat=False),
    "expt_dp_gtp_remat": lambda s: s.get_expert_data_parallel_group(check_initialized=False),
    "expt_dp_ag": lambda s: None,
    # The distributed optimizer's instances.
    "intra_dp_cp": lambda s: s.get_data_parallel_group(
        with_context_parallel=True, with_gtp_remat=False, partial_data_parallel=True
    ),
    "intra_expt_dp": lambda s: s.get_expert_data_parallel_group(
        check_initialized=False, with_gtp_remat=False, partial_expert_data_parallel=True
    ),
    "inter_dist_opt": lambda s: s.get_inter_distributed_optimizer_instance_group(check_initialized=False),
    "intra_dist_opt": lambda s: s.get_intra_distributed_optimizer_instance_group(check_initialized=False),
}


def _collection_class() -> Any:
    """The installed Megatron-Core's ``ProcessGroupCollection``."""
    _parallel_state()  # the ImportError that says what to install
    from megatron.core.process_groups_config import ProcessGroupCollection

    return ProcessGroupCollection


def _field_names(cls: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _installed_state(version: str) -> ParallelState:
    """The state ``megatron.core.parallel_state`` holds now (whoever
    initialized it, if anyone), as a :class:`ParallelState` reading its
    globals."""
    module = _parallel_state()
    values = {name: getattr(module, name, first) for name, first in globals_of(version).items()}
    return ParallelState(None, dist.get_rank(), {}, values, version)  # type: ignore[arg-type]  # no layout: read only


def pg_collection(state: Optional[ParallelState] = None, required_pgs: Optional[Sequence[str]] = None) -> Any:
    """Megatron-Core's ``ProcessGroupCollection`` of the training layout:
    what ``ProcessGroupCollection.use_mpu_process_groups(required_pgs)``
    returns after Megatron-Core's ``initialize_model_parallel`` with the
    same arguments, field by field (each field the group with the same
    members, in the same order; ``None`` where Megatron-Core's is ``None``).

    ``state``: a :class:`ParallelState` (what :func:`initialize_model_parallel`
    returns, or :meth:`ParallelState.create`'s, which need not be
    installed); by default the state ``megatron.core.parallel_state``
    holds now. No group is created: the fields are the state's groups
    (families that share a process group give the same object to several
    fields, where Megatron-Core has one object per field).

    The fields are those of the installed release's class
    (``dataclasses.fields``; every one is set, ``None`` included, as
    Megatron-Core's), or ``required_pgs`` of them. 0.19.2's
    ``dp_cp_ag`` and ``expt_dp_ag`` are ``None``, as there; ``hcp`` is the
    list of hierarchical context-parallel groups or ``None``.

    >>> state = initialize_model_parallel(tensor_model_parallel_size=2)  # doctest: +SKIP
    >>> pgs = pg_collection(state)                                     # doctest: +SKIP
    >>> pgs.tp.size(), pgs.dp_cp is not None                           # doctest: +SKIP
    (2, True)

    Raises :class:`rank_layout.LayoutError` when the installed class has
    a field rank-layout does not know (named; a later release's), when
    ``required_pgs`` names a field the class does not have, when
    ``state`` follows another release than the installed one, and,
    naming the field and the rank, where Megatron-Core's getter would fail
    its assertion: on a rank outside 0.19's
    ``rank_offset``..``+local_world_size``, which has no data-parallel
    group, and without a state when ``parallel_state`` is not initialized
    (``ProcessGroupCollection.dp: rank 3: data parallel group is not
    initialized``). ``ImportError`` without megatron-core.
    """
    cls = _collection_class()
    version = installed_release()
    if state is None:
        state = _installed_state(version)
    elif state.version != version:
        raise LayoutError(
            f"the state follows megatron-core {state.version}'s parallel_state; the installed release is {version}"
        )
    names = _field_names(cls)
    unknown = [n for n in names if n not in TRAINING_FIELDS]
    if unknown:
        raise LayoutError(
            f"megatron-core {version}'s ProcessGroupCollection has fields rank-layout does not fill: "
            f"{', '.join(unknown)}"
        )
    if required_pgs is None:
        wanted = names
    else:
        wanted = list(dict.fromkeys(required_pgs))
        invalid = [n for n in wanted if n not in names]
        if invalid:
            raise LayoutError(f"megatron-core {version}'s ProcessGroupCollection has no field {', '.join(invalid)}")
    values = {}
    for name in wanted:
        try:
            values[name] = TRAINING_FIELDS[name](state)
        except AssertionError as e:
            raise LayoutError(f"ProcessGroupCollection.{name}: rank {state.rank}: {e}") from None
    return cls(**values)


# -- inference shards -------------------------------------------------------------

#: The field of Megatron-Core's ``ProcessGroupCollection`` holding each
#: kind of an inference shard (:attr:`rank_layout.InferenceShards.kinds`):
#: the fields 0.19.2's ``build_inference_pg_collection`` sets, and only
#: those (its other fields stay unset, read as ``None``).
SHARD_FIELDS: dict[str, str] = {
    "tp": "tp",
    "cp": "cp",
    "pp": "pp",
    "dp": "dp",
    "tp-pp": "mp",
    "tp-cp": "tp_cp",
    "dp-cp": "dp_cp",
    "tp-dp-cp": "tp_dp_cp",
    "ep": "ep",
    "etp": "expt_tp",
    "edp": "expt_dp",
    "etp-ep": "tp_ep",
    "etp-ep-pp": "tp_ep_pp",
    "embd": "embd",
    "pos-embd": "pos_embd",
}

_SHARD_KEYS = ("tp", "pp", "ep", "dp", "cp", "expt_tp")
_ROLES = ("prefill", "decode")


def _shard_text(index: int, shard: Any) -> str:
    """One shard given as Megatron-Core's ``InferenceShardSpec`` or a dict,
    as ``--inference-shards`` text (every size written, so no entry is
    empty)."""
    given = shard.to_dict() if hasattr(shard, "to_dict") else dict(shard)
    sizes: dict[str, Any] = {"tp": 1, "pp": 1, "ep": 1, "dp": 1, "cp": 1, **given}
    entries = []
    for key, value in sizes.items():
        if key == "role":
            if value is not None and value not in _ROLES:
                raise LayoutError(f"inference shard {index}: role {value!r} is not one of {', '.join(_ROLES)} or None")
            if value is not None:
                entries.append(f"role={value}")
        elif key not in _SHARD_KEYS:
            raise LayoutError(f"inference shard {index}: unknown key {key!r} (keys: {', '.join(_SHARD_KEYS)}, role)")
        elif not (key == "expt_tp" and value is None):
            try:
                entries.append(f"{key}={operator.index(value)}")
            except TypeError:
                raise LayoutError(f"inference shard {index}: {key}={value!r} is not an int") from None
    return ",".join(entries)


def _inference_shards(
    total_world_size: int, shards: Union[str, InferenceShards, Sequence[Any]], use_tp_pp_dp_mapping: bool
) -> InferenceShards:
    """``shards`` as :class:`rank_layout.InferenceShards` over ``total_world_size`` ranks."""
    if isinstance(shards, InferenceShards):
        if (shards.world_size, shards.use_tp_pp_dp_mapping) != (total_world_size, bool(use_tp_pp_dp_mapping)):
            raise LayoutError(
                f"the shards are {shards.world_size} ranks with use_tp_pp_dp_mapping={shards.use_tp_pp_dp_mapping}; "
                f"asked for {total_world_size} ranks with use_tp_pp_dp_mapping={bool(use_tp_pp_dp_mapping)}"
            )
        return shards
    if not isinstance(shards, str):
        shards = ";".join(_shard_text(i, s) for i, s in enumerate(shards))
    return InferenceShards(shards, total_world_size, use_tp_pp_dp_mapping=use_tp_pp_dp_mapping)


def _shard_spec(shards: InferenceShards, kind: str) -> GroupSpec:
    """The groups of ``kind`` in every shard as one family: each rank's
    members are its own shard's group (ascending, as ``new_group`` sorts
    Megatron-Core's); all the groups, for sharing, when they have one size."""

    def mine(rank: Optional[int]) -> Optional[list[int]]:
        if rank is None:
            return None
        layout = shards.shard_of(rank).layout
        split = layout.split(rank, kind)
        return None if split is None else layout.group(kind, split.color)

    def partition() -> Optional[np.ndarray]:
        arrays = [shard.layout.groups_array(kind) for shard in shards.shards]
        if len({a.shape[1] for a in arrays}) != 1:
            return None  # groups of several sizes: a family of its own
        return np.concatenate(arrays)

    # A partition of None is no sharing (build_groups reads it so).
    return GroupSpec(
        kind, mine=mine, partition=partition, sort=True,  # type: ignore[arg-type]
        desc=f"INFERENCE_SHARD_{SHARD_FIELDS[kind].upper()}",
    )


def build_inference_pg_collections_for_shards(
    total_world_size: int,
    shards: Union[str, InferenceShards, Sequence[Any]],
    use_tp_pp_dp_mapping: bool = False,
    *,
    share: bool = True,
    timeout: Optional[timedelta] = None,
) -> list[Any]:
    """Megatron-Core 0.19.2's ``build_inference_pg_collections_for_shards``
    (``megatron.core.inference.shards``), with this rank's groups only:
    one ``InferenceShard`` (Megatron-Core's class: ``spec``,
    ``rank_offset``, ``world_size``, ``pg_collection``) per shard, in
    order; ``pg_collection`` is a ``ProcessGroupCollection`` in this
    rank's own shard and ``None`` in the others, as there. Its fields
    (:data:`SHARD_FIELDS`: ``tp``, ``cp``, ``pp``, ``dp``, ``mp``,
    ``tp_cp``, ``dp_cp``, ``tp_dp_cp``, ``ep``, ``expt_tp``, ``expt_dp``,
    ``tp_ep``, ``tp_ep_pp``, ``embd``, ``pos_embd``) hold groups with the
    members Megatron-Core's have, in ascending order; ``embd`` is ``None``
    off a pipeline's first and last stages, ``pos_embd`` off its first;
    the class's other fields are left unset, as Megatron-Core leaves them.

    ``shards``: the ``--inference-shards`` text, a
    :class:`rank_layout.InferenceShards` (of ``total_world_size`` ranks
    and the same ``use_tp_pp_dp_mapping``), or Megatron-Core's
    ``InferenceShardSpec`` objects or dicts of their keys; read by
    rank-layout's parser, which refuses what Megatron-Core's refuses.

    Every rank of the default group calls it, with the same arguments.
    Each rank makes one members-only ``new_group`` per kind (15, fewer
    where kinds have the same groups in every shard and ``share``, as
    ``tp`` and ``tp_cp`` since ``cp`` is 1): its own shard's group, or a
    group of itself dropped at once. Megatron-Core calls ``new_group`` on
    every rank for every group of every shard. Ranks past
    ``total_world_size`` are in no shard. ``timeout`` goes to ``new_group``.

    >>> shards = build_inference_pg_collections_for_shards(          # doctest: +SKIP
    ...     16, "tp=2,pp=2,dp=2,role=prefill+tp=4,pp=2,role=decode")
    >>> [s.pg_collection is not None for s in shards]                # doctest: +SKIP
    [True, False]

    Raises :class:`rank_layout.LayoutError`, on every rank and before any
    group is made, for a spec rank-layout refuses (naming the shard), for
    ``total_world_size`` past torch's world, and when a field of
    :data:`SHARD_FIELDS` is not in the installed class. ``ImportError``
    under a megatron-core without inference shards (0.16.1).
    """
    cls = _collection_class()
    try:
        from megatron.core.inference.shards import InferenceShard
        from megatron.core.inference.shards_spec import InferenceShardSpec
    except ImportError as e:
        raise ImportError(
            f"megatron-core {installed_release()} has no inference shards (megatron.core.inference.shards); "
            "megatron-core 0.19.2 has them"
        ) from e
    missing = [f for f in SHARD_FIELDS.values() if f not in _field_names(cls)]
    if missing:
        raise LayoutError(f"megatron-core's ProcessGroupCollection has no field {', '.join(missing)}")
    if not dist.is_initialized():
        raise LayoutError("torch.distributed is not initialized (init_process_group first)")
    parsed = _inference_shards(total_world_size, shards, use_tp_pp_dp_mapping)
    span = Layout(world_size=parsed.world_size)  # the shards' ranks, checked against the world
    specs = [_shard_spec(parsed, kind) for kind in parsed.kinds]
    built = build_groups(span, specs, timeout=timeout, share=share)
    rank = dist.get_rank()
    own = parsed.shard_of(rank).index if rank < parsed.world_size else None
    out = []
    for shard in parsed.shards:
        collection = None
        if shard.index == own:
            collection = cls(**{SHARD_FIELDS[kind]: (built[kind] or [None])[0] for kind in parsed.kinds})
        spec = InferenceShardSpec(
            tp=shard.tp, pp=shard.pp, ep=shard.ep, dp=shard.dp, expt_tp=shard.expt_tp, role=shard.role
        )
        out.append(InferenceShard(spec=spec, rank_offset=shard.rank_offset, world_size=shard.world_size,
                                  pg_collection=collection))
    return out
