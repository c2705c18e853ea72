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

from __future__ import annotations

import inspect
import math
import os
import warnings
from datetime import timedelta
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch.distributed as dist

from rank_layout import Layout, LayoutError
from rank_layout.torch._groups import GroupSpec, RankMap, build_groups

__all__ = [
    "initialize_model_parallel",
    "relayout_model_parallel",
    "destroy_model_parallel",
    "ParallelState",
    "MEGATRON_CORE_VERSION",
    "MEGATRON_CORE_VERSIONS",
    "SIGNATURES",
    "GLOBALS",
    "globals_of",
    "installed_release",
]

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

# Group family (Megatron-Core's group_desc) -> its name in Megatron-Core's
# NCCL communicator configuration (nccl_communicator_config_path,
# high_priority_stream_groups).
_NCCL_NAMES = {
    "DATA_PARALLEL_GROUP_WITH_CP": "dp_cp",
    "DATA_PARALLEL_GROUP_WITH_CP_AG": "dp_cp",
    "INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP": "intra_dp_cp",
    "DATA_PARALLEL_GROUP": "dp",
    "CONTEXT_PARALLEL_GROUP": "cp",
    "MODEL_PARALLEL_GROUP": "mp",
    "TENSOR_MODEL_PARALLEL_GROUP": "tp",
    "PIPELINE_MODEL_PARALLEL_GROUP": "pp",
    "EMBEDDING_GROUP": "embd",
    "POSITION_EMBEDDING_GROUP": "pos_embd",
    "TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP": "tp_dp_cp",
    "TENSOR_AND_DATA_PARALLEL_GROUP": "tp_dp",
    "TENSOR_AND_CONTEXT_PARALLEL_GROUP": "tp_cp",
    "EXPERT_MODEL_PARALLEL_GROUP": "ep",
    "EXPERT_TENSOR_PARALLEL_GROUP": "ep_tp",
    "EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP": "tp_ep_mp",
    "EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP": "tp_ep_pp",
    "EXPERT_DATA_PARALLEL_GROUP": "ep_dp",
    "HIERARCHICAL_EXPERT_DATA_PARALLEL_GROUP_L0": "intra_ep_dp",
    "HIERARCHICAL_EXPERT_DATA_PARALLEL_GROUP_L1": "inter_ep_dp",
    "INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP": "intra_dist_opt_instance",
    # 0.19's weight-shard families
    "GTP_WEIGHT_REMAT_GROUP": "gtp_remat",
    "DATA_PARALLEL_GROUP_WITH_GTP_REMAT": "gtp_remat_dp",
    "DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT": "gtp_remat_dp_cp",
    "EXPERT_GTP_WEIGHT_REMAT_GROUP": "expt_gtp_remat",
    "EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP_WITH_EGTP": "tp_ep_gtp_remat_pp",
    "EXPERT_DATA_PARALLEL_GROUP_WITH_GTP_REMAT": "ep_gtp_remat_dp",
}

# Arguments the drop-in cannot honour, with their default (honoured) value.
_UNSUPPORTED = {"use_sharp": False, "sharp_enabled_group": None}


class _Plan:
    """Everything :func:`initialize_model_parallel` decides before creating
    a group: the checks (all of them, on every rank alike), the layout and
    the group families. ``rank`` may be any rank of the world (the tests
    plan every rank of a world in one process)."""

    def __init__(self, world: int, rank: int, args: dict[str, Any], version: str = MEGATRON_CORE_VERSION) -> None:
        a = {**_ABSENT, **args}
        self.version = _release(version)
        self.rank, self.args = rank, a
        self._refuse_unsupported(a)
        for name in (
            "tensor_model_parallel_size",
            "pipeline_model_parallel_size",
            "context_parallel_size",
            "expert_model_parallel_size",
            "num_distributed_optimizer_instances",
            "gtp_remat_size",
            "expert_gtp_remat_size",
        ):
            if not isinstance(a[name], int) or isinstance(a[name], bool) or a[name] < 1:
                raise LayoutError(f"{name} must be a positive int, got {a[name]!r}")
        tp, pp, cp = a["tensor_model_parallel_size"], a["pipeline_model_parallel_size"], a["context_parallel_size"]
        ep, n = a["expert_model_parallel_size"], a["num_distributed_optimizer_instances"]
        gtp, egtp = a["gtp_remat_size"], a["expert_gtp_remat_size"]
        order = a["order"]
        etp = a["expert_tensor_parallel_size"]
        if etp is None:
            etp = tp
        elif not isinstance(etp, int) or isinstance(etp, bool) or etp < 1:
            raise LayoutError(f"expert_tensor_parallel_size must be a positive int, got {etp!r}")
        if not isinstance(order, str):
            raise LayoutError(f"order must be a string, got {order!r}")
        offset, local = a["rank_offset"], a["local_world_size"]
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise LayoutError(f"rank_offset must be an int >= 0, got {offset!r}")
        if local is not None and (not isinstance(local, int) or isinstance(local, bool) or local < 1):
            raise LayoutError(f"local_world_size must be a positive int, got {local!r}")
        # Megatron-Core's ranks run from rank_offset over local_world_size
        # (or the whole world): they must all exist.
        everyone, world = world, (world if local is None else local)
        if offset + world > everyone:
            raise LayoutError(
                f"rank_offset {offset} with local_world_size {local}: ranks {offset}..{offset + world} "
                f"are not all in torch.distributed's world of {everyone}"
            )
        self.world = world
        order = _weight_shard_order(order, gtp, egtp)
        if (gtp > 1 or egtp > 1) and n > 1:
            raise LayoutError("GTP_remat with num_distributed_optimizer_instances > 1 is not yet supported.")
        # Megatron-Core's own checks, in its order and with its messages.
        model = tp * pp * cp * gtp
        if world % model:
            raise LayoutError(f"world_size ({world}) is not divisible by {model}")
        dp = world // model
        vpp = a["virtual_pipeline_model_parallel_size"]
        if vpp is not None and not pp > 1:
            raise LayoutError("pipeline-model-parallel size should be greater than 1 with interleaved schedule")
        backend = a["pipeline_model_parallel_comm_backend"]
        if backend not in (None, "nccl", "ucc"):
            raise LayoutError(
                f'"{backend}" backend for PP communication is currently not supported '
                "(pipeline_model_parallel_comm_backend: None, 'nccl' or 'ucc')"
            )
        if backend == "ucc" and not dist.is_ucc_available():
            raise LayoutError("pipeline_model_parallel_comm_backend='ucc': this torch has no UCC backend")
        self.nccl_cfgs = _nccl_configs(a["nccl_communicator_config_path"], a["high_priority_stream_groups"])
        etmp = etp * ep * pp * egtp
        if world % etmp:
            raise LayoutError(
                f"world_size ({world}) is not divisible by expert_tensor_model_pipeline_parallel size ({etmp})"
            )
        edp = world // etmp
        if not (order.endswith("pp") or pp == 1 or edp == dp):
            raise LayoutError(
                "When not using pp-last rank ordering, the data parallel size of the attention and moe "
                f"layers must be the same (order {order!r}, dp {dp}, expert dp {edp})"
            )
        if (dp * cp) % n:
            raise LayoutError("Data parallel size should be divisible by partial DistOpt shard factor")
        if edp % n:
            raise LayoutError("Expert data parallel size should be divisible by partial DistOpt shard factor")
        hcp = a["hierarchical_context_parallel_sizes"]
        if hcp:
            hcp = [int(s) for s in hcp]
            if math.prod(hcp) != cp:
                raise LayoutError(
                    f"hierarchical_context_parallel_sizes {hcp}: their product must be "
                    f"context_parallel_size ({cp})"
                )
        if a["hybrid_context_parallel"] and (dp * cp) % 2:
            raise LayoutError("Hybrid context parallel requires an even number of ranks")
        self.vpp = vpp
        self.n_instances = n
        self.edp = edp
        # The layout (Layout's own checks last: a LayoutError with its message).
        self.layout = Layout(
            tp=tp,
            cp=cp,
            ep=ep,
            pp=pp,
            etp=etp,
            world_size=world,
            order=order,
            rank_offset=offset,
            expert_layout="folded",
            hierarchical_cp=hcp or None,
            dist_opt_instances=n if n > 1 else None,
            gtp_remat=gtp,
            expert_gtp_remat=egtp,
        )
        self.gtp, self.egtp = gtp, egtp
        self.hcp_levels = len(hcp) if hcp else 0
        self.specs = self._specs(a)

    @staticmethod
    def _refuse_unsupported(a: dict[str, Any]) -> None:
        bad = [f"{name}={a[name]!r}" for name, ok in _UNSUPPORTED.items() if a[name] != ok]
        if bad:
            raise LayoutError(
                "rank_layout.torch.megatron.initialize_model_parallel cannot honour "
                + ", ".join(bad)
                + " (SHARP needs the data-parallel communicator created first with "
                "NCCL_COLLNET_ENABLE=1 and a CUDA barrier; use Megatron-Core's own "
                "initialize_model_parallel for it)"
            )

    # -- the group families -------------------------------------------------

    def _opts(self, label: str) -> Any:
        name = _NCCL_NAMES.get(label)
        return None if name is None else _nccl_options(name, self.nccl_cfgs)

    def _kind(self, label: str, kind: str, **kw: Any) -> GroupSpec:
        kw.setdefault("pg_options", self._opts(label) if kw.get("backend") != "gloo" else None)
        return GroupSpec(label, kind=kind, sort=True, **kw)

    def _specs(self, a: dict[str, Any]) -> list[GroupSpec]:
        """The group families in the order Megatron-Core creates them (a
        process group's name is salted with torch's count of groups, so the
        order is the same on every rank)."""
        n, gtp, egtp = self.n_instances, self.gtp, self.egtp
        new = self.version != "0.16.1"
        # 0.19 turns gloo off under a weight-shard axis: the dense groups'
        # under gtp_remat, the expert ones' under either.
        gloo = bool(a["create_gloo_process_groups"]) and gtp == 1
        expert_gloo = gloo and egtp == 1
        specs = []
        if new:
            specs.append(self._shards("GTP_WEIGHT_REMAT_GROUP", "gtp_remat", gtp))
        specs.append(self._kind("DATA_PARALLEL_GROUP_WITH_CP", "dp-cp"))
        if a["create_all_gather_group"]:
            specs.append(self._kind("DATA_PARALLEL_GROUP_WITH_CP_AG", "dp-cp", share=False))
        if gloo:
            specs.append(self._kind("DATA_PARALLEL_GROUP_WITH_CP_GLOO", "dp-cp", backend="gloo"))
        if n > 1:
            specs.append(self._kind("INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP", "dp-cp-intra"))
            if gloo:
                specs.append(
                    self._kind("INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP_GLOO", "dp-cp-intra", backend="gloo")
                )
        if a["hybrid_context_parallel"]:
            dp_cp = self.layout.sizes["dp"] * self.layout.sizes["cp"]
            for size in [2**i for i in range(int(math.log2(dp_cp)))][1:]:
                specs.append(self._hybrid(size))
        specs.append(self._kind("DATA_PARALLEL_GROUP", "dp"))
        if gloo:
            specs.append(self._kind("DATA_PARALLEL_GROUP_GLOO", "dp", backend="gloo"))
        if gtp > 1:
            specs.append(self._kind("DATA_PARALLEL_GROUP_WITH_GTP_REMAT", "gtp_remat-dp"))
            specs.append(self._kind("DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT", "gtp_remat-dp-cp"))
        specs.append(self._kind("CONTEXT_PARALLEL_GROUP", "cp"))
        hcp_opts = _nccl_options("hcp", self.nccl_cfgs)
        for level in range(self.hcp_levels):
            specs.append(
                self._kind(f"HIERARCHICAL_CONTEXT_PARALLEL_GROUP_L{level}", f"hcp-{level}", pg_options=hcp_opts)
            )
        # With a weight-shard axis, the model, tensor + data groups span it.
        with_gtp = (lambda kind: kind.replace("tp-", "tp-gtp_remat-", 1)) if gtp > 1 else (lambda kind: kind)
        specs.append(self._kind("MODEL_PARALLEL_GROUP", with_gtp("tp-pp")))
        specs.append(self._kind("TENSOR_MODEL_PARALLEL_GROUP", "tp"))
        pp_backend = a["pipeline_model_parallel_comm_backend"]
        specs.append(
            self._kind(
                "PIPELINE_MODEL_PARALLEL_GROUP",
                "pp",
                backend=pp_backend,
                pg_options=None if pp_backend == "ucc" else self._opts("PIPELINE_MODEL_PARALLEL_GROUP"),
            )
        )
        specs.append(self._embedding("EMBEDDING_GROUP", "embd", a["get_embedding_ranks"]))
        specs.append(self._embedding("POSITION_EMBEDDING_GROUP", "pos-embd", a["get_position_embedding_ranks"]))
        specs.append(self._kind("TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP", with_gtp("tp-dp-cp")))
        specs.append(self._kind("TENSOR_AND_DATA_PARALLEL_GROUP", with_gtp("tp-dp")))
        specs.append(self._kind("TENSOR_AND_CONTEXT_PARALLEL_GROUP", "tp-cp"))
        if new:
            specs.append(self._shards("EXPERT_GTP_WEIGHT_REMAT_GROUP", "egtp_remat", egtp))
        specs.append(self._kind("EXPERT_MODEL_PARALLEL_GROUP", "ep"))
        specs.append(self._kind("EXPERT_TENSOR_PARALLEL_GROUP", "etp"))
        specs.append(self._kind("EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP", "etp-ep"))
        specs.append(self._kind("EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP", "etp-ep-pp"))
        if new:
            specs.append(
                self._kind(
                    "EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP_WITH_EGTP",
                    "etp-ep-egtp_remat-pp" if egtp > 1 else "etp-ep-pp",
                )
            )
        specs.append(self._kind("EXPERT_DATA_PARALLEL_GROUP", "edp"))
        if expert_gloo:
            specs.append(self._kind("EXPERT_DATA_PARALLEL_GROUP_GLOO", "edp", backend="gloo"))
        if n > 1:
            specs.append(self._kind("HIERARCHICAL_EXPERT_DATA_PARALLEL_GROUP_L0", "edp-intra"))
            if expert_gloo:
                specs.append(
                    self._kind("HIERARCHICAL_EXPERT_DATA_PARALLEL_GROUP_GLOO_L0", "edp-intra", backend="gloo")
                )
            specs.append(self._edp_inter())
        if egtp > 1:
            specs.append(self._kind("EXPERT_DATA_PARALLEL_GROUP_WITH_GTP_REMAT", "egtp_remat-edp"))
        if n > 1:
            specs.append(self._kind("INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP", "dist-opt-instance"))
        else:
            # One instance (always so under a weight-shard axis): Megatron-Core's
            # instance group is every rank of the layout.
            specs.append(
                GroupSpec(
                    "INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP",
                    everyone=True,
                    pg_options=self._opts("INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP"),
                    sort=True,
                )
            )
        return specs

    def _shards(self, label: str, kind: str, size: int) -> GroupSpec:
        """0.19's weight-shard group family: the axis' groups, or, when its
        size is 1, a group of each rank alone (Megatron-Core makes them)."""
        if size > 1:
            return self._kind(label, kind)
        layout = self.layout
        first = layout.rank_offset

        def mine(rank: Optional[int]) -> Optional[list[int]]:
            return None if rank is None else [rank]

        def partition() -> np.ndarray:
            return np.arange(first, first + layout.world_size, dtype=np.uint32)[:, None]

        return GroupSpec(label, mine=mine, partition=partition, pg_options=self._opts(label), sort=True)

    def _hybrid(self, size: int) -> GroupSpec:
        """Megatron-Core's hybrid dp x cp groups of ``size``: consecutive
        slices of a (dp, cp) group."""
        layout = self.layout

        def mine(rank: Optional[int]) -> Optional[list[int]]:
            if rank is None:
                return None
            color, key = layout.split(rank, "dp-cp")
            members = sorted(layout.group("dp-cp", color))
            key = members.index(rank)
            start = key // size * size
            return members[start : start + size]

        def partition() -> Optional[np.ndarray]:
            arr = np.sort(layout.groups_array("dp-cp"), axis=1)
            return arr.reshape(-1, size) if arr.shape[1] % size == 0 else None

        return GroupSpec(
            f"HYBRID_DP_CP_GROUP_{size}",
            mine=mine,
            partition=partition,
            pg_options=_nccl_options("dp_cp", self.nccl_cfgs),
            sort=True,
        )

    def _edp_inter(self) -> GroupSpec:
        """Megatron-Core's inter-instance group: the expert data-parallel
        group's level 1 (``create_hierarchical_groups`` over [intra,
        instances]): every ``intra``-th member of the rank's expert
        data-parallel group."""
        layout, intra = self.layout, self.edp // self.n_instances

        def mine(rank: Optional[int]) -> Optional[list[int]]:
            if rank is None:
                return None
            color, _ = layout.split(rank, "edp")
            members = sorted(layout.group("edp", color))
            return members[members.index(rank) % intra :: intra]

        def partition() -> np.ndarray:
            arr = np.sort(layout.groups_array("edp"), axis=1)
            rows = arr.reshape(arr.shape[0], self.n_instances, intra).transpose(0, 2, 1)
            return rows.reshape(-1, self.n_instances)

        return GroupSpec(
            "HIERARCHICAL_EXPERT_DATA_PARALLEL_GROUP_L1",
            mine=mine,
            partition=partition,
            pg_options=self._opts("HIERARCHICAL_EXPERT_DATA_PARALLEL_GROUP_L1"),
            sort=True,
        )

    def _embedding(self, label: str, kind: str, fn: Optional[Callable]) -> GroupSpec:
        if fn is None:
            return self._kind(label, kind)
        # A custom function: Megatron-Core calls it on every pipeline and
        # makes a group of each answer. Called here on every pipeline too,
        # once, to refuse (on every rank alike) answers that are not a
        # subset of their pipeline: a rank must find its group from its
        # own pipeline, or the groups could not be made members-only.
        layout = self.layout
        name = "get_embedding_ranks" if kind == "embd" else "get_position_embedding_ranks"
        answers: dict[int, list[int]] = {}
        for color, pipeline in enumerate(layout.groups("pp")):
            try:
                got = [int(r) for r in fn(list(pipeline))]
            except Exception as e:  # noqa: BLE001 (the user's function)
                raise LayoutError(f"{name}({pipeline}) raised {e!r}") from e
            if not got or len(set(got)) != len(got) or not set(got) <= set(pipeline):
                raise LayoutError(
                    f"{name}({pipeline}) returned {got}: rank-layout needs distinct ranks of that pipeline"
                )
            answers[color] = got

        def mine(rank: Optional[int]) -> Optional[list[int]]:
            if rank is None:
                return None
            got = answers[layout.split(rank, "pp")[0]]
            return got if rank in got else None

        return GroupSpec(label, mine=mine, pg_options=self._opts(label), sort=True)

    # -- this rank's members -----------------------------------------------

    def members(self, label: str, rank: Optional[int] = None, ordered: bool = False) -> Optional[list[int]]:
        """The members of ``rank``'s group of the family ``label``, sorted
        (as the process group's ranks) or, with ``ordered``, in
        Megatron-Core's order (as its ``*_GLOBAL_RANKS`` lists); ``None``
        where the rank is in none."""
        rank = self.rank if rank is None else rank
        spec = next(s for s in self.specs if s.label == label)
        first = self.layout.rank_offset
        if not first <= rank < first + self.world:
            return None  # outside the ranks 0.19's rank_offset names
        if spec.everyone:
            got = list(range(first, first + self.world))
        elif spec.kind is None:
            got = spec.mine(rank)
        else:
            split = self.layout.split(rank, spec.kind)
            got = None if split is None else self.layout.group(spec.kind, split[0])
        if got is None:
            return None
        return list(got) if ordered else sorted(got)

    def planned(self, rank: Optional[int] = None) -> dict[str, Optional[list[int]]]:
        """Every family's members for ``rank`` (sorted), by family."""
        return {s.label: self.members(s.label, rank) for s in self.specs}


def _weight_shard_order(order: str, gtp: int, egtp: int) -> str:
    """``order`` with ``gtp_remat`` written where Megatron-Core 0.19 puts it
    (``_inject_gtp_remat_axis``: after ``tp`` on the dense grid, after
    ``ep`` on the expert grid, else after ``tp``, else first). Megatron-Core
    looks for those tokens case-sensitively while its grids read the order
    in any case; rank-layout reads it in any case throughout, so an order
    in capitals is rewritten here to place the axis as Megatron-Core does,
    and a place no single written position gives is refused."""
    toks = order.split("-")
    if (gtp == 1 and egtp == 1) or "gtp_remat" in [t.lower() for t in toks]:
        return order

    def place(words: list[str], after: str) -> int:
        anchor = after if after in words else "tp"
        return words.index(anchor) + 1 if anchor in words else 0

    lower = [t.lower() for t in toks]
    theirs = {"dense": place(toks, "tp"), "expert": place(toks, "ep")}
    ours = {"dense": place(lower, "tp"), "expert": place(lower, "ep")}
    used = [grid for grid, size in (("dense", gtp), ("expert", egtp)) if size > 1]
    if all(theirs[g] == ours[g] for g in used):
        return order
    positions = {theirs[g] for g in used}
    if len(positions) > 1:
        raise LayoutError(
            f"order {order!r}: Megatron-Core puts gtp_remat at place {theirs['dense']} of the dense grid and "
            f"{theirs['expert']} of the expert grid (it finds 'tp' and 'ep' case-sensitively); write the "
            "order in lowercase, or write gtp_remat in it"
        )
    at = positions.pop()
    return "-".join(toks[:at] + ["gtp_remat"] + toks[at:])


def _nccl_configs(path: Optional[str], high_priority: Optional[Sequence[str]]) -> dict[str, dict]:
    """Megatron-Core's NCCL communicator configuration: the YAML file, and
    ``is_high_priority_stream`` for ``high_priority``."""
    cfgs: dict[str, dict] = {}
    if path is not None:
        try:
            import yaml
        except ImportError as e:
            raise LayoutError(
                "nccl_communicator_config_path needs the yaml package (pip install pyyaml)"
            ) from e
        try:
            with open(path) as stream:
                cfgs = yaml.safe_load(stream) or {}
        except OSError as e:
            raise LayoutError(f"nccl_communicator_config_path: {e}") from e
    for name in high_priority or []:
        cfgs.setdefault(name, {})["is_high_priority_stream"] = True
    return cfgs


def _nccl_options(name: str, cfgs: dict[str, dict]) -> Any:
    """Megatron-Core's ``get_nccl_options``: NCCL options for the
    communicator ``name``, or ``None``."""
    if name not in cfgs:
        return None
    cfg = cfgs[name]
    options = dist.ProcessGroupNCCL.Options(is_high_priority_stream=cfg.get("is_high_priority_stream", False))
    for key in ("cga_cluster_size", "max_ctas", "min_ctas", "net_name"):
        if key in cfg:
            setattr(options.config, key, cfg[key])
    if "net_name" in cfg and str(cfg["net_name"]).lower() not in ("ib", "socket"):
        raise LayoutError(f"net_name ({cfg['net_name']}) is not supported. Accepted values: 'IB' or 'socket'.")
    return options


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
        if not ignore_virtual and self.get_virtual_pipeline_model_parallel_world_size() is not None:
            assert vp_stage is not None, "vp_stage must be passed if virtual pipeline is enabled"
            if vp_stage != (self.get_virtual_pipeline_model_parallel_world_size() - 1):
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


def _megatron_core() -> Any:
    import megatron.core

    return megatron.core


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
