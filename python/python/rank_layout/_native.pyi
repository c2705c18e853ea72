"""Type stubs of rank_layout._native, the compiled half of rank_layout."""

from typing import Any, Literal, Optional, Sequence, SupportsIndex, TypedDict

import numpy as np
import numpy.typing as npt

from rank_layout import Split

CONFIG_KEYS: list[str]

class LayoutError(ValueError):
    """An invalid layout, or a question a layout cannot answer."""

class Sizes(TypedDict):
    tp: int
    cp: int
    ep: int
    dp: int
    pp: int
    etp: int
    edp: int
    gtp_remat: int
    egtp_remat: int

class Config(TypedDict):
    tp: int
    cp: int
    ep: int
    dp: Optional[int]
    pp: int
    world_size: Optional[int]
    order: str
    rank_offset: int
    encoder_tp: Optional[int]
    encoder_pp: Optional[int]
    expert_layout: Literal["nested", "folded"]
    etp: Optional[int]
    hierarchical_cp: list[int]
    dist_opt_instances: int
    gtp_remat: int
    expert_gtp_remat: int

class Membership(TypedDict):
    color: int
    key: int
    members: list[int]

class Coord(TypedDict):
    tp: int
    cp: int
    ep: int
    dp: int
    pp: int
    etp: int
    edp: int

class Pipeline(TypedDict):
    stage: int
    stages: int
    prev: list[int]
    next: list[int]

class RankCard(TypedDict):
    rank: int
    part: Literal["encoder", "decoder"]
    coord: Coord
    pipeline: Pipeline
    groups: dict[str, list[Membership]]

#: (name, flag, key, meaning, handling, source) rows of the crate's table
#: of Megatron-LM's arguments (read into rank_layout.MEGATRON_ARGS and
#: MEGATRON_REFUSED).
MEGATRON_TABLE: list[tuple[str, str, str, str, str, str]]

def megatron_config(args: object) -> dict[str, object]: ...
def audit(layout: Layout, megatron: str) -> dict[str, Any]: ...

class RankGenerator:
    def __init__(
        self, tp: Int, ep: Int, dp: Int, pp: Int, cp: Int, order: str, rank_offset: Optional[Int] = None
    ) -> None: ...
    def get_ranks(self, token: str, independent_ep: bool = False) -> list[list[int]]: ...

class CoreRankGenerator:
    def __init__(
        self,
        tp: Int,
        ep: Int,
        dp: Int,
        pp: Int,
        cp: Int,
        order: str,
        rank_offset: Optional[Int] = None,
        gtp_remat: Optional[Int] = None,
    ) -> None: ...
    @property
    def tp(self) -> int: ...
    @property
    def ep(self) -> int: ...
    @property
    def dp(self) -> int: ...
    @property
    def pp(self) -> int: ...
    @property
    def cp(self) -> int: ...
    @property
    def gtp_remat(self) -> int: ...
    @property
    def rank_offset(self) -> int: ...
    @property
    def world_size(self) -> int: ...
    @property
    def order(self) -> str: ...
    @property
    def ordered_size(self) -> list[int]: ...
    def get_mask(self, order: str, token: str) -> list[bool]: ...
    def get_ranks(self, token: str) -> list[list[int]]: ...
    def get_gtp_ranks(self, gtp_remat_size: Int) -> list[list[int]]: ...

Int = SupportsIndex
SplitStep = tuple[str, int, int, Optional[tuple[int, int]]]

class Layout:
    def __new__(
        cls,
        *,
        tp: Optional[Int] = 1,
        cp: Optional[Int] = 1,
        ep: Optional[Int] = 1,
        dp: Optional[Int] = None,
        pp: Optional[Int] = 1,
        world_size: Optional[Int] = None,
        order: Optional[str] = "tp-cp-ep-dp-pp",
        rank_offset: Optional[Int] = 0,
        encoder_tp: Optional[Int] = None,
        encoder_pp: Optional[Int] = None,
        expert_layout: Optional[Literal["nested", "folded"]] = "folded",
        etp: Optional[Int] = None,
        hierarchical_cp: Optional[Sequence[Int]] = None,
        dist_opt_instances: Optional[Int] = None,
        gtp_remat: Optional[Int] = 1,
        expert_gtp_remat: Optional[Int] = 1,
    ) -> "Layout": ...
    @property
    def kinds(self) -> list[str]: ...
    @property
    def world_size(self) -> int: ...
    @property
    def rank_offset(self) -> int: ...
    @property
    def encoder_world_size(self) -> int: ...
    @property
    def shape(self) -> Literal["nested", "folded", "encoder+decoder"]: ...
    @property
    def sizes(self) -> Sizes: ...
    @property
    def encoder_sizes(self) -> Optional[Sizes]: ...
    @property
    def config(self) -> Config: ...
    def groups(self, kind: str) -> list[list[int]]: ...
    def groups_array(self, kind: str) -> npt.NDArray[np.uint32]: ...
    def group(self, kind: str, index: Int) -> list[int]: ...
    def rank(self, rank: Int) -> RankCard: ...
    def memberships(self, rank: Int, kind: str) -> list[Membership]: ...
    def split(self, rank: Int, kind: str, round: Optional[Int] = None) -> Optional[Split]: ...
    def split_rounds(self, kind: str) -> int: ...
    def mesh(self) -> Mesh: ...
    def groups_arrays(self, kinds: Optional[Sequence[str]] = None) -> dict[str, npt.NDArray[np.uint32]]: ...
    def splits(self, rank: Int) -> list[SplitStep]: ...
    def pipeline_next(self, rank: Int) -> list[int]: ...
    def pipeline_prev(self, rank: Int) -> list[int]: ...
    def is_first_stage(self, rank: Int) -> bool: ...
    def is_last_stage(self, rank: Int) -> bool: ...
    def is_embedding_rank(self, rank: Int) -> bool: ...
    def is_position_embedding_rank(self, rank: Int) -> bool: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

__all__ = ["CONFIG_KEYS", "Layout", "LayoutError"]

class Mesh:
    def __init__(
        self,
        dims: Sequence[tuple[str, Int]] | dict[str, Int],
        *,
        rank_offset: Optional[Int] = None,
        rank_map: Optional[Sequence[Int]] = None,
    ) -> None: ...
    @staticmethod
    def from_device_mesh(shape: Sequence[Int], names: Sequence[str], *, rank_offset: Optional[Int] = None) -> Mesh: ...
    @staticmethod
    def from_hyper_comm_grid(shape: Sequence[Int], dim_names: Sequence[str], rank_offset: Optional[Int] = None) -> Mesh: ...
    @property
    def dims(self) -> list[tuple[str, int]]: ...
    @property
    def views(self) -> list[tuple[str, list[tuple[str, int]]]]: ...
    @property
    def flattens(self) -> list[tuple[str, str]]: ...
    @property
    def world_size(self) -> int: ...
    @property
    def rank_offset(self) -> int: ...
    @property
    def rank_map(self) -> Optional[list[int]]: ...
    def view(self, name: str, dims: Sequence[tuple[str, Int]] | dict[str, Int], shared: Optional[Sequence[str]] = None) -> Mesh: ...
    def flatten(self, name: str, dims: str | Sequence[str], view: Optional[str] = None) -> Mesh: ...
    def groups(self, dims: str | Sequence[str], view: Optional[str] = None) -> list[list[int]]: ...
    def groups_array(self, dims: str | Sequence[str], view: Optional[str] = None) -> npt.NDArray[np.uint32]: ...
    def coord(self, rank: Int, view: Optional[str] = None) -> Optional[dict[str, int]]: ...
    def split(self, rank: Int, dims: str | Sequence[str], view: Optional[str] = None) -> Split: ...
    def splits(self, rank: Int, dim_sets: Sequence[str]) -> list[Split]: ...

def torchtitan_mesh(
    *,
    dp_replicate: Optional[Int] = None,
    dp_shard: Optional[Int] = None,
    cp: Optional[Int] = None,
    tp: Optional[Int] = None,
    pp: Optional[Int] = None,
    ep: Optional[Int] = None,
    world_size: Int,
    spmd_backend: Optional[str] = None,
) -> Mesh: ...

class Modules:
    """Named modules (each a mesh of tp, gtp, cp, dp and pp) on consecutive
    rank spans or all on the same ranks (``colocated``), joined by the edges
    of a DAG, with each edge's bridge plan (Megatron-Core's MIMO)."""

    def __init__(
        self,
        modules: Sequence[tuple[str, Mesh | Layout | dict[str, object]]] | dict[str, Mesh | Layout | dict[str, object]],
        edges: Sequence[tuple[str, str]] | dict[str, Sequence[str]] | None = (),
        colocated: bool = False,
    ) -> None:
        """``modules``: ``(name, mesh)`` pairs in declaration order, each mesh
        a Mesh, a Layout or a dict of Layout keywords. ``edges``: ``(src,
        dst)`` pairs, or a topology dict in which every module is a key."""
    @property
    def names(self) -> list[str]:
        """The modules' names, in declaration order."""
    @property
    def edges(self) -> list[tuple[str, str]]:
        """The edges ``(src, dst)``, by source's declaration order."""
    @property
    def colocated(self) -> bool:
        """Whether every module is on the same ranks."""
    @property
    def world_size(self) -> int:
        """The number of ranks of all modules together."""
    @property
    def rank_offset(self) -> int:
        """The first rank."""
    @property
    def total_stages(self) -> int:
        """The longest path through the graph, each module weighted by its pp."""
    @property
    def rounds(self) -> int:
        """Rounds of a dim set's groups: 1 on separate spans, one per module when colocated."""
    def bridge(self, src: str, dst: str) -> BridgePlan:
        """The bridge plan of the edge ``src -> dst``, ranks global."""
    def bridges(self) -> dict[tuple[str, str], BridgePlan]:
        """Every edge's bridge plan, keyed by ``(src, dst)``, in ``edges`` order."""
    def module(self, name: str) -> Mesh:
        """Module ``name``'s mesh, at its own rank offset."""
    def module_of(self, rank: Int) -> str:
        """The first module ``rank`` belongs to."""
    def modules_of(self, rank: Int) -> list[str]:
        """Every module ``rank`` belongs to, in declaration order."""
    def stage(self, rank: Int) -> int:
        """``rank``'s global pipeline stage in its first module."""
    def stage_in(self, rank: Int, name: str) -> int:
        """``rank``'s global pipeline stage in module ``name``."""
    def first_stage(self, name: str) -> int:
        """Module ``name``'s first stage: the longest path into it."""
    def bridge_kinds(self, src: str, dst: str) -> list[BridgeKindName]:
        """The communicator kinds the edge ``src -> dst`` needs."""
    def bridge_split(self, rank: Int, src: str, dst: str, kind: BridgeKindName) -> Optional[Split]:
        """``rank``'s :class:`Split` in the ``kind`` groups of the edge, or None."""
    def bridge_members(self, rank: Int, src: str, dst: str, kind: BridgeKindName) -> Optional[list[int]]:
        """The members of ``rank``'s ``kind`` group of the edge, in key order, or None."""
    def role(self, rank: Int, src: str, dst: str) -> BridgeRole:
        """``rank``'s role on the edge ``src -> dst``."""
    def roles(self, rank: Int) -> list[BridgeRole]:
        """``rank``'s role on every edge, in ``edges`` order."""
    def split(self, rank: Int, dims: str | Sequence[str], round: Optional[Int] = None) -> Optional[Split]:
        """``rank``'s :class:`Split` in the groups of ``dims`` in round ``round``, or None."""
    def members(self, rank: Int, dims: str | Sequence[str], round: Optional[Int] = None) -> Optional[list[int]]:
        """The members of ``rank``'s group of ``dims`` in round ``round``, in key order, or None."""
    def __len__(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

BridgeKindName = Literal[
    "bridge",
    "src_broadcast",
    "dst_broadcast",
    "dst_cp_reduce",
    "src_cp_gather",
    "gather",
    "colocated_cp_gather",
    "colocated_cp_reduce",
]

class _ColocatedPlanBase(TypedDict):
    mode: Literal["collective", "p2p"]
    direction: Literal["fan_in", "fan_out", "equal"]
    scale: int
    gather_groups: list[list[int]]
    slots: list[int]
    reason: Optional[str]

class ColocatedPlan(_ColocatedPlanBase, total=False):
    src_cp_gather: list[list[int]]
    dst_cp_reduce: list[list[int]]

class _BridgePlanBase(TypedDict):
    src_leaders: list[int]
    dst_leaders: list[int]
    pairs: list[tuple[int, int]]
    src_broadcast: list[list[int]]
    dst_broadcast: list[list[int]]
    bridge_group: list[int]

class BridgePlan(_BridgePlanBase, total=False):
    dst_cp_reduce: list[list[int]]
    src_cp_gather: list[list[int]]
    colocated: ColocatedPlan

class BridgeRole(TypedDict):
    src: str
    dst: str
    src_leader: bool
    dst_leader: bool
    sends_to: list[int]
    receives_from: list[int]
    slot: Optional[int]
    splits: dict[str, Optional[Split]]
