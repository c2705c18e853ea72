"""The body of each process of test_reshard_gloo.py (a module of its own so
that spawned processes can import it), and what the reshard tests share:
a small model with every kind of sharding, its global tensors (every
element its own value), and a shard cut from them by a plan's boxes.

Each process of a world runs the cases in order on the default gloo
group: it builds the plan (every process the same, with no
communication), cuts its source shards from the global tensors, fills
the destination tensors it passes with -1 (no element of a global tensor
is negative), runs ``apply_reshard`` and checks every element of every
destination tensor against the global tensors. The last case of a world
may kill a process: it writes its result, says it is going (a store key)
and SIGKILLs itself; the survivors plan the reshard of the re-layout that
drops it and run it among themselves.
"""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

#: Every wait of the processes.
TIMEOUT = timedelta(seconds=60)

LAYERS, EXPERTS = 4, 4


def model() -> dict[str, Any]:
    """A 4-layer model with 4 experts: a tied embedding on both pipeline
    ends, fused QKV (stride 3), SwiGLU fc1 (stride 2), row-parallel
    weights (tp on dim 1: boxes that are not contiguous), norms
    replicated over tp, a packed ``in_proj`` (Mamba's blocks), per-expert
    weights and a fused expert tensor, a KV cache of layers over the
    stages and heads over tp, and a distributed-optimizer buffer; 4- and
    8-byte elements."""
    tensors: list[dict[str, Any]] = [
        {"name": "embedding", "shape": [32, 6], "element_bytes": 4, "layer": "ends", "tp_dim": 0},
    ]
    for layer in range(LAYERS):
        tensors += [
            {"name": f"l{layer}.qkv", "shape": [24, 6], "element_bytes": 4, "layer": layer, "tp_dim": 0, "tp_stride": 3},
            {"name": f"l{layer}.proj", "shape": [6, 8], "element_bytes": 4, "layer": layer, "tp_dim": 1},
            {"name": f"l{layer}.fc1", "shape": [16, 6], "element_bytes": 8, "layer": layer, "tp_dim": 0, "tp_stride": 2},
            {"name": f"l{layer}.fc2", "shape": [6, 8], "element_bytes": 4, "layer": layer, "tp_dim": 1},
            {"name": f"l{layer}.norm", "shape": [6], "element_bytes": 8, "layer": layer},
        ]
        if layer == 1:
            tensors.append({"name": "l1.in_proj", "shape": [20, 6], "element_bytes": 4, "layer": 1, "tp_dim": 0, "tp_sizes": [8, 4, 8]})
        if layer % 2 == 1:
            tensors += [
                {"name": f"l{layer}.e{e}.fc1", "shape": [8, 6], "element_bytes": 4, "layer": layer, "expert": e, "tp_dim": 0, "tp_stride": 2}
                for e in range(EXPERTS)
            ]
        if layer == 3:
            tensors.append({"name": "l3.experts", "shape": [EXPERTS, 8, 6], "element_bytes": 4, "layer": 3, "ep_dim": 0, "tp_dim": 1})
    tensors += [
        {"name": "kv", "shape": [2 * LAYERS, 8, 3], "element_bytes": 4, "pp_dim": 0, "tp_dim": 1},
        {"name": "final_norm", "shape": [6], "element_bytes": 8, "layer": "last"},
        {"name": "optimizer", "shape": [96], "element_bytes": 8, "dp_dim": 0},
    ]
    return {"num_layers": LAYERS, "num_experts": EXPERTS, "tensors": tensors}


def global_arrays(tensors: dict[str, Any]) -> dict[str, np.ndarray]:
    """Every tensor's global values: the model's elements numbered end to
    end (tensor after tensor, row-major), so each element is its own
    value, and none is negative."""
    out, base = {}, 0
    for t in tensors["tensors"]:
        n = int(np.prod(t["shape"]))
        dtype = np.int64 if t.get("element_bytes", 2) == 8 else np.int32
        out[t["name"]] = (base + np.arange(n, dtype=np.int64)).astype(dtype).reshape(t["shape"])
        base += n
    return out


def cut(shard: dict[str, Any], whole: np.ndarray) -> np.ndarray:
    """A shard (``source_shard`` or ``destination_shard``) of a global
    array: each box of the whole at its local offset."""
    local = np.full(shard["local_shape"], -1, dtype=whole.dtype)
    for b in shard["boxes"]:
        there = tuple(slice(lo, hi) for lo, hi in b["box"])
        here = tuple(slice(o, o + hi - lo) for o, (lo, hi) in zip(b["offset"], b["box"]))
        local[here] = whole[there]
    return local


def plan_of_case(case: dict[str, Any]) -> Any:
    """The case's plan: two layouts, or the re-layout after ``failed``."""
    from rank_layout import Layout, relayout, reshard

    tensors = case.get("tensors") or model()
    if "failed" in case:
        lost = relayout(Layout(**case["from"]), [case["failed"]], policy=case["policy"])
        return reshard(lost, tensors=tensors, gpus_per_node=case["gpus_per_node"])
    return reshard(Layout(**case["from"]), Layout(**case["to"]), tensors=tensors, gpus_per_node=case["gpus_per_node"])


def run_case(case: dict[str, Any], rank: int, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """One case on this process: plan, cut, execute, check every element."""
    import torch

    from rank_layout.torch import apply_reshard

    plan = plan_of_case(case)
    mine = plan.plan_of(rank) if _in_plan(plan, rank) else None
    if mine is None:
        return {"checked": 0, "elements": 0, "sends": 0, "recvs": 0, "copies": 0}
    sources = {}
    for name in plan.tensor_names:
        shard = plan.source_shard(rank, name)
        if shard is not None:
            sources[name] = torch.from_numpy(cut(shard, arrays[name]))
    given = {}
    if case.get("allocate") != "executor":
        for name in plan.tensor_names:
            shard = plan.destination_shard(rank, name)
            if shard is not None:
                given[name] = torch.full(shard["local_shape"], -1, dtype=torch.from_numpy(arrays[name][:0]).dtype)
    t = time.monotonic()
    out = apply_reshard(plan, sources, given if given else None, dtype={n: torch.from_numpy(a[:0]).dtype for n, a in arrays.items()})
    seconds = time.monotonic() - t
    checked = elements = 0
    for name in plan.tensor_names:
        shard = plan.destination_shard(rank, name)
        if shard is None:
            assert name not in out, name
            continue
        want = cut(shard, arrays[name])
        got = out[name].numpy()
        assert (want >= 0).all(), f"{name}: the destination shard's boxes do not cover it"
        bad = np.argwhere(got != want)
        assert bad.size == 0, f"{case['label']}: {name} on process {rank}: {len(bad)} wrong elements, first at {bad[0].tolist()}: {got[tuple(bad[0])]} (want {want[tuple(bad[0])]})"
        if name in given:
            assert out[name] is given[name], name
        checked += 1
        elements += want.size
    return {
        "checked": checked,
        "elements": elements,
        "sends": len(mine["sends"]),
        "recvs": len(mine["recvs"]),
        "copies": len(mine["copies"]),
        "seconds": round(seconds, 3),
    }


def _in_plan(plan: Any, process: int) -> bool:
    for layout in (plan.from_layout, plan.to_layout):
        if layout.rank_offset <= process < layout.rank_offset + layout.world_size:
            return True
    return False


def run(rank: int, world: int, port: int, out: str, job: dict[str, Any]) -> None:
    """One process of the world; writes what it saw to ``out``/rank.json."""
    from worlds import recorded

    result: dict[str, Any] = {"rank": rank, "error": None, "cases": {}}
    with recorded(out, rank, result):
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        store = dist.TCPStore("127.0.0.1", port, world, is_master=rank == 0, timeout=TIMEOUT)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=TIMEOUT)
        arrays = global_arrays(model())
        alive = list(range(world))
        for case in job["cases"]:
            label = case["label"]
            if "failed" in case:
                failed = case["failed"]
                if rank == failed:
                    # Every earlier case is done everywhere (the barrier
                    # below); the process goes, with its result written.
                    result["killed"] = True
                    Path(out, f"{rank}.json").write_text(json.dumps(result))
                    store.set(f"gone/{rank}", "1")
                    os.kill(os.getpid(), signal.SIGKILL)
                store.wait([f"gone/{failed}"], TIMEOUT)
                alive = [r for r in alive if r != failed]
            result["cases"][label] = run_case(case, rank, arrays)
            # A barrier through the store (the default group may hold a dead process).
            store.set(f"done/{label}/{rank}", "1")
            store.wait([f"done/{label}/{r}" for r in alive], TIMEOUT)
        dist.destroy_process_group()
        # The store lives in process 0: it goes once every other process
        # is past its last wait.
        store.set(f"bye/{rank}", "1")
        if rank == 0:
            store.wait([f"bye/{r}" for r in alive], TIMEOUT)
