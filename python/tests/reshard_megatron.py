"""Megatron-Core 0.19.2's refit planner (``megatron.core.resharding``) on
the layouts and tensors of a rank-layout reshard, on the CPU without a
process group: what test_reshard_megatron_core.py compares and
python/bench_reshard.py times.

The rosters are built as ``build_local_reshard_plan`` would all-gather
them: for every rank, the ``ParameterMetadata`` of each parameter its
source and its destination model hold, made by Megatron-Core's own
``extract_param_metadata`` from a parameter (on the meta device, with
the attributes Megatron-Core's layers set: ``tensor_model_parallel``,
``partition_dim``, ``partition_stride``, ``partition_sizes``,
``allreduce`` False for experts) and a ``ProcessGroupCollection`` whose
groups are Megatron-Core's own ``RankGenerator`` groups of the layout
(decoder ``tp``, ``dp``, ``pp``; expert ``ep`` and ``tp``), read through
``dist.get_process_group_ranks`` (patched to return the rank lists).
Parameter names are local, as a module names them (a stage's layers from
0, a rank's experts from 0), with the layer prefix map
``_build_layer_module_prefix_map`` would give, so Megatron-Core resolves
the global names itself. A tied embedding is ``embedding.word_embeddings.weight``
on the first stage and, with pp > 1, its copy ``output_layer.weight`` on
the last (rank-layout's one tensor held by both ends).

A rank's local tensor is cut from the global one as Megatron-Core's
layers cut it (``_initialize_affine_weight_cpu``): the tensor-parallel
dim in ``tp * stride`` segments, rank ``t`` holding ``t, t + tp, ...``;
packed blocks each in ``tp`` pieces; a fused expert tensor's expert dim
in ``ep`` contiguous parts.
"""

from __future__ import annotations

import contextlib
import re
import types
import warnings
from typing import Any, Iterator, Optional

import numpy as np

ORDER = "tp-cp-ep-dp-pp"
LAYER = re.compile(r"^decoder\.layers\.(\d+)\.")
EXPERT = re.compile(r"weight(\d+)$")


def _import() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.parallel_state import RankGenerator
        from megatron.core.resharding import planner, utils
    return RankGenerator, planner, utils


class Grid:
    """One side's groups, each rank's, from Megatron-Core's RankGenerator."""

    def __init__(self, layout: Any) -> None:
        RankGenerator, _, _ = _import()
        s = layout.sizes
        assert s["cp"] == 1 and layout.config["order"] == ORDER, "the parity tests use cp 1, the default order"
        off = layout.rank_offset
        dense = RankGenerator(tp=s["tp"], ep=1, dp=s["dp"], pp=s["pp"], cp=1, order=ORDER, rank_offset=off)
        expert = RankGenerator(tp=s["etp"], ep=s["ep"], dp=s["edp"], pp=s["pp"], cp=1, order=ORDER, rank_offset=off)
        self.offset, self.world = off, layout.world_size
        self.of: dict[str, dict[int, list[int]]] = {}
        for name, gen, token in [("tp", dense, "tp"), ("dp", dense, "dp"), ("pp", dense, "pp"),
                                 ("ep", expert, "ep"), ("expt_tp", expert, "tp")]:
            self.of[name] = {r: g for g in gen.get_ranks(token) for r in g}
        self.pp, self.ep = s["pp"], s["ep"]

    def ranks(self) -> range:
        return range(self.offset, self.offset + self.world)

    def index(self, kind: str, rank: int) -> int:
        return self.of[kind][rank].index(rank)


def stage_layers(num_layers: int, pp: int, stage: int) -> range:
    per = num_layers // pp
    return range(stage * per, (stage + 1) * per)


def _local_name(name: str, stage_first: int, expert_first: Optional[int]) -> str:
    m = LAYER.match(name)
    if m:
        name = f"decoder.layers.{int(m.group(1)) - stage_first}." + name[m.end():]
    if expert_first is not None:
        e = EXPERT.search(name)
        name = name[: e.start()] + f"weight{int(e.group(1)) - expert_first}"
    return name


def holders(model: dict[str, Any], grid: Grid, rank: int) -> list[tuple[str, dict[str, Any], str]]:
    """The parameters ``rank`` holds: (its local name, the tensor, the
    resolved name Megatron-Core should find)."""
    stage = grid.index("pp", rank)
    layers = stage_layers(model["num_layers"], grid.pp, stage)
    out = []
    experts = model.get("num_experts", 0)
    for t in model["tensors"]:
        layer = t.get("layer")
        expert_first = None
        if "expert" in t:
            per = experts // grid.ep
            if t["expert"] // per != grid.index("ep", rank):
                continue
            expert_first = grid.index("ep", rank) * per
        if isinstance(layer, int):
            if layer not in layers:
                continue
            local = _local_name(t["name"], layers[0], expert_first)
            out.append((local, t, t["name"]))
        elif layer == "ends":
            if stage == 0:
                out.append((t["name"], t, t["name"]))
            if stage == grid.pp - 1 and grid.pp > 1:
                out.append(("output_layer.weight", t, "output_layer.weight"))
        elif layer == "first":
            if stage == 0:
                out.append((t["name"], t, t["name"]))
        elif layer == "last":
            if stage == grid.pp - 1:
                out.append((t["name"], t, t["name"]))
        else:
            assert "pp_dim" not in t and "dp_dim" not in t, "Megatron-Core's refit moves parameters only"
            out.append((t["name"], t, t["name"]))
    return out


@contextlib.contextmanager
def rank_lists() -> Iterator[None]:
    """``dist.get_process_group_ranks`` of the planner's utils returns the
    rank list it is given (the groups are rank lists here)."""
    _, _, utils = _import()
    real = utils.dist
    utils.dist = types.SimpleNamespace(get_process_group_ranks=lambda g: g, get_world_size=lambda: 0)
    try:
        yield
    finally:
        utils.dist = real


def metadata(model: dict[str, Any], grid: Grid, rank: int, cache: dict, torch: Any) -> tuple[list[Any], dict[str, str]]:
    """``rank``'s ParameterMetadata list for one side, by Megatron-Core's
    ``extract_param_metadata``; and local name -> tensor name."""
    _, _, utils = _import()
    pg = types.SimpleNamespace(tp=grid.of["tp"][rank], dp=grid.of["dp"][rank], pp=grid.of["pp"][rank],
                               ep=grid.of["ep"][rank], expt_tp=grid.of["expt_tp"][rank])
    metas, names = [], {}
    layers = stage_layers(model["num_layers"], grid.pp, grid.index("pp", rank))
    # What _build_layer_module_prefix_map gives (layer_number is global, from 1).
    prefix = {f"decoder.layers.{layer - layers[0]}": f"decoder.layers.{layer}" for layer in layers}
    for local, t, resolved in holders(model, grid, rank):
        expert = "expert" in t or "ep_dim" in t
        tp = len(pg.expt_tp if expert else pg.tp)
        shape = local_shape(t, tp, grid.ep if "ep_dim" in t else 1)
        dtype = {2: torch.bfloat16, 4: torch.float32, 8: torch.float64}[t.get("element_bytes", 2)]
        p = torch.nn.Parameter(torch.empty(shape, dtype=dtype, device="meta"), requires_grad=False)
        if "tp_dim" in t and not expert:
            p.tensor_model_parallel = True
        if "tp_dim" in t:
            p.partition_dim = t["tp_dim"]
            p.partition_stride = t.get("tp_stride", 1)
            if "tp_sizes" in t:
                p.partition_sizes = [s // tp for s in t["tp_sizes"]]
        if expert:
            p.allreduce = False
        m = utils.extract_param_metadata(p, local, rank, pg, num_experts=model.get("num_experts") or None,
                                         layer_module_prefix_map=prefix, _rank_list_cache=cache)
        assert m.resolved_name == resolved, (m.resolved_name, resolved)
        metas.append(m)
        names[local] = t["name"]
    return metas, names


def local_shape(t: dict[str, Any], tp: int, ep: int) -> list[int]:
    shape = list(t["shape"])
    if "ep_dim" in t:
        shape[t["ep_dim"]] //= ep
    if "tp_dim" in t:
        shape[t["tp_dim"]] //= tp
    return shape


def megatron_local(whole: np.ndarray, t: dict[str, Any], tp_rank: int, tp: int, ep_rank: int, ep: int) -> np.ndarray:
    """A rank's local tensor, cut as Megatron-Core's layers cut it."""
    a = whole
    if "ep_dim" in t:
        a = np.split(a, ep, axis=t["ep_dim"])[ep_rank]
    if "tp_dim" in t:
        d = t["tp_dim"]
        if "tp_sizes" in t:
            blocks = np.split(a, np.cumsum(t["tp_sizes"])[:-1], axis=d)
            a = np.concatenate([np.split(b, tp, axis=d)[tp_rank] for b in blocks], axis=d)
        else:
            s = t.get("tp_stride", 1)
            segments = np.split(a, tp * s, axis=d)
            a = np.concatenate([segments[tp_rank + k * tp] for k in range(s)], axis=d)
    return np.ascontiguousarray(a)


class Side:
    """One side of a reshard as Megatron-Core sees it: every rank's
    metadata, names and local arrays."""

    def __init__(self, model: dict[str, Any], layout: Any, torch: Any, cache: dict) -> None:
        self.grid = Grid(layout)
        self.metas: dict[int, list[Any]] = {}
        self.names: dict[int, dict[str, str]] = {}
        with rank_lists():
            for r in self.grid.ranks():
                self.metas[r], self.names[r] = metadata(model, self.grid, r, cache, torch)

    def local(self, model: dict[str, Any], arrays: dict[str, np.ndarray], rank: int, name: str) -> np.ndarray:
        t = next(t for t in model["tensors"] if t["name"] == name)
        expert = "expert" in t or "ep_dim" in t
        tp_kind = "expt_tp" if expert else "tp"
        g = self.grid
        return megatron_local(arrays[name], t, g.index(tp_kind, rank), len(g.of[tp_kind][rank]),
                              g.index("ep", rank), g.ep)


def rosters(world: int, src: Side, dst: Side) -> tuple[dict, dict]:
    """Megatron-Core's two rosters (``index_metadata_rosters``) of a
    world of ``world`` ranks: what the all-gather would give."""
    _, planner, _ = _import()
    pairs = [(src.metas.get(r, []), dst.metas.get(r, [])) for r in range(world)]
    return planner.index_metadata_rosters(pairs)


def schedule_moves(world: int, src: Side, dst: Side) -> list[tuple[int, int, int]]:
    """Megatron-Core's whole schedule (``_iter_global_transfer_ops``, what
    ``build_plan_from_rosters`` replays on every rank) as (src, dst,
    bytes), without data: each op's bytes from its destination slice of
    the destination's local shape."""
    _, planner, _ = _import()
    dst_by_rank, src_by_name = rosters(world, src, dst)
    moves = []
    for _task, d, s, _src_slice, dst_slice, _sm, dm in planner._iter_global_transfer_ops(dst_by_rank, src_by_name):
        n = dm.element_size
        for length, sl in zip(dm.shape, dst_slice):
            n *= len(range(*sl.indices(length)))
        moves.append((s, d, n))
    return moves
