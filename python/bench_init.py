"""What one rank's process-group set-up costs at scale: Megatron-Core's
``initialize_model_parallel``, rank-layout's drop-in
(``rank_layout.torch.megatron.initialize_model_parallel``), torch's
``init_device_mesh`` of a 5-D mesh (torchtitan's dims), torchtitan's
``ParallelDims.build_mesh`` (``init_device_mesh`` of the world, then its
unflattens and flatten) and rank-layout's drop-in for it
(``rank_layout.torch.torchtitan_meshes``), and ``rank_layout.torch.device_mesh``
of the same 5-D mesh.

    python python/bench_init.py                       # W = 4,096, 16,384, 131,072
    python python/bench_init.py --worlds 16384 --rank 5
    python python/bench_init.py --setups megatron --worlds 16384          # megatron-core 0.19.2's environment
    python python/bench_init.py --setups megatron --worlds 16384 --gtp-remat 2

torch's ``fake`` backend lets one process act as rank r of a world of W
ranks (``init_process_group("fake", rank=r, world_size=W, store=FakeStore())``):
every ``new_group`` call runs torch's Python for it and, for the rank's own
groups, builds a fake backend, with no communication. So the figures are
the set-up's Python and bookkeeping per rank, the part that grows with W;
real backends add their rendezvous and communicator set-up on top (for the
groups a rank is in, with both Megatron-Core and rank-layout).

Each world runs in processes of its own (``--runs``, default 3; the fastest
is reported, the machine being shared), the set-ups one after the other in
each (the same process, side by side), each with the same layout:
tp 8, pp 8, cp 2, ep 8 (etp = tp), dp = W / 128; the mesh is
(pp 8, dp_replicate 2, dp_shard W / 256, cp 2, tp 8), torchtitan's
``ParallelDims(dp_replicate=2, dp_shard=-1, cp=2, tp=8, pp=8, ep=8)`` with
its default ``spmd_backend`` (every mesh it builds, rank-layout's too: the
figures include the DeviceMesh objects, whose constructor walks the whole
rank map). A rank-layout row's last column compares it with the set-up it
replaces (Megatron-Core's, or torchtitan's). ``new_group`` calls are
counted by wrapping ``torch.distributed.new_group`` (and the names
``distributed_c10d`` and ``device_mesh`` call it by; ``split_group`` too).
Megatron-Core's default ``create_gloo_process_groups=True`` is kept; a gloo
group cannot be made on the fake backend, so both set-ups' gloo groups are
made as fake ones (counted all the same). A set-up still running after
``--limit`` seconds (default 120) is stopped and reported as such.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
import warnings
from typing import Any, Callable

LAYOUT = dict(tensor_model_parallel_size=8, pipeline_model_parallel_size=8, context_parallel_size=2,
              expert_model_parallel_size=8)


class Counter:
    """Counts (and passes on) new_group and split_group calls, gloo made fake."""

    def __init__(self) -> None:
        import torch.distributed as dist
        import torch.distributed.device_mesh as device_mesh
        from torch.distributed import distributed_c10d

        self.calls = 0
        self.new_group = distributed_c10d.new_group
        self.split_group = distributed_c10d.split_group
        self.patched = [(m, name) for m in (dist, distributed_c10d, device_mesh) for name in ("new_group", "split_group")
                        if hasattr(m, name)]

        def new_group(*args: Any, backend: Any = None, **kwargs: Any) -> Any:
            self.calls += 1
            return self.new_group(*args, backend=None if backend == "gloo" else backend, **kwargs)

        def split_group(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return self.split_group(*args, **kwargs)

        for module, name in self.patched:
            setattr(module, name, new_group if name == "new_group" else split_group)


class Timeout(Exception):
    pass


def timed(f: Callable[[], Any], counter: Counter, limit: float) -> dict[str, Any]:
    def alarm(*_: Any) -> None:
        raise Timeout

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    before = counter.calls
    start = time.perf_counter()
    try:
        f()
    except Timeout:
        return {"seconds": None, "calls": counter.calls - before, "note": f"stopped after {limit:.0f} s"}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return {"seconds": time.perf_counter() - start, "calls": counter.calls - before}


def one_world(world: int, rank: int, limit: float, repeat: int, setups: str, gtp: int) -> list[dict[str, Any]]:
    """The set-ups for one rank of ``world``, in this process: all of them,
    or (``setups="megatron"``) Megatron-Core's and its drop-in's only."""
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    warnings.filterwarnings("ignore")
    from megatron.core import parallel_state

    from rank_layout.torch import megatron as rl_megatron

    torch.set_num_threads(1)
    dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())
    counter = Counter()
    rows = []

    def reset() -> None:
        rl_megatron.destroy_model_parallel()
        parallel_state._GLOBAL_MEMORY_BUFFER = None

    layout = dict(LAYOUT, **({"gtp_remat_size": gtp} if gtp > 1 else {}))
    got = timed(lambda: parallel_state.initialize_model_parallel(**layout), counter, limit)
    rows.append({"setup": "Megatron-Core initialize_model_parallel", **got})
    tp_theirs = dist.get_process_group_ranks(parallel_state.get_tensor_model_parallel_group()) if got["seconds"] else None
    reset()
    for share, name in ((True, "rank-layout initialize_model_parallel"), (False, "rank-layout, share=False")):
        runs = []
        for _ in range(repeat):
            runs.append(timed(lambda: rl_megatron.initialize_model_parallel(**layout, share=share), counter, limit))
            tp_ours = dist.get_process_group_ranks(parallel_state.get_tensor_model_parallel_group())
            reset()
        assert tp_theirs in (None, tp_ours)
        rows.append({"setup": name, "seconds": statistics.median(r["seconds"] for r in runs), "calls": runs[0]["calls"],
                     "note": f"median of {repeat}"})
    if setups == "megatron":
        dist.destroy_process_group()
        return [dict(row, world=world) for row in rows]
    from torch.distributed.device_mesh import init_device_mesh

    shape = (8, 2, world // 256, 2, 8)
    names = ("pp", "dp_replicate", "dp_shard", "cp", "tp")
    got = timed(lambda: init_device_mesh("cpu", shape, mesh_dim_names=names), counter, limit)
    rows.append({"setup": "init_device_mesh " + "x".join(map(str, shape)), **got})
    ref = init_device_mesh("cpu", shape, mesh_dim_names=names) if got["seconds"] is not None else None

    from rank_layout import Mesh
    from rank_layout.torch import device_mesh

    runs = []
    for _ in range(repeat):
        ours: dict[str, Any] = {}
        runs.append(timed(lambda: ours.update(dm=device_mesh(Mesh.from_device_mesh(shape, names), "cpu")), counter, limit))
    assert ref is None or dist.get_process_group_ranks(ours["dm"].get_group("dp_shard")) == dist.get_process_group_ranks(
        ref.get_group("dp_shard"))
    rows.append({"setup": "rank-layout device_mesh", "seconds": statistics.median(r["seconds"] for r in runs),
                 "calls": runs[0]["calls"], "note": f"median of {repeat}", "baseline": len(rows) - 1})

    import logging

    from torchtitan.distributed.parallel_dims import ParallelDims

    from rank_layout.torch import torchtitan_meshes

    logging.disable(logging.INFO)  # torchtitan's log lines
    degrees = dict(dp_replicate=2, dp_shard=-1, cp=2, tp=8, pp=8, ep=8)
    got = timed(lambda: ParallelDims(**degrees, world_size=world).build_mesh(), counter, limit)
    rows.append({"setup": "init_device_mesh + torchtitan build_mesh", **got})
    runs = []
    for _ in range(repeat):
        ours: dict[str, Any] = {}
        runs.append(timed(lambda: ours.update(m=torchtitan_meshes(**degrees, device_type="cpu")), counter, limit))
    efsdp = dist.get_process_group_ranks(ours["m"].get_mesh("efsdp").get_group())
    assert len(efsdp) == world // 128 and rank in efsdp
    rows.append({"setup": "rank-layout torchtitan_meshes", "seconds": statistics.median(r["seconds"] for r in runs),
                 "calls": runs[0]["calls"], "note": f"median of {repeat}", "baseline": len(rows) - 1})
    dist.destroy_process_group()
    for row in rows:
        row["world"] = world
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", type=int, nargs="+", default=[4096, 16384, 131072])
    parser.add_argument("--rank", type=int, default=None, help="the rank measured (default: W / 2 + 3)")
    parser.add_argument("--limit", type=float, default=120.0, help="seconds before a set-up is stopped")
    parser.add_argument("--repeat", type=int, default=5, help="runs of rank-layout's set-up per process (median)")
    parser.add_argument("--runs", type=int, default=3, help="processes per world (the fastest reported)")
    parser.add_argument("--setups", choices=["all", "megatron"], default="all",
                        help="every set-up, or Megatron-Core's and its drop-in's only (no torchtitan needed)")
    parser.add_argument("--gtp-remat", type=int, default=1,
                        help="gtp_remat_size of the Megatron layout (megatron-core 0.19)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        rank = args.one // 2 + 3 if args.rank is None else args.rank
        print(json.dumps(one_world(args.one, rank, args.limit, args.repeat, args.setups, args.gtp_remat)))
        return
    rows = []
    for world in args.worlds:
        cmd = [sys.executable, __file__, "--one", str(world), "--limit", str(args.limit), "--repeat", str(args.repeat),
               "--setups", args.setups, "--gtp-remat", str(args.gtp_remat)]
        if args.rank is not None:
            cmd += ["--rank", str(args.rank)]
        runs = []
        for _ in range(args.runs):
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
        for same in zip(*runs):  # one set-up, every run: the fastest
            timed_out = [r for r in same if r["seconds"] is None]
            rows.append(timed_out[0] if timed_out else min(same, key=lambda r: r["seconds"]))
    import megatron.core
    import torch

    from importlib.metadata import PackageNotFoundError, version

    try:
        titan = f", torchtitan {version('torchtitan')}"
    except PackageNotFoundError:
        titan = ""
    gtp = f", gtp_remat {args.gtp_remat}" if args.gtp_remat > 1 else ""
    print(f"torch {torch.__version__}, megatron-core {megatron.core.__version__}{titan}, "
          f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f}; layout tp 8, pp 8, cp 2, ep 8{gtp}; "
          f"fake backend, one rank; fastest of {args.runs} processes")
    print()
    print("| W | set-up | seconds | new_group calls | rank-layout's speed-up |")
    print("| ---: | --- | ---: | ---: | ---: |")
    for world in args.worlds:
        mine = [r for r in rows if r["world"] == world]
        for r in mine:
            base = mine[r.get("baseline", 0)]["seconds"]
            secs = "-" if r["seconds"] is None else f"{r['seconds']:.4f}"
            ratio = ("" if base is None or r["seconds"] is None or not r["setup"].startswith("rank-layout")
                     else f"{base / r['seconds']:,.0f}x")
            note = f" ({r['note']})" if r.get("note") and r["seconds"] is None else ""
            print(f"| {world:,} | {r['setup']}{note} | {secs} | {r['calls']:,} | {ratio} |")


if __name__ == "__main__":
    main()
