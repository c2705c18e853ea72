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
