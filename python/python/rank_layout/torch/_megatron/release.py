"""Megatron-Core's releases, as :mod:`rank_layout.torch.megatron` fills
them: each release's ``initialize_model_parallel`` signature
(``SIGNATURES``) and the globals of its ``parallel_state`` (``GLOBALS``,
:func:`globals_of`), the binding of a call's arguments to one release
(``_bind``), and which release is installed and whether its
``parallel_state`` can take a state (:func:`installed_release`,
``_check_installable``).
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, Callable, Optional

from rank_layout import LayoutError

#: The Megatron-Core releases whose ``parallel_state`` this module fills.
MEGATRON_CORE_VERSIONS = ("0.16.1", "0.19.2")
#: The newest of them: what :meth:`ParallelState.create` follows unless told.
MEGATRON_CORE_VERSION = MEGATRON_CORE_VERSIONS[-1]


def _initialize_0_16_1(
    tensor_model_parallel_size: int = 1,
    pipeline_model_parallel_size: int = 1,
    virtual_pipeline_model_parallel_size: Optional[int] = None,
    pipeline_model_parallel_comm_backend: Optional[str] = None,
    use_sharp: bool = False,
    context_parallel_size: int = 1,
    hierarchical_context_parallel_sizes: Optional[list[int]] = None,
    hybrid_context_parallel: bool = False,
    expert_model_parallel_size: int = 1,
    num_distributed_optimizer_instances: int = 1,
    expert_tensor_parallel_size: Optional[int] = None,
    nccl_communicator_config_path: Optional[str] = None,
    distributed_timeout_minutes: int = 30,
    order: str = "tp-cp-ep-dp-pp",
    get_embedding_ranks: Optional[Callable[[list[int]], list[int]]] = None,
    get_position_embedding_ranks: Optional[Callable[[list[int]], list[int]]] = None,
    create_gloo_process_groups: bool = True,
    high_priority_stream_groups: Optional[list[str]] = None,
    sharp_enabled_group: Optional[str] = None,
    create_all_gather_group: Optional[bool] = False,
) -> None:
    """Megatron-Core 0.16.1's ``initialize_model_parallel`` arguments."""


def _initialize_0_19_2(
    tensor_model_parallel_size: int = 1,
    pipeline_model_parallel_size: int = 1,
    virtual_pipeline_model_parallel_size: Optional[int] = None,
    pipeline_model_parallel_comm_backend: Optional[str] = None,
    use_sharp: bool = False,
    context_parallel_size: int = 1,
    hierarchical_context_parallel_sizes: Optional[list[int]] = None,
    hybrid_context_parallel: bool = False,
    expert_model_parallel_size: int = 1,
    gtp_remat_size: int = 1,
    expert_gtp_remat_size: int = 1,
    num_distributed_optimizer_instances: int = 1,
    expert_tensor_parallel_size: Optional[int] = None,
    nccl_communicator_config_path: Optional[str] = None,
    distributed_timeout_minutes: int = 30,
    order: str = "tp-cp-ep-dp-pp",
    get_embedding_ranks: Optional[Callable[[list[int]], list[int]]] = None,
    get_position_embedding_ranks: Optional[Callable[[list[int]], list[int]]] = None,
    create_gloo_process_groups: bool = True,
    high_priority_stream_groups: Optional[list[str]] = None,
    sharp_enabled_group: Optional[str] = None,
    rank_offset: int = 0,
    local_world_size: Optional[int] = None,
) -> None:
    """Megatron-Core 0.19.2's ``initialize_model_parallel`` arguments."""


#: Each release's ``initialize_model_parallel`` signature (names, order,
#: defaults), by version: what :func:`initialize_model_parallel` and
#: :meth:`ParallelState.create` bind their arguments to.
SIGNATURES: dict[str, inspect.Signature] = {
    "0.16.1": inspect.signature(_initialize_0_16_1),
    "0.19.2": inspect.signature(_initialize_0_19_2),
}

# The value of each argument one release lacks, as the other release
# behaves without it (so the plan reads one set of keys).
_ABSENT = {
    "gtp_remat_size": 1,
    "expert_gtp_remat_size": 1,
    "rank_offset": 0,
    "local_world_size": None,
    "create_all_gather_group": False,
}

_COMMON_GLOBALS = (
    "_TENSOR_MODEL_PARALLEL_GROUP",
    "_PIPELINE_MODEL_PARALLEL_GROUP",
    "_MODEL_PARALLEL_GROUP",
    "_EMBEDDING_GROUP",
    "_POSITION_EMBEDDING_GROUP",
    "_DATA_PARALLEL_GROUP",
    "_DATA_PARALLEL_GROUP_GLOO",
    "_TENSOR_AND_DATA_PARALLEL_GROUP",
    "_EXPERT_MODEL_PARALLEL_GROUP",
    "_EXPERT_TENSOR_PARALLEL_GROUP",
    "_EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP",
    "_EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP",
    "_EXPERT_DATA_PARALLEL_GROUP",
    "_EXPERT_DATA_PARALLEL_GROUP_GLOO",
    "_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP",
    "_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP_GLOO",
    "_INTER_PARTIAL_EXPERT_DATA_PARALLEL_GROUP",
    "_VIRTUAL_PIPELINE_MODEL_PARALLEL_RANK",
    "_VIRTUAL_PIPELINE_MODEL_PARALLEL_WORLD_SIZE",
    "_EMBEDDING_GLOBAL_RANKS",
    "_POSITION_EMBEDDING_GLOBAL_RANKS",
    "_PIPELINE_GLOBAL_RANKS",
    "_DATA_PARALLEL_GLOBAL_RANKS",
    "_TENSOR_MODEL_PARALLEL_GLOBAL_RANKS",
    "_EXPERT_MODEL_PARALLEL_RANKS",
    "_MODEL_PARALLEL_GLOBAL_RANKS",
    "_CONTEXT_PARALLEL_GROUP",
    "_CONTEXT_PARALLEL_GLOBAL_RANKS",
    "_HIERARCHICAL_CONTEXT_PARALLEL_GROUPS",
    "_HYBRID_DP_CP_GROUPS",
    "_DATA_PARALLEL_GROUP_WITH_CP",
    "_DATA_PARALLEL_GROUP_WITH_CP_GLOO",
    "_DATA_PARALLEL_GLOBAL_RANKS_WITH_CP",
    "_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP",
    "_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP_GLOO",
    "_TENSOR_AND_CONTEXT_PARALLEL_GROUP",
    "_TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP",
    "_INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP",
    "_global_process_group_list",
)
_RELEASE_GLOBALS = {
    "0.16.1": ("_DATA_PARALLEL_GROUP_WITH_CP_AG",),
    "0.19.2": (
        "_GTP_WEIGHT_REMAT_GROUP",
        "_GTP_WEIGHT_REMAT_GLOBAL_RANKS",
        "_DATA_PARALLEL_GROUP_WITH_GTP_REMAT",
        "_DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT",
        "_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT",
        "_EXPERT_GTP_WEIGHT_REMAT_GROUP",
        "_EXPERT_GTP_WEIGHT_REMAT_GLOBAL_RANKS",
        "_EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP_WITH_EGTP",
        "_EXPERT_DATA_PARALLEL_GROUP_WITH_GTP_REMAT",
        "_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP_WITH_GTP_REMAT",
    ),
}

#: Every global of ``megatron.core.parallel_state`` that
#: :func:`initialize_model_parallel` sets in one release or the other, with
#: its value before any initialization (what :func:`destroy_model_parallel`
#: restores); :func:`globals_of` gives one release's.
GLOBALS: dict[str, Any] = {
    name: None for name in (*_COMMON_GLOBALS, *(n for names in _RELEASE_GLOBALS.values() for n in names))
}
GLOBALS["_HYBRID_DP_CP_GROUPS"] = {}


def globals_of(version: str) -> dict[str, Any]:
    """The globals :func:`initialize_model_parallel` sets in Megatron-Core
    ``version``'s ``parallel_state``, with their first values."""
    names = (*_COMMON_GLOBALS, *_RELEASE_GLOBALS[_release(version)])
    return {name: GLOBALS[name] for name in names}


def _release(version: str) -> str:
    if version not in SIGNATURES:
        raise LayoutError(
            f"megatron-core {version!r}: rank_layout.torch.megatron fills {' and '.join(MEGATRON_CORE_VERSIONS)}"
        )
    return version


def _bind(version: str, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Every argument of ``version``'s ``initialize_model_parallel``, bound
    as Python binds them (a ``TypeError`` for an unknown one), defaults
    filled; and the other release's arguments at their neutral values."""
    bound = SIGNATURES[_release(version)].bind(*args, **kwargs)
    bound.apply_defaults()
    return {**_ABSENT, **bound.arguments}


# The globals that say whether parallel_state is initialized (Megatron-Core
# asserts each is None before building it).
_INITIALIZED_BY = (
    "_DATA_PARALLEL_GROUP",
    "_CONTEXT_PARALLEL_GROUP",
    "_MODEL_PARALLEL_GROUP",
    "_TENSOR_MODEL_PARALLEL_GROUP",
    "_PIPELINE_MODEL_PARALLEL_GROUP",
    "_EMBEDDING_GROUP",
    "_POSITION_EMBEDDING_GROUP",
    "_TENSOR_AND_DATA_PARALLEL_GROUP",
    "_TENSOR_AND_CONTEXT_PARALLEL_GROUP",
    "_EXPERT_MODEL_PARALLEL_GROUP",
    "_EXPERT_TENSOR_PARALLEL_GROUP",
    "_EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP",
    "_EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP",
    "_EXPERT_DATA_PARALLEL_GROUP",
    "_EXPERT_DATA_PARALLEL_GROUP_GLOO",
    "_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP",
    "_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP_GLOO",
    "_INTER_PARTIAL_EXPERT_DATA_PARALLEL_GROUP",
    "_INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP",
    # 0.19's
    "_GTP_WEIGHT_REMAT_GROUP",
    "_EXPERT_GTP_WEIGHT_REMAT_GROUP",
)


def _parallel_state() -> Any:
    try:
        from megatron.core import parallel_state
    except ImportError as e:
        raise ImportError(
            "rank_layout.torch.megatron.initialize_model_parallel needs megatron-core "
            f"(pip install megatron-core=={MEGATRON_CORE_VERSION}, or {MEGATRON_CORE_VERSIONS[0]} "
            "under Python 3.11); ParallelState.create does not"
        ) from e
    return parallel_state


def _megatron_core() -> Any:
    import megatron.core

    return megatron.core


def installed_release(module: Any = None) -> str:
    """The release of :data:`MEGATRON_CORE_VERSIONS` the installed
    ``parallel_state`` (or ``module``) is filled as: its own version when
    it is one of them; otherwise, with a warning, 0.19.2 when it has the
    weight-shard globals, else 0.16.1."""
    module = _parallel_state() if module is None else module
    version = getattr(_megatron_core(), "__version__", None)
    if version in SIGNATURES:
        return version
    guess = "0.19.2" if hasattr(module, "_GTP_WEIGHT_REMAT_GROUP") else "0.16.1"
    warnings.warn(
        f"rank_layout.torch.megatron fills megatron-core {' and '.join(MEGATRON_CORE_VERSIONS)}'s "
        f"parallel_state; this is {version}, filled as {guess}",
        stacklevel=3,
    )
    return guess


def _check_installable(module: Any, version: str) -> None:
    names = (*globals_of(version), "_GLOBAL_MEMORY_BUFFER", "_set_global_memory_buffer")
    missing = [name for name in names if not hasattr(module, name)]
    if missing:
        raise LayoutError(
            f"{module.__name__} has no {', '.join(missing)}: it is not megatron-core {version}'s parallel_state"
        )
    set_already = [name for name in _INITIALIZED_BY if getattr(module, name, None) is not None]
    if set_already:
        raise LayoutError(
            f"{module.__name__} is already initialized ({', '.join(set_already)}): "
            "call destroy_model_parallel() first"
        )
