"""Benchmark: one rank's reshard plan, rank-layout (through Python) against
megatron-core 0.19.2's refit planner, on the inputs of benches/reshard.rs.

An 80-layer GPT (Llama-3 70B's shape from Megatron-LM's arguments: hidden
8192, 64 heads, 8 query groups, ffn 28672, vocabulary 128256, SwiGLU,
RMSNorm, rope, untied; 483 tensors) refit from training (tp 8, pp 8) to
inference (tp 4, pp 1) on the same ranks (collocated, 8 GPUs per node,
NVLink domains of 9 nodes), at ``--world`` ranks (default 1,024), for the
process in the middle of the world (``world / 2 + 3``, as the criterion
bench):

- **rank-layout**: ``Reshard.plan_of(rank)`` (its sends, receives and
  local copies, as Python dicts), and ``reshard(...)`` (both sides' splits
  of every tensor, made once per reshard), median of ``--repeat``;
- **Megatron-Core**: ``build_plan_from_rosters(dst_by_rank,
  src_by_name, rank)``, the part of ``build_local_reshard_plan`` after its
  all-gather: it replays the whole schedule (``_iter_global_transfer_ops``)
  and keeps the rank's operations, median of ``--megatron-repeat``. The
  rosters (what the all-gather would give every rank) are built first,
  untimed, with Megatron-Core's own ``extract_param_metadata``
  (python/tests/reshard_megatron.py); the all-gather itself, which every
  rank waits for before planning, is not counted.

Both plans of the rank are checked to receive the same bytes. The machine
(CPU, cores) and its load (1-minute load average, before and after) are
printed: the figures are only comparable within one run. Needs
megatron-core 0.19.2 (Python 3.12)::

    python python/bench_reshard.py [--world 1024] [--repeat 20] [--megatron-repeat 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))

ARGS = (
    "--num-layers 80 --hidden-size 8192 --num-attention-heads 64 --group-query-attention --num-query-groups 8 "
    "--ffn-hidden-size 28672 --vocab-size 128256 --swiglu --normalization RMSNorm --position-embedding-type rope "
    "--disable-bias-linear --untie-embeddings-and-output-weights"
)


def cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def median(f, repeat: int) -> tuple[tuple[float, float], object]:
    """The median wall and CPU (this process's) seconds of ``repeat``
    calls of ``f``, and its last answer. On a busy machine the CPU time
    is the steadier figure."""
    wall, cpu_s, out = [], [], None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        out = f()
        wall.append(time.perf_counter() - t)
        cpu_s.append(time.process_time() - c)
    return (statistics.median(wall), statistics.median(cpu_s)), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--megatron-repeat", type=int, default=3)
    a = parser.parse_args()

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import megatron.core
        from megatron.core.resharding.planner import build_plan_from_rosters

    import reshard_megatron as rm
    from rank_layout import Layout, reshard

    load_before = os.getloadavg()[0]
    world, rank = a.world, a.world // 2 + 3
    train, infer = Layout(tp=8, pp=8, world_size=world), Layout(tp=4, world_size=world)

    def ours_new():
        return reshard(train, infer, model_args=ARGS, gpus_per_node=8, nodes_per_domain=9)

    t_new, plan = median(ours_new, max(1, a.repeat // 4))
    assert len(plan.tensor_names) == 483
    t_rank, mine = median(lambda: plan.plan_of(rank), a.repeat)
    ours_bytes = sum(t["bytes"] for t in mine["recvs"] + mine["copies"])

    t = time.perf_counter()
    cache: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src, dst = rm.Side(plan.model, train, torch, cache), rm.Side(plan.model, infer, torch, cache)
        dst_by_rank, src_by_name = rm.rosters(world, src, dst)
    t_rosters = time.perf_counter() - t
    metadata = sum(len(v) for v in src.metas.values()) + sum(len(v) for v in dst.metas.values())
    t_megatron, theirs = median(lambda: build_plan_from_rosters(dst_by_rank, src_by_name, rank), a.megatron_repeat)
    their_bytes = 0
    for op in theirs.recv_ops:
        shape = next(m.shape for m in dst.metas[rank] if m.name == op.param_name)
        size = next(m.element_size for m in dst.metas[rank] if m.name == op.param_name)
        for length, sl in zip(shape, op.my_slice):
            size *= len(range(*sl.indices(length)))
        their_bytes += size
    assert their_bytes == ours_bytes, (their_bytes, ours_bytes)
    load_after = os.getloadavg()[0]

    print(f"machine: {cpu()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"megatron-core {megatron.core.__version__}; load average {load_before:.1f} before, {load_after:.1f} after")
    print(f"{world} ranks, 483 tensors, rank {rank}: rank-layout {len(mine['sends'])} sends, {len(mine['recvs'])} "
          f"receives, {len(mine['copies'])} copies; Megatron-Core {len(theirs.send_ops)} sends, "
          f"{len(theirs.recv_ops)} receives (local copies in both); {ours_bytes:,} bytes in, both")
    print(f"{'':54} {'wall':>12} {'CPU':>12}")
    for label, (w, c) in [("rank-layout  reshard(...) (both sides' splits, once)", t_new),
                          ("rank-layout  plan_of(rank) through Python", t_rank),
                          ("Megatron-Core build_plan_from_rosters(rank)", t_megatron)]:
        print(f"{label:54} {w * 1e3:9.2f} ms {c * 1e3:9.2f} ms")
    print(f"ratio (Megatron-Core / rank-layout), one rank's plan: {t_megatron[0] / t_rank[0]:.0f}x wall, "
          f"{t_megatron[1] / t_rank[1]:.0f}x CPU")
    print(f"(Megatron-Core's rosters, untimed above: {metadata:,} ParameterMetadata built in {t_rosters:.1f} s)")


if __name__ == "__main__":
    main()
