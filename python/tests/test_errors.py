"""Every invalid input raises rank_layout.LayoutError (a ValueError) with
rank-layout's message; values no Rust integer holds included, never a bare
TypeError or OverflowError from the binding."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import rank_layout
from rank_layout import CONFIG_KEYS, Layout, LayoutError


def raises(message: str, call: Callable[[], Any]) -> None:
    with pytest.raises(LayoutError) as info:
        call()
    assert type(info.value) is LayoutError
    assert str(info.value) == message


def test_layout_error_is_a_value_error() -> None:
    assert issubclass(LayoutError, ValueError)
    assert LayoutError.__module__ == "rank_layout"
    assert rank_layout.LayoutError is rank_layout._native.LayoutError


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (dict(tp=4, world_size=10), "world_size (10) is not divisible by tp*cp*pp = 4"),
        (dict(tp=2, cp=2, dp=2, world_size=6), "world_size (6) disagrees with dp (2): tp*cp*pp * dp = 8"),
        (dict(tp=0), "tp must be at least 1, got 0"),
        (dict(world_size=0), "world_size must be at least 1, got 0"),
        (dict(hierarchical_cp=[2, 0], cp=4), "a hierarchical_cp level must be at least 1, got 0"),
        (dict(order="tp-xp"), 'unknown axis "xp" in order "tp-xp" (expected tp, cp, ep, dp or pp)'),
        (dict(order="tp--dp"), 'empty axis name in order "tp--dp"'),
        (dict(order="tp-dp-tp"), 'axis tp appears twice in order "tp-dp-tp"'),
        (
            dict(cp=2, order="tp-dp-pp"),
            'cp has size 2 but is missing from order "tp-dp-pp" (only size-1 axes may be left out)',
        ),
        (dict(expert_layout="flat"), 'unknown expert layout "flat" (expected nested or folded)'),
        (dict(etp=2, expert_layout="nested"), "etp needs the folded expert layout (expert_layout = folded)"),
        (dict(cp=8, hierarchical_cp=[2, 2]), "hierarchical_cp [2, 2] multiplies to 4, but cp is 8"),
        (
            dict(tp=65536, pp=65536),
            "tp*cp*pp*gtp_remat = 65536*1*65536*1 overflows u32 ranks (at most 4294967296 ranks, the last one 4294967295)",
        ),
        (
            dict(encoder_tp=2, dp=3, dist_opt_instances=2),
            "dist_opt_instances (2) must divide dp*cp (3): with an encoder, each dp-cp group is cut into that many slices",
        ),
    ],
)
def test_crate_messages(config: dict, message: str) -> None:
    raises(message, lambda: Layout(**config))


def test_question_errors() -> None:
    layout = Layout(tp=4, cp=2, encoder_tp=2)  # 12 ranks, pp groups overlap
    raises("rank 12 is outside the layout (ranks 0..11, both included)", lambda: layout.rank(12))
    raises(
        "unknown kind \"tp-xp\" (expected axes joined by '-' such as tp-dp-cp, or dp-mod-ep, embd, "
        "pos-embd, hcp-N, dp-cp-intra, dp-cp-inter, edp-intra, dist-opt-instance)",
        lambda: layout.groups("tp-xp"),
    )
    with pytest.raises(LayoutError, match=r"^kind dp-mod-ep is not part of the encoder\+decoder layout"):
        layout.groups("dp-mod-ep")
    raises(
        "groups of kind pp overlap (a rank can be in 2 of them); "
        "use split(rank, kind, round), splits(rank) or memberships(rank, kind)",
        lambda: layout.split(0, "pp"),
    )
    raises("kind pp is built in 2 rounds, round 2 does not exist", lambda: layout.split(0, "pp", round=2))
    raises("kind pp is built in 2 rounds, round -1 does not exist", lambda: layout.split(0, "pp", round=-1))
    raises("kind tp has 4 groups, group 4 does not exist", lambda: layout.group("tp", 4))
    raises("kind tp has 4 groups, group -1 does not exist", lambda: layout.group("tp", -1))
    raises(
        "the groups of kind tp have two sizes (2 and 4): an array needs one; use groups(kind)",
        lambda: layout.groups_array("tp"),
    )
    with pytest.raises(LayoutError, match="invalid configuration: unknown key \"tpp\""):
        Layout(tpp=2)
    with pytest.raises(LayoutError, match="keyword arguments only"):
        Layout(2)  # type: ignore[misc]


# Values no u32 holds, or not integers at all, where a size goes.
BAD_SIZES: list[tuple[Any, str]] = [
    (-1, "{key} must be at least 1, got -1"),
    (-(2**70), "{key} must be at least 1, got -1180591620717411303424"),
    (2**32, "{key} = 4294967296 overflows u32 ranks (at most 4294967296 ranks, the last one 4294967295)"),
    (2**64, "{key} = 18446744073709551616 overflows u32 ranks (at most 4294967296 ranks, the last one 4294967295)"),
    (2.0, "{key} must be an int, got float 2.0"),
    (float("nan"), "{key} must be an int, got float nan"),
    ("4", "{key} must be an int, got str '4'"),
    (True, "{key} must be an int, got bool True"),
    ([2], "{key} must be an int, got list [2]"),
    (np.float64(2.0), "{key} must be an int, got float64 " + repr(np.float64(2.0))),
    (np.int64(-3), "{key} must be at least 1, got -3"),
]
SIZE_KEYS = ["tp", "cp", "ep", "dp", "pp", "world_size", "encoder_tp", "encoder_pp", "etp", "dist_opt_instances"]


@pytest.mark.parametrize("key", SIZE_KEYS)
@pytest.mark.parametrize(("value", "message"), BAD_SIZES, ids=[repr(v) for v, _ in BAD_SIZES])
def test_bad_sizes(key: str, value: Any, message: str) -> None:
    raises(message.format(key=key), lambda: Layout(**{key: value}))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-5, "rank_offset must be at least 0, got -5"),
        (2**32, "rank_offset = 4294967296 overflows u32 ranks (at most 4294967296 ranks, the last one 4294967295)"),
        (1.5, "rank_offset must be an int, got float 1.5"),
        ("0", "rank_offset must be an int, got str '0'"),
        (
            2**32 - 1,
            "rank_offset (4294967295) + world (1) overflows u32 ranks (at most 4294967296 ranks, the last one 4294967295)",
        ),
    ],
)
def test_bad_rank_offset(value: Any, message: str) -> None:
    if isinstance(value, int) and value == 2**32 - 1:
        # A valid u32 whose layout does not fit: the crate's own check.
        with pytest.raises(LayoutError, match="overflows u32 ranks"):
            Layout(rank_offset=value, tp=2)
        return
    raises(message, lambda: Layout(rank_offset=value))


def test_bad_strings_and_lists() -> None:
    raises("order must be a str such as 'tp-cp-ep-dp-pp', got int 3", lambda: Layout(order=3))
    raises(
        "expert_layout must be a str such as 'nested' or 'folded', got bytes b'folded'",
        lambda: Layout(expert_layout=b"folded"),
    )
    raises("hierarchical_cp must be a list of ints such as [2, 2], got int 4", lambda: Layout(hierarchical_cp=4))
    raises("hierarchical_cp must be a list of ints such as [2, 2], got str '22'", lambda: Layout(hierarchical_cp="22"))
    raises("hierarchical_cp[1] must be at least 1, got -2", lambda: Layout(cp=4, hierarchical_cp=[2, -2]))
    raises("hierarchical_cp[0] must be an int, got float 2.0", lambda: Layout(cp=4, hierarchical_cp=[2.0, 2]))
    raises("kind must be a str such as 'tp' or 'dp-cp', got int 0", lambda: Layout().groups(0))


BAD_RANKS: list[tuple[Any, str]] = [
    (-1, "rank -1 is outside the layout (ranks 0..15, both included)"),
    (16, "rank 16 is outside the layout (ranks 0..15, both included)"),
    (2**32, "rank 4294967296 is outside the layout (ranks 0..15, both included)"),
    (2**64, "rank 18446744073709551616 is outside the layout (ranks 0..15, both included)"),
    (-(2**64), "rank -18446744073709551616 is outside the layout (ranks 0..15, both included)"),
    (1.0, "rank must be an int, got float 1.0"),
    ("1", "rank must be an int, got str '1'"),
    (None, "rank must be an int, got NoneType None"),
    (False, "rank must be an int, got bool False"),
]
RANK_METHODS: dict[str, Callable[[Layout, Any], Any]] = {
    "rank": lambda l, r: l.rank(r),
    "memberships": lambda l, r: l.memberships(r, "tp"),
    "split": lambda l, r: l.split(r, "tp"),
    "split_round": lambda l, r: l.split(r, "tp", round=0),
    "splits": lambda l, r: l.splits(r),
    "pipeline_next": lambda l, r: l.pipeline_next(r),
    "pipeline_prev": lambda l, r: l.pipeline_prev(r),
    "is_first_stage": lambda l, r: l.is_first_stage(r),
    "is_last_stage": lambda l, r: l.is_last_stage(r),
    "is_embedding_rank": lambda l, r: l.is_embedding_rank(r),
    "is_position_embedding_rank": lambda l, r: l.is_position_embedding_rank(r),
}


@pytest.mark.parametrize("method", sorted(RANK_METHODS))
@pytest.mark.parametrize(("rank", "message"), BAD_RANKS, ids=[repr(r) for r, _ in BAD_RANKS])
def test_bad_ranks(method: str, rank: Any, message: str) -> None:
    layout = Layout(tp=2, cp=2, pp=2, world_size=16)
    raises(message, lambda: RANK_METHODS[method](layout, rank))


def test_integer_like_values_are_accepted() -> None:
    layout = Layout(tp=np.int64(2), cp=np.uint8(2), pp=np.int32(2), world_size=np.uint64(16))
    assert layout == Layout(tp=2, cp=2, pp=2, world_size=16)
    assert layout.split(np.int16(13), "pp") == (5, 1)
    assert layout.group("tp", np.int64(1)) == [2, 3]
    assert Layout(cp=4, hierarchical_cp=np.array([2, 2])).groups("hcp-0") == Layout(
        cp=4, hierarchical_cp=(2, 2)
    ).groups("hcp-0")


def test_none_means_default() -> None:
    assert Layout(**{key: None for key in CONFIG_KEYS}) == Layout()


def test_no_bare_type_or_overflow_error() -> None:
    """Every argument of every call, fed every kind of bad value: only LayoutError."""
    layout = Layout(tp=2, cp=2, pp=2, world_size=16)
    bad = [-1, 2**32, 2**100, -(2**100), 1.5, "x", None, True, [1], object(), np.float32(1)]
    calls: list[Callable[[Any], Any]] = [
        *(lambda v, k=k: Layout(**{k: v}) for k in CONFIG_KEYS),
        lambda v: layout.groups(v),
        lambda v: layout.groups_array(v),
        lambda v: layout.group(v, 0),
        lambda v: layout.group("tp", v),
        lambda v: layout.split(v, "tp"),
        lambda v: layout.split(0, v),
        lambda v: layout.split(0, "tp", round=v),
        lambda v: layout.split_rounds(v),
        lambda v: layout.memberships(0, v),
        *(lambda v, m=m: m(layout, v) for m in RANK_METHODS.values()),
    ]
    for call in calls:
        for value in bad:
            if value is None and call in calls[: len(CONFIG_KEYS)]:
                continue  # None leaves a key out
            try:
                call(value)
            except LayoutError:
                continue
            except Exception as e:  # pragma: no cover - the failure we look for
                pytest.fail(f"{type(e).__name__} for {value!r}: {e}")


def test_huge_groups_fail_as_memory_errors_not_aborts() -> None:
    """A card, a group or all groups of 2^31 ranks as Python lists: a
    MemoryError before anything is allocated (once this aborted the
    interpreter); the arrays and per-rank answers still work."""
    layout = Layout(tp=2**31)
    for ask in (lambda: layout.rank(5), lambda: layout.group("tp", 0), lambda: layout.groups("tp"),
                lambda: layout.memberships(5, "tp")):
        with pytest.raises((MemoryError, LayoutError), match="2147483648"):
            ask()
    assert layout.split(5, "tp") == (0, 5)
    assert layout.splits(2**31 - 1)[0].split.key == 2**31 - 1
