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
>>> layout.split(13, "pp")  # the rank's group's number (color), its place (key)
Split(color=5, key=1)
>>> layout.pipeline_next(5), layout.is_last_stage(13)
([13], True)

Multi-module models (Megatron-Core's MIMO): :class:`Modules`, named
meshes joined by edges, with each edge's bridge plan. Megatron-Core 0.19's
inference shards (``--inference-shards``, prefill and decode roles):
:class:`InferenceShards`, each shard a :class:`Layout` at its rank offset.
Moving a model's tensors from one layout to another (an RL refit, a KV
handoff, the state after a failure): :func:`reshard`, each process's
sends, receives and local copies computed from coordinates.

Real ``torch.distributed`` process groups: :func:`rank_layout.torch.new_groups`
(and :func:`rank_layout.torch.new_module_groups` for :class:`Modules`).
"""

# No `from __future__ import annotations` (it would put the name
# `annotations` in the package), and the typing names under private names:
# dir(rank_layout) shows the package's own names only.
from typing import Any as _Any
from typing import NamedTuple as _NamedTuple
from typing import Optional as _Optional
from typing import Sequence as _Sequence
from typing import Union as _Union

from rank_layout._native import CONFIG_KEYS, LayoutError
from rank_layout._native import MEGATRON_TABLE as _MEGATRON_TABLE
from rank_layout._native import Layout as _NativeLayout
from rank_layout._native import (
    InferenceShard,
    InferenceShards,
    Mesh,
    Modules,
    Relayout,
    Reshard,
    megatron_config,
    place,
    relayout,
    reshard,
    torchtitan_mesh,
)

__all__ = [
    "Layout",
    "LayoutError",
    "InferenceShard",
    "InferenceShards",
    "CONFIG_KEYS",
    "MEGATRON_ARGS",
    "MEGATRON_REFUSED",
    "Mesh",
    "Modules",
    "Split",
    "SplitRound",
    "megatron_config",
    "place",
    "Relayout",
    "relayout",
    "Reshard",
    "reshard",
    "placement_rank_map",
    "torchtitan_mesh",
]

try:
    from importlib.metadata import version as _version

    __version__ = _version("rank-layout")
except Exception:  # not installed as a distribution (e.g. a bare build)
    __version__ = "0+unknown"

#: Megatron-LM argument -> configuration key, as read by
#: :meth:`Layout.from_megatron_args`: the modelled rows of the crate's one
#: table of Megatron-LM's parallelism arguments (shared with the command
#: line; torchrun's flags, read from command lines only, left out).
MEGATRON_ARGS: dict[str, str] = {
    name: key
    for name, _flag, key, _meaning, handling, source in _MEGATRON_TABLE
    if handling == "modelled" and source != "torchrun"
}

#: Megatron-LM arguments that change the process groups in a way
#: rank-layout does not model -> what they do: given (not ``None`` or
#: ``False``), :meth:`Layout.from_megatron_args` raises naming them.
MEGATRON_REFUSED: dict[str, str] = {
    name: meaning
    for name, _flag, _key, meaning, handling, _source in _MEGATRON_TABLE
    if handling == "refused"
}


class Split(_NamedTuple):
    """A rank's comm-split pair for one kind: its group's ``color`` (the
    group's number) and its ``key`` (its place in the group)."""

    color: int
    key: int


class SplitRound(_NamedTuple):
    """One step of :meth:`Layout.splits`: a kind, one of its ``rounds``, and
    the rank's :class:`Split` there (``None``: in no group of this round)."""

    kind: str
    round: int
    rounds: int
    split: _Optional[Split]


def _rebuild(cls: type, config: dict[str, _Any]) -> "Layout":
    """Unpickles a layout: rebuilt (and re-validated) from its configuration."""
    return cls(**config)


def _rebuild_mesh(
    dims: list[tuple[str, int]],
    rank_offset: int,
    rank_map: _Optional[list[int]],
    views: list[tuple[str, list[tuple[str, int]]]],
    flattens: list[tuple[str, str]],
) -> Mesh:
    """Unpickles a mesh: rebuilt (and checked again) from its dims, rank
    offset, rank map, views and flattens."""
    mesh = Mesh(dims, rank_offset=rank_offset, rank_map=rank_map)
    for name, view_dims in views:
        mesh = mesh.view(name, view_dims)
    for name, spec in flattens:
        mesh = mesh.flatten(name, spec)
    return mesh


class Layout(_NativeLayout):
    __doc__ = _NativeLayout.__doc__
    __slots__ = ()

    def __reduce__(self) -> tuple[_Any, ...]:
        """Pickles as the resolved configuration (for multiprocessing)."""
        return (_rebuild, (type(self), self.config))

    def splits(self, rank: _Any) -> list[SplitRound]:
        return [
            SplitRound(kind, r, rounds, None if s is None else Split(*s))
            for kind, r, rounds, s in super().splits(rank)
        ]

    splits.__doc__ = _NativeLayout.splits.__doc__

    @classmethod
    def from_megatron_args(cls, args: _Any, **overrides: _Any) -> "Layout":
        """The layout Megatron-Core builds from Megatron-LM's arguments.

        ``args`` is an ``argparse.Namespace`` (Megatron-LM's ``get_args()``),
        a dict, or any object with the attributes; or a pasted command line
        (a ``str``, as the command line's ``--megatron-args``) or its words
        (a list of ``str``, such as ``sys.argv``), whose other arguments are
        ignored. Anything else (``42``) is a ``TypeError`` naming its type.
        The arguments read are
        the rows of :data:`MEGATRON_ARGS` (the crate's one table, which the
        command line's flags and configuration files read too), with
        Megatron-Core's defaults:

        - ``tensor_model_parallel_size`` -> ``tp``,
          ``pipeline_model_parallel_size`` -> ``pp``,
          ``context_parallel_size`` -> ``cp``,
          ``expert_model_parallel_size`` -> ``ep``,
          ``expert_tensor_parallel_size`` -> ``etp`` (default ``tp``);
        - ``world_size`` and ``data_parallel_size`` -> ``world_size`` and
          ``dp``, checked against each other when both are given;
        - ``encoder_pipeline_model_parallel_size`` > 0 makes an encoder +
          decoder layout, with ``encoder_tensor_model_parallel_size`` (0
          means ``tp``);
        - ``hierarchical_context_parallel_sizes`` -> ``hierarchical_cp``,
          ``num_distributed_optimizer_instances`` -> ``dist_opt_instances``;
        - ``use_tp_pp_dp_mapping`` -> order ``tp-cp-ep-pp-dp`` instead of
          ``tp-cp-ep-dp-pp``;
        - ``tensor_parallel_num_weight_shards`` S -> ``gtp_remat`` S / tp,
          ``expert_tensor_parallel_num_weight_shards`` S ->
          ``expert_gtp_remat`` S / etp (Megatron-Core's rule: S >= tp and
          divisible by it).

        The arguments of :data:`MEGATRON_REFUSED` (``hybrid_context_parallel``,
        the RL inference sizes, ...) change the groups in a way rank-layout
        does not model: given (not ``None`` or ``False``), they raise
        :class:`LayoutError` naming them. ``inference_shards`` describes
        several layouts, not one: given, it raises too;
        :meth:`InferenceShards.from_megatron_args` reads them.

        The expert layout is Megatron-Core's folded grid (the default of
        :class:`Layout`), with an encoder too. ``overrides`` are
        configuration keys applied last, e.g. ``expert_layout="nested"`` for
        Megatron-LM's 2024 layout, or ``world_size=...``.

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
        >>> Layout.from_megatron_args("pretrain_gpt.py --tensor-model-parallel-size 8 --world-size 64").sizes["dp"]
        8
        """
        config = megatron_config(args)
        config.update(overrides)
        return cls(**config)


def placement_rank_map(
    placement: _Union[dict[str, _Any], _Sequence[str]],
    launcher_hosts: _Sequence[_Union[str, tuple[str, int]]],
    gpus_per_node: _Optional[int] = None,
) -> list[int]:
    """The rank map of a placed job: ``rank_map[r]`` is the launcher's
    (``torch.distributed``'s) rank of the process that runs logical rank
    ``r`` of the placement, for the ``rank_map=`` of
    :func:`rank_layout.torch.new_groups` and
    :func:`rank_layout.torch.megatron.initialize_model_parallel`.

    ``placement`` is what :func:`place` returned (its ``node_hosts`` and
    ``gpus_per_node``) or the host of each logical node in order (then
    ``gpus_per_node`` is needed). Logical rank ``r`` runs on the host of
    node ``r // G``, GPU (local rank) ``r % G``. ``launcher_hosts[t]`` is
    where the launcher put its rank ``t``: ``(host, local_rank)``, or the
    host alone (the local ranks then count the host's processes in
    launcher order). Host names must be spelled as in the placement.

    >>> placement = {"node_hosts": ["b", "a"], "gpus_per_node": 2}
    >>> placement_rank_map(placement, ["a", "a", "b", "b"])  # c10d sorted a first
    [2, 3, 0, 1]
    >>> placement_rank_map(["b", "a"], [("a", 1), ("a", 0), ("b", 0), ("b", 1)], 2)
    [2, 3, 1, 0]

    Raises :class:`LayoutError` when the launcher's processes are not
    exactly the placement's: a host the placement does not use (idle,
    spare), a local rank out of range or given twice, a missing process.
    """
    if isinstance(placement, dict):
        try:
            nodes = list(placement["node_hosts"])
        except KeyError:
            raise LayoutError("placement has no node_hosts (pass what rank_layout.place returned)") from None
        per_node = placement.get("gpus_per_node") if gpus_per_node is None else gpus_per_node
    elif isinstance(placement, str):
        raise LayoutError("placement must be place()'s dict or a list of host names, got a str")
    else:
        nodes, per_node = list(placement), gpus_per_node
    if per_node is None:
        raise LayoutError("gpus_per_node is needed with a list of node hosts")
    if isinstance(per_node, bool) or not isinstance(per_node, int) or per_node < 1:
        raise LayoutError(f"gpus_per_node must be a positive int, got {per_node!r}")
    slot: dict[str, int] = {}
    for n, host in enumerate(nodes):
        if not isinstance(host, str):
            raise LayoutError(f"node {n}'s host must be a str, got {host!r}")
        if host in slot:
            raise LayoutError(f"host {host!r} holds nodes {slot[host]} and {n}")
        slot[host] = n
    world = len(nodes) * per_node
    if isinstance(launcher_hosts, str):
        raise LayoutError("launcher_hosts must be a sequence (one entry per launcher rank), got a str")
    launched = list(launcher_hosts)
    if len(launched) != world:
        raise LayoutError(
            f"the launcher has {len(launched)} processes; the placement runs {world} "
            f"({len(nodes)} nodes of {per_node})"
        )
    counted: dict[str, int] = {}
    rank_map = [-1] * world
    for t, entry in enumerate(launched):
        if isinstance(entry, str):
            host = entry
            local = counted.get(host, 0)
            counted[host] = local + 1
        else:
            try:
                host, local = entry
            except (TypeError, ValueError):
                raise LayoutError(
                    f"launcher rank {t}: expected a host name or (host, local_rank), got {entry!r}"
                ) from None
            if isinstance(local, bool) or not isinstance(local, int):
                raise LayoutError(f"launcher rank {t}: local rank must be an int, got {local!r}")
        if host not in slot:
            raise LayoutError(f"launcher rank {t} runs on {host!r}, a host the placement does not use")
        if not 0 <= local < per_node:
            raise LayoutError(f"launcher rank {t} on {host!r}: local rank {local} is not below {per_node}")
        logical = slot[host] * per_node + local
        if rank_map[logical] >= 0:
            raise LayoutError(
                f"launcher ranks {rank_map[logical]} and {t} are both local rank {local} of {host!r}"
            )
        rank_map[logical] = t
    return rank_map
