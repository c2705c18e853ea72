"""Type stubs of rank_layout._native, the compiled half of rank_layout."""

from typing import Literal, Optional, Sequence, SupportsIndex, TypedDict

import numpy as np
import numpy.typing as npt

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

MEGATRON_ARGS: list[tuple[str, str, str, str]]

def megatron_config(args: object) -> dict[str, object]: ...

class RankGenerator:
    def __init__(
        self, tp: Int, ep: Int, dp: Int, pp: Int, cp: Int, order: str, rank_offset: Optional[Int] = None
    ) -> None: ...
    def get_ranks(self, token: str, independent_ep: bool = False) -> list[list[int]]: ...

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
        expert_layout: Optional[Literal["nested", "folded"]] = "nested",
        etp: Optional[Int] = None,
        hierarchical_cp: Optional[Sequence[Int]] = None,
        dist_opt_instances: Optional[Int] = None,
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
    def split(
        self, rank: Int, kind: str, round: Optional[Int] = None
    ) -> Optional[tuple[int, int]]: ...
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
    def split(self, rank: Int, dims: str | Sequence[str], view: Optional[str] = None) -> tuple[int, int]: ...
    def splits(self, rank: Int, dim_sets: Sequence[str]) -> list[tuple[int, int]]: ...

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
