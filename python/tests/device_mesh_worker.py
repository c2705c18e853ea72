"""What the DeviceMesh tests compare, and the body of each process of
test_device_mesh_gloo.py (a module of its own so that spawned processes can
import it).

``describe_mesh`` and ``describe_titan`` list everything a DeviceMesh or
torchtitan user sees on this rank (dim names, shape, rank tensor, layout,
root, coordinate, and per dim the group's ranks, backend and the local
rank; every sub-mesh; every query of ``ParallelDims``), so that two set-ups
compare with ``==``, and ``differences`` names what differs."""

from __future__ import annotations

import itertools
import json
import traceback
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

import worlds

TIMEOUT = timedelta(seconds=120)


def describe_mesh(m: Any, subsets: bool = True) -> Any:
    """A DeviceMesh as this rank sees it (``None`` stays ``None``)."""
    import torch.distributed as dist

    if m is None:
        return None
    out: dict[str, Any] = {
        "names": m.mesh_dim_names,
        "shape": tuple(m.shape),
        "mesh": m.mesh.tolist(),
        "coord": m.get_coordinate(),
        "layout": repr(m._layout),
        "rank_map": m._rank_map.tolist(),
        "root names": m._get_root_mesh().mesh_dim_names,
    }
    if m.get_coordinate() is None:
        return out
    for n in m.mesh_dim_names:
        g = m.get_group(n)
        out[f"dim {n}"] = (dist.get_process_group_ranks(g), dist.get_backend(g), m.get_local_rank(n))
    if subsets and m.ndim > 1:
        for k in range(1, m.ndim):
            for sub in itertools.combinations(m.mesh_dim_names, k):
                out[f"sub {sub}"] = describe_mesh(m[sub], subsets=False)
    return out


def _query(f: Callable[[], Any]) -> Any:
    try:
        return describe_mesh(f(), subsets=False)
    except ValueError as e:  # LayoutError is a ValueError, as torchtitan's
        return ("ValueError", str(e))
    except (KeyError, IndexError, AssertionError, RuntimeError) as e:
        return (type(e).__name__, str(e))


def describe_titan(pd: Any) -> dict[str, Any]:
    """Every mesh a torchtitan ``ParallelDims`` (after ``build_mesh``) or
    rank-layout's ``TorchtitanMeshes`` has, and every query's answer."""
    out: dict[str, Any] = {"world": describe_mesh(pd.world_mesh)}
    out["global keys"] = list(pd._global_meshes)
    for k, m in pd._global_meshes.items():
        out[f"global {k}"] = describe_mesh(m)
        out[f"global {k} is under the world"] = m._get_root_mesh() is pd.world_mesh
    out["single keys"] = list(pd._single_axis_meshes)
    for k, m in pd._single_axis_meshes.items():
        out[f"single {k}"] = describe_mesh(m)
        out[f"optional {k}"] = _query(lambda: pd.get_optional_mesh(k))
        out[f"mesh {k}"] = _query(lambda: pd.get_mesh(k))
        out[f"singleton {k}"] = _query(lambda: pd.get_optional_mesh(k, include_singleton_axes=True))
    out["unknown"] = _query(lambda: pd.get_mesh("hsdp"))
    out["one-dimensional"] = {k: describe_mesh(v) for k, v in pd.get_all_one_dimensional_meshes().items()}
    out["flattened at the root"] = sorted(pd.world_mesh._flatten_mapping)
    out["loss at the root"] = _query(lambda: pd.world_mesh["loss_mesh"])
    for m in list(pd._global_meshes.values()):
        names = list(m.mesh_dim_names)
        for k in range(2, len(names) + 1):
            for sub in itertools.combinations(names, k):
                out[f"optional {sub}"] = _query(lambda: pd.get_optional_mesh(list(sub)))
                out[f"singleton {sub}"] = _query(lambda: pd.get_optional_mesh(list(sub), include_singleton_axes=True))
    out["spmd"] = [describe_mesh(m, subsets=False) for m in pd.spmd_meshes()]
    out["dense tp"] = _query(pd.get_dense_tp_mesh)
    for axes in (["dp", "cp", "tp", "ep"], ["dp", "tp"], ["tp"], ["ep"], ["dp_replicate", "efsdp", "ep"], ["cp"]):
        out[f"resolve {axes}"] = _query(lambda: pd.resolve_mesh(axes))
        out[f"activated {axes}"] = _query(lambda: pd.get_activated_mesh(axes))
    for name in ("dp_enabled", "dp_replicate_enabled", "dp_shard_enabled", "cp_enabled", "dp_cp_enabled",
                 "fsdp_enabled", "tp_enabled", "pp_enabled", "ep_enabled", "non_data_parallel_size",
                 "seq_len_divisor", "dp_replicate", "dp_shard", "cp", "tp", "pp", "ep", "world_size", "spmd_backend"):
        out[name] = getattr(pd, name)
    return out


def differences(theirs: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    keys = list(dict.fromkeys([*theirs, *ours]))
    return [f"{k}: torchtitan {theirs.get(k)!r} != ours {ours.get(k)!r}" for k in keys if theirs.get(k) != ours.get(k)]


class Calls:
    """Counts new_group calls, wherever torch and torchtitan call it from."""

    def __init__(self) -> None:
        import torch.distributed as dist
        import torch.distributed.device_mesh as device_mesh
        from torch.distributed import distributed_c10d

        self.n = 0
        real = distributed_c10d.new_group

        def new_group(*args: Any, **kwargs: Any) -> Any:
            self.n += 1
            return real(*args, **kwargs)

        for module in (dist, distributed_c10d, device_mesh):
            setattr(module, "new_group", new_group)


def check_collectives(meshes: list[Any], rank: int) -> int:
    """An all-reduce of the ranks on every real (not fake) group of each
    mesh gives the sum of its members; the number of groups used."""
    import torch
    import torch.distributed as dist

    used = 0
    for m in meshes:
        if m is None or m.get_coordinate() is None:
            continue
        for n in m.mesh_dim_names:
            g = m.get_group(n)
            if dist.get_backend(g) == "fake":
                continue
            t = torch.tensor([rank], dtype=torch.int64)
            dist.all_reduce(t, group=g)
            assert t.item() == sum(dist.get_process_group_ranks(g)), (m, n)
            used += 1
    return used


def titan_job(kwargs: dict[str, Any], rank: int, calls: Calls) -> dict[str, Any]:
    from torchtitan.distributed.parallel_dims import ParallelDims

    from rank_layout.torch import torchtitan_meshes

    import torch.distributed as dist

    full = dict(dp_replicate=1, dp_shard=-1, cp=1, tp=1, pp=1, ep=1, world_size=dist.get_world_size())
    full.update(kwargs)
    before = calls.n
    pd = ParallelDims(**full)
    pd.build_mesh()
    theirs_calls = calls.n - before
    before = calls.n
    ours = torchtitan_meshes(**kwargs, timeout=TIMEOUT)
    ours_calls = calls.n - before
    diff = differences(describe_titan(pd), describe_titan(ours))
    used = check_collectives(list(ours._single_axis_meshes.values()) + list(ours._global_meshes.values()), rank)
    return {"differences": diff, "calls": [theirs_calls, ours_calls], "collectives": used}


def mesh_job(shape: list[int], names: list[str], flattens: list[list[str]], rank: int, calls: Calls) -> dict[str, Any]:
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    from rank_layout import Mesh
    from rank_layout.torch import device_mesh

    before = calls.n
    ref = init_device_mesh("cpu", tuple(shape), mesh_dim_names=tuple(names))
    flat_names = ["_".join(f) for f in flattens]
    inside = ref.get_coordinate() is not None
    if inside:
        for f in flattens:
            ref[tuple(f)]._flatten()
    theirs_calls = calls.n - before
    mesh = Mesh.from_device_mesh(shape, names)
    for f in flattens:
        mesh = mesh.flatten("_".join(f), f)
    before = calls.n
    dm = device_mesh(mesh, "cpu", timeout=TIMEOUT)
    ours_calls = calls.n - before
    theirs = {"root": describe_mesh(ref)}
    ours = {"root": describe_mesh(dm)}
    if inside:
        for f in flat_names:
            theirs[f] = describe_mesh(ref[f])
            ours[f] = describe_mesh(dm[f])
    diff = differences(theirs, ours)
    used = check_collectives([dm] + ([dm[f] for f in flat_names] if inside else []), rank)
    if inside:  # DTensor on it: shard on the first dim, replicate on the others, gather back
        x = torch.arange(float(dm.size(0) * 2 * 3)).reshape(-1, 3)
        dt = distribute_tensor(x, dm, [Shard(0)] + [Replicate()] * (dm.ndim - 1))
        assert torch.equal(dt.full_tensor(), x)
    return {"differences": diff, "calls": [theirs_calls, ours_calls], "collectives": used}


def run(rank: int, world: int, rdzv: str, out: str, jobs: list) -> None:
    """Joins the gloo world, runs every job (torchtitan's set-up and ours,
    or init_device_mesh and ours) and writes what differed to
    ``out``/rank.json."""
    result: dict[str, Any] = {"rank": rank, "jobs": {}, "error": None}
    try:
        import torch
        import torch.distributed as dist
        import torch.testing._internal.distributed.fake_pg  # noqa: F401  (torchtitan's size-1 dims are "fake")

        warnings.simplefilter("ignore")
        import logging

        logging.disable(logging.WARNING)  # torchtitan's info lines
        torch.set_num_threads(1)
        worlds.init_gloo(rank, world, rdzv, TIMEOUT)
        calls = Calls()
        for name, kind, args in jobs:
            if kind == "torchtitan":
                result["jobs"][name] = titan_job(args, rank, calls)
            else:
                result["jobs"][name] = mesh_job(*args, rank=rank, calls=calls)
        t = torch.ones(1)
        dist.all_reduce(t)
        assert t.item() == world
        dist.destroy_process_group()
    except BaseException:
        result["error"] = traceback.format_exc()
        raise
    finally:
        Path(out, f"{rank}.json").write_text(json.dumps(result))
