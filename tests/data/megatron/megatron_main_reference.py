#!/usr/bin/env python3
"""Regenerate megatron_d98e8a64dd.json: the groups Megatron-LM main's
`initialize_model_parallel` builds, with its GTP (gtp_remat) axes.

No Megatron code lives here. The script loads `megatron/core/parallel_state.py`
from a Megatron-LM source tree given with `--megatron` (a checkout or
`git archive <commit> megatron | tar -x -C DIR`), runs its own
`initialize_model_parallel` on seeded random configurations, and then runs
the same arguments through the `parallel_state.py` of the installed
megatron-core wheel (0.19.2) to compare. Usage:

    git -C Megatron-LM archive d98e8a64ddf34856e74b24714e3bedb2f5a39553 megatron \
        | tar -x -C DIR
    pip install torch einops megatron-core==0.19.2
    python megatron_main_reference.py --megatron DIR --out megatron_d98e8a64dd.json

How it runs (one CPU process, nothing is communicated):

* `parallel_state.py` is executed as module `megatron.core.parallel_state`
  from its file, afresh for every run (so every run starts from clean module
  globals). Its two package imports are replaced by stand-ins in
  `sys.modules`: `megatron.core.utils` (`GlobalMemoryBuffer`, an empty
  class; `is_torch_min_version`, always true) and
  `megatron.core.inference.symmetric_memory` (`SymmetricMemoryManager`, an
  empty class). Nothing else of either package is imported. torch and einops
  are the real ones.
* torch.distributed runs on its `fake` backend (FakeStore), initialised for
  every run with the configuration's world size and the chosen rank.
  `new_group` is wrapped: it records `(group_desc, backend, ranks)` in call
  order, then creates the group on the fake backend without `backend` and
  `pg_options` (so torch's own checks apply, e.g. ranks inside the world).
  Every rank creates every group, so the run as rank 0 records them all;
  each accepted case is run again as the last rank and one random rank, and
  the call sequences must be identical.
* Each call is named by its `group_desc` (table `DESC_KIND` below; an unknown
  description stops the script). After each run the module globals are read
  back: every group a global holds must carry the kind the global is
  mapped to in `GLOBAL_KIND` (or one of the aliases allowed there), and
  every group holding the run's rank must be held by some global, except the
  gloo copy of the expert inter-instance group, which Megatron drops.
* Groups are recorded as the rank lists passed to `new_group` (torch sorts
  them; Megatron passes them sorted except the distributed-optimizer
  instance groups of the path without GTP). Gloo copies are checked equal to
  the NCCL groups of their kind and left out.
* `hybrid_context_parallel` is never set (rank-layout has no kind for those
  groups).

Output: compact JSON, `{"commit", "note", "cases", "rejected"}` as in
megatron_5a3b6bcf1f.json; see README.md for keys and the kind names.
"""
import argparse
import itertools
import json
import math
import os
import random
import re
import sys
import types

import torch  # noqa: F401
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore

SEED = 20260825
COMMIT = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
MAX_WORLD = 256

# ----------------------------------------------------------------- kinds
# group_desc passed to create_group -> rank-layout kind name.
DESC_KIND = {
    "GTP_WEIGHT_REMAT_GROUP": "gtp_remat",
    "DATA_PARALLEL_GROUP_WITH_CP": "dp-cp",
    "INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP": "dp-cp-intra",
    "DATA_PARALLEL_GROUP": "dp",
    "DATA_PARALLEL_GROUP_WITH_GTP_REMAT": "gtp_remat-dp",
    "DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT": "gtp_remat-dp-cp",
    "CONTEXT_PARALLEL_GROUP": "cp",
    "MODEL_PARALLEL_GROUP": "tp-gtp_remat-pp",
    "TENSOR_MODEL_PARALLEL_GROUP": "tp",
    "PIPELINE_MODEL_PARALLEL_GROUP": "pp",
    "EMBEDDING_GROUP": "embd",
    "POSITION_EMBEDDING_GROUP": "pos-embd",
    "TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP": "tp-gtp_remat-dp-cp",
    "TENSOR_AND_DATA_PARALLEL_GROUP": "tp-gtp_remat-dp",
    "TENSOR_AND_CONTEXT_PARALLEL_GROUP": "tp-cp",
    "EXPERT_GTP_WEIGHT_REMAT_GROUP": "egtp_remat",
    "EXPERT_MODEL_PARALLEL_GROUP": "ep",
    "EXPERT_TENSOR_PARALLEL_GROUP": "etp",
    "EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP": "etp-ep",
    "EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP": "etp-ep-pp",
    "EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP_WITH_EGTP": "etp-ep-egtp_remat-pp",
    "EXPERT_DATA_PARALLEL_GROUP": "edp",
    "HIERARCHICAL_EXPERT_DATA_PARALLEL_GROUP_L0": "edp-intra",
    "HIERARCHICAL_EXPERT_DATA_PARALLEL_GROUP_L1": "dp-cp-inter",
    "EXPERT_DATA_PARALLEL_GROUP_WITH_GTP_REMAT": "egtp_remat-edp",
    "INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP": "dist-opt-instance",
}
HCP_DESC = re.compile(r"^HIERARCHICAL_CONTEXT_PARALLEL_GROUP_L(\d+)$")

# module global -> kinds its group may have (the first is its own kind; the
# others are the groups it aliases when that kind is not built).
GLOBAL_KIND = {
    "_TENSOR_MODEL_PARALLEL_GROUP": ["tp"],
    "_GTP_WEIGHT_REMAT_GROUP": ["gtp_remat"],
    "_PIPELINE_MODEL_PARALLEL_GROUP": ["pp"],
    "_MODEL_PARALLEL_GROUP": ["tp-gtp_remat-pp"],
    "_EMBEDDING_GROUP": ["embd"],
    "_POSITION_EMBEDDING_GROUP": ["pos-embd"],
    "_DATA_PARALLEL_GROUP": ["dp"],
    "_DATA_PARALLEL_GROUP_GLOO": ["dp"],
    "_TENSOR_AND_DATA_PARALLEL_GROUP": ["tp-gtp_remat-dp"],
    "_EXPERT_GTP_WEIGHT_REMAT_GROUP": ["egtp_remat"],
    "_EXPERT_MODEL_PARALLEL_GROUP": ["ep"],
    "_EXPERT_TENSOR_PARALLEL_GROUP": ["etp"],
    "_EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP": ["etp-ep"],
    "_EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP": ["etp-ep-pp"],
    "_EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP_WITH_EGTP": ["etp-ep-egtp_remat-pp"],
    "_EXPERT_DATA_PARALLEL_GROUP": ["edp"],
    "_EXPERT_DATA_PARALLEL_GROUP_GLOO": ["edp"],
    "_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP": ["edp-intra", "edp"],
    "_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP_GLOO": ["edp-intra", "edp"],
    "_INTER_PARTIAL_EXPERT_DATA_PARALLEL_GROUP": ["dp-cp-inter"],
    "_EXPERT_DATA_PARALLEL_GROUP_WITH_GTP_REMAT": ["egtp_remat-edp", "edp"],
    "_INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP_WITH_GTP_REMAT": [
        "egtp_remat-edp", "edp-intra", "edp"],
    "_CONTEXT_PARALLEL_GROUP": ["cp"],
    "_HIERARCHICAL_CONTEXT_PARALLEL_GROUPS": ["hcp-*"],
    "_DATA_PARALLEL_GROUP_WITH_GTP_REMAT": ["gtp_remat-dp", "dp"],
    "_DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT": ["gtp_remat-dp-cp", "dp-cp"],
    "_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT": [
        "gtp_remat-dp-cp", "dp-cp-intra", "dp-cp"],
    "_DATA_PARALLEL_GROUP_WITH_CP": ["dp-cp"],
    "_DATA_PARALLEL_GROUP_WITH_CP_GLOO": ["dp-cp"],
    "_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP": ["dp-cp-intra", "dp-cp"],
    "_INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP_GLOO": ["dp-cp-intra", "dp-cp"],
    "_TENSOR_AND_CONTEXT_PARALLEL_GROUP": ["tp-cp"],
    "_TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP": ["tp-gtp_remat-dp-cp"],
    "_INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP": ["dist-opt-instance"],
}
# globals that hold process-group lists or dicts but no group of a kind here
IGNORED_GLOBALS = {"_global_process_group_list", "_HYBRID_DP_CP_GROUPS"}


def kind_of(desc):
    """(kind, is_gloo) of a group description."""
    gloo = False
    if "_GLOO" in desc:
        gloo = True
        desc = desc.replace("_GLOO", "")
    m = HCP_DESC.match(desc)
    if m:
        return f"hcp-{m.group(1)}", gloo
    if desc not in DESC_KIND:
        raise SystemExit(f"unknown group_desc {desc!r}: add it to DESC_KIND")
    return DESC_KIND[desc], gloo


# ------------------------------------------------------- recording torch
class Group:
    """One recorded new_group call, and the process group torch returned."""

    __slots__ = ("ranks", "desc", "backend", "pg")

    def __init__(self, ranks, desc, backend, pg):
        self.ranks = ranks
        self.desc = desc
        self.backend = backend
        self.pg = pg


CALLS = []
_real_new_group = dist.new_group


def _new_group(ranks=None, timeout=None, backend=None, pg_options=None,
               use_local_synchronization=False, group_desc=None, **kwargs):
    """Records the call, then creates the group on the fake backend (whose
    checks, such as ranks inside the world, are torch's own); `backend` and
    `pg_options` are dropped (the fake backend serves every group)."""
    ranks = [int(r) for r in ranks]
    pg = _real_new_group(ranks, timeout=timeout, group_desc=group_desc)
    CALLS.append(Group(ranks, group_desc, backend, pg))
    return pg


dist.new_group = _new_group


def init_world(world, rank):
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())


def install_stubs():
    """Stand-ins for the two package modules parallel_state.py imports."""
    for name in ("megatron", "megatron.core", "megatron.core.inference"):
        mod = types.ModuleType(name)
        mod.__path__ = []
        sys.modules[name] = mod
    utils = types.ModuleType("megatron.core.utils")

    class GlobalMemoryBuffer:  # noqa: D401 - stand-in
        pass

    utils.GlobalMemoryBuffer = GlobalMemoryBuffer
    utils.is_torch_min_version = lambda version, check_equality=True: True
    sys.modules["megatron.core.utils"] = utils
    symm = types.ModuleType("megatron.core.inference.symmetric_memory")

    class SymmetricMemoryManager:
        @staticmethod
        def destroy():
            pass

    symm.SymmetricMemoryManager = SymmetricMemoryManager
    sys.modules["megatron.core.inference.symmetric_memory"] = symm


class Version:
    """One parallel_state.py, executed afresh for every run."""

    def __init__(self, path):
        self.path = path
        with open(path) as f:
            self.code = compile(f.read(), path, "exec")

    def module(self):
        name = "megatron.core.parallel_state"
        mod = types.ModuleType(name)
        mod.__file__ = self.path
        mod.__package__ = "megatron.core"
        sys.modules[name] = mod
        exec(self.code, mod.__dict__)
        return mod

    def run(self, cfg, rank):
        """Calls initialize_model_parallel; returns (calls, module)."""
        mod = self.module()
        init_world(cfg["world_size"], rank)
        CALLS.clear()
        mod.initialize_model_parallel(
            tensor_model_parallel_size=cfg["tp"],
            pipeline_model_parallel_size=cfg["pp"],
            context_parallel_size=cfg["cp"],
            hierarchical_context_parallel_sizes=cfg["hierarchical_cp"],
            expert_model_parallel_size=cfg["ep"],
            gtp_remat_size=cfg["gtp_remat"],
            expert_gtp_remat_size=cfg["expert_gtp_remat"],
            num_distributed_optimizer_instances=cfg["dist_opt_instances"],
            expert_tensor_parallel_size=cfg["etp_passed"],
            order=cfg["order"],
        )
        return list(CALLS), mod


def error_text(e):
    return f"{type(e).__name__}: {e}"


def attempt(version, cfg, rank=0):
    try:
        calls, mod = version.run(cfg, rank)
    except Exception as e:  # noqa: BLE001 - Megatron's refusal, recorded
        return None, None, error_text(e)
    return calls, mod, None


def signature(calls):
    return [(g.desc, g.backend, tuple(g.ranks)) for g in calls]


def check_globals(calls, mod, rank, stats):
    """Every group a global holds has the global's kind (or an allowed
    alias); every group holding `rank` is held by some global."""
    # (torch returns one shared NON_GROUP_MEMBER object to non-members)
    by_pg = {id(g.pg): g for g in calls if rank in g.ranks}
    held = set()
    for name, value in vars(mod).items():
        if not name.startswith("_") or name in IGNORED_GLOBALS:
            continue
        items = []
        if id(value) in by_pg:
            items = [(None, value)]
        elif isinstance(value, list) and any(id(v) in by_pg for v in value):
            items = list(enumerate(value))
        elif isinstance(value, dict) and any(id(v) in by_pg for v in value.values()):
            items = list(value.items())
        if not items:
            continue
        if name not in GLOBAL_KIND:
            raise SystemExit(f"global {name} holds groups but has no kind")
        for index, pg in items:
            if pg is None:
                continue
            g = by_pg[id(pg)]
            kind, _ = kind_of(g.desc)
            allowed = GLOBAL_KIND[name]
            if allowed == ["hcp-*"]:
                assert kind == f"hcp-{index}", (name, index, kind)
            else:
                assert kind in allowed, (name, kind, allowed)
            assert rank in g.ranks, (name, g.ranks, rank)
            held.add(id(g))
            stats.setdefault(name, set()).add(kind)
    for g in calls:
        if rank in g.ranks and id(g) not in held:
            kind, gloo = kind_of(g.desc)
            # Megatron keeps no handle on the gloo level-1 expert group.
            assert gloo and kind == "dp-cp-inter", (g.desc, g.ranks)


def grouped(calls):
    """{kind: [ranks, ...]} in creation order, and the kinds with gloo copies."""
    nccl, gloo = {}, {}
    for g in calls:
        kind, is_gloo = kind_of(g.desc)
        assert is_gloo == (g.backend == "gloo"), (g.desc, g.backend)
        (gloo if is_gloo else nccl).setdefault(kind, []).append(g.ranks)
    for kind, lists in gloo.items():
        assert nccl.get(kind) == lists, f"gloo {kind} differs from nccl"
    return nccl, sorted(gloo)


# ---------------------------------------------------------- configurations
BASE = ["tp", "cp", "ep", "dp", "pp"]


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def make_cfg(tp, cp, ep, etp_passed, pp, world, order, hcp=None, n=1, g=1, eg=1):
    m = tp * pp * cp * g
    return {
        "tp": tp, "cp": cp, "ep": ep,
        "etp": etp_passed if etp_passed is not None else tp,
        "etp_passed": etp_passed, "pp": pp,
        "dp": world // m if world % m == 0 else None,
        "world_size": world, "encoder_tp": 0, "encoder_pp": 0,
        "order": order, "hierarchical_cp": hcp, "dist_opt_instances": n,
        "gtp_remat": g, "expert_gtp_remat": eg,
    }


def random_order(rng, sizes):
    r = rng.random()
    if r < 0.35:
        toks = list(BASE)
    elif r < 0.45:
        toks = ["tp", "cp", "ep", "pp", "dp"]
    else:
        toks = list(BASE)
        rng.shuffle(toks)
    if rng.random() < 0.1:
        # leave out a token whose size is 1 on both grids (Megatron appends it)
        ones = [t for t in toks if t != "tp" and sizes[t] == 1]
        if ones:
            toks.remove(rng.choice(ones))
    if rng.random() < 0.2:
        toks.insert(rng.randrange(len(toks) + 1), "gtp_remat")
    return "-".join(toks)


def random_hcp(rng, cp):
    if cp == 1 or rng.random() > 0.35:
        return None
    options = [[cp]]
    for a in divisors(cp):
        options.append([a, cp // a])
    if cp == 4:
        options.append([2, 1, 2])
    return rng.choice(options)


def random_cfg(rng, g=None, eg=None, fit=0.92):
    """A random configuration; mostly fitting the expert grid."""
    while True:
        gg = g if g is not None else rng.choice([1, 1, 2, 2, 3, 4, 4])
        egg = eg if eg is not None else rng.choice([1, 1, 2, 2, 4])
        tp = rng.choice([1, 1, 2, 2, 2, 3, 4, 4, 8])
        cp = rng.choice([1, 1, 1, 2, 2, 4])
        pp = rng.choice([1, 1, 2, 2, 3, 4])
        m = tp * cp * pp * gg
        dps = [d for d in (1, 1, 2, 2, 3, 4, 4, 6, 8, 12, 16, 32) if m * d <= MAX_WORLD]
        if not dps:
            continue
        dp = rng.choice(dps)
        world = m * dp
        default_etp = rng.random() < 0.4
        etp_passed = None if default_etp else rng.choice([1, 2, 4, tp])
        ep = rng.choice([1, 1, 2, 4, 8])
        sizes = {"tp": tp, "cp": cp, "ep": ep, "dp": 2, "pp": pp}
        order = random_order(rng, sizes)
        if rng.random() < fit and world % (pp * egg) == 0:
            # an expert grid that fits: etp * ep divides world / (pp * egtp)
            rem = world // (pp * egg)
            etps = [tp] if default_etp else [1, 2, 4, tp]
            pairs = [(t, e) for t in etps for e in (1, 2, 4, 8) if rem % (t * e) == 0]
            if not order.endswith("pp") and pp > 1 and rng.random() < 0.85:
                # pp not last: edp must equal dp
                same = [(t, e) for t, e in pairs if t * e * egg == tp * cp * gg]
                pairs = same or pairs
            if not pairs:
                continue
            etp, ep = rng.choice(pairs)
            etp_passed = None if default_etp else etp
        etp = etp_passed if etp_passed is not None else tp
        sizes["ep"] = ep
        if "ep" not in order.split("-") and ep > 1:
            toks = order.split("-")
            toks.insert(rng.randrange(2), "ep")
            order = "-".join(toks)
        hcp = random_hcp(rng, cp)
        n = 1
        if gg == 1 and egg == 1 and rng.random() < 0.4:
            edp = world // (etp * ep * pp) if world % (etp * ep * pp) == 0 else 1
            cands = [d for d in divisors(math.gcd(dp * cp, edp)) if d > 1]
            if cands:
                n = rng.choice(cands)
        return make_cfg(tp, cp, ep, etp_passed, pp, world, order, hcp, n, gg, egg)


def refusing_cfg(rng, category):
    """A configuration aimed at one of Megatron's refusals."""
    c = random_cfg(rng)
    if category == "gtp_dist_opt":
        eg = rng.choice([2, 4]) if rng.random() < 0.5 else 1
        c = random_cfg(rng, g=rng.choice([1, 2, 4]), eg=eg)
        if c["gtp_remat"] == 1 and c["expert_gtp_remat"] == 1:
            c = random_cfg(rng, g=2)
        c["dist_opt_instances"] = rng.choice([2, 4])
    elif category == "dense_world":
        while c["tp"] * c["pp"] * c["cp"] * c["gtp_remat"] == 1 or c["gtp_remat"] == 1:
            c = random_cfg(rng)
        m = c["tp"] * c["pp"] * c["cp"] * c["gtp_remat"]
        c["world_size"] = max(1, c["world_size"] // c["gtp_remat"]) if rng.random() < 0.5 \
            else c["world_size"] + rng.randrange(1, m)
        if c["world_size"] % m == 0:
            c["world_size"] += 1
        c["dp"] = None
    elif category == "expert_world":
        while c["expert_gtp_remat"] == 1:
            c = random_cfg(rng)
        e = c["etp"] * c["ep"] * c["pp"] * c["expert_gtp_remat"]
        w = c["world_size"]
        if w % e == 0:
            # double the expert grid's gtp axis until it no longer fits
            while w % (c["etp"] * c["ep"] * c["pp"] * c["expert_gtp_remat"]) == 0:
                c["expert_gtp_remat"] *= 2
    elif category == "pp_last":
        while c["pp"] == 1:
            c = random_cfg(rng)
        toks = [t for t in c["order"].split("-") if t != "pp"]
        toks.insert(rng.randrange(len(toks)), "pp")
        c["order"] = "-".join(toks)
        edp_div = c["etp"] * c["ep"] * c["pp"] * c["expert_gtp_remat"]
        if c["world_size"] % edp_div == 0 and c["world_size"] // edp_div == c["dp"]:
            c["ep"] *= 2
    elif category == "gtp_twice":
        toks = c["order"].split("-")
        for _ in range(2):
            toks.insert(rng.randrange(len(toks) + 1), "gtp_remat")
        c["order"] = "-".join(toks)
    elif category == "unknown_token":
        toks = c["order"].split("-")
        toks.insert(rng.randrange(len(toks) + 1), rng.choice(["sp", "gtp", "egtp_remat", "xp"]))
        c["order"] = "-".join(toks)
    elif category == "no_tp":
        c["order"] = "-".join(t for t in c["order"].split("-") if t != "tp")
    elif category == "missing_token":
        big = [t for t in ("cp", "ep", "dp", "pp") if (c[t] or 1) > 1]
        if not big:
            c = make_cfg(c["tp"], 2, c["ep"], c["etp_passed"], c["pp"], c["world_size"] * 2,
                         c["order"], None, 1, c["gtp_remat"], c["expert_gtp_remat"])
            big = ["cp"]
        t = rng.choice(big)
        c["order"] = "-".join(x for x in c["order"].split("-") if x != t)
    elif category == "dist_opt_split":
        c = random_cfg(rng, g=1, eg=1)
        dpcp = (c["dp"] or 1) * c["cp"]
        c["dist_opt_instances"] = rng.choice([d for d in (3, 4, 5, 8) if dpcp % d] or [dpcp + 1])
    elif category == "hcp_product":
        while c["cp"] == 1:
            c = random_cfg(rng)
        c["hierarchical_cp"] = [2 * c["cp"]] if rng.random() < 0.5 else [c["cp"], 2]
    elif category == "pp_groups":
        # pp inside the order with gtp_remat > 1: the injected axes move the
        # dense and expert pipelines apart
        c = random_cfg(rng, g=rng.choice([2, 4]))
        while c["pp"] == 1:
            c = random_cfg(rng, g=rng.choice([2, 4]))
        toks = [t for t in BASE if t != "pp"]
        toks.insert(rng.randrange(1, 4), "pp")
        c["order"] = "-".join(toks)
    return c


REFUSALS = ["gtp_dist_opt", "dense_world", "expert_world", "pp_last", "gtp_twice",
            "unknown_token", "no_tp", "missing_token", "dist_opt_split", "hcp_product",
            "pp_groups"]


def hand_picked():
    o = "tp-cp-ep-dp-pp"
    return [
        # --tensor-parallel-num-weight-shards 4 and 8 with tp 2, pp 2, 64 ranks
        make_cfg(2, 1, 1, None, 2, 64, o, g=2),
        make_cfg(2, 1, 1, None, 2, 64, o, g=4),
        make_cfg(1, 1, 1, None, 1, 2, o, g=2),
        make_cfg(1, 1, 1, None, 1, 2, o, eg=2),
        make_cfg(1, 1, 2, None, 1, 4, o, eg=2),
        make_cfg(2, 1, 1, None, 2, 8, o, g=2),
        make_cfg(1, 2, 1, None, 1, 4, o, g=2),
        make_cfg(2, 1, 2, None, 1, 8, o, g=2, eg=2),
        make_cfg(1, 1, 1, None, 1, 4, "gtp_remat-tp-cp-ep-dp-pp", g=2),
        make_cfg(2, 1, 1, None, 1, 4, "gtp_remat-tp-cp-ep-dp-pp", g=2),
        make_cfg(2, 1, 1, None, 1, 4, "tp-cp-gtp_remat-ep-dp-pp", g=2),
        make_cfg(2, 1, 2, None, 1, 8, "tp-cp-ep-gtp_remat-dp-pp", g=2, eg=2),
        make_cfg(2, 1, 1, None, 2, 8, "tp-cp-ep-pp-dp", g=2),
        make_cfg(1, 1, 1, None, 2, 4, "tp-cp-ep-pp-dp", g=2),
        make_cfg(1, 1, 1, None, 1, 4, o, n=2),
        make_cfg(2, 1, 2, 1, 2, 16, o, n=2),
        make_cfg(2, 1, 1, None, 1, 4, o, g=2, n=2),
        make_cfg(2, 1, 1, None, 1, 6, o, g=2),
        make_cfg(2, 1, 1, None, 1, 8, o, eg=4),
        make_cfg(2, 1, 1, None, 2, 8, "tp-pp-cp-ep-dp", g=2),
        make_cfg(2, 1, 1, None, 1, 4, "cp-ep-dp-pp", g=2),
        make_cfg(1, 1, 1, None, 1, 4, "cp-ep-dp-pp"),
        make_cfg(2, 1, 1, None, 1, 8, "tp-gtp_remat-cp-gtp_remat-ep-dp-pp", g=2),
        make_cfg(2, 1, 1, None, 1, 4, "tp-gtp_remat-cp-gtp_remat-ep-dp-pp", g=1),
        make_cfg(1, 1, 1, None, 1, 3, o, g=2),
        make_cfg(1, 1, 1, None, 1, 3, o, eg=2),
        make_cfg(2, 1, 4, 1, 2, 8, "tp-pp-cp-ep-dp", g=2),
        make_cfg(1, 1, 1, None, 1, 4, "tp-cp-ep-dp-pp-xp"),
        make_cfg(1, 1, 1, None, 1, 2, o, eg=2, n=2),
    ]


# --------------------------------------------------------------- main loop
def compare(main_calls, main_err, old, cfg):
    """What 0.19.2 does with the same arguments, relative to main."""
    calls, _, err = attempt(old, cfg)
    if main_err is not None or err is not None:
        if main_err == err:
            return {"same_in_0_19_2": True}
        return {"same_in_0_19_2": False,
                "in_0_19_2": err if err is not None else "accepted"}
    if signature(calls) == signature(main_calls):
        return {"same_in_0_19_2": True}
    a, _ = grouped(main_calls)
    b, _ = grouped(calls)
    diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return {"same_in_0_19_2": False, "kinds_differing_in_0_19_2": diff}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--megatron", required=True,
                    help="Megatron-LM source tree (holds megatron/core/parallel_state.py)")
    ap.add_argument("--old", default=None,
                    help="parallel_state.py to compare with (default: the installed "
                         "megatron-core wheel's)")
    ap.add_argument("--out", default="megatron_d98e8a64dd.json")
    ap.add_argument("--cases", type=int, default=340)
    ap.add_argument("--rejected", type=int, default=100)
    args = ap.parse_args()

    install_stubs()
    main_v = Version(os.path.join(args.megatron, "megatron", "core", "parallel_state.py"))
    old_path = args.old
    if old_path is None:
        from importlib.metadata import distribution
        d = distribution("megatron-core")
        assert d.version == "0.19.2", d.version
        old_path = str(d.locate_file("megatron/core/parallel_state.py"))
    old_v = Version(old_path)

    rng = random.Random(SEED)
    check_rng = random.Random(SEED + 1)
    cases, rejected, stats = [], [], {}
    seen = set()
    counts = {"gtp": 0, "egtp": 0, "both": 0}

    def run(cfg):
        key = json.dumps(cfg, sort_keys=True)
        if key in seen:
            return
        seen.add(key)
        calls, mod, err = attempt(main_v, cfg)
        if err is not None:
            entry = {"config": cfg, "error": err}
            entry.update(compare(None, err, old_v, cfg))
            rejected.append(entry)
            return
        check_globals(calls, mod, 0, stats)
        w = cfg["world_size"]
        for r in sorted({w - 1, check_rng.randrange(w)} - {0}):
            other, omod, oerr = attempt(main_v, cfg, r)
            assert oerr is None and signature(other) == signature(calls), (cfg, r, oerr)
            check_globals(other, omod, r, stats)
        groups, gloo = grouped(calls)
        entry = {"config": cfg, "groups": groups, "gloo_duplicated_kinds": gloo}
        entry.update(compare(calls, None, old_v, cfg))
        cases.append(entry)
        g, eg = cfg["gtp_remat"] > 1, cfg["expert_gtp_remat"] > 1
        counts["gtp"] += g
        counts["egtp"] += eg
        counts["both"] += g and eg

    for cfg in hand_picked():
        run(cfg)
    for cat in itertools.islice(itertools.cycle(REFUSALS), 8 * len(REFUSALS)):
        run(refusing_cfg(rng, cat))
    while (len(cases) < args.cases or counts["gtp"] < 130 or counts["egtp"] < 130
           or counts["both"] < 65):
        run(random_cfg(rng))
    while len(rejected) < args.rejected:
        run(refusing_cfg(rng, rng.choice(REFUSALS)))

    note = (
        "Megatron-LM " + COMMIT + " (main, 2026-08-22) initialize_model_parallel, "
        "decoder only, one process recording every new_group call "
        "(megatron_main_reference.py). groups[kind] lists every group of that kind in "
        "creation order, each as the rank list passed to new_group (identical call "
        "sequence on every rank checked). Kinds absent from a case were not created "
        "(globals that alias another group are not created). Gloo duplicates omitted "
        "(always identical to the NCCL groups of the same kind; gloo_duplicated_kinds "
        "lists which kinds had them; none at all when gtp_remat > 1, no expert ones when "
        "expert_gtp_remat > 1). gtp_remat / expert_gtp_remat = gtp_remat_size / "
        "expert_gtp_remat_size passed. etp = expert_tensor_parallel_size passed or "
        "default tp; etp_passed is the raw argument (null = default). encoder_tp and "
        "encoder_pp are always 0 (main has no encoder). order = the order string passed "
        "(Megatron inserts gtp_remat after tp on the dense grid and after ep on the "
        "expert grid unless the token is present). dp = derived data_parallel_size = "
        "world / (tp*pp*cp*gtp_remat) (null if not divisible). error = "
        "'<ExceptionType>: <message>', Megatron's own except 'Rank N is out of range', "
        "raised by torch.distributed.new_group (torch 2.15) on a group Megatron built "
        "with ranks outside the world. same_in_0_19_2: megatron-core 0.19.2's "
        "parallel_state made the same new_group calls (or raised the same error). Kind "
        "names: see README.md."
    )
    out = {"commit": COMMIT, "note": note, "cases": cases, "rejected": rejected}
    with open(args.out, "w") as f:
        json.dump(out, f, separators=(",", ":"))
    same = sum(c["same_in_0_19_2"] for c in cases + rejected)
    print(f"{len(cases)} accepted (gtp_remat>1: {counts['gtp']}, expert_gtp_remat>1: "
          f"{counts['egtp']}, both: {counts['both']}), {len(rejected)} rejected; "
          f"same in 0.19.2: {same}/{len(cases) + len(rejected)}", file=sys.stderr)
    for name in sorted(stats):
        print(f"  {name}: {sorted(stats[name])}", file=sys.stderr)


if __name__ == "__main__":
    main()
