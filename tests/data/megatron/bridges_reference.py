#!/usr/bin/env python3
"""Regenerate bridges.json: what Megatron-Core's own bridge code computes.

Imports the installed (or unpacked) megatron-core package; no Megatron code
lives here. Usage:

    PYTHONPATH=/path/to/unpacked/megatron_core-0.19.2 \
        python bridges_reference.py [--rank R] [--out bridges.json] [--no-stages]

Runs on one CPU process under torch.distributed's "fake" backend (world size
128). `new_group` / `new_subgroups_by_enumeration` are wrapped: the rank lists
Megatron passes are recorded in call order, then the call goes on to the fake
backend with `backend='nccl'` dropped. Every rank computes every plan, so one
run as rank 0 records them all (`--rank R` re-runs as rank R for comparison;
`stages` re-initialises the fake group as each rank it asks about).
"""
import argparse
import itertools
import json
import random
import sys

import torch  # noqa: F401
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore

WORLD = 128
SEED = 20260822

_real_new_group = dist.new_group
_real_new_subgroups = dist.new_subgroups_by_enumeration
CALLS = []  # ("new_group", ranks) / ("subgroups", ranks_per_subgroup)


def _rec_new_group(ranks=None, *args, **kwargs):
    kwargs.pop("backend", None)
    CALLS.append(("new_group", [int(r) for r in ranks]))
    return _real_new_group(ranks, *args, **kwargs)


def _rec_new_subgroups(ranks_per_subgroup_list, *args, **kwargs):
    kwargs.pop("backend", None)
    CALLS.append(("subgroups", [[int(r) for r in g] for g in ranks_per_subgroup_list]))
    return _real_new_subgroups(ranks_per_subgroup_list, *args, **kwargs)


dist.new_group = _rec_new_group
dist.new_subgroups_by_enumeration = _rec_new_subgroups


def init(rank):
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", rank=rank, world_size=WORLD, store=FakeStore())


from megatron.core.hyper_comm_grid import HyperCommGrid  # noqa: E402
from megatron.core.model_parallel_config import ModelParallelConfig  # noqa: E402
from megatron.core.models.mimo.comm.colocated_communicator import (  # noqa: E402
    ColocatedBridgeCommunicator,
)
from megatron.core.pipeline_parallel.bridge_communicator import BridgeCommunicator  # noqa: E402
from megatron.core.pipeline_parallel.multimodule_communicator import (  # noqa: E402
    MultiModulePipelineCommunicator,
)

SIZES = [1, 2, 3, 4]


def prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def grid_of(spec):
    names = [d for d, _ in spec["dims"]]
    shape = [s for _, s in spec["dims"]]
    return HyperCommGrid(shape, names, rank_offset=spec["offset"])


def span(spec):
    return prod(s for _, s in spec["dims"])


def order_dims(rng, names):
    """HyperCommGrid order (first-fastest): sometimes MIMO's tp,(gtp_remat),cp,dp,pp."""
    mimo = [d for d in ["tp", "gtp_remat", "cp", "dp", "pp"] if d in names]
    if rng.random() < 0.4:
        return mimo
    names = list(names)
    rng.shuffle(names)
    return names


def reset_bridge_caches():
    BridgeCommunicator._broadcast_pg_cache.clear()
    BridgeCommunicator._bridge_pg_cache.clear()


def refusal(e):
    return str(e)


# ---------------------------------------------------------------- separate
def run_separate(src, dst):
    reset_bridge_caches()
    CALLS.clear()
    case = {"src": src, "dst": dst}
    try:
        b = BridgeCommunicator(grid_of(src), grid_of(dst))
    except Exception as e:  # noqa: BLE001
        case["refused"] = refusal(e)
        return case
    subgroups = [c[1] for c in CALLS if c[0] == "subgroups"]
    groups = [c[1] for c in CALLS if c[0] == "new_group"]
    assert len(subgroups) == 2 and len(groups) == 1, CALLS
    case["refused"] = None
    case["src_leaders"] = [int(r) for r in b.src_tp_leaders]
    case["dst_leaders"] = [int(r) for r in b.dest_tp_leaders]
    cm = {}
    for r in sorted(b.comm_map):
        info = b.comm_map[r]
        if info.role.value == "MEMBER":
            continue
        cm[str(r)] = {
            "role": info.role.value,
            "send_to": [int(x) for x in info.send_to_ranks],
            "recv_from": [int(x) for x in info.recv_from_ranks],
        }
    case["comm_map"] = cm
    case["src_broadcast"] = subgroups[0]
    case["dst_broadcast"] = subgroups[1]
    case["bridge_group"] = groups[0]
    return case


def rand_separate_grid(rng, max_size):
    while True:
        names = ["tp", "cp", "dp", "pp"]
        if rng.random() < 0.25:
            names.append("gtp_remat")
        sizes = {
            "tp": rng.choice(SIZES),
            "cp": 1 if rng.random() < 0.88 else rng.choice([2, 3, 4]),
            "dp": rng.choice([1, 2, 2, 3, 4, 4]),
            "pp": rng.choice(SIZES),
        }
        if "gtp_remat" in names:
            sizes["gtp_remat"] = rng.choice([1, 2, 2, 3, 4])
        if prod(sizes.values()) > min(64, max_size):
            continue
        return [[d, sizes[d]] for d in order_dims(rng, names)]


def separate_cases(rng, n):
    out = []
    while len(out) < n:
        off = 0 if rng.random() < 0.8 else rng.choice([4, 8])
        sd = rand_separate_grid(rng, WORLD - off - 1)
        s = {"dims": sd, "offset": off}
        dd = rand_separate_grid(rng, WORLD - off - span(s))
        out.append(run_separate(s, {"dims": dd, "offset": off + span(s)}))
    return out


def separate_hand():
    def g(dims, off):
        return {"dims": [list(x) for x in dims], "offset": off}

    pairs = [
        # the brief's example: fan-out 2 -> 4 leaders, src pp 2
        ([("tp", 2), ("dp", 2), ("pp", 2), ("cp", 1)], 0, [("tp", 1), ("dp", 4), ("pp", 1), ("cp", 1)], 8),
        # src cp > 1
        ([("tp", 1), ("cp", 2), ("dp", 2), ("pp", 1)], 0, [("tp", 1), ("cp", 1), ("dp", 2), ("pp", 1)], 4),
        # dst cp > 1
        ([("tp", 1), ("cp", 1), ("dp", 2), ("pp", 1)], 0, [("tp", 1), ("cp", 2), ("dp", 2), ("pp", 1)], 2),
        # lane counts 2 and 3 do not divide
        ([("tp", 1), ("cp", 1), ("dp", 2), ("pp", 1)], 0, [("tp", 1), ("cp", 1), ("dp", 3), ("pp", 1)], 2),
        # gtp_remat > 1 on src: one leader per dp replica, broadcast groups per (gtp, dp)
        ([("tp", 1), ("gtp_remat", 2), ("cp", 1), ("dp", 2), ("pp", 1)], 0, [("tp", 1), ("cp", 1), ("dp", 2), ("pp", 1)], 4),
        # gtp_remat > 1 on dst
        ([("tp", 1), ("cp", 1), ("dp", 2), ("pp", 1)], 0, [("tp", 1), ("gtp_remat", 2), ("cp", 1), ("dp", 2), ("pp", 1)], 2),
        # grid without a cp dim at all
        ([("tp", 2), ("dp", 2), ("pp", 1)], 0, [("tp", 1), ("dp", 2), ("pp", 1)], 4),
        # grid without a pp dim at all
        ([("tp", 2), ("cp", 1), ("dp", 2)], 0, [("tp", 1), ("cp", 1), ("dp", 2), ("pp", 1)], 4),
        # pp > 1, dp-first order: leaders from the per-replica enumeration
        ([("dp", 2), ("pp", 2), ("tp", 2), ("cp", 1)], 0, [("pp", 2), ("tp", 2), ("dp", 2), ("cp", 1)], 8),
        # tp-dp vs dp-tp
        ([("tp", 2), ("cp", 1), ("dp", 2), ("pp", 1)], 0, [("dp", 2), ("cp", 1), ("tp", 2), ("pp", 1)], 4),
        # smallest: the src leader is the last tp rank, the dst leader the first
        ([("tp", 2), ("cp", 1), ("dp", 1), ("pp", 1)], 0, [("tp", 2), ("cp", 1), ("dp", 1), ("pp", 1)], 2),
        # smallest gtp_remat > 1: one leader, two broadcast groups (one without a leader)
        ([("tp", 1), ("gtp_remat", 2), ("cp", 1), ("dp", 1), ("pp", 1)], 0, [("tp", 1), ("cp", 1), ("dp", 1), ("pp", 1)], 2),
        ([("tp", 1), ("cp", 1), ("dp", 1), ("pp", 1)], 0, [("tp", 1), ("gtp_remat", 2), ("cp", 1), ("dp", 1), ("pp", 1)], 1),
    ]
    return [run_separate(g(a, ao), g(b, bo)) for a, ao, b, bo in pairs]


# --------------------------------------------------------------- colocated
def run_colocated(src, dst):
    CALLS.clear()
    case = {"src": src, "dst": dst}
    try:
        c = ColocatedBridgeCommunicator(grid_of(src), grid_of(dst))
    except Exception as e:  # noqa: BLE001
        case["refused"] = refusal(e)
        return case
    case["refused"] = None
    case["direction"] = c.direction.value
    case["scale"] = int(c.scale)
    gg = [[int(r) for r in g] for g in c.gather_group_ranks]
    subgroups = [x[1] for x in CALLS if x[0] == "subgroups"]
    if c.direction.value == "equal":
        assert subgroups == [] and gg == [], (CALLS, gg)
    else:
        assert subgroups == [gg], (CALLS, gg)
    case["gather_groups"] = gg
    lo, n = src["offset"], span(src)
    slots = {}
    me = c.current_rank
    for r in range(lo, lo + n):
        c.current_rank = r
        si = c.get_slice_info(c.scale)  # batch of `scale` rows: start == slot
        assert si.size == (1 if c.direction.value != "equal" else c.scale)
        slots[str(r)] = int(si.start)
    c.current_rank = me
    case["slots"] = slots
    if c.direction.value == "equal":
        case["ranks_without_gather_group"] = []
    else:
        inside = {r for g in gg for r in g}
        case["ranks_without_gather_group"] = [r for r in range(lo, lo + n) if r not in inside]
    return case


def factorizations(names, total, sizes=SIZES):
    out = []
    for combo in itertools.product(sizes, repeat=len(names)):
        if prod(combo) == total:
            out.append(combo)
    return out


def rand_colocated_names(rng):
    names = ["tp", "dp"]
    for d, p in (("cp", 0.6), ("pp", 0.6), ("gtp_remat", 0.3)):
        if rng.random() < p:
            names.append(d)
    return names


def rand_colocated_sizes(rng, names, total=None):
    """Sizes for names; cp/pp mostly 1; if total given, product must equal it."""
    for _ in range(200):
        sizes = {}
        for d in names:
            if d in ("cp", "pp"):
                sizes[d] = 1 if rng.random() < 0.9 else rng.choice([2, 3, 4])
            elif d == "gtp_remat":
                sizes[d] = rng.choice([1, 2, 2, 3, 4])
            else:
                sizes[d] = rng.choice(SIZES)
        p = prod(sizes.values())
        if total is None and p <= 64:
            return sizes
        if total is not None and p == total:
            return sizes
    return None


def colocated_cases(rng, n):
    out = []
    while len(out) < n:
        off = 0 if rng.random() < 0.8 else rng.choice([4, 8])
        sn = rand_colocated_names(rng)
        ss = rand_colocated_sizes(rng, sn)
        total = prod(ss.values())
        if total + off > WORLD:
            continue
        dn = rand_colocated_names(rng)
        want_diff = rng.random() < 0.7  # mostly fan-in / fan-out, some equal
        for _ in range(20):
            ds = rand_colocated_sizes(rng, dn, total)
            if ds is None or not want_diff or ds["dp"] != ss["dp"]:
                break
        if ds is None:
            # fall back to any factorization over the chosen names
            fs = factorizations(dn, total)
            if not fs:
                continue
            ds = dict(zip(dn, rng.choice(fs)))
        src = {"dims": [[d, ss[d]] for d in order_dims(rng, sn)], "offset": off}
        dst = {"dims": [[d, ds[d]] for d in order_dims(rng, dn)], "offset": off}
        out.append(run_colocated(src, dst))
    return out


def colocated_hand():
    def g(dims, off=0):
        return {"dims": [list(x) for x in dims], "offset": off}

    pairs = [
        # gtp_remat > 1 on the gathering (sibling) side: too few gather groups
        (g([("tp", 4), ("dp", 1)]), g([("tp", 1), ("gtp_remat", 2), ("dp", 2)])),
        (g([("tp", 1), ("gtp_remat", 2), ("dp", 2)]), g([("tp", 4), ("dp", 1)])),
        (g([("tp", 2), ("gtp_remat", 2), ("dp", 2)]), g([("tp", 1), ("dp", 8)])),
        # gtp_remat > 1 on the iterating side only
        (g([("tp", 1), ("gtp_remat", 2), ("dp", 2)]), g([("tp", 1), ("dp", 4)])),
        # orders: tp-dp vs dp-tp
        (g([("tp", 2), ("dp", 4)]), g([("dp", 2), ("tp", 4)])),
        (g([("dp", 4), ("tp", 2)]), g([("tp", 4), ("dp", 2)])),
        (g([("tp", 2), ("dp", 2)]), g([("dp", 4), ("tp", 1)])),
        (g([("dp", 2), ("tp", 2)]), g([("tp", 1), ("dp", 4)])),
        # cp > 1 / pp > 1
        (g([("tp", 1), ("cp", 2), ("dp", 2)]), g([("tp", 1), ("dp", 4)])),
        (g([("tp", 1), ("dp", 4)]), g([("tp", 1), ("cp", 2), ("dp", 2)])),
        (g([("tp", 1), ("dp", 2), ("pp", 2)]), g([("tp", 2), ("dp", 2), ("pp", 1)])),
        # dp 2 vs 3
        (g([("tp", 3), ("dp", 2)]), g([("tp", 2), ("dp", 3)])),
        # different offsets / sizes
        (g([("tp", 2), ("dp", 2)], 0), g([("tp", 2), ("dp", 2)], 4)),
        (g([("tp", 2), ("dp", 2)], 0), g([("tp", 2), ("dp", 4)], 0)),
        # no dp dim
        (g([("tp", 4)]), g([("tp", 2), ("dp", 2)])),
    ]
    return [run_colocated(a, b) for a, b in pairs]


# ------------------------------------------------------------------ stages
def build_mm(modules, topology, rank):
    init(rank)
    reset_bridge_caches()
    grids = {}
    for m in modules:
        gr = grid_of(m)
        gr.create_pg("pp")
        grids[m["name"]] = gr
    mm = MultiModulePipelineCommunicator(grids, topology, ModelParallelConfig())
    return mm, grids


def run_stages(modules, topology, probe):
    case = {"modules": modules, "topology": topology}
    grids = {m["name"]: grid_of(m) for m in modules}
    total = MultiModulePipelineCommunicator.compute_total_pipeline_stages(topology, grids)
    case["total_stages"] = int(total)
    cur = {}
    for r in probe:
        mm, _ = build_mm(modules, topology, r)
        assert mm.total_stages == total
        cur[str(r)] = int(mm.current_stage)
    case["current_stage"] = cur
    return case


def stage_hand():
    def m(name, dims, off):
        return {"name": name, "dims": [list(x) for x in dims], "offset": off}

    def allr(mods):
        return sorted({r for x in mods for r in range(x["offset"], x["offset"] + span(x))})

    cases = []
    # chain of two pp-2 modules
    mods = [m("m0", [("tp", 1), ("cp", 1), ("dp", 1), ("pp", 2)], 0),
            m("m1", [("tp", 1), ("cp", 1), ("dp", 1), ("pp", 2)], 2)]
    cases.append((mods, {"m0": ["m1"], "m1": []}))
    # colocated m0 -> m1 on the same ranks: current_stage comes from the first module listed
    mods = [m("m0", [("tp", 2), ("cp", 1), ("dp", 1), ("pp", 1)], 0),
            m("m1", [("tp", 1), ("cp", 1), ("dp", 2), ("pp", 1)], 0)]
    cases.append((mods, {"m0": ["m1"], "m1": []}))
    # the same with the sink listed first
    mods = [m("m0", [("tp", 1), ("cp", 1), ("dp", 2), ("pp", 1)], 0),
            m("m1", [("tp", 2), ("cp", 1), ("dp", 1), ("pp", 1)], 0)]
    cases.append((mods, {"m0": [], "m1": ["m0"]}))
    # two sources of different depth joining
    mods = [m("m0", [("tp", 1), ("cp", 1), ("dp", 1), ("pp", 1)], 0),
            m("m1", [("tp", 1), ("cp", 1), ("dp", 1), ("pp", 3)], 1),
            m("m2", [("tp", 1), ("cp", 1), ("dp", 1), ("pp", 2)], 4)]
    cases.append((mods, {"m0": ["m2"], "m1": ["m2"], "m2": []}))
    # pp first-fastest: stage index from the pp enumeration
    mods = [m("m0", [("pp", 2), ("tp", 2), ("cp", 1), ("dp", 1)], 0),
            m("m1", [("tp", 1), ("cp", 1), ("dp", 2), ("pp", 2)], 4)]
    cases.append((mods, {"m0": ["m1"], "m1": []}))
    # diamond
    mods = [m("m0", [("tp", 1), ("cp", 1), ("dp", 1), ("pp", 1)], 0),
            m("m1", [("tp", 1), ("cp", 1), ("dp", 1), ("pp", 2)], 1),
            m("m2", [("tp", 1), ("cp", 1), ("dp", 1), ("pp", 4)], 3),
            m("m3", [("tp", 1), ("cp", 1), ("dp", 1), ("pp", 1)], 7)]
    cases.append((mods, {"m0": ["m1", "m2"], "m1": ["m3"], "m2": ["m3"], "m3": []}))
    return [run_stages(ms, t, allr(ms)) for ms, t in cases]


def rand_stage_dims(rng, pp, total=None):
    names = ["tp", "cp", "dp", "pp"]
    if total is None:
        sizes = {"tp": rng.choice([1, 2]), "cp": 1, "dp": rng.choice([1, 2, 4]), "pp": pp}
    else:
        opts = [
            (tp, dp)
            for tp in (1, 2, 4)
            for dp in (1, 2, 4)
            if tp * dp * pp == total
        ]
        if not opts:
            return None
        tp, dp = rng.choice(opts)
        sizes = {"tp": tp, "cp": 1, "dp": dp, "pp": pp}
    return [[d, sizes[d]] for d in order_dims(rng, names)]


def stage_cases(rng, n):
    out = []
    while len(out) < n:
        k = rng.randint(2, 5)
        modules, off, ok = [], 0, True
        for i in range(k):
            pp = rng.randint(1, 4)
            prev = modules[-1] if modules else None
            dims = None
            if prev is not None and rng.random() < 0.15:
                # colocated with the previous module: same span, own factorization
                dims = rand_stage_dims(rng, pp, span(prev))
                if dims is not None:
                    modules.append({"name": f"m{i}", "dims": dims, "offset": prev["offset"]})
                    continue
            dims = rand_stage_dims(rng, pp)
            m = {"name": f"m{i}", "dims": dims, "offset": off}
            off += span(m)
            modules.append(m)
        if off > WORLD:
            continue
        topology = {m["name"]: [] for m in modules}
        for j in range(1, k):
            if rng.random() < 0.85:
                preds = [i for i in range(j) if rng.random() < 0.5] or [rng.randrange(j)]
                for i in preds:
                    topology[f"m{i}"].append(f"m{j}")
        if all(not v for v in topology.values()):
            continue
        probe = set()
        for m in modules:
            gr = grid_of(m)
            first_pp = gr._gen_rank_enum(["pp"])[0]
            probe.update(first_pp)
            probe.add(rng.randrange(m["offset"], m["offset"] + span(m)))
        out.append(run_stages(modules, topology, sorted(probe)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--out", default="bridges.json")
    ap.add_argument("--no-stages", action="store_true")
    ap.add_argument("--separate", type=int, default=300)
    ap.add_argument("--colocated", type=int, default=200)
    ap.add_argument("--stages", type=int, default=50)
    a = ap.parse_args()
    import megatron.core.package_info as pi

    ver = f"megatron-core {pi.__version__}"
    init(a.rank)
    rng = random.Random(SEED)
    data = {
        "source": {"bridge": ver, "colocated": ver, "multimodule": ver},
        "note": (
            "Generated by tests/data/megatron/bridges_reference.py (seed %d, fake world %d) "
            "from megatron-core's BridgeCommunicator, ColocatedBridgeCommunicator and "
            "MultiModulePipelineCommunicator; see README.md." % (SEED, WORLD)
        ),
        "separate": separate_hand() + separate_cases(rng, a.separate),
        "colocated": colocated_hand() + colocated_cases(rng, a.colocated),
        "stages": [],
    }
    if not a.no_stages:
        data["stages"] = stage_hand() + stage_cases(rng, a.stages)
    def enc(x):
        return json.dumps(x, separators=(",", ":"))

    with open(a.out, "w") as f:  # one case a line
        f.write("{\"source\":%s,\n\"note\":%s" % (enc(data["source"]), enc(data["note"])))
        for k in ("separate", "colocated", "stages"):
            f.write(",\n\"%s\":[" % k)
            f.write(",".join("\n" + enc(c) for c in data[k]))
            f.write("\n]")
        f.write("}\n")
    assert json.load(open(a.out)) == data
    for k in ("separate", "colocated", "stages"):
        cs = data[k]
        nref = sum(1 for c in cs if c.get("refused"))
        print(k, len(cs), "refused", nref, file=sys.stderr)


if __name__ == "__main__":
    main()
