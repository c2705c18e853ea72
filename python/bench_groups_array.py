"""Benchmark: ``Layout.groups_array`` against NumPy's arange/reshape/transpose.

For every kind of one layout (default: 131,072 ranks, tp=8, cp=2, ep=8,
pp=16, dp=512, order tp-cp-ep-dp-pp), side by side in one run:

- **rank-layout**: ``layout.groups_array(kind)``, filled by the Rust crate,
  and ``layout.groups_arrays()``: every kind as views of one allocation;
- **NumPy**, the DeviceMesh way: the ranks as one array in the grid's shape
  (``np.arange(world).reshape(...)``, built once), then per kind a transpose
  that puts the kind's axes last and a reshape to (groups, group size),
  which copies; ``embd``/``pos-embd`` take the first (and last) column of
  the pp groups. Same ``uint32`` dtype, same contents (checked first).

Each figure is the median of ``--repeat`` calls. With every array kept
(fresh memory for each call), rank-layout's calls, NumPy's and the floor
(as many bytes of new memory, written once) are timed in turns, round
after round, so that a change in a shared machine's load meets them alike;
their ratios are the figures to read there. Run::

    python python/bench_groups_array.py [--tp 8 --cp 2 --ep 8 --pp 16 --dp 512] [--repeat 50]
"""

from __future__ import annotations

import argparse
import mmap
import os
import platform
import statistics
import time
from typing import Callable

import numpy as np

from rank_layout import Layout

ORDER = ["tp", "cp", "ep", "dp", "pp"]  # first fastest


class NumpyMesh:
    """A nested layout of the default order as NumPy arrays, DeviceMesh-style."""

    def __init__(self, tp: int, cp: int, ep: int, dp: int, pp: int) -> None:
        self.sizes = {"tp": tp, "cp": cp, "ep": ep, "dp": dp, "pp": pp, "edp": dp // ep}
        ranks = np.arange(tp * cp * dp * pp, dtype=np.uint32)
        # C order is last-fastest, so the shapes list the axes slowest first.
        self.attention = ("pp", "dp", "cp", "tp"), ranks.reshape(pp, dp, cp, tp)
        self.expert = ("pp", "edp", "ep", "cp", "tp"), ranks.reshape(pp, dp // ep, ep, cp, tp)

    def _axes(self, view: tuple, kind_axes: set) -> np.ndarray:
        names, mesh = view
        inner = [i for i, a in enumerate(names) if a in kind_axes]
        outer = [i for i, a in enumerate(names) if a not in kind_axes]
        size = int(np.prod([self.sizes[names[i]] for i in inner]))
        return mesh.transpose(outer + inner).reshape(-1, size)

    def groups(self, kind: str) -> np.ndarray:
        if kind == "embd":
            pp = self.groups("pp")
            return pp[:, [0, -1]] if pp.shape[1] > 1 else pp.copy()
        if kind == "pos-embd":
            return self.groups("pp")[:, [0]]
        if kind.endswith("-mod-ep"):
            axes = {"edp" if a == "dp" else a for a in kind[: -len("-mod-ep")].split("-")}
            return self._axes(self.expert, axes)
        axes = set(kind.split("-"))
        return self._axes(self.expert if "ep" in axes else self.attention, axes)


def median_ns(call: Callable[[], object], repeat: int) -> float:
    call()  # warm up
    times = []
    for _ in range(repeat):
        t = time.perf_counter_ns()
        call()
        times.append(time.perf_counter_ns() - t)
    return statistics.median(times)


def median_ns_turns(calls: dict[str, Callable[[], object]], repeat: int, keep: bool) -> dict[str, float]:
    """Like median_ns, for each of ``calls``, the calls taking turns in an
    order that rotates every round; with ``keep``, every result is kept
    until the end, so each call gets fresh memory and pays its first-touch
    page faults."""
    names = list(calls)
    kept = [call() for call in calls.values()]
    times: dict[str, list[int]] = {name: [] for name in names}
    for i in range(repeat):
        for name in names[i % len(names):] + names[: i % len(names)]:
            t = time.perf_counter_ns()
            got = calls[name]()
            times[name].append(time.perf_counter_ns() - t)
            if keep:
                kept.append(got)
            del got
    del kept
    return {name: statistics.median(ts) for name, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for axis, default in (("tp", 8), ("cp", 2), ("ep", 8), ("pp", 16), ("dp", 512)):
        parser.add_argument(f"--{axis}", type=int, default=default)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    sizes = {a: getattr(args, a) for a in ("tp", "cp", "ep", "dp", "pp")}

    t = time.perf_counter_ns()
    layout = Layout(**sizes, expert_layout="nested")  # NumpyMesh lays experts out nested
    setup_ours = time.perf_counter_ns() - t
    t = time.perf_counter_ns()
    mesh = NumpyMesh(**sizes)
    setup_numpy = time.perf_counter_ns() - t

    print(f"{layout!r}: {layout.world_size:,} ranks, {len(layout.kinds)} kinds")
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; "
          f"Python {platform.python_version()}, NumPy {np.__version__}; median of {args.repeat}")
    for kind in layout.kinds:
        ours, theirs = layout.groups_array(kind), mesh.groups(kind)
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs), kind

    print(f"{'kind':<14}{'shape':>14}{'rank-layout':>14}{'NumPy':>12}{'speed-up':>10}")
    total_ours = total_numpy = 0.0
    for kind in layout.kinds:
        ours = median_ns(lambda: layout.groups_array(kind), args.repeat)
        theirs = median_ns(lambda: mesh.groups(kind), args.repeat)
        total_ours += ours
        total_numpy += theirs
        shape = "x".join(map(str, layout.groups_array(kind).shape))
        print(f"{kind:<14}{shape:>14}{ours / 1e3:>11.1f} us{theirs / 1e3:>9.1f} us{theirs / ours:>9.1f}x")
    print(f"{'total':<14}{'':>14}{total_ours / 1e3:>11.1f} us{total_numpy / 1e3:>9.1f} us"
          f"{total_numpy / total_ours:>9.1f}x")
    print(f"{'(setup, once)':<14}{'':>14}{setup_ours / 1e3:>11.1f} us{setup_numpy / 1e3:>9.1f} us")

    # One kind's array against the least a new array of as many values
    # costs: np.arange, in turns (arrays dropped, as in the table).
    kind = layout.kinds[0]
    count = layout.groups_array(kind).size
    one = median_ns_turns(
        {
            f"groups_array({kind!r})": lambda: layout.groups_array(kind),
            f"np.arange({count:,}, dtype=uint32)": lambda: np.arange(count, dtype=np.uint32),
        },
        args.repeat,
        keep=False,
    )
    (ours_name, ours), (arange_name, arange) = one.items()
    print(f"one kind, in turns: {ours_name} {ours / 1e3:.1f} us, {arange_name} {arange / 1e3:.1f} us "
          f"({ours / arange:.2f}x)")

    # Every kind at once with every array kept alive (what a launcher does):
    # fresh memory for each array, so first-touch page faults count.
    arrays = layout.groups_arrays()
    for kind in layout.kinds:
        assert np.array_equal(arrays[kind], mesh.groups(kind)), kind
    # The floor of any answer in fresh memory: as many bytes as the arrays
    # hold, mapped and written once (4 KiB pages; pre-faulted by the kernel
    # with MAP_POPULATE; 2 MiB pages asked for with MADV_HUGEPAGE).
    size = sum(a.nbytes for a in arrays.values())
    floors = {"4 KiB pages": (False, False), "MAP_POPULATE": (True, False), "MADV_HUGEPAGE": (False, True)}
    got = median_ns_turns(
        {
            "groups_arrays() (one allocation)": lambda: layout.groups_arrays(),
            "groups_array(kind) per kind": lambda: [layout.groups_array(kind) for kind in layout.kinds],
            "NumPy transpose per kind": lambda: [mesh.groups(kind) for kind in layout.kinds],
            **{name: (lambda p=p, h=h: fresh(size, p, h)) for name, (p, h) in floors.items()},
        },
        args.repeat,
        keep=True,
    )
    theirs, floor = got["NumPy transpose per kind"], got["4 KiB pages"]
    print(f"every kind, all arrays kept, timed in turns ({size / 2**20:.1f} MiB each):")
    print(f"  {'':<34}{'':>9}     {'NumPy / it':>10}  {'it / floor':>10}")
    for name, ns in got.items():
        if name in floors:
            name = f"fresh memory alone, {name}"
        print(f"  {name:<34}{ns / 1e3:>9.1f} us  {theirs / ns:>9.2f}x  {ns / floor:>9.2f}x")


def cpu_model() -> str:
    """The processor's name (``/proc/cpuinfo``), or the platform's."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def fresh(size: int, populate: bool, huge: bool) -> object:
    """``size`` bytes of new anonymous memory, written once."""
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | (mmap.MAP_POPULATE if populate else 0)
    m = mmap.mmap(-1, size, flags=flags)
    if huge:
        m.madvise(mmap.MADV_HUGEPAGE)
    a = np.frombuffer(m, dtype=np.uint32)
    a[:] = 1
    return m, a


if __name__ == "__main__":
    main()
