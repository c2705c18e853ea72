"""The plan of :func:`rank_layout.torch.megatron.initialize_model_parallel`:
everything decided before a group is made (Megatron-Core's checks, on
every rank alike; the layout; the group families, in Megatron-Core's order,
each with its kind or its own members), and where Megatron-Core 0.19 puts
the weight-shard axis in an order.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

import numpy as np
import torch.distributed as dist

from rank_layout import Layout, LayoutError, Split
from rank_layout.torch._groups import GroupSpec
from rank_layout.torch._megatron.nccl import _NCCL_NAMES, _nccl_configs, _nccl_options
from rank_layout.torch._megatron.release import _ABSENT, MEGATRON_CORE_VERSION, _release

# Arguments the drop-in cannot honour, with their default (honoured) value.
_UNSUPPORTED = {"use_sharp": False, "sharp_enabled_group": None}


class _Plan:
    """Everything :func:`initialize_model_parallel` decides before creating
    a group: the checks (all of them, on every rank alike), the layout and
    the group families. ``rank`` may be any rank of the world (the tests
    plan every rank of a world in one process)."""

    def __init__(self, world: int, rank: int, args: dict[str, Any], version: str = MEGATRON_CORE_VERSION) -> None:
        a = {**_ABSENT, **args}
        self.version = _release(version)
        self.rank, self.args = rank, a
        self._refuse_unsupported(a)
        for name in (
            "tensor_model_parallel_size",
            "pipeline_model_parallel_size",
            "context_parallel_size",
            "expert_model_parallel_size",
            "num_distributed_optimizer_instances",
            "gtp_remat_size",
            "expert_gtp_remat_size",
        ):
            if not isinstance(a[name], int) or isinstance(a[name], bool) or a[name] < 1:
                raise LayoutError(f"{name} must be a positive int, got {a[name]!r}")
        tp, pp, cp = a["tensor_model_parallel_size"], a["pipeline_model_parallel_size"], a["context_parallel_size"]
        ep, n = a["expert_model_parallel_size"], a["num_distributed_optimizer_instances"]
        gtp, egtp = a["gtp_remat_size"], a["expert_gtp_remat_size"]
        order = a["order"]
        etp = a["expert_tensor_parallel_size"]
        if etp is None:
            etp = tp
        elif not isinstance(etp, int) or isinstance(etp, bool) or etp < 1:
            raise LayoutError(f"expert_tensor_parallel_size must be a positive int, got {etp!r}")
        if not isinstance(order, str):
            raise LayoutError(f"order must be a string, got {order!r}")
        offset, local = a["rank_offset"], a["local_world_size"]
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise LayoutError(f"rank_offset must be an int >= 0, got {offset!r}")
        if local is not None and (not isinstance(local, int) or isinstance(local, bool) or local < 1):
            raise LayoutError(f"local_world_size must be a positive int, got {local!r}")
        # Megatron-Core's ranks run from rank_offset over local_world_size
        # (or the whole world): they must all exist.
        everyone, world = world, (world if local is None else local)
        if offset + world > everyone:
            raise LayoutError(
                f"rank_offset {offset} with local_world_size {local}: ranks {offset}..{offset + world} "
                f"are not all in torch.distributed's world of {everyone}"
            )
        self.world = world
        order = _weight_shard_order(order, gtp, egtp)
        if (gtp > 1 or egtp > 1) and n > 1:
            raise LayoutError("GTP_remat with num_distributed_optimizer_instances > 1 is not yet supported.")
        # Megatron-Core's own checks, in its order and with its messages.
        model = tp * pp * cp * gtp
        if world % model:
            raise LayoutError(f"world_size ({world}) is not divisible by {model}")
        dp = world // model
        vpp = a["virtual_pipeline_model_parallel_size"]
        if vpp is not None and not pp > 1:
            raise LayoutError("pipeline-model-parallel size should be greater than 1 with interleaved schedule")
        backend = a["pipeline_model_parallel_comm_backend"]
        if backend not in (None, "nccl", "ucc"):
            raise LayoutError(
                f'"{backend}" backend for PP communication is currently not supported '
                "(pipeline_model_parallel_comm_backend: None, 'nccl' or 'ucc')"
            )
        if backend == "ucc" and not dist.is_ucc_available():
            raise LayoutError("pipeline_model_parallel_comm_backend='ucc': this torch has no UCC backend")
        self.nccl_cfgs = _nccl_configs(a["nccl_communicator_config_path"], a["high_priority_stream_groups"])
        etmp = etp * ep * pp * egtp
        if world % etmp:
            raise LayoutError(
                f"world_size ({world}) is not divisible by expert_tensor_model_pipeline_parallel size ({etmp})"
            )
        edp = world // etmp
        if not (order.endswith("pp") or pp == 1 or edp == dp):
            raise LayoutError(
                "When not using pp-last rank ordering, the data parallel size of the attention and moe "
                f"layers must be the same (order {order!r}, dp {dp}, expert dp {edp})"
            )
        if (dp * cp) % n:
            raise LayoutError("Data parallel size should be divisible by partial DistOpt shard factor")
        if edp % n:
            raise LayoutError("Expert data parallel size should be divisible by partial DistOpt shard factor")
        hcp = a["hierarchical_context_parallel_sizes"]
        if hcp:
            hcp = [int(s) for s in hcp]
            if math.prod(hcp) != cp:
                raise LayoutError(
                    f"hierarchical_context_parallel_sizes {hcp}: their product must be "
                    f"context_parallel_size ({cp})"
                )
        if a["hybrid_context_parallel"] and (dp * cp) % 2:
            raise LayoutError("Hybrid context parallel requires an even number of ranks")
        self.vpp = vpp
        self.n_instances = n
        self.edp = edp
        # The layout (Layout's own checks last: a LayoutError with its message).
        self.layout = Layout(
            tp=tp,
            cp=cp,
            ep=ep,
            pp=pp,
            etp=etp,
            world_size=world,
            order=order,
            rank_offset=offset,
            expert_layout="folded",
            hierarchical_cp=hcp or None,
            dist_opt_instances=n if n > 1 else None,
            gtp_remat=gtp,
            expert_gtp_remat=egtp,
        )
        self.gtp, self.egtp = gtp, egtp
        self.hcp_levels = len(hcp) if hcp else 0
        self.specs = self._specs(a)

    @staticmethod
    def _refuse_unsupported(a: dict[str, Any]) -> None:
        bad = [f"{name}={a[name]!r}" for name, ok in _UNSUPPORTED.items() if a[name] != ok]
        if bad:
            raise LayoutError(
                "rank_layout.torch.megatron.initialize_model_parallel cannot honour "
                + ", ".join(bad)
                + " (SHARP needs the data-parallel communicator created first with "
                "NCCL_COLLNET_ENABLE=1 and a CUDA barrier; use Megatron-Core's own "
                "initialize_model_parallel for it)"
            )

    # -- the group families -------------------------------------------------

    def _opts(self, label: str) -> Any:
        name = _NCCL_NAMES.get(label)
        return None if name is None else _nccl_options(name, self.nccl_cfgs)

    def _kind(self, label: str, kind: str, **kw: Any) -> GroupSpec:
        kw.setdefault("pg_options", self._opts(label) if kw.get("backend") != "gloo" else None)
        return GroupSpec(label, kind=kind, sort=True, **kw)

    def _specs(self, a: dict[str, Any]) -> list[GroupSpec]:
        """The group families in the order Megatron-Core creates them (a
        process group's name is salted with torch's count of groups, so the
        order is the same on every rank)."""
        n, gtp, egtp = self.n_instances, self.gtp, self.egtp
        new = self.version != "0.16.1"
        # 0.19 turns gloo off under a weight-shard axis: the dense groups'
        # under gtp_remat, the expert ones' under either.
        gloo = bool(a["create_gloo_process_groups"]) and gtp == 1
        expert_gloo = gloo and egtp == 1
        specs = []
        if new:
            specs.append(self._shards("GTP_WEIGHT_REMAT_GROUP", "gtp_remat", gtp))
        specs.append(self._kind("DATA_PARALLEL_GROUP_WITH_CP", "dp-cp"))
        if a["create_all_gather_group"]:
            specs.append(self._kind("DATA_PARALLEL_GROUP_WITH_CP_AG", "dp-cp", share=False))
        if gloo:
            specs.append(self._kind("DATA_PARALLEL_GROUP_WITH_CP_GLOO", "dp-cp", backend="gloo"))
        if n > 1:
            specs.append(self._kind("INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP", "dp-cp-intra"))
            if gloo:
                specs.append(
                    self._kind("INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP_GLOO", "dp-cp-intra", backend="gloo")
                )
        if a["hybrid_context_parallel"]:
            dp_cp = self.layout.sizes["dp"] * self.layout.sizes["cp"]
            for size in [2**i for i in range(int(math.log2(dp_cp)))][1:]:
                specs.append(self._hybrid(size))
        specs.append(self._kind("DATA_PARALLEL_GROUP", "dp"))
        if gloo:
            specs.append(self._kind("DATA_PARALLEL_GROUP_GLOO", "dp", backend="gloo"))
        if gtp > 1:
            specs.append(self._kind("DATA_PARALLEL_GROUP_WITH_GTP_REMAT", "gtp_remat-dp"))
            specs.append(self._kind("DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT", "gtp_remat-dp-cp"))
        specs.append(self._kind("CONTEXT_PARALLEL_GROUP", "cp"))
        hcp_opts = _nccl_options("hcp", self.nccl_cfgs)
        for level in range(self.hcp_levels):
            specs.append(
                self._kind(f"HIERARCHICAL_CONTEXT_PARALLEL_GROUP_L{level}", f"hcp-{level}", pg_options=hcp_opts)
            )
        # With a weight-shard axis, the model, tensor + data groups span it.
        with_gtp = (lambda kind: kind.replace("tp-", "tp-gtp_remat-", 1)) if gtp > 1 else (lambda kind: kind)
        specs.append(self._kind("MODEL_PARALLEL_GROUP", with_gtp("tp-pp")))
        specs.append(self._kind("TENSOR_MODEL_PARALLEL_GROUP", "tp"))
        pp_backend = a["pipeline_model_parallel_comm_backend"]
        specs.append(
            self._kind(
                "PIPELINE_MODEL_PARALLEL_GROUP",
                "pp",
                backend=pp_backend,
                pg_options=None if pp_backend == "ucc" else self._opts("PIPELINE_MODEL_PARALLEL_GROUP"),
            )
        )
        specs.append(self._embedding("EMBEDDING_GROUP", "embd", a["get_embedding_ranks"]))
        specs.append(self._embedding("POSITION_EMBEDDING_GROUP", "pos-embd", a["get_position_embedding_ranks"]))
        specs.append(self._kind("TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP", with_gtp("tp-dp-cp")))
        specs.append(self._kind("TENSOR_AND_DATA_PARALLEL_GROUP", with_gtp("tp-dp")))
        specs.append(self._kind("TENSOR_AND_CONTEXT_PARALLEL_GROUP", "tp-cp"))
        if new:
            specs.append(self._shards("EXPERT_GTP_WEIGHT_REMAT_GROUP", "egtp_remat", egtp))
        specs.append(self._kind("EXPERT_MODEL_PARALLEL_GROUP", "ep"))
        specs.append(self._kind("EXPERT_TENSOR_PARALLEL_GROUP", "etp"))
        specs.append(self._kind("EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP", "etp-ep"))
        specs.append(self._kind("EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP", "etp-ep-pp"))
        if new:
            specs.append(
                self._kind(
                    "EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP_WITH_EGTP",
                    "etp-ep-egtp_remat-pp" if egtp > 1 else "etp-ep-pp",
                )
            )
        specs.append(self._kind("EXPERT_DATA_PARALLEL_GROUP", "edp"))
        if expert_gloo:
            specs.append(self._kind("EXPERT_DATA_PARALLEL_GROUP_GLOO", "edp", backend="gloo"))
        if n > 1:
            specs.append(self._kind("HIERARCHICAL_EXPERT_DATA_PARALLEL_GROUP_L0", "edp-intra"))
            if expert_gloo:
                specs.append(
                    self._kind("HIERARCHICAL_EXPERT_DATA_PARALLEL_GROUP_GLOO_L0", "edp-intra", backend="gloo")
                )
            specs.append(self._edp_inter())
        if egtp > 1:
            specs.append(self._kind("EXPERT_DATA_PARALLEL_GROUP_WITH_GTP_REMAT", "egtp_remat-edp"))
        if n > 1:
            specs.append(self._kind("INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP", "dist-opt-instance"))
        else:
            # One instance (always so under a weight-shard axis): Megatron-Core's
            # instance group is every rank of the layout.
            specs.append(
                GroupSpec(
                    "INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP",
                    everyone=True,
                    pg_options=self._opts("INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP"),
                    sort=True,
                )
            )
        return specs

    def _shards(self, label: str, kind: str, size: int) -> GroupSpec:
        """0.19's weight-shard group family: the axis' groups, or, when its
        size is 1, a group of each rank alone (Megatron-Core makes them)."""
        if size > 1:
            return self._kind(label, kind)
        layout = self.layout
        first = layout.rank_offset

        def mine(rank: Optional[int]) -> Optional[list[int]]:
            return None if rank is None else [rank]

        def partition() -> np.ndarray:
            return np.arange(first, first + layout.world_size, dtype=np.uint32)[:, None]

        return GroupSpec(label, mine=mine, partition=partition, pg_options=self._opts(label), sort=True)

    def _hybrid(self, size: int) -> GroupSpec:
        """Megatron-Core's hybrid dp x cp groups of ``size``: consecutive
        slices of a (dp, cp) group."""
        layout = self.layout

        def mine(rank: Optional[int]) -> Optional[list[int]]:
            if rank is None:
                return None
            color, key = _split(layout, rank, "dp-cp")
            members = sorted(layout.group("dp-cp", color))
            key = members.index(rank)
            start = key // size * size
            return members[start : start + size]

        def partition() -> Optional[np.ndarray]:
            arr = np.sort(layout.groups_array("dp-cp"), axis=1)
            return arr.reshape(-1, size) if arr.shape[1] % size == 0 else None

        return GroupSpec(
            f"HYBRID_DP_CP_GROUP_{size}",
            mine=mine,
            partition=partition,
            pg_options=_nccl_options("dp_cp", self.nccl_cfgs),
            sort=True,
        )

    def _edp_inter(self) -> GroupSpec:
        """Megatron-Core's inter-instance group: the expert data-parallel
        group's level 1 (``create_hierarchical_groups`` over [intra,
        instances]): every ``intra``-th member of the rank's expert
        data-parallel group."""
        layout, intra = self.layout, self.edp // self.n_instances

        def mine(rank: Optional[int]) -> Optional[list[int]]:
            if rank is None:
                return None
            color, _ = _split(layout, rank, "edp")
            members = sorted(layout.group("edp", color))
            return members[members.index(rank) % intra :: intra]

        def partition() -> np.ndarray:
            arr = np.sort(layout.groups_array("edp"), axis=1)
            rows = arr.reshape(arr.shape[0], self.n_instances, intra).transpose(0, 2, 1)
            return rows.reshape(-1, self.n_instances)

        return GroupSpec(
            "HIERARCHICAL_EXPERT_DATA_PARALLEL_GROUP_L1",
            mine=mine,
            partition=partition,
            pg_options=self._opts("HIERARCHICAL_EXPERT_DATA_PARALLEL_GROUP_L1"),
            sort=True,
        )

    def _embedding(self, label: str, kind: str, fn: Optional[Callable]) -> GroupSpec:
        if fn is None:
            return self._kind(label, kind)
        # A custom function: Megatron-Core calls it on every pipeline and
        # makes a group of each answer. Called here on every pipeline too,
        # once, to refuse (on every rank alike) answers that are not a
        # subset of their pipeline: a rank must find its group from its
        # own pipeline, or the groups could not be made members-only.
        layout = self.layout
        name = "get_embedding_ranks" if kind == "embd" else "get_position_embedding_ranks"
        answers: dict[int, list[int]] = {}
        for color, pipeline in enumerate(layout.groups("pp")):
            try:
                got = [int(r) for r in fn(list(pipeline))]
            except Exception as e:  # noqa: BLE001 (the user's function)
                raise LayoutError(f"{name}({pipeline}) raised {e!r}") from e
            if not got or len(set(got)) != len(got) or not set(got) <= set(pipeline):
                raise LayoutError(
                    f"{name}({pipeline}) returned {got}: rank-layout needs distinct ranks of that pipeline"
                )
            answers[color] = got

        def mine(rank: Optional[int]) -> Optional[list[int]]:
            if rank is None:
                return None
            got = answers[_split(layout, rank, "pp").color]
            return got if rank in got else None

        return GroupSpec(label, mine=mine, pg_options=self._opts(label), sort=True)

    # -- this rank's members -----------------------------------------------

    def members(self, label: str, rank: Optional[int] = None, ordered: bool = False) -> Optional[list[int]]:
        """The members of ``rank``'s group of the family ``label``, sorted
        (as the process group's ranks) or, with ``ordered``, in
        Megatron-Core's order (as its ``*_GLOBAL_RANKS`` lists); ``None``
        where the rank is in none."""
        rank = self.rank if rank is None else rank
        spec = next(s for s in self.specs if s.label == label)
        first = self.layout.rank_offset
        if not first <= rank < first + self.world:
            return None  # outside the ranks 0.19's rank_offset names
        got: Optional[list[int]]
        if spec.everyone:
            got = list(range(first, first + self.world))
        elif spec.kind is not None:
            split = self.layout.split(rank, spec.kind)
            got = None if split is None else self.layout.group(spec.kind, split[0])
        elif spec.mine is not None:
            got = spec.mine(rank)
        else:
            raise LayoutError(f"{label}: a family needs a kind, a function of the rank or everyone")
        if got is None:
            return None
        return list(got) if ordered else sorted(got)

    def planned(self, rank: Optional[int] = None) -> dict[str, Optional[list[int]]]:
        """Every family's members for ``rank`` (sorted), by family."""
        return {s.label: self.members(s.label, rank) for s in self.specs}


def _split(layout: Layout, rank: int, kind: str) -> Split:
    """``rank``'s split of ``kind``, for a rank of the layout (in a group of
    every kind's)."""
    split = layout.split(rank, kind)
    if split is None:
        raise LayoutError(f"rank {rank} is in no group of kind {kind}")
    return split


def _weight_shard_order(order: str, gtp: int, egtp: int) -> str:
    """``order`` with ``gtp_remat`` written where Megatron-Core 0.19 puts it
    (``_inject_gtp_remat_axis``: after ``tp`` on the dense grid, after
    ``ep`` on the expert grid, else after ``tp``, else first). Megatron-Core
    looks for those tokens case-sensitively while its grids read the order
    in any case; rank-layout reads it in any case throughout, so an order
    in capitals is rewritten here to place the axis as Megatron-Core does,
    and a place no single written position gives is refused."""
    toks = order.split("-")
    if (gtp == 1 and egtp == 1) or "gtp_remat" in [t.lower() for t in toks]:
        return order

    def place(words: list[str], after: str) -> int:
        anchor = after if after in words else "tp"
        return words.index(anchor) + 1 if anchor in words else 0

    lower = [t.lower() for t in toks]
    theirs = {"dense": place(toks, "tp"), "expert": place(toks, "ep")}
    ours = {"dense": place(lower, "tp"), "expert": place(lower, "ep")}
    used = [grid for grid, size in (("dense", gtp), ("expert", egtp)) if size > 1]
    if all(theirs[g] == ours[g] for g in used):
        return order
    positions = {theirs[g] for g in used}
    if len(positions) > 1:
        raise LayoutError(
            f"order {order!r}: Megatron-Core puts gtp_remat at place {theirs['dense']} of the dense grid and "
            f"{theirs['expert']} of the expert grid (it finds 'tp' and 'ep' case-sensitively); write the "
            "order in lowercase, or write gtp_remat in it"
        )
    at = positions.pop()
    return "-".join(toks[:at] + ["gtp_remat"] + toks[at:])
