"""This rank's parallel state: :class:`ParallelState` (the getters of
``megatron.core.parallel_state`` as methods), how it is built from a plan
(``_create``: the groups, then the globals' values, ``_values``), and the
public calls that build it into Megatron-Core's module or take it out:
:func:`initialize_model_parallel`, :func:`relayout_model_parallel`,
:func:`destroy_model_parallel`. What else is built from a state's groups
belongs here too.
"""

from __future__ import annotations

import os
import warnings
from datetime import timedelta
from typing import Any, Optional, Sequence

import torch.distributed as dist

from rank_layout import Layout, LayoutError
from rank_layout.torch._groups import GroupSpec, RankMap, build_groups
from rank_layout.torch._megatron.plan import _Plan
from rank_layout.torch._megatron.release import (
    MEGATRON_CORE_VERSION,
    _bind,
    _check_installable,
    _parallel_state,
    globals_of,
    installed_release,
)

class ParallelState:
    """Megatron-Core's parallel state of this rank, as an object: the
    getters of ``megatron.core.parallel_state`` as methods, answering as
    Megatron-Core's do after its ``initialize_model_parallel``.

    >>> state = ParallelState.create(tensor_model_parallel_size=2)  # doctest: +SKIP
    >>> state.get_tensor_model_parallel_rank(), state.get_data_parallel_world_size()  # doctest: +SKIP
    (1, 4)

    ``state.layout`` is the :class:`rank_layout.Layout`; ``state.groups``
    this rank's process group of each family (Megatron-Core's group
    descriptions: ``"TENSOR_MODEL_PARALLEL_GROUP"``, ...; ``None`` where it
    is in none); ``state.values`` the globals of ``parallel_state``, by
    name. Not offered: the ``set_*`` overrides of ``parallel_state``, and
    its memory buffers (``get_global_memory_buffer``), which are not
    groups.
    """

    def __init__(
        self,
        layout: Layout,
        rank: int,
        groups: dict[str, Any],
        values: dict[str, Any],
        version: str = MEGATRON_CORE_VERSION,
        rank_map: Optional[list[int]] = None,
    ) -> None:
        self.layout, self.rank, self.groups, self.values = layout, rank, groups, values
        #: The Megatron-Core release whose ``parallel_state`` this state is.
        self.version = version
        #: Logical rank -> torch rank (``None``: the identity); ``rank`` is
        #: the torch rank.
        self.rank_map = rank_map

    @classmethod
    def create(
        cls,
        *args: Any,
        share: bool = True,
        megatron_core: str = MEGATRON_CORE_VERSION,
        rank_map: Optional[Sequence[int]] = None,
        **kwargs: Any,
    ) -> ParallelState:
        """Builds this rank's groups, with the arguments of Megatron-Core
        ``megatron_core``'s ``initialize_model_parallel`` (``SIGNATURES``:
        the same names, order and defaults; 0.19.2 unless told), without
        touching Megatron-Core. Every rank calls it, with the same
        arguments. ``share``: families with the same members share one
        process group (see :mod:`rank_layout.torch`). ``rank_map``: as
        :func:`initialize_model_parallel`'s."""
        return _create(megatron_core, _bind(megatron_core, args, kwargs), share, rank_map=rank_map)

    # -- the state -----------------------------------------------------------

    def _get(self, name: str, message: str) -> Any:
        value = self.values.get(name)
        assert value is not None, message
        return value

    def is_initialized(self) -> bool:
        """Useful for code segments that may be accessed with or without mpu initialization"""
        return self.values["_DATA_PARALLEL_GROUP"] is not None

    def is_unitialized(self) -> bool:
        """Deprecated in Megatron-Core: ``not is_initialized()``."""
        warnings.warn("is_unitialized is deprecated, use is_initialized instead", DeprecationWarning)
        return not self.is_initialized()

    def model_parallel_is_initialized(self) -> bool:
        """Check if model- and data-parallel groups are initialized."""
        v = self.values
        return not (
            v["_TENSOR_MODEL_PARALLEL_GROUP"] is None
            or v["_PIPELINE_MODEL_PARALLEL_GROUP"] is None
            or v["_DATA_PARALLEL_GROUP"] is None
        )

    def _group(self, name: str, check_initialized: bool, message: str) -> Any:
        value = self.values.get(name)
        if check_initialized:
            assert value is not None, message
        return value

    def get_model_parallel_group(self, check_initialized: bool = True) -> Any:
        """Get the model-parallel group the caller rank belongs to."""
        return self._group("_MODEL_PARALLEL_GROUP", check_initialized, "model parallel group is not initialized")

    def get_tensor_model_parallel_group(self, check_initialized: bool = True) -> Any:
        """Get the tensor-model-parallel group the caller rank belongs to."""
        return self._group(
            "_TENSOR_MODEL_PARALLEL_GROUP", check_initialized, "tensor model parallel group is not initialized"
        )

    def get_pipeline_model_parallel_group(self, check_initialized: bool = True) -> Any:
        """Get the pipeline-model-parallel group the caller rank belongs to."""
        return self._group(
            "_PIPELINE_MODEL_PARALLEL_GROUP", check_initialized, "pipeline_model parallel group is not initialized"
        )

    def get_data_parallel_group(
        self,
        with_context_parallel: bool = False,
        with_gtp_remat: bool = True,
        partial_data_parallel: bool = False,
        *,
        independent_all_gather: bool = False,
    ) -> Any:
        """Get the data-parallel group the caller rank belongs to (0.19.2's
        arguments; 0.16.1's ``independent_all_gather`` by keyword; under
        0.16.1 ``with_gtp_remat`` changes nothing)."""
        if self.version == "0.16.1":
            if with_context_parallel:
                if partial_data_parallel:
                    return self._get(
                        "_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP",
                        "Intra partial data parallel group is not initialized",
                    )
                if independent_all_gather:
                    return self._get(
                        "_DATA_PARALLEL_GROUP_WITH_CP_AG",
                        "data parallel group with context parallel AG is not initialized",
                    )
                return self._get(
                    "_DATA_PARALLEL_GROUP_WITH_CP",
                    "data parallel group with context parallel combined is not initialized",
                )
            group = self._get("_DATA_PARALLEL_GROUP", "data parallel group is not initialized")
            assert partial_data_parallel == False, "Partial DP for Optimizer needs to include CP"  # noqa: E712
            return group
        assert with_context_parallel or not partial_data_parallel, "Partial DP for Optimizer needs to include CP"
        suffix, described = ("_WITH_GTP_REMAT", " (with GTP_remat)") if with_gtp_remat else ("", "")
        name, description = {
            (False, False): ("_DATA_PARALLEL_GROUP", "data parallel group"),
            (True, False): ("_DATA_PARALLEL_GROUP_WITH_CP", "data parallel group with CP"),
            (True, True): ("_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP", "intra partial data parallel group with CP"),
        }[with_context_parallel, partial_data_parallel]
        return self._get(name + suffix, f"{description}{described} is not initialized")

    def has_separate_all_gather_group(self) -> bool:
        """Check if a separate all-gather process group has been created."""
        return self.values.get("_DATA_PARALLEL_GROUP_WITH_CP_AG") is not None

    def get_data_parallel_group_gloo(self, with_context_parallel: bool = False, partial_data_parallel: bool = False) -> Any:
        """Get the Gloo data-parallel group the caller rank belongs to."""
        if with_context_parallel:
            if partial_data_parallel:
                return self._get(
                    "_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP_GLOO",
                    "Intra partial data parallel group is not initialized",
                )
            return self._get(
                "_DATA_PARALLEL_GROUP_WITH_CP_GLOO",
                "data parallel group-gloo with context parallel combined is not initialized",
            )
        group = self._get("_DATA_PARALLEL_GROUP_GLOO", "data parallel group-gloo is not initialized")
        assert partial_data_parallel == False, "Partial DP for Optimizer needs to include CP"  # noqa: E712
        return group

    def get_context_parallel_group(self, check_initialized: bool = True) -> Any:
        """Get the context-parallel group the caller rank belongs to."""
        return self._group("_CONTEXT_PARALLEL_GROUP", check_initialized, "context parallel group is not initialized")

    def get_context_parallel_global_ranks(self, check_initialized: bool = True) -> Any:
        """Get all global ranks of the context-parallel group that the caller rank belongs to."""
        return self._group(
            "_CONTEXT_PARALLEL_GLOBAL_RANKS", check_initialized, "context parallel group is not initialized"
        )

    def get_hierarchical_context_parallel_groups(self, check_initialized: bool = True) -> Any:
        """Get the inner ring of context parallel group the caller rank belongs to."""
        return self._group("_HIERARCHICAL_CONTEXT_PARALLEL_GROUPS", check_initialized, "")

    def get_hybrid_data_context_parallel_groups(self, check_initialized: bool = True, group_size: Optional[int] = None) -> Any:
        """Get the hybrid context parallel groups the caller rank belongs to."""
        if self.get_data_parallel_world_size(with_context_parallel=True) == group_size:
            return self._group("_DATA_PARALLEL_GROUP_WITH_CP", check_initialized, "")
        return self.values["_HYBRID_DP_CP_GROUPS"][group_size]

    def get_embedding_group(self, check_initialized: bool = True) -> Any:
        """Get the embedding group the caller rank belongs to."""
        return self._group("_EMBEDDING_GROUP", check_initialized, "embedding group is not initialized")

    def get_position_embedding_group(self, check_initialized: bool = True) -> Any:
        """Get the position embedding group the caller rank belongs to."""
        return self._group(
            "_POSITION_EMBEDDING_GROUP", check_initialized, "position embedding group is not initialized"
        )

    def get_amax_reduction_group(self, with_context_parallel: bool = False, tp_only_amax_red: bool = False) -> Any:
        """Get the FP8 amax reduction group the caller rank belongs to."""
        if with_context_parallel:
            name = "_TENSOR_AND_CONTEXT_PARALLEL_GROUP" if tp_only_amax_red else "_TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP"
        else:
            name = "_TENSOR_MODEL_PARALLEL_GROUP" if tp_only_amax_red else "_TENSOR_AND_DATA_PARALLEL_GROUP"
        return self._get(name, "FP8 amax reduction group is not initialized")

    def get_tensor_and_data_parallel_group(self, check_initialized: bool = True, with_context_parallel: bool = False) -> Any:
        """Get the tensor- and data-parallel group the caller rank belongs to."""
        name = "_TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP" if with_context_parallel else "_TENSOR_AND_DATA_PARALLEL_GROUP"
        return self._group(name, check_initialized, "tensor and data parallel group is not initialized")

    def get_tensor_and_context_parallel_group(self, check_initialized: bool = True) -> Any:
        """Get the tensor- and context-parallel group the caller rank belongs to."""
        return self._group(
            "_TENSOR_AND_CONTEXT_PARALLEL_GROUP", check_initialized, "tensor and context parallel group is not initialized"
        )

    def get_tensor_model_parallel_world_size(self) -> int:
        """Return world size for the tensor-model-parallel group."""
        return self.get_tensor_model_parallel_group().size()

    def get_pipeline_model_parallel_world_size(self) -> int:
        """Return world size for the pipeline-model-parallel group."""
        return self.get_pipeline_model_parallel_group().size()

    def get_tensor_model_parallel_rank(self) -> int:
        """Return caller's rank for the tensor-model-parallel group."""
        return self.get_tensor_model_parallel_group().rank()

    def get_pipeline_model_parallel_rank(self) -> int:
        """Return caller's rank for the pipeline-model-parallel group."""
        return dist.get_rank(group=self.get_pipeline_model_parallel_group())

    def is_pipeline_first_stage(self, ignore_virtual: bool = True, vp_stage: Optional[int] = None) -> bool:
        """Return True if in the first pipeline model-parallel stage, False otherwise."""
        if not ignore_virtual and self.get_virtual_pipeline_model_parallel_world_size() is not None:
            assert vp_stage is not None, "vp_stage must be passed if virtual pipeline is enabled"
            if vp_stage != 0:
                return False
        return self.get_pipeline_model_parallel_rank() == 0

    def is_pipeline_last_stage(self, ignore_virtual: bool = True, vp_stage: Optional[int] = None) -> bool:
        """Return True if in the last pipeline-model-parallel stage, False otherwise."""
        vp_size = None if ignore_virtual else self.get_virtual_pipeline_model_parallel_world_size()
        if vp_size is not None:
            assert vp_stage is not None, "vp_stage must be passed if virtual pipeline is enabled"
            if vp_stage != (vp_size - 1):
                return False
        return self.get_pipeline_model_parallel_rank() == (self.get_pipeline_model_parallel_world_size() - 1)

    def is_rank_in_embedding_group(self, ignore_virtual: bool = True, vp_stage: Optional[int] = None) -> bool:
        """Return true if current rank is in embedding group, False otherwise."""
        ranks = self.values["_EMBEDDING_GLOBAL_RANKS"]
        if ranks is None:
            return False
        if ignore_virtual:
            return self.rank in ranks
        if self.rank in ranks:
            if self.rank == ranks[0]:
                return self.is_pipeline_first_stage(ignore_virtual=False, vp_stage=vp_stage)
            if self.rank == ranks[-1]:
                return self.is_pipeline_last_stage(ignore_virtual=False, vp_stage=vp_stage)
            return True
        return False

    def is_rank_in_position_embedding_group(self) -> bool:
        """Return true if current rank is in position embedding group, False otherwise."""
        ranks = self.values["_POSITION_EMBEDDING_GLOBAL_RANKS"]
        return ranks is not None and self.rank in ranks

    def get_virtual_pipeline_model_parallel_rank(self) -> Optional[int]:
        """Return the virtual pipeline-parallel rank."""
        return self.values["_VIRTUAL_PIPELINE_MODEL_PARALLEL_RANK"]

    def get_virtual_pipeline_model_parallel_world_size(self) -> Optional[int]:
        """Return the virtual pipeline-parallel world size."""
        return self.values["_VIRTUAL_PIPELINE_MODEL_PARALLEL_WORLD_SIZE"]

    def get_tensor_model_parallel_src_rank(self) -> int:
        """The global rank of the first member of the tensor-model-parallel group."""
        return self._get("_TENSOR_MODEL_PARALLEL_GLOBAL_RANKS", "Tensor model parallel group is not initialized")[0]

    def get_model_parallel_src_rank(self) -> int:
        """The global rank of the first member of the model-parallel group."""
        return self._get("_MODEL_PARALLEL_GLOBAL_RANKS", "Model parallel group is not initialized")[0]

    def get_data_parallel_src_rank(self, with_context_parallel: bool = False) -> int:
        """The global rank of the first member of the data-parallel group."""
        if with_context_parallel:
            return self._get(
                "_DATA_PARALLEL_GLOBAL_RANKS_WITH_CP",
                "Data parallel group with context parallel combined is not initialized",
            )[0]
        return self._get("_DATA_PARALLEL_GLOBAL_RANKS", "Data parallel group is not initialized")[0]

    def get_pipeline_model_parallel_first_rank(self) -> int:
        """Return the global rank of the first stage in the current rank's pipeline."""
        return self._get("_PIPELINE_GLOBAL_RANKS", "Pipeline parallel group is not initialized")[0]

    def get_pipeline_model_parallel_last_rank(self) -> int:
        """Return the global rank of the last stage in the current rank's pipeline."""
        ranks = self._get("_PIPELINE_GLOBAL_RANKS", "Pipeline parallel group is not initialized")
        return ranks[self.get_pipeline_model_parallel_world_size() - 1]

    def get_pipeline_model_parallel_next_rank(self) -> int:
        """The global rank after the caller's in its pipeline; the first
        stage's after the last's (Megatron-Core's answer, which wraps)."""
        ranks = self._get("_PIPELINE_GLOBAL_RANKS", "Pipeline parallel group is not initialized")
        return ranks[(self.get_pipeline_model_parallel_rank() + 1) % self.get_pipeline_model_parallel_world_size()]

    def get_pipeline_model_parallel_prev_rank(self) -> int:
        """The global rank before the caller's in its pipeline; the last
        stage's before the first's (Megatron-Core's answer, which wraps)."""
        ranks = self._get("_PIPELINE_GLOBAL_RANKS", "Pipeline parallel group is not initialized")
        return ranks[(self.get_pipeline_model_parallel_rank() - 1) % self.get_pipeline_model_parallel_world_size()]

    def get_data_parallel_world_size(
        self, with_context_parallel: bool = False, with_gtp_remat: bool = True, partial_data_parallel: bool = False
    ) -> int:
        """Return world size for the data parallel group."""
        return self.get_data_parallel_group(
            with_context_parallel=with_context_parallel,
            with_gtp_remat=with_gtp_remat,
            partial_data_parallel=partial_data_parallel,
        ).size()

    def get_data_parallel_rank(
        self, with_context_parallel: bool = False, with_gtp_remat: bool = True, partial_data_parallel: bool = False
    ) -> int:
        """Return caller's rank in the data-parallel group."""
        return self.get_data_parallel_group(
            with_context_parallel=with_context_parallel,
            with_gtp_remat=with_gtp_remat,
            partial_data_parallel=partial_data_parallel,
        ).rank()

    def get_gtp_weight_remat_group(self, check_initialized: bool = True) -> Any:
        """Get the weight-shard (GTP_remat) group the caller rank belongs to (0.19)."""
        return self._group(
            "_GTP_WEIGHT_REMAT_GROUP", check_initialized, "generalized tensor parallel group is not initialized"
        )

    def get_gtp_weight_remat_world_size(self) -> int:
        """The size of the weight-shard group (0 without one)."""
        group = self.values.get("_GTP_WEIGHT_REMAT_GROUP")
        return group.size() if group is not None else 0

    def get_gtp_weight_remat_rank(self) -> int:
        """The caller's rank in its weight-shard group (0 without one)."""
        group = self.values.get("_GTP_WEIGHT_REMAT_GROUP")
        return group.rank() if group is not None else 0

    def get_gtp_weight_remat_global_ranks(self, check_initialized: bool = True) -> Any:
        """The global ranks of the caller's weight-shard group."""
        return self._group(
            "_GTP_WEIGHT_REMAT_GLOBAL_RANKS", check_initialized, "generalized tensor parallel group is not initialized"
        )

    def get_expert_gtp_weight_remat_group(self, check_initialized: bool = True) -> Any:
        """Get the expert weight-shard (EGTP) group the caller rank belongs to (0.19)."""
        return self._group(
            "_EXPERT_GTP_WEIGHT_REMAT_GROUP",
            check_initialized,
            "expert generalized tensor parallel group is not initialized",
        )

    def get_expert_gtp_weight_remat_world_size(self) -> int:
        """The size of the expert weight-shard group (0 without one)."""
        group = self.values.get("_EXPERT_GTP_WEIGHT_REMAT_GROUP")
        return group.size() if group is not None else 0

    def get_expert_gtp_weight_remat_rank(self) -> int:
        """The caller's rank in its expert weight-shard group (0 without one)."""
        group = self.values.get("_EXPERT_GTP_WEIGHT_REMAT_GROUP")
        return group.rank() if group is not None else 0

    def get_expert_gtp_weight_remat_global_ranks(self, check_initialized: bool = True) -> Any:
        """The global ranks of the caller's expert weight-shard group."""
        return self._group(
            "_EXPERT_GTP_WEIGHT_REMAT_GLOBAL_RANKS",
            check_initialized,
            "expert generalized tensor parallel group is not initialized",
        )

    def get_context_parallel_world_size(self) -> int:
        """Return world size for the context parallel group."""
        return self.get_context_parallel_group().size()

    def get_context_parallel_rank(self) -> int:
        """Return caller's rank in the context-parallel group."""
        return self.get_context_parallel_group().rank()

    def get_tensor_and_context_parallel_world_size(self) -> int:
        """Return world size for the tensor and context-parallel group."""
        return self.get_tensor_and_context_parallel_group().size()

    def get_tensor_and_context_parallel_rank(self) -> int:
        """Return caller's rank in the joint tensor-model-parallel and context-parallel group."""
        return self.get_tensor_and_context_parallel_group().rank()

    def get_expert_model_parallel_group(self, check_initialized: bool = True) -> Any:
        """Get the expert-model-parallel group the caller rank belongs to."""
        return self._group(
            "_EXPERT_MODEL_PARALLEL_GROUP", check_initialized, "expert model parallel group is not initialized"
        )

    def get_expert_model_parallel_src_rank(self) -> int:
        """The global rank of the first member of the expert-model-parallel group."""
        return self._get("_EXPERT_MODEL_PARALLEL_RANKS", "Expert model parallel group is not initialized")[0]

    def get_expert_model_parallel_world_size(self) -> int:
        """Return world size for the expert-model-parallel group."""
        return self.get_expert_model_parallel_group().size()

    def get_expert_model_parallel_rank(self) -> int:
        """Return caller's rank in the expert-model-parallel group."""
        return self.get_expert_model_parallel_group().rank()

    def get_expert_tensor_parallel_group(self, check_initialized: bool = True) -> Any:
        """Get the expert-tensor-parallel group the caller rank belongs to."""
        return self._group(
            "_EXPERT_TENSOR_PARALLEL_GROUP", check_initialized, "Expert tensor parallel group is not initialized"
        )

    def get_expert_tensor_parallel_world_size(self) -> Optional[int]:
        """Return world size for the expert tensor parallel group (``None``
        outside every group, as Megatron-Core's, which falls back on its
        unset tensor-parallel override)."""
        group = self.values.get("_EXPERT_TENSOR_PARALLEL_GROUP")
        return None if group is None else group.size()

    def get_expert_tensor_parallel_rank(self) -> Optional[int]:
        """Return my rank for the expert tensor parallel group (``None``
        outside every group)."""
        group = self.values.get("_EXPERT_TENSOR_PARALLEL_GROUP")
        return None if group is None else group.rank()

    def get_expert_tensor_and_model_parallel_group(self, check_initialized: bool = True) -> Any:
        """Get the expert-tensor and expert-model group the caller rank belongs to."""
        return self._group(
            "_EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP",
            check_initialized,
            "Expert tensor and model parallel group is not initialized",
        )

    def get_expert_tensor_and_model_parallel_world_size(self) -> int:
        """Return world size for the expert model parallel group times expert tensor parallel group."""
        return self.get_expert_tensor_and_model_parallel_group().size()

    def get_expert_tensor_and_model_parallel_rank(self) -> int:
        """Return caller's rank in the joint tensor- and expert-model-parallel group."""
        return self.get_expert_tensor_and_model_parallel_group().rank()

    def get_expert_tensor_model_pipeline_parallel_group(
        self, check_initialized: bool = True, with_egtp_remat: bool = False
    ) -> Any:
        """Get expert tensor-model-pipeline parallel group (``with_egtp_remat``:
        0.19's group spanning the expert weight-shard axis too)."""
        if with_egtp_remat:
            return self._group(
                "_EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP_WITH_EGTP",
                check_initialized,
                "Expert tensor-model-pipeline parallel group with EGTP is not initialized",
            )
        return self._group(
            "_EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP",
            check_initialized,
            "Expert tensor-model-pipeline parallel group is not initialized",
        )

    def get_expert_data_parallel_group(
        self, check_initialized: bool = True, with_gtp_remat: bool = True, partial_expert_data_parallel: bool = False
    ) -> Any:
        """Get expert data parallel group (0.19.2's arguments; under 0.16.1
        ``with_gtp_remat`` changes nothing)."""
        gtp = with_gtp_remat and self.version != "0.16.1"
        name, description = {
            (False, False): ("_EXPERT_DATA_PARALLEL_GROUP", "Expert data parallel group"),
            (False, True): ("_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP", "Intra partial expert data parallel group"),
            (True, False): (
                "_EXPERT_DATA_PARALLEL_GROUP_WITH_GTP_REMAT",
                "Expert data parallel group (with GTP_remat)",
            ),
            (True, True): (
                "_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP_WITH_GTP_REMAT",
                "Intra partial expert data parallel group (with GTP_remat)",
            ),
        }[gtp, partial_expert_data_parallel]
        return self._group(name, check_initialized, f"{description} is not initialized")

    def get_data_modulo_expert_parallel_group(self, partial_expert_data_parallel: bool = False) -> Any:
        """[Deprecated in Megatron-Core] Get expert data parallel group."""
        warnings.warn(
            "get_data_modulo_expert_parallel_group is deprecated, please use "
            "get_expert_data_parallel_group instead.",
            DeprecationWarning,
        )
        return self.get_expert_data_parallel_group(partial_expert_data_parallel=partial_expert_data_parallel)

    def get_expert_data_parallel_group_gloo(self, partial_expert_data_parallel: bool = False) -> Any:
        """Get expert data parallel group-gloo."""
        if partial_expert_data_parallel:
            return self._get(
                "_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP_GLOO",
                "Intra partial expert data parallel group-gloo is not initialized",
            )
        return self._get("_EXPERT_DATA_PARALLEL_GROUP_GLOO", "Expert data parallel group-gloo is not initialized")

    def get_expert_data_parallel_rank(
        self, with_gtp_remat: bool = True, partial_expert_data_parallel: bool = False
    ) -> int:
        """Return caller's rank in the expert data parallel group."""
        return self.get_expert_data_parallel_group(
            with_gtp_remat=with_gtp_remat, partial_expert_data_parallel=partial_expert_data_parallel
        ).rank()

    def get_expert_data_parallel_world_size(
        self, with_gtp_remat: bool = True, partial_expert_data_parallel: bool = False
    ) -> int:
        """Return world size for the expert data parallel group."""
        return self.get_expert_data_parallel_group(
            with_gtp_remat=with_gtp_remat, partial_expert_data_parallel=partial_expert_data_parallel
        ).size()

    def get_intra_distributed_optimizer_instance_group(self, check_initialized: bool = True) -> Any:
        """Get the group of all GPUs in a distributed optimizer instance."""
        return self._group(
            "_INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP",
            check_initialized,
            "Intra distributed optimizer instance group is not initialized",
        )

    def get_inter_distributed_optimizer_instance_group(self, check_initialized: bool = True) -> Any:
        """Get the group spanning the different distributed optimizer instances."""
        return self._group(
            "_INTER_PARTIAL_EXPERT_DATA_PARALLEL_GROUP",
            check_initialized,
            "Attention and MLP/Expert share same inter distributed optimize instance group, "
            "which has not been initialized",
        )

    def get_all_ranks(self) -> str:
        """Caller's rank in the tp, dp, cp, pp and ep groups (0.19: tp,
        gtp_remat, dp, ...), joined by ``_``."""
        ranks = [
            self.get_tensor_model_parallel_rank(),
            *([] if self.version == "0.16.1" else [self.get_gtp_weight_remat_rank()]),
            self.get_data_parallel_rank(),
            self.get_context_parallel_rank(),
            self.get_pipeline_model_parallel_rank(),
            self.get_expert_model_parallel_rank(),
        ]
        return "_".join(str(x or 0) for x in ranks)

    # -- Megatron-Core's module ------------------------------------------------

    def install(self, module: Any = None) -> None:
        """Sets the globals of ``megatron.core.parallel_state`` (or of
        ``module``) to this state, and its memory buffer. Raises
        :class:`LayoutError` if that module is already initialized or
        lacks one of the globals (another Megatron-Core release)."""
        module = _parallel_state() if module is None else module
        _check_installable(module, self.version)
        for name, value in self.values.items():
            if name == "_HYBRID_DP_CP_GROUPS":
                module._HYBRID_DP_CP_GROUPS.clear()
                module._HYBRID_DP_CP_GROUPS.update(value)
            else:
                setattr(module, name, value)
        module._GLOBAL_MEMORY_BUFFER = None
        module._set_global_memory_buffer()


def _create(
    version: str,
    args: dict[str, Any],
    share: bool,
    module: Any = None,
    rank_map: Optional[Sequence[int]] = None,
    reuse: Optional[dict[tuple[int, ...], Any]] = None,
    partial: bool = False,
    expect: Optional[Layout] = None,
) -> ParallelState:
    """Plans (every check), checks ``module`` (when installing), builds the
    groups and returns the state. ``partial``: the rank map may name fewer
    ranks than the world, and Megatron-Core's world is the map's (a
    re-layout); ``reuse``: process groups kept, by their members;
    ``expect``: the layout the arguments must give (checked before any
    group is made)."""
    if not dist.is_initialized():
        raise LayoutError("torch.distributed is not initialized (init_process_group first)")
    world, rank = dist.get_world_size(), dist.get_rank()
    rmap = RankMap(rank_map, world, partial=partial)
    if partial and rmap.logical is not None:
        if rmap.logical[rank] < 0:
            raise LayoutError(f"torch rank {rank} is not in the rank map: it has no rank in the new layout")
        world = len(rmap.torch_rank or [])
    # Megatron-Core's ranks are the logical ones; the groups and the global
    # rank lists get torch's.
    plan = _Plan(world, rank if rmap.logical is None else rmap.logical[rank], args, version)
    if expect is not None and (plan.layout.world_size, plan.layout.sizes) != (expect.world_size, expect.sizes):
        raise LayoutError(
            f"the arguments give a layout of {plan.layout.world_size} ranks ({plan.layout.sizes}); "
            f"the plan's new layout is {expect.world_size} ranks ({expect.sizes})"
        )
    if module is not None:
        _check_installable(module, version)
    if args["pipeline_model_parallel_comm_backend"] == "ucc":
        _ucc_environment()
    made: list[Any] = [None]
    seen: set[int] = set()

    def on_create(pg: Any, spec: GroupSpec) -> None:
        if id(pg) not in seen:
            seen.add(id(pg))
            made.append(pg)

    timeout = timedelta(minutes=args["distributed_timeout_minutes"])
    built = build_groups(
        plan.layout, plan.specs, timeout=timeout, share=share, on_create=on_create, rank_map=rmap, reuse=reuse
    )
    groups = {label: (pgs[0] if pgs else None) for label, pgs in built.items()}
    values = _values(plan, groups, rmap)
    values["_global_process_group_list"] = made
    return ParallelState(plan.layout, rank, groups, values, version, rmap.torch_rank)


def _values(plan: _Plan, groups: dict[str, Any], rmap: Optional[RankMap] = None) -> dict[str, Any]:
    """The globals of ``parallel_state`` for this rank (global rank lists
    as torch ranks, through ``rmap``)."""
    g = groups.get

    def ordered(label: str) -> Optional[list[int]]:
        got = plan.members(label, ordered=True)
        return got if got is None or rmap is None else rmap.of(got)

    n = plan.n_instances
    v = globals_of(plan.version)
    v["_HYBRID_DP_CP_GROUPS"] = {
        int(label.rsplit("_", 1)[1]): pg for label, pg in groups.items() if label.startswith("HYBRID_DP_CP_GROUP_")
    }
    v.update(
        _DATA_PARALLEL_GROUP_WITH_CP=g("DATA_PARALLEL_GROUP_WITH_CP"),
        _DATA_PARALLEL_GROUP_WITH_CP_GLOO=g("DATA_PARALLEL_GROUP_WITH_CP_GLOO"),
        _DATA_PARALLEL_GLOBAL_RANKS_WITH_CP=ordered("DATA_PARALLEL_GROUP_WITH_CP"),
        _DATA_PARALLEL_GROUP=g("DATA_PARALLEL_GROUP"),
        _DATA_PARALLEL_GROUP_GLOO=g("DATA_PARALLEL_GROUP_GLOO"),
        _DATA_PARALLEL_GLOBAL_RANKS=ordered("DATA_PARALLEL_GROUP"),
        _CONTEXT_PARALLEL_GROUP=g("CONTEXT_PARALLEL_GROUP"),
        _CONTEXT_PARALLEL_GLOBAL_RANKS=ordered("CONTEXT_PARALLEL_GROUP"),
        _MODEL_PARALLEL_GROUP=g("MODEL_PARALLEL_GROUP"),
        _MODEL_PARALLEL_GLOBAL_RANKS=ordered("MODEL_PARALLEL_GROUP"),
        _TENSOR_MODEL_PARALLEL_GROUP=g("TENSOR_MODEL_PARALLEL_GROUP"),
        _TENSOR_MODEL_PARALLEL_GLOBAL_RANKS=ordered("TENSOR_MODEL_PARALLEL_GROUP"),
        _PIPELINE_MODEL_PARALLEL_GROUP=g("PIPELINE_MODEL_PARALLEL_GROUP"),
        _PIPELINE_GLOBAL_RANKS=ordered("PIPELINE_MODEL_PARALLEL_GROUP"),
        _EMBEDDING_GROUP=g("EMBEDDING_GROUP"),
        _EMBEDDING_GLOBAL_RANKS=ordered("EMBEDDING_GROUP"),
        _POSITION_EMBEDDING_GROUP=g("POSITION_EMBEDDING_GROUP"),
        _POSITION_EMBEDDING_GLOBAL_RANKS=ordered("POSITION_EMBEDDING_GROUP"),
        _TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP=g("TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP"),
        _TENSOR_AND_DATA_PARALLEL_GROUP=g("TENSOR_AND_DATA_PARALLEL_GROUP"),
        _TENSOR_AND_CONTEXT_PARALLEL_GROUP=g("TENSOR_AND_CONTEXT_PARALLEL_GROUP"),
        _EXPERT_MODEL_PARALLEL_GROUP=g("EXPERT_MODEL_PARALLEL_GROUP"),
        _EXPERT_MODEL_PARALLEL_RANKS=ordered("EXPERT_MODEL_PARALLEL_GROUP"),
        _EXPERT_TENSOR_PARALLEL_GROUP=g("EXPERT_TENSOR_PARALLEL_GROUP"),
        _EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP=g("EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP"),
        _EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP=g("EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP"),
        _EXPERT_DATA_PARALLEL_GROUP=g("EXPERT_DATA_PARALLEL_GROUP"),
        _EXPERT_DATA_PARALLEL_GROUP_GLOO=g("EXPERT_DATA_PARALLEL_GROUP_GLOO"),
        _INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP=g("INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP"),
    )
    if plan.hcp_levels:
        v["_HIERARCHICAL_CONTEXT_PARALLEL_GROUPS"] = [
            g(f"HIERARCHICAL_CONTEXT_PARALLEL_GROUP_L{level}") for level in range(plan.hcp_levels)
        ]
    if n > 1:
        v["_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP"] = g("INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP")
        v["_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP_GLOO"] = g("INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP_GLOO")
        v["_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP"] = g("HIERARCHICAL_EXPERT_DATA_PARALLEL_GROUP_L0")
        v["_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP_GLOO"] = g("HIERARCHICAL_EXPERT_DATA_PARALLEL_GROUP_GLOO_L0")
        v["_INTER_PARTIAL_EXPERT_DATA_PARALLEL_GROUP"] = g("HIERARCHICAL_EXPERT_DATA_PARALLEL_GROUP_L1")
    else:
        v["_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP"] = v["_DATA_PARALLEL_GROUP_WITH_CP"]
        v["_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP_GLOO"] = v["_DATA_PARALLEL_GROUP_WITH_CP_GLOO"]
        v["_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP"] = v["_EXPERT_DATA_PARALLEL_GROUP"]
        v["_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP_GLOO"] = v["_EXPERT_DATA_PARALLEL_GROUP_GLOO"]
    if plan.version == "0.16.1":
        v["_DATA_PARALLEL_GROUP_WITH_CP_AG"] = g("DATA_PARALLEL_GROUP_WITH_CP_AG")
    else:
        # 0.19's weight-shard groups; without the axis, the plain ones.
        gtp, egtp = plan.gtp > 1, plan.egtp > 1
        v["_GTP_WEIGHT_REMAT_GROUP"] = g("GTP_WEIGHT_REMAT_GROUP")
        v["_GTP_WEIGHT_REMAT_GLOBAL_RANKS"] = ordered("GTP_WEIGHT_REMAT_GROUP")
        v["_DATA_PARALLEL_GROUP_WITH_GTP_REMAT"] = (
            g("DATA_PARALLEL_GROUP_WITH_GTP_REMAT") if gtp else v["_DATA_PARALLEL_GROUP"]
        )
        v["_DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT"] = (
            g("DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT") if gtp else v["_DATA_PARALLEL_GROUP_WITH_CP"]
        )
        v["_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT"] = (
            v["_DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT"] if gtp else v["_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP"]
        )
        v["_EXPERT_GTP_WEIGHT_REMAT_GROUP"] = g("EXPERT_GTP_WEIGHT_REMAT_GROUP")
        v["_EXPERT_GTP_WEIGHT_REMAT_GLOBAL_RANKS"] = ordered("EXPERT_GTP_WEIGHT_REMAT_GROUP")
        v["_EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP_WITH_EGTP"] = g(
            "EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP_WITH_EGTP"
        )
        v["_EXPERT_DATA_PARALLEL_GROUP_WITH_GTP_REMAT"] = (
            g("EXPERT_DATA_PARALLEL_GROUP_WITH_GTP_REMAT") if egtp else v["_EXPERT_DATA_PARALLEL_GROUP"]
        )
        v["_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP_WITH_GTP_REMAT"] = (
            v["_EXPERT_DATA_PARALLEL_GROUP_WITH_GTP_REMAT"] if egtp else v["_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP"]
        )
    if plan.vpp is not None:
        v["_VIRTUAL_PIPELINE_MODEL_PARALLEL_RANK"] = 0
        v["_VIRTUAL_PIPELINE_MODEL_PARALLEL_WORLD_SIZE"] = plan.vpp
    return v


def _ucc_environment() -> None:
    """The environment Megatron-Core sets for a UCC pipeline backend."""
    if os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1":
        raise LayoutError("UCC-backend requires CUDA_DEVICE_MAX_CONNECTIONS > 1")
    os.environ.setdefault("TORCH_UCC_BLOCKING_WAIT", "none")
    os.environ.setdefault("UCC_EC_CUDA_STREAM_TASK_MODE", "driver")
    os.environ.setdefault("UCX_TLS", "ib,cuda_copy")
    os.environ["NSYS_UCP_COMM_PARAMS"] = "1"
    os.environ["UCX_RNDV_THRESH"] = "0"
    os.environ["UCX_NET_DEVICES"] = "all"
    os.environ["UCC_CL_BASIC_TLS"] = "^sharp,nccl"


def initialize_model_parallel(
    *args: Any, share: bool = True, rank_map: Optional[Sequence[int]] = None, **kwargs: Any
) -> ParallelState:
    """Megatron-Core's ``parallel_state.initialize_model_parallel``, with
    this rank's groups only (see the module's documentation), installed into
    ``megatron.core.parallel_state``. The installed release's arguments
    (``SIGNATURES``: 0.16.1's or 0.19.2's names, order and defaults; an
    argument the release does not have is a ``TypeError``, as there); every
    rank calls it. Returns the :class:`ParallelState` it installed.

    ``share`` (keyword only, not Megatron-Core's): families with the same
    members on every rank share one process group.

    ``rank_map`` (keyword only, not Megatron-Core's; e.g. from
    :func:`rank_layout.placement_rank_map`): ``rank_map[r]`` is the torch
    rank that runs Megatron-Core's rank ``r``, a permutation of the world,
    so that the groups are those of the placed job. Megatron-Core's ranks
    are then logical; every group is created with the torch ranks of its
    members in Megatron-Core's (ascending logical) order, so tensor,
    pipeline, data-parallel ... ranks are what they would be at rank
    ``r``, and the ``*_GLOBAL_RANKS`` lists (read by the src-rank and
    pipeline next/previous getters) hold torch ranks. Custom
    ``get_embedding_ranks`` functions receive and answer logical ranks.
    Where torch's ``new_group`` has no ``sort_ranks``, torch sorts the
    members by torch rank instead (a warning says so), and the pipeline
    stage of a rank would follow torch ranks: use such a torch only with
    a rank map that keeps each group's order.

    Raises :class:`rank_layout.LayoutError` for ``use_sharp=True`` or a
    ``sharp_enabled_group`` (not honoured), for any argument Megatron-Core
    would refuse, for a layout rank-layout refuses, and when
    ``parallel_state`` is already initialized: on every rank, before any
    group is created. ``ImportError`` without megatron-core. Another
    release than those two draws a warning and is filled as the one whose
    globals it has, when it has them all.
    """
    module = _parallel_state()
    version = installed_release(module)
    state = _create(version, _bind(version, args, kwargs), share, module, rank_map=rank_map)
    state.install(module)
    return state


def relayout_model_parallel(plan: Any, *args: Any, state: ParallelState, share: bool = True, **kwargs: Any) -> ParallelState:
    """After a failure: Megatron-Core's ``parallel_state`` for ``plan``'s new
    layout (a :class:`rank_layout.Relayout`), installed in place of
    ``state`` (what :func:`initialize_model_parallel` returned). Called by
    every process that has a rank in the new layout (``plan.new_rank[r]``
    not ``None`` for torch rank ``r``), with Megatron-Core's arguments of
    the new layout (its sizes; the data-parallel size follows from the new
    world, ``plan.world_size``); failed and idle processes do not call.

    The new layout's rank ``n`` runs on torch rank ``plan.process(n)``
    (torch cannot renumber a live world): the groups are built as with
    ``rank_map=``, members-only (``use_local_synchronization``), so the
    processes that are gone take no part. Every group of the old state
    whose members (torch ranks, in order) are a new group's is kept, the
    same object; the old groups not kept are destroyed. Shrunk groups are
    created anew here (:func:`rank_layout.torch.apply_relayout` shrinks
    them where the backend can). Afterwards the getters answer for the new
    layout: ``get_data_parallel_world_size()`` is the new ``dp``, the
    ``*_GLOBAL_RANKS`` lists hold torch ranks.

    Raises :class:`rank_layout.LayoutError`, before any group is made, when
    this process has no rank in the new layout, or the arguments do not
    give the plan's new layout.
    """
    if not dist.is_initialized():
        raise LayoutError("torch.distributed is not initialized (init_process_group first)")
    me = dist.get_rank()
    new_rank = plan.new_rank[me] if me < len(plan.new_rank) else None
    if new_rank is None:
        raise LayoutError(f"torch rank {me} has no rank in the new layout (failed or idle): it does not call")
    module = _parallel_state()
    version = installed_release(module)
    old = {id(pg): pg for pg in state.groups.values() if pg is not None}
    default = dist.distributed_c10d._get_default_group()
    reuse = {}
    for pg in old.values():
        if pg is not default:
            reuse[tuple(dist.get_process_group_ranks(pg))] = pg
    rank_map = [plan.process(n) for n in range(plan.world_size)]
    new = _create(
        version, _bind(version, args, kwargs), share, None, rank_map=rank_map, reuse=reuse, partial=True,
        expect=plan.layout,
    )
    kept = {id(pg) for pg in new.groups.values() if pg is not None}
    for key, pg in old.items():
        if key not in kept and pg is not default:
            dist.destroy_process_group(pg)
    for name, value in globals_of(version).items():
        if name == "_HYBRID_DP_CP_GROUPS":
            module._HYBRID_DP_CP_GROUPS.clear()
        else:
            setattr(module, name, value)
    new.install(module)
    return new


def destroy_model_parallel() -> None:
    """Megatron-Core's ``parallel_state.destroy_model_parallel()``, then
    every global :func:`initialize_model_parallel` sets back to its first
    value (Megatron-Core's leaves some global rank lists, the hierarchical
    context-parallel groups and the hybrid groups set)."""
    module = _parallel_state()
    module.destroy_model_parallel()
    for name, value in globals_of(installed_release(module)).items():
        if name == "_HYBRID_DP_CP_GROUPS":
            module._HYBRID_DP_CP_GROUPS.clear()
        else:
            setattr(module, name, value)
