"""Executes a reshard plan (:func:`rank_layout.reshard`) on this process's
tensors with ``torch.distributed``: its sends and receives in one
``batch_isend_irecv``, its local copies in memory.

>>> from rank_layout import Layout, reshard
>>> from rank_layout.torch.reshard import apply_reshard
>>> plan = reshard(train_layout, infer_layout, model_args=args)     # doctest: +SKIP
>>> # every process, with what it holds of the training layout:
>>> out = apply_reshard(plan, {name: p.data for name, p in model.named_parameters()})  # doctest: +SKIP
>>> out["decoder.layers.0.mlp.linear_fc1.weight"].shape              # doctest: +SKIP

What it does
------------
Every process of either side calls :func:`apply_reshard` with the same
plan (every process computes the same plan from the same arguments, with
no communication). On process ``p`` (default: the torch global rank;
with ``ranks``, the process whose torch rank this is):

1. ``plan.plan_of(p)``: its sends, receives and local copies, each in
   ``id`` order. A send and its receive carry the same ``id``, so the
   sends from ``p`` to a peer and that peer's receives from ``p`` come in
   the same order on both processes: posted in that order, message ``k``
   between two processes is the ``k``-th of each, with one tag.
2. The destination tensors: ``destinations[name]`` where given, else
   ``torch.empty`` of the local shape ``plan.destination_shard(p, name)``
   gives, for every tensor ``p`` holds on the destination side (dtype:
   ``dtype``, else that of ``sources[name]``; device: ``device``, else
   that of the sources, else the CPU). Every element is written by the
   plan (it covers each destination shard exactly once).
3. One ``torch.distributed.batch_isend_irecv`` of every send and receive:
   a piece is ``narrow`` views of the local tensor at the transfer's
   offset (``src_offset``, ``dst_offset``) with the box's lengths; a view
   that is not contiguous (a box that does not cover every dim after its
   first cut one) is sent from a contiguous copy and received into a
   buffer copied into place after the wait.
4. The local copies (``src == dst``), ``copy_`` between views, while the
   messages are in flight; then it waits for them.

A process with nothing to send or receive makes no call. The shapes are
checked first, on every process, before any message: a source tensor
whose shape is not its shard's local shape, whose element size is not
the model's ``element_bytes``, a destination tensor of the wrong shape,
or a tensor the plan needs that is missing, raises
:class:`rank_layout.LayoutError` naming it. The processes of a dead
side (``dead``, or a :class:`rank_layout.Relayout`'s failed processes)
are never peers: the survivors exchange among themselves on the default
group (gloo and NCCL point-to-point pairs do not need the dead).
"""

from __future__ import annotations

from typing import Any, Mapping, MutableMapping, Optional, Sequence, Union

import torch
import torch.distributed as dist

from rank_layout import LayoutError, Reshard

__all__ = ["apply_reshard"]


def _view(tensor: torch.Tensor, offset: Sequence[int], box: Sequence[Sequence[int]]) -> torch.Tensor:
    """The piece of ``tensor`` at ``offset`` with the lengths of ``box``,
    as a view (``narrow`` on each dim it does not cover whole)."""
    view = tensor
    for d, (start, (lo, hi)) in enumerate(zip(offset, box)):
        if start != 0 or hi - lo != view.shape[d]:
            view = view.narrow(d, start, hi - lo)
    return view


def _rank_of(ranks: Optional[Union[Sequence[int], Mapping[int, int]]], process: int) -> int:
    """The torch global rank of ``process``."""
    if ranks is None:
        return process
    try:
        return int(ranks[process])
    except (IndexError, KeyError):
        raise LayoutError(f"ranks has no torch rank for process {process}") from None


def apply_reshard(
    plan: Reshard,
    sources: Mapping[str, torch.Tensor],
    destinations: Optional[MutableMapping[str, torch.Tensor]] = None,
    *,
    process: Optional[int] = None,
    dtype: Optional[Union[torch.dtype, Mapping[str, torch.dtype]]] = None,
    device: Optional[Union[str, torch.device]] = None,
    group: Optional[Any] = None,
    ranks: Optional[Union[Sequence[int], Mapping[int, int]]] = None,
) -> dict[str, torch.Tensor]:
    """Runs this process's part of ``plan``: ``sources`` (tensor name ->
    this process's shard on the source side, in its local shape) go to
    the destination tensors, which it returns (tensor name -> this
    process's shard on the destination side; ``destinations``, where
    given, filled in place). ``group``: the process group of the
    messages (default: the default group); ``ranks``: the torch global
    rank of each process (a list or a dict), default the process itself.
    The module's doc says how.

    Raises :class:`rank_layout.LayoutError` on every process whose
    tensors do not fit the plan, before any message.
    """
    if process is None:
        me = dist.get_rank()
        if ranks is None:
            process = me
        else:
            items = ranks.items() if isinstance(ranks, Mapping) else enumerate(ranks)
            found = [p for p, r in items if int(r) == me]
            if len(found) != 1:
                raise LayoutError(f"torch rank {me} runs {len(found)} processes of ranks (one needed)")
            process = found[0]
    mine = plan.plan_of(process)
    element_bytes = {t["name"]: t["element_bytes"] for t in plan.model["tensors"]}

    def check(name: str, tensor: torch.Tensor, shard: Optional[dict[str, Any]], side: str) -> None:
        if shard is None:
            raise LayoutError(f"process {process} holds no {side} shard of tensor {name}")
        if list(tensor.shape) != shard["local_shape"]:
            raise LayoutError(
                f"tensor {name}: process {process}'s {side} shard has shape {shard['local_shape']}, "
                f"got a tensor of shape {list(tensor.shape)}"
            )
        if tensor.element_size() != element_bytes[name]:
            raise LayoutError(
                f"tensor {name}: {element_bytes[name]} bytes per element in the model, "
                f"got {tensor.dtype} ({tensor.element_size()} bytes)"
            )

    for name, tensor in sources.items():
        if name not in element_bytes:
            raise LayoutError(f"no tensor named {name!r} in the model")
        check(name, tensor, plan.source_shard(process, name), "source")
    for t in mine["sends"] + mine["copies"]:
        if t["tensor"] not in sources:
            raise LayoutError(f"process {process} sends tensor {t['tensor']}: it is missing from sources")

    out: dict[str, torch.Tensor] = {}
    given = destinations if destinations is not None else {}
    default_device = device if device is not None else next((s.device for s in sources.values()), "cpu")
    for name in plan.tensor_names:
        shard = plan.destination_shard(process, name)
        if name in given:
            check(name, given[name], shard, "destination")
            out[name] = given[name]
        elif shard is not None:
            if isinstance(dtype, Mapping):
                kind = dtype.get(name)
            else:
                kind = dtype
            if kind is None:
                if name not in sources:
                    raise LayoutError(
                        f"tensor {name}: give its dtype (dtype=...), or its destination tensor"
                    )
                kind = sources[name].dtype
            out[name] = torch.empty(shard["local_shape"], dtype=kind, device=default_device)
            check(name, out[name], shard, "destination")

    ops = []
    for t in mine["sends"]:
        piece = _view(sources[t["tensor"]], t["src_offset"], t["box"])
        ops.append(dist.P2POp(dist.isend, piece.contiguous(), _rank_of(ranks, t["dst"]), group))
    landing = []
    for t in mine["recvs"]:
        view = _view(out[t["tensor"]], t["dst_offset"], t["box"])
        buffer = view if view.is_contiguous() else torch.empty_like(view, memory_format=torch.contiguous_format)
        if buffer is not view:
            landing.append((view, buffer))
        ops.append(dist.P2POp(dist.irecv, buffer, _rank_of(ranks, t["src"]), group))
    works = dist.batch_isend_irecv(ops) if ops else []
    for t in mine["copies"]:
        _view(out[t["tensor"]], t["dst_offset"], t["box"]).copy_(_view(sources[t["tensor"]], t["src_offset"], t["box"]))
    for w in works:
        w.wait()
    for view, buffer in landing:
        view.copy_(buffer)
    if destinations is not None:
        destinations.update(out)
    return out
