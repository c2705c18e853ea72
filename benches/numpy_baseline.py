"""NumPy's way to every group of a layout, for comparison with `cargo bench`.

PyTorch DeviceMesh (and many launchers) build groups this way: an arange of
the world reshaped to the grid, transposed so the kind's axes come last,
and reshaped to (groups, group size). This script writes every kind that
way into one preallocated buffer, as `enumerate/all-kinds/131072` does with
`Groups::fill`: the 16 kinds of the nested layout at 131,072 ranks (tp=8,
cp=2, ep=8, dp=512, pp=16, order tp-cp-ep-dp-pp). It checks a few groups
against Megatron-LM's documented ordering. Not part of CI; run it with
numpy installed:

    python3 benches/numpy_baseline.py

It also does the same for the 6-dim mesh of `mesh/fill-up-to-3-dims`.
"""

import time

import numpy as np

TP, CP, EP, DP, PP = 8, 2, 8, 512, 16
WORLD = TP * CP * DP * PP

# Order tp-cp-ep-dp-pp, first axis fastest: NumPy's C order is last axis
# fastest, so the array's axes are the order reversed. The expert view
# splits dp into ep (faster) and dp / ep.
ATTENTION = ("pp", "dp", "cp", "tp")
EXPERT = ("pp", "edp", "ep", "cp", "tp")
SIZES = {"tp": TP, "cp": CP, "ep": EP, "dp": DP, "edp": DP // EP, "pp": PP}

KINDS = [
    ("tp", ATTENTION, {"tp"}),
    ("pp", ATTENTION, {"pp"}),
    ("dp", ATTENTION, {"dp"}),
    ("cp", ATTENTION, {"cp"}),
    ("dp-cp", ATTENTION, {"dp", "cp"}),
    ("tp-pp", ATTENTION, {"tp", "pp"}),
    ("tp-cp", ATTENTION, {"tp", "cp"}),
    ("tp-dp", ATTENTION, {"tp", "dp"}),
    ("tp-dp-cp", ATTENTION, {"tp", "dp", "cp"}),
    ("ep", EXPERT, {"ep"}),
    ("tp-ep", EXPERT, {"tp", "ep"}),
    ("tp-ep-pp", EXPERT, {"tp", "ep", "pp"}),
    ("dp-mod-ep", EXPERT, {"edp"}),
    ("dp-cp-mod-ep", EXPERT, {"edp", "cp"}),
]


def groups(axes, kind_axes):
    """Every group of a kind: (groups, group size), groups in Megatron-LM's order."""
    ranks = np.arange(WORLD, dtype=np.uint32).reshape([SIZES[a] for a in axes])
    outer = [i for i, a in enumerate(axes) if a not in kind_axes]
    inner = [i for i, a in enumerate(axes) if a in kind_axes]
    size = int(np.prod([SIZES[axes[i]] for i in inner]))
    return ranks.transpose(outer + inner).reshape(-1, size)


def views():
    out = {name: groups(axes, kind) for name, axes, kind in KINDS}
    pp = out["pp"]
    out["embd"] = pp[:, [0, -1]]
    out["pos-embd"] = pp[:, :1]
    return out


def fill_all(buf):
    """Every kind's members into `buf`, one kind after the other."""
    at = 0
    for g in views().values():
        n = g.size
        buf[at : at + n] = g.reshape(-1)
        at += n
    return at


def main():
    out = views()
    assert out["tp"][1].tolist() == list(range(8, 16))
    assert out["pp"][0].tolist() == [i * WORLD // PP for i in range(PP)]
    assert out["dp"][0][:3].tolist() == [0, 16, 32]
    members = sum(g.size for g in out.values())
    assert members == 14 * WORLD + 3 * WORLD // PP, members
    buf = np.zeros(members, dtype=np.uint32)
    best = float("inf")
    for _ in range(20):
        start = time.perf_counter()
        assert fill_all(buf) == members
        best = min(best, time.perf_counter() - start)
    print(
        f"numpy {np.__version__}: all 16 kinds at {WORLD} ranks ({members:,} members) "
        f"into one buffer: {best * 1e3:.2f} ms (best of 20)"
    )
    seq = float("inf")
    for _ in range(20):
        start = time.perf_counter()
        buf[:] = np.arange(members, dtype=np.uint32)
        seq = min(seq, time.perf_counter() - start)
    print(f"numpy arange of the same length into the buffer: {seq * 1e3:.2f} ms")


# The mesh benchmark of `cargo bench` (`mesh/fill-up-to-3-dims/1048576`):
# dims tp=16, cp=8, ep=8, dp=8, pp=8, x=16, first fastest, and every dim set
# of up to three dims, filled one after the other into one buffer.
MESH = [("tp", 16), ("cp", 8), ("ep", 8), ("dp", 8), ("pp", 8), ("x", 16)]


def mesh_sets():
    names = [n for n, _ in MESH]
    return [
        {names[i] for i in range(len(names)) if bits & (1 << i)}
        for bits in range(1, 1 << len(names))
        if bin(bits).count("1") <= 3
    ]


def mesh_fill_all(buf, ranks, sets):
    """Every dim set's groups into `buf` (members in mesh order, groups by first member)."""
    axes = [n for n, _ in reversed(MESH)]  # C order: last axis fastest
    at = 0
    for chosen in sets:
        outer = [i for i, a in enumerate(axes) if a not in chosen]
        inner = [i for i, a in enumerate(axes) if a in chosen]
        n = ranks.size
        buf[at : at + n] = ranks.transpose(outer + inner).reshape(-1)
        at += n
    return at


def mesh_main():
    world = int(np.prod([s for _, s in MESH]))
    ranks = np.arange(world, dtype=np.uint32).reshape([s for _, s in reversed(MESH)])
    sets = mesh_sets()
    assert len(sets) == 41
    buf = np.zeros(world * len(sets), dtype=np.uint32)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        assert mesh_fill_all(buf, ranks, sets) == buf.size
        best = min(best, time.perf_counter() - start)
    # The first set is tp: its groups are 0..world in order.
    assert buf[world - 1] == world - 1
    print(
        f"numpy {np.__version__}: a 6-dim mesh of {world} ranks, its 41 dim sets of up to 3 dims "
        f"({buf.size:,} members) into one buffer: {best * 1e3:.2f} ms (best of 5)"
    )


if __name__ == "__main__":
    main()
    mesh_main()
