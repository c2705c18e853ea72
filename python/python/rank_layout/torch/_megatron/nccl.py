"""Megatron-Core's NCCL communicator configuration
(``nccl_communicator_config_path``, ``high_priority_stream_groups``): the
name of each group family in it, and the options it gives a family's
process group.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch.distributed as dist

from rank_layout import LayoutError

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
