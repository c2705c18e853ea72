"""Type stubs of rank_layout._native, the compiled half of rank_layout."""

from typing import Any, Literal, Optional, Sequence, SupportsIndex, TypedDict, Union, final, type_check_only

import numpy as np
import numpy.typing as npt

from rank_layout import Split

# The names the module adds (PyO3 lists them in the runtime's __all__).
__all__ = [
    "LayoutError",
    "Layout",
    "CONFIG_KEYS",
    "RankGenerator",
    "CoreRankGenerator",
    "Mesh",
    "Modules",
    "InferenceShards",
    "InferenceShard",
    "torchtitan_mesh",
    "megatron_config",
    "audit",
    "place",
    "Relayout",
    "relayout",
    "Reshard",
    "reshard",
    "MEGATRON_TABLE",
    "_memory_limits",
    "_check_ints_in_cgroups",
]

CONFIG_KEYS: list[str]

def _memory_limits() -> dict[str, Optional[int]]:
    """The memory a process may still use, in bytes (``meminfo``,
    ``address_space``, ``cgroup``; ``None`` where unknown): for tests."""

def _check_ints_in_cgroups(members: int, cgroups: str, mountinfo: str) -> None:
    """The check before ``members`` ranks as Python ints, against the
    cgroups of ``cgroups`` (a ``/proc/self/cgroup`` text) mounted as
    ``mountinfo`` (a ``/proc/self/mountinfo`` text) says, and no other
    limit: ``MemoryError`` when they do not fit. For tests."""

class LayoutError(ValueError):
    """An invalid layout, or a question a layout cannot answer."""

@type_check_only
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

@type_check_only
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

@type_check_only
class Membership(TypedDict):
    color: int
    key: int
    members: list[int]

@type_check_only
class Coord(TypedDict):
    tp: int
    cp: int
    ep: int
    dp: int
    pp: int
    etp: int
    edp: int

@type_check_only
class Pipeline(TypedDict):
    stage: int
    stages: int
    prev: list[int]
    next: list[int]

@type_check_only
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

def megatron_config(args: object) -> dict[str, Any]: ...
def audit(layout: Layout, megatron: str) -> dict[str, Any]: ...
#: The host table formats of place's and relayout's hosts_format=.
_HostsFormat = Literal[
    "auto",
    "plain",
    "json",
    "nvidia-smi",
    "topology-conf",
    "topology-yaml",
    "scontrol",
    "slurm-topology-addr",
    "kubectl",
]

def place(
    target: Union[Layout, Mesh],
    hosts: Union[str, list[dict[str, Any]], dict[str, str]],
    *,
    must_fit: Optional[list[str]] = None,
    gpus_per_node: Optional[_Int] = None,
    on_shortfall: Literal["straddle", "shrink", "fail"] = "straddle",
    hosts_format: _HostsFormat = "auto",
    clique_label: Optional[str] = None,
    topology: Optional[str] = None,
    nodelist: Optional[str] = None,
) -> dict[str, Any]: ...
def relayout(
    layout: Layout,
    failed_ranks: Union[str, Sequence[_Int]],
    *,
    policy: str,
    gpus_per_node: Optional[_Int] = None,
    spare_nodes: Optional[_Int] = None,
    min_dp: Optional[_Int] = None,
    global_batch: Optional[_Int] = None,
    micro_batch: Optional[_Int] = None,
    kinds: Optional[list[str]] = None,
    hosts: Union[str, list[dict[str, Any]], dict[str, str], None] = None,
    failed_hosts: Optional[list[str]] = None,
    hosts_format: _HostsFormat = "auto",
    clique_label: Optional[str] = None,
    topology: Optional[str] = None,
    nodelist: Optional[str] = None,
) -> Relayout: ...
@final
class Relayout:
    @property
    def policy(self) -> str: ...
    @property
    def layout(self) -> Layout: ...
    @property
    def old_layout(self) -> Layout: ...
    @property
    def world_size(self) -> int: ...
    @property
    def new_rank(self) -> list[Optional[int]]: ...
    def process(self, rank: _Int) -> int: ...
    @property
    def kinds(self) -> dict[str, dict[str, int]]: ...
    def changes(self, kind: str) -> dict[str, Any]: ...
    def split(self, process: _Int, kind: str, round: Optional[_Int] = None) -> Optional[Split]: ...
    @property
    def new_communicators(self) -> int: ...
    @property
    def cost(self) -> dict[str, int]: ...
    @property
    def hash(self) -> int: ...
    @property
    def notes(self) -> list[str]: ...

def reshard(
    source: Union[Layout, Relayout],
    target: Optional[Layout] = None,
    *,
    tensors: Optional[Union[dict[str, Any], str]] = None,
    model_args: Any = None,
    from_layers: Any = None,
    to_layers: Any = None,
    from_processes: Optional[Sequence[_Int]] = None,
    to_processes: Optional[Sequence[_Int]] = None,
    dead: Optional[Sequence[_Int]] = None,
    gpus_per_node: Optional[_Int] = None,
    nodes_per_domain: Optional[_Int] = None,
    hosts: Optional[Union[str, list[dict[str, Any]]]] = None,
    placement: Optional[Union[dict[str, Any], Sequence[str]]] = None,
) -> Reshard: ...
@final
class Reshard:
    def plan_of(self, process: _Int) -> dict[str, Any]: ...
    def transfers(self) -> list[dict[str, Any]]: ...
    def cost(self, process: Optional[_Int] = None) -> dict[str, int]: ...
    def source_shard(self, process: _Int, tensor: Union[str, _Int]) -> Optional[dict[str, Any]]: ...
    def destination_shard(self, process: _Int, tensor: Union[str, _Int]) -> Optional[dict[str, Any]]: ...
    @property
    def tensor_names(self) -> list[str]: ...
    @property
    def model(self) -> dict[str, Any]: ...
    @property
    def from_layout(self) -> Layout: ...
    @property
    def to_layout(self) -> Layout: ...
    @property
    def layers(self) -> dict[str, list[int]]: ...
    @property
    def process_bound(self) -> int: ...

@final
class RankGenerator:
    def __new__(
        cls, tp: _Int, ep: _Int, dp: _Int, pp: _Int, cp: _Int, order: str, rank_offset: Optional[_Int] = None
    ) -> RankGenerator: ...
    def get_ranks(self, token: str, independent_ep: bool = False) -> list[list[int]]: ...

@final
class CoreRankGenerator:
    def __new__(
        cls,
        tp: _Int,
        ep: _Int,
        dp: _Int,
        pp: _Int,
        cp: _Int,
        order: str,
        rank_offset: Optional[_Int] = None,
        gtp_remat: Optional[_Int] = None,
    ) -> CoreRankGenerator: ...
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
    def get_gtp_ranks(self, gtp_remat_size: _Int) -> list[list[int]]: ...

_Int = SupportsIndex
_SplitStep = tuple[str, int, int, Optional[tuple[int, int]]]

class Layout:
    def __new__(
        cls,
        *,
        tp: Optional[_Int] = 1,
        cp: Optional[_Int] = 1,
        ep: Optional[_Int] = 1,
        dp: Optional[_Int] = None,
        pp: Optional[_Int] = 1,
        world_size: Optional[_Int] = None,
        order: Optional[str] = "tp-cp-ep-dp-pp",
        rank_offset: Optional[_Int] = 0,
        encoder_tp: Optional[_Int] = None,
        encoder_pp: Optional[_Int] = None,
        expert_layout: Optional[Literal["nested", "folded"]] = "folded",
        etp: Optional[_Int] = None,
        hierarchical_cp: Optional[Sequence[_Int]] = None,
        dist_opt_instances: Optional[_Int] = None,
        gtp_remat: Optional[_Int] = 1,
        expert_gtp_remat: Optional[_Int] = 1,
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
    def group(self, kind: str, index: _Int) -> list[int]: ...
    def rank(self, rank: _Int) -> RankCard: ...
    def memberships(self, rank: _Int, kind: str) -> list[Membership]: ...
    def split(self, rank: _Int, kind: str, round: Optional[_Int] = None) -> Optional[Split]: ...
    def split_rounds(self, kind: str) -> int: ...
    def mesh(self) -> Mesh: ...
    def groups_arrays(self, kinds: Optional[Sequence[str]] = None) -> dict[str, npt.NDArray[np.uint32]]: ...
    def splits(self, rank: _Int) -> Sequence[_SplitStep]: ...
    def pipeline_next(self, rank: _Int) -> list[int]: ...
    def pipeline_prev(self, rank: _Int) -> list[int]: ...
    def is_first_stage(self, rank: _Int) -> bool: ...
    def is_last_stage(self, rank: _Int) -> bool: ...
    def is_embedding_rank(self, rank: _Int) -> bool: ...
    def is_position_embedding_rank(self, rank: _Int) -> bool: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

class Mesh:
    def __new__(
        cls,
        dims: Sequence[tuple[str, _Int]] | dict[str, _Int],
        *,
        rank_offset: Optional[_Int] = None,
        rank_map: Optional[Sequence[_Int]] = None,
    ) -> Mesh: ...
    @staticmethod
    def from_device_mesh(shape: Sequence[_Int], names: Sequence[str], *, rank_offset: Optional[_Int] = None) -> Mesh: ...
    @staticmethod
    def from_hyper_comm_grid(shape: Sequence[_Int], dim_names: Sequence[str], rank_offset: Optional[_Int] = None) -> Mesh: ...
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
    def view(self, name: str, dims: Sequence[tuple[str, _Int]] | dict[str, _Int], shared: Optional[Sequence[str]] = None) -> Mesh: ...
    def flatten(self, name: str, dims: str | Sequence[str], view: Optional[str] = None) -> Mesh: ...
    def groups(self, dims: str | Sequence[str], view: Optional[str] = None) -> list[list[int]]: ...
    def groups_array(self, dims: str | Sequence[str], view: Optional[str] = None) -> npt.NDArray[np.uint32]: ...
    def coord(self, rank: _Int, view: Optional[str] = None) -> Optional[dict[str, int]]: ...
    def split(self, rank: _Int, dims: str | Sequence[str], view: Optional[str] = None) -> Split: ...
    def splits(self, rank: _Int, dim_sets: Sequence[str]) -> list[Split]: ...

def torchtitan_mesh(
    *,
    dp_replicate: Optional[_Int] = None,
    dp_shard: Optional[_Int] = None,
    cp: Optional[_Int] = None,
    tp: Optional[_Int] = None,
    pp: Optional[_Int] = None,
    ep: Optional[_Int] = None,
    world_size: _Int,
    spmd_backend: Optional[str] = None,
) -> Mesh: ...

@final
class InferenceShards:
    """Megatron-Core 0.19's inference shards (``--inference-shards``):
    contiguous shards, each a :class:`Layout` of its own parallelism at its
    rank offset, with an optional role (``"prefill"``, ``"decode"``)."""

    def __new__(
        cls, spec: str, world_size: Optional[_Int] = None, use_tp_pp_dp_mapping: bool = False
    ) -> InferenceShards: ...
    @staticmethod
    def from_megatron_args(args: object) -> Optional[InferenceShards]: ...
    @property
    def kinds(self) -> list[str]: ...
    @property
    def shards(self) -> list[InferenceShard]: ...
    @property
    def world_size(self) -> int: ...
    @property
    def use_tp_pp_dp_mapping(self) -> bool: ...
    @property
    def spec(self) -> str: ...
    def __len__(self) -> int: ...
    def shard_of(self, rank: _Int) -> InferenceShard: ...
    def role_of(self, rank: _Int) -> Optional[str]: ...
    def split(self, rank: _Int, kind: str) -> Optional[Split]: ...
    def splits(self, rank: _Int) -> list[tuple[str, Optional[Split]]]: ...

@final
class InferenceShard:
    """One shard of :class:`InferenceShards`."""

    @property
    def index(self) -> int: ...
    @property
    def role(self) -> Optional[str]: ...
    @property
    def rank_offset(self) -> int: ...
    @property
    def world_size(self) -> int: ...
    @property
    def tp(self) -> int: ...
    @property
    def pp(self) -> int: ...
    @property
    def ep(self) -> int: ...
    @property
    def expt_tp(self) -> int: ...
    @property
    def dp(self) -> int: ...
    @property
    def layout(self) -> Layout: ...

@final
class Modules:
    """Named modules (each a mesh of tp, gtp, cp, dp and pp) on consecutive
    rank spans or all on the same ranks (``colocated``), joined by the edges
    of a DAG, with each edge's bridge plan (Megatron-Core's MIMO)."""

    def __new__(
        cls,
        modules: Sequence[tuple[str, Mesh | Layout | dict[str, object]]] | dict[str, Mesh | Layout | dict[str, object]],
        edges: Sequence[tuple[str, str]] | dict[str, Sequence[str]] | None = (),
        colocated: bool = False,
    ) -> Modules:
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
    def module_of(self, rank: _Int) -> str:
        """The first module ``rank`` belongs to."""
    def modules_of(self, rank: _Int) -> list[str]:
        """Every module ``rank`` belongs to, in declaration order."""
    def stage(self, rank: _Int) -> int:
        """``rank``'s global pipeline stage in its first module."""
    def stage_in(self, rank: _Int, name: str) -> int:
        """``rank``'s global pipeline stage in module ``name``."""
    def first_stage(self, name: str) -> int:
        """Module ``name``'s first stage: the longest path into it."""
    def bridge_kinds(self, src: str, dst: str) -> list[_BridgeKindName]:
        """The communicator kinds the edge ``src -> dst`` needs."""
    def bridge_split(self, rank: _Int, src: str, dst: str, kind: _BridgeKindName) -> Optional[Split]:
        """``rank``'s :class:`Split` in the ``kind`` groups of the edge, or None."""
    def bridge_members(self, rank: _Int, src: str, dst: str, kind: _BridgeKindName) -> Optional[list[int]]:
        """The members of ``rank``'s ``kind`` group of the edge, in key order, or None."""
    def role(self, rank: _Int, src: str, dst: str) -> BridgeRole:
        """``rank``'s role on the edge ``src -> dst``."""
    def roles(self, rank: _Int) -> list[BridgeRole]:
        """``rank``'s role on every edge, in ``edges`` order."""
    def split(self, rank: _Int, dims: str | Sequence[str], round: Optional[_Int] = None) -> Optional[Split]:
        """``rank``'s :class:`Split` in the groups of ``dims`` in round ``round``, or None."""
    def members(self, rank: _Int, dims: str | Sequence[str], round: Optional[_Int] = None) -> Optional[list[int]]:
        """The members of ``rank``'s group of ``dims`` in round ``round``, in key order, or None."""
    def __len__(self) -> int: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

_BridgeKindName = Literal[
    "bridge",
    "src_broadcast",
    "dst_broadcast",
    "dst_cp_reduce",
    "src_cp_gather",
    "gather",
    "colocated_cp_gather",
    "colocated_cp_reduce",
]

@type_check_only
class _ColocatedPlanBase(TypedDict):
    mode: Literal["collective", "p2p"]
    direction: Literal["fan_in", "fan_out", "equal"]
    scale: int
    gather_groups: list[list[int]]
    slots: list[int]
    reason: Optional[str]

@type_check_only
class ColocatedPlan(_ColocatedPlanBase, total=False):
    src_cp_gather: list[list[int]]
    dst_cp_reduce: list[list[int]]

@type_check_only
class _BridgePlanBase(TypedDict):
    src_leaders: list[int]
    dst_leaders: list[int]
    pairs: list[tuple[int, int]]
    src_broadcast: list[list[int]]
    dst_broadcast: list[list[int]]
    bridge_group: list[int]

@type_check_only
class BridgePlan(_BridgePlanBase, total=False):
    dst_cp_reduce: list[list[int]]
    src_cp_gather: list[list[int]]
    colocated: ColocatedPlan

@type_check_only
class BridgeRole(TypedDict):
    src: str
    dst: str
    src_leader: bool
    dst_leader: bool
    sends_to: list[int]
    receives_from: list[int]
    slot: Optional[int]
    splits: dict[str, Optional[Split]]
