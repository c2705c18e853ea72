"""rank_layout.reshard against megatron-core 0.19.2's own planners, on the
same layouts and tensors, in one process on the CPU.

**Refit** (``megatron.core.resharding``): the rosters every rank would
all-gather are built by Megatron-Core's ``extract_param_metadata``
(reshard_megatron says how); every rank's plan is Megatron-Core's
``build_plan_from_rosters`` (which replays the whole schedule,
``_iter_global_transfer_ops``), executed as its copy services do (a
receive matched to its send by ``task_id``, slices of the local tensors
as Megatron-Core's layers cut them). rank-layout's plan is executed on
the same local tensors at its offsets. Every destination tensor of both
must equal the expected cut of the global tensor, element by element.
Where the two take an element from different ranks the test reports it,
with what each plan costs (bytes, local, cross-node, cross-domain, the
most one rank sends and receives, messages); rank-layout's rule never
crosses a node or a domain where Megatron-Core's does not, and copies
locally wherever Megatron-Core does. The cases: tp 4 -> 2 (SwiGLU fc1 of
stride 2, packed ``in_proj`` blocks), pp 2 -> 1 (a tied embedding whose
copy is ``output_layer.weight``), experts ep 4 -> 2 with etp 1 -> 2,
collocated and disjoint, 8 to 48 ranks on nodes of 4 GPUs in domains of
2 nodes; and a fused tensor of every expert, the same across an etp
change, where across an ep change Megatron-Core's planner (which slices
the tp dim only) cannot.

The worked refit of the semantics (12.9): Megatron-Core's column is
its own schedule's cost.

**KV handoff** (``inference.disaggregation.kv_reshard.plan_kv_reshard``):
a prefill shard and a decode shard of different tp and pp of
``InferenceShards``; Megatron-Core's ``KVShardLayout`` of every rank read
from its own ``build_inference_pg_collections_for_shards`` (torch's fake
backend) as Megatron-LM's ``layout_from_pg_collection`` reads it; the KV
cache a rank-layout tensor with the layers over pp and the heads over tp.
Both give every decode rank the same data; Megatron-Core sends each
attention shard from its smallest-rank replica only, rank-layout from
every replica.

megatron-core 0.16.1 has neither planner (its ``resharding`` is older):
under it (the 3.11 environment of python/ci.sh) this file is skipped;
python/ci.sh runs it under 0.19.2 (MEGATRON_CORE_TESTS), where a
megatron-core that cannot be imported fails it (CI=true)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import megatron_core_worker as mcw

mcw.require_megatron()
if mcw.version() == "0.16.1":
    pytest.skip(
        "megatron-core 0.16.1 has no build_plan_from_rosters nor plan_kv_reshard; python/ci.sh runs this file under 0.19.2",
        allow_module_level=True,
    )

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from megatron.core.inference.disaggregation.kv_reshard import KVShardLayout, plan_kv_reshard  # noqa: E402
    from megatron.core.inference.shards import build_inference_pg_collections_for_shards  # noqa: E402
    from megatron.core.resharding.planner import build_plan_from_rosters  # noqa: E402
    from megatron.core.utils import get_pg_rank, get_pg_size  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402

import reshard_megatron as rm  # noqa: E402
import reshard_worker as rw  # noqa: E402
from rank_layout import InferenceShards, Layout, reshard  # noqa: E402

#: GPUs per node and nodes per NVLink domain of every case.
G, M = 4, 2
LAYERS, EXPERTS = 4, 4


def model() -> dict[str, Any]:
    """A 4-layer MoE under Megatron-Core's names: a tied embedding, QKV,
    the attention projection (tp on dim 1), SwiGLU fc1 (stride 2), fc2,
    a norm, a packed ``in_proj`` (Mamba's blocks) and 4 experts' fc1 per
    layer, the final norm."""
    tensors: list[dict[str, Any]] = [
        {"name": "embedding.word_embeddings.weight", "shape": [64, 8], "layer": "ends", "tp_dim": 0},
    ]
    for layer in range(LAYERS):
        p = f"decoder.layers.{layer}."
        tensors += [
            {"name": p + "self_attention.linear_qkv.weight", "shape": [48, 8], "layer": layer, "tp_dim": 0},
            {"name": p + "self_attention.linear_proj.weight", "shape": [8, 16], "layer": layer, "tp_dim": 1},
            {"name": p + "mlp.linear_fc1.weight", "shape": [32, 8], "layer": layer, "tp_dim": 0, "tp_stride": 2},
            {"name": p + "mlp.linear_fc2.weight", "shape": [8, 16], "layer": layer, "tp_dim": 1},
            {"name": p + "input_layernorm.weight", "shape": [8], "layer": layer, "element_bytes": 4},
            {"name": p + "mixer.in_proj.weight", "shape": [40, 8], "layer": layer, "tp_dim": 0, "tp_sizes": [16, 8, 16]},
        ]
        tensors += [
            {"name": p + f"mlp.experts.linear_fc1.weight{e}", "shape": [16, 8], "layer": layer, "expert": e,
             "tp_dim": 0, "tp_stride": 2}
            for e in range(EXPERTS)
        ]
    tensors.append({"name": "decoder.final_layernorm.weight", "shape": [8], "layer": "last", "element_bytes": 4})
    return {"num_layers": LAYERS, "num_experts": EXPERTS, "tensors": tensors}


def costs(moves: list[tuple[int, int, int]], g: int = G, m: int = M) -> dict[str, int]:
    """What a plan of (src, dst, bytes) moves costs, nodes of ``g`` GPUs
    in domains of ``m`` nodes (as rank-layout's Cost counts it)."""
    out = dict.fromkeys(["bytes", "local_bytes", "cross_node_bytes", "cross_domain_bytes", "max_send_bytes",
                         "max_recv_bytes", "messages", "local_copies"], 0)
    sent: dict[int, int] = {}
    got: dict[int, int] = {}
    for s, d, b in moves:
        if s == d:
            out["local_bytes"] += b
            out["local_copies"] += 1
            continue
        out["bytes"] += b
        out["messages"] += 1
        out["cross_node_bytes"] += b if s // g != d // g else 0
        out["cross_domain_bytes"] += b if s // (g * m) != d // (g * m) else 0
        sent[s] = sent.get(s, 0) + b
        got[d] = got.get(d, 0) + b
    out["max_send_bytes"] = max(sent.values(), default=0)
    out["max_recv_bytes"] = max(got.values(), default=0)
    return out


def element_bytes(m: dict[str, Any]) -> dict[str, int]:
    return {t["name"]: t.get("element_bytes", 2) for t in m["tensors"]}


class Refit:
    """One refit of ``m`` from a to b on both sides' local tensors (cut
    as Megatron-Core's layers cut them), and the expected destinations."""

    def __init__(self, m: dict[str, Any], a: Layout, b: Layout) -> None:
        self.m, self.a, self.b = m, a, b
        self.arrays = rw.global_arrays(m)
        self.eb = element_bytes(m)
        cache: dict = {}
        self.src, self.dst = rm.Side(m, a, torch, cache), rm.Side(m, b, torch, cache)
        self.world = max(a.rank_offset + a.world_size, b.rank_offset + b.world_size)
        self.held: dict[tuple[int, str], np.ndarray] = {}
        self.expected = {(r, name): self.dst.local(m, self.arrays, r, name)
                         for r in self.dst.grid.ranks() for name in set(self.dst.names[r].values())}

    def source(self, rank: int, name: str) -> np.ndarray:
        if (rank, name) not in self.held:
            self.held[rank, name] = self.src.local(self.m, self.arrays, rank, name)
        return self.held[rank, name]

    def blank(self) -> tuple[dict, dict, list]:
        """Destinations of -1, who sent each element (-1), the moves."""
        out = {k: np.full_like(v, -1) for k, v in self.expected.items()}
        who = {k: np.full(v.shape, -1) for k, v in self.expected.items()}
        return out, who, []

    def megatron(self) -> tuple[dict, dict, list]:
        """Every rank's own plan (build_plan_from_rosters), executed: a
        receive takes its send's slice (matched by task_id)."""
        out, who, moves = self.blank()
        dst_by_rank, src_by_name = rm.rosters(self.world, self.src, self.dst)
        plans = {r: build_plan_from_rosters(dst_by_rank, src_by_name, r) for r in range(self.world)}
        sends = {op.task_id: (r, op) for r, p in plans.items() for op in p.send_ops}
        for r, p in plans.items():
            for op in p.recv_ops:
                s, send = sends[op.task_id]
                assert s == op.peer_rank and send.peer_rank == r and send.my_slice == op.peer_slice
                name = self.dst.names[r][op.param_name]
                assert self.src.names[s][send.param_name] == name
                piece = self.source(s, name)[send.my_slice]
                out[r, name][op.my_slice] = piece
                who[r, name][op.my_slice] = s
                moves.append((s, r, piece.size * self.eb[name]))
        return out, who, moves

    def ours(self) -> tuple[dict, dict, list]:
        """rank-layout's whole plan, executed at its offsets."""
        out, who, moves = self.blank()
        plan = reshard(self.a, self.b, tensors=self.m, gpus_per_node=G, nodes_per_domain=M)
        for (r, name), want in self.expected.items():
            assert plan.destination_shard(r, name)["local_shape"] == list(want.shape)
        for t in plan.transfers():
            name = t["tensor"]
            there = tuple(slice(o, o + hi - lo) for o, (lo, hi) in zip(t["src_offset"], t["box"]))
            here = tuple(slice(o, o + hi - lo) for o, (lo, hi) in zip(t["dst_offset"], t["box"]))
            out[t["dst"], name][here] = self.source(t["src"], name)[there]
            who[t["dst"], name][here] = t["src"]
            moves.append((t["src"], t["dst"], t["bytes"]))
        assert costs(moves) == plan.cost(), "rank-layout's Cost is what the test counts"
        return out, who, moves


def refit(a: Layout, b: Layout, m: Any = None) -> dict[str, Any]:
    """Both plans of ``m`` (default model()) from a to b, executed."""
    r = Refit(m or model(), a, b)
    return {"expected": r.expected, "eb": r.eb, "megatron": r.megatron(), "ours": r.ours()}


def report(label: str, r: dict[str, Any]) -> dict[str, Any]:
    """Checks both plans' destinations; prints and returns where their
    sources differ and what each costs."""
    eb, expected = r["eb"], r["expected"]
    (ours, our_who, our_moves), (theirs, their_who, their_moves) = r["ours"], r["megatron"]
    for key, want in expected.items():
        np.testing.assert_array_equal(theirs[key], want, err_msg=f"Megatron-Core: {key}")
        np.testing.assert_array_equal(ours[key], want, err_msg=f"rank-layout: {key}")
    differ = crossing = 0
    for (rank, name), a in our_who.items():
        b = their_who[rank, name]
        differ += int((a != b).sum()) * eb[name]
        node, domain = rank // G, rank // (G * M)
        # Element by element: where rank-layout leaves the node (domain),
        # so does Megatron-Core; where Megatron-Core copies, so does it.
        assert not ((a // G != node) & (b // G == node)).any(), (label, rank, name)
        assert not ((a // (G * M) != domain) & (b // (G * M) == domain)).any(), (label, rank, name)
        assert not ((b == rank) & (a != rank)).any(), (label, rank, name)
        crossing += int(((b // G != node) & (a // G == node)).sum()) * eb[name]
    c_ours, c_theirs = costs(our_moves), costs(their_moves)
    print(f"\n{label}: sources differ for {differ} destination bytes "
          f"({crossing} of them cross a node with Megatron-Core, not with rank-layout)")
    print(f"  {'':22} {'rank-layout':>12} {'Megatron-Core':>14}")
    for k in c_ours:
        print(f"  {k:22} {c_ours[k]:>12,} {c_theirs[k]:>14,}")
    return {"ours": c_ours, "megatron": c_theirs, "differ": differ}


CASES = [
    ("tp 4 -> 2, SwiGLU stride 2, packed in_proj; collocated on 8",
     dict(tp=4, dp=2, ep=2, etp=2), dict(tp=2, dp=4, ep=4, etp=2)),
    ("pp 2 -> 1, tied embedding; disjoint 0-7 -> 8-11",
     dict(tp=2, pp=2, dp=2, ep=2, etp=1), dict(tp=2, dp=2, ep=4, etp=1, world_size=4, rank_offset=8)),
    ("experts ep 4 -> 2, etp 1 -> 2, tp 2 -> 4, pp 2 -> 1; collocated on 16",
     dict(tp=2, pp=2, dp=4, ep=4, etp=1), dict(tp=4, dp=4, ep=2, etp=2)),
    ("tp 2 pp 4 -> tp 4 pp 1, ep 4, etp 1 -> 2; collocated on 32",
     dict(tp=2, pp=4, dp=4, ep=4, etp=1), dict(tp=4, dp=8, ep=4, etp=2)),
    ("tp 4 pp 2 dp 4 -> tp 2 dp 8; disjoint 0-31 -> 32-47",
     dict(tp=4, pp=2, dp=4, ep=4, etp=1), dict(tp=2, dp=8, ep=4, etp=1, world_size=16, rank_offset=32)),
]


@pytest.mark.parametrize("label, a, b", CASES, ids=[c[0].split(";")[0] for c in CASES])
def test_refit_same_destinations_as_megatron_core(label: str, a: dict, b: dict) -> None:
    found = report(label, refit(Layout(**a), Layout(**b)))
    ours, theirs = found["ours"], found["megatron"]
    # The same bytes reach the same destinations: only the sources differ.
    assert ours["bytes"] + ours["local_bytes"] == theirs["bytes"] + theirs["local_bytes"]
    assert ours["max_recv_bytes"] <= theirs["max_recv_bytes"]
    assert ours["cross_node_bytes"] <= theirs["cross_node_bytes"]
    assert ours["cross_domain_bytes"] <= theirs["cross_domain_bytes"]
    assert ours["local_bytes"] >= theirs["local_bytes"]
    # And, in these cases, no more messages, and no rank sends more.
    assert ours["messages"] <= theirs["messages"]
    assert ours["max_send_bytes"] <= theirs["max_send_bytes"]


def fused_experts() -> dict[str, Any]:
    """One fused tensor of every expert (4 experts of [16, 8]; ep on dim
    0, etp on dim 1), as a grouped GEMM's weight."""
    return {"num_layers": 1, "num_experts": EXPERTS, "tensors": [
        {"name": "decoder.layers.0.mlp.experts.weight_fused", "shape": [EXPERTS, 16, 8], "layer": 0,
         "ep_dim": 0, "tp_dim": 1}]}


def test_fused_experts_etp_change_same_as_megatron_core() -> None:
    """etp 2 -> 1 at the same ep: the same destinations."""
    report("fused experts etp 2 -> 1", refit(Layout(tp=2, dp=2, ep=2, etp=2), Layout(tp=2, dp=2, ep=2, etp=1),
                                             fused_experts()))


def test_fused_experts_ep_change_megatron_core_cannot() -> None:
    """ep 2 -> 4: Megatron-Core's planner slices a fused expert tensor on
    its tp dim only (``_plan_tp``; its ep dim is taken whole), so a
    source's 2 experts meet a destination of 1 and the copy fails (its
    copy services would fail alike); rank-layout cuts the ep dim too."""
    r = Refit(fused_experts(), Layout(tp=2, dp=2, ep=2, etp=2), Layout(tp=2, dp=2, ep=4, etp=1))
    with pytest.raises(ValueError, match=r"could not broadcast input array from shape \(2,8,8\) into shape \(1,8,8\)"):
        r.megatron()
    out, _, _ = r.ours()
    for key, want in r.expected.items():
        np.testing.assert_array_equal(out[key], want, err_msg=str(key))


# -- the KV handoff ---------------------------------------------------------------

KV_LAYERS, KV_HEADS = 8, 8


def megatron_kv_layouts(spec: str) -> list[list[KVShardLayout]]:
    """Every shard's KVShardLayout of every rank, as Megatron-LM's
    layout_from_pg_collection reads it from the ProcessGroupCollection
    that Megatron-Core's build_inference_pg_collections_for_shards hands
    that rank (one fake world per rank)."""
    world = InferenceShards(spec).world_size
    shards: dict[int, list[KVShardLayout]] = {}
    for rank in range(world):
        dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                built = build_inference_pg_collections_for_shards(world, spec)
            for i, shard in enumerate(built):
                pg = shard.pg_collection
                if pg is None:
                    continue
                shards.setdefault(i, []).append(KVShardLayout(
                    num_layers=KV_LAYERS, num_heads=KV_HEADS,
                    tp_size=get_pg_size(pg.tp), tp_rank=get_pg_rank(pg.tp),
                    pp_size=get_pg_size(pg.pp), pp_rank=get_pg_rank(pg.pp),
                    global_rank=dist.get_rank(),
                    ep_size=get_pg_size(getattr(pg, "ep", None)), ep_rank=get_pg_rank(getattr(pg, "ep", None)),
                    etp_size=get_pg_size(getattr(pg, "expt_tp", None)),
                    etp_rank=get_pg_rank(getattr(pg, "expt_tp", None)),
                ))
        finally:
            dist.destroy_process_group()
    return [shards[i] for i in sorted(shards)]


KV_SPECS = [
    "tp=2,pp=2,ep=2,dp=2,role=prefill + tp=4,role=decode",
    "tp=4,ep=2,dp=2,role=prefill + tp=2,pp=2,role=decode",
]


@pytest.mark.parametrize("spec", KV_SPECS)
def test_kv_handoff_same_data_as_plan_kv_reshard(spec: str) -> None:
    shards = InferenceShards(spec)
    prefill, decode = shards.shards
    assert (prefill.role, decode.role) == ("prefill", "decode")
    srcs, dsts = megatron_kv_layouts(spec)
    tokens = 16
    kv = {"num_layers": KV_LAYERS, "tensors": [
        {"name": "kv", "shape": [KV_LAYERS, KV_HEADS, 2, tokens], "element_bytes": 2, "pp_dim": 0, "tp_dim": 1}]}
    whole = rw.global_arrays(kv)["kv"]
    by_rank = {s.global_rank: s for s in srcs} | {d.global_rank: d for d in dsts}

    def local(s: KVShardLayout) -> np.ndarray:
        (l0, l1), (h0, h1) = s.layer_range(), s.head_range()
        return whole[l0:l1, h0:h1]

    # Megatron-Core's plan.
    theirs = {d.global_rank: np.full_like(local(d), -1) for d in dsts}
    their_moves = []
    for t in plan_kv_reshard(srcs, dsts):
        s, d = by_rank[t.src_rank], by_rank[t.dst_rank]
        piece = local(s)[t.src_layer_slice(s), t.src_head_slice(s)]
        theirs[t.dst_rank][t.dst_layer_slice(d), t.dst_head_slice(d)] = piece
        their_moves.append((t.src_rank, t.dst_rank, piece.size * 2))
    # rank-layout's, on the same local caches.
    plan = reshard(prefill.layout, decode.layout, tensors=kv, gpus_per_node=G, nodes_per_domain=M)
    ours = {d.global_rank: np.full_like(local(d), -1) for d in dsts}
    our_moves = []
    for t in plan.transfers():
        there = tuple(slice(o, o + hi - lo) for o, (lo, hi) in zip(t["src_offset"], t["box"]))
        here = tuple(slice(o, o + hi - lo) for o, (lo, hi) in zip(t["dst_offset"], t["box"]))
        assert plan.source_shard(t["src"], "kv")["local_shape"] == list(local(by_rank[t["src"]]).shape)
        ours[t["dst"]][here] = local(by_rank[t["src"]])[there]
        our_moves.append((t["src"], t["dst"], t["bytes"]))
    for d in dsts:
        np.testing.assert_array_equal(theirs[d.global_rank], local(d), err_msg=f"Megatron-Core: decode rank {d.global_rank}")
        np.testing.assert_array_equal(ours[d.global_rank], local(d), err_msg=f"rank-layout: decode rank {d.global_rank}")
    # Who sends each attention shard (tp_rank, pp_rank): Megatron-Core its
    # smallest-rank replica only; rank-layout more than one replica of
    # every shard that has several.
    replicas: dict[tuple[int, int], list[int]] = {}
    for s in srcs:
        replicas.setdefault(s.kv_shard_key(), []).append(s.global_rank)
    assert all(len(r) > 1 for r in replicas.values())
    for key, ranks in replicas.items():
        their_senders = {s for s, _, _ in their_moves if s in ranks}
        our_senders = {s for s, _, _ in our_moves if s in ranks}
        assert their_senders == {min(ranks)}, key
        assert len(our_senders) > 1, key
    c_ours, c_theirs = costs(our_moves), costs(their_moves)
    assert c_ours["bytes"] == c_theirs["bytes"] and c_ours["max_send_bytes"] < c_theirs["max_send_bytes"]
    print(f"\nKV handoff {spec}: senders rank-layout {sorted({s for s, _, _ in our_moves})}, "
          f"Megatron-Core {sorted({s for s, _, _ in their_moves})}")
    print(f"  {'':22} {'rank-layout':>12} {'Megatron-Core':>14}")
    for k in c_ours:
        print(f"  {k:22} {c_ours[k]:>12,} {c_theirs[k]:>14,}")


def test_worked_refit_megatron_core_column() -> None:
    """The worked refit of the semantics (12.9): a 24-layer GPT trained
    with tp 8, pp 4 on ranks 0-63, served with tp 4, pp 1 on ranks 64-79,
    4 GPUs per node, domains of 18 nodes. Megatron-Core's whole schedule
    (``_iter_global_transfer_ops`` on the rosters of its own
    ``extract_param_metadata``) costs what the table's Megatron-Core
    column says; rank-layout's plan moves the same bytes across the same
    nodes and domains, its busiest sender less loaded."""
    args = "--num-layers 24 --hidden-size 1024 --num-attention-heads 16 --vocab-size 50257 --max-position-embeddings 1024"
    a, b = Layout(tp=8, pp=4, world_size=64), Layout(tp=4, world_size=16, rank_offset=64)
    plan = reshard(a, b, model_args=args, gpus_per_node=4, nodes_per_domain=18)
    cache: dict = {}
    src, dst = rm.Side(plan.model, a, torch, cache), rm.Side(plan.model, b, torch, cache)
    theirs = costs(rm.schedule_moves(80, src, dst), g=4, m=18)
    assert theirs == {"bytes": 2_875_064_320, "local_bytes": 0, "cross_node_bytes": 2_875_064_320,
                      "cross_domain_bytes": 1_437_532_160, "max_send_bytes": 66_155_520,
                      "max_recv_bytes": 179_691_520, "messages": 6_992, "local_copies": 0}
    ours = plan.cost()
    for key in ("bytes", "local_bytes", "cross_node_bytes", "cross_domain_bytes", "max_recv_bytes", "messages"):
        assert ours[key] == theirs[key], key
    assert ours["max_send_bytes"] < theirs["max_send_bytes"]
