"""Megatron-LM process-group rank layouts, answered per rank in O(axes).

Which ranks form the tensor (tp), context (cp), expert (ep), data (dp) and
pipeline (pp) parallel groups, exactly as Megatron-LM orders them, for any
axis order; also Megatron-Core's folded expert grid, encoder + decoder
pipelines, hierarchical context parallel and distributed-optimizer
instances. Computed by the ``rank-layout`` Rust crate.

>>> from rank_layout import Layout
>>> layout = Layout(tp=2, cp=2, pp=2, world_size=16)
>>> layout.groups("tp")[:3]
[[0, 1], [2, 3], [4, 5]]
>>> layout.groups_array("dp").tolist()[:2]  # NumPy, filled in Rust
[[0, 4], [1, 5]]
>>> layout.split(13, "pp")  # (color, key): index of the rank's group, its place
(5, 1)
>>> layout.pipeline_next(5), layout.is_last_stage(13)
([13], True)

Real ``torch.distributed`` process groups: :func:`rank_layout.torch.new_groups`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rank_layout._native import CONFIG_KEYS, LayoutError
from rank_layout._native import Layout as _NativeLayout

__all__ = ["Layout", "LayoutError", "CONFIG_KEYS", "MEGATRON_ARGS", "megatron_config"]

try:
    from importlib.metadata import version as _version

    __version__ = _version("rank-layout")
except Exception:  # not installed as a distribution (e.g. a bare build)
    __version__ = "0+unknown"

#: Megatron-LM argument -> configuration key, as read by
#: :meth:`Layout.from_megatron_args`.
MEGATRON_ARGS: dict[str, str] = {
    "tensor_model_parallel_size": "tp",
    "pipeline_model_parallel_size": "pp",
    "context_parallel_size": "cp",
    "expert_model_parallel_size": "ep",
    "expert_tensor_parallel_size": "etp",
    "world_size": "world_size",
    "data_parallel_size": "dp",
    "encoder_tensor_model_parallel_size": "encoder_tp",
    "encoder_pipeline_model_parallel_size": "encoder_pp",
    "hierarchical_context_parallel_sizes": "hierarchical_cp",
    "num_distributed_optimizer_instances": "dist_opt_instances",
    "use_tp_pp_dp_mapping": "order",
}


def _rebuild(cls: type, config: dict[str, Any]) -> Layout:
    """Unpickles a layout: rebuilt (and re-validated) from its configuration."""
    return cls(**config)


class Layout(_NativeLayout):
    __doc__ = _NativeLayout.__doc__
    __slots__ = ()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles as the resolved configuration (for multiprocessing)."""
        return (_rebuild, (type(self), self.config))

    @classmethod
    def from_megatron_args(cls, args: Any, **overrides: Any) -> Layout:
        """The layout Megatron-LM builds from its arguments.

        ``args`` is an ``argparse.Namespace`` (Megatron-LM's ``get_args()``),
        a dict, or any object with the attributes. Arguments read (missing
        or ``None`` ones are left out):

        - ``tensor_model_parallel_size`` -> ``tp``,
          ``pipeline_model_parallel_size`` -> ``pp``,
          ``context_parallel_size`` -> ``cp``,
          ``expert_model_parallel_size`` -> ``ep``,
          ``expert_tensor_parallel_size`` -> ``etp``;
        - ``world_size`` -> ``world_size``; ``data_parallel_size`` -> ``dp``
          only when there is no world size;
        - ``encoder_pipeline_model_parallel_size`` > 0 makes an encoder +
          decoder layout, with ``encoder_tensor_model_parallel_size`` (0
          means ``tp``, as in Megatron-LM);
        - ``hierarchical_context_parallel_sizes`` -> ``hierarchical_cp``,
          ``num_distributed_optimizer_instances`` (> 1) ->
          ``dist_opt_instances``;
        - ``use_tp_pp_dp_mapping`` -> order ``tp-cp-ep-pp-dp`` instead of
          ``tp-cp-ep-dp-pp``.

        The expert layout is ``folded``, as Megatron-Core builds its expert
        groups today (a second rank generator over ``etp``, ``ep``, ``edp``,
        ``pp``), except with an encoder, which rank-layout lays out nested.
        ``overrides`` are configuration keys applied last, e.g.
        ``expert_layout="nested"`` for Megatron-LM's 2024 layout, or
        ``world_size=...``.

        >>> import argparse
        >>> args = argparse.Namespace(tensor_model_parallel_size=2,
        ...     pipeline_model_parallel_size=2, context_parallel_size=1,
        ...     expert_model_parallel_size=2, expert_tensor_parallel_size=1,
        ...     world_size=16)
        >>> layout = Layout.from_megatron_args(args)
        >>> layout.shape, layout.sizes["dp"], layout.sizes["edp"]
        ('folded', 4, 4)
        >>> Layout.from_megatron_args({"tensor_model_parallel_size": 8, "world_size": 64}).sizes["dp"]
        8
        """
        config = megatron_config(args)
        config.update(overrides)
        return cls(**config)


def megatron_config(args: Any) -> dict[str, Any]:
    """The configuration keys of Megatron-LM arguments (see
    :meth:`Layout.from_megatron_args`).

    >>> megatron_config({"tensor_model_parallel_size": 4, "world_size": 32})
    {'tp': 4, 'world_size': 32, 'expert_layout': 'folded'}
    """

    def arg(name: str) -> Any:
        if isinstance(args, Mapping):
            return args.get(name)
        return getattr(args, name, None)

    config: dict[str, Any] = {}
    for name in (
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
        "context_parallel_size",
        "expert_model_parallel_size",
        "world_size",
        "hierarchical_context_parallel_sizes",
    ):
        value = arg(name)
        if value is not None:
            config[MEGATRON_ARGS[name]] = value
    if arg("world_size") is None and arg("data_parallel_size") is not None:
        config["dp"] = arg("data_parallel_size")
    instances = arg("num_distributed_optimizer_instances")
    if instances is not None and instances != 1:
        config["dist_opt_instances"] = instances
    if arg("use_tp_pp_dp_mapping"):
        config["order"] = "tp-cp-ep-pp-dp"
    # etp defaults to tp: given only when it differs, so that an override
    # expert_layout="nested" works (the nested layout has no etp of its own).
    etp = arg("expert_tensor_parallel_size")
    if etp is not None and etp != config.get("tp", 1):
        config["etp"] = etp
    encoder_pp = arg("encoder_pipeline_model_parallel_size")
    if encoder_pp:  # None or 0: no encoder, as in Megatron-LM
        config["encoder_pp"] = encoder_pp
        if arg("encoder_tensor_model_parallel_size"):
            config["encoder_tp"] = arg("encoder_tensor_model_parallel_size")
    else:
        config["expert_layout"] = "folded"
    return config
