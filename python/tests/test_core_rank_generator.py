"""rank_layout.megatron.CoreRankGenerator against the real
megatron.core.parallel_state.RankGenerator of the installed megatron-core
(0.19.2: with gtp_remat; 0.16.1: without it, gtp_remat left at 1): hundreds
of random generators (sizes, orders written partly, in any case, with
rank offsets, some that Megatron-Core refuses), and for each every subset
of the axes as a get_ranks token (and a reordered token), get_gtp_ranks,
and the attributes. Both refuse alike, or both answer the same lists.

The one difference, by design: an order naming gtp_remat but not tp, with
tp > 1, which Megatron-Core accepts and lists wrong groups for (its check
for a missing axis finds 'tp' in 'gtp_remat'), is refused here."""

from __future__ import annotations

import inspect
import itertools
import random
import warnings
from typing import Any, Callable

import pytest

import megatron_core_worker as mcw

parallel_state = mcw.require_megatron()

from rank_layout import LayoutError  # noqa: E402
from rank_layout.megatron import CoreRankGenerator, RankGenerator  # noqa: E402

#: Whether the installed Megatron-Core's generator has the weight-shard axis.
HAS_GTP = "gtp_remat" in inspect.signature(parallel_state.RankGenerator).parameters
AXES = ["tp", "pp", "dp", "ep", "cp"] + (["gtp_remat"] if HAS_GTP else [])


def outcome(f: Callable[[], Any]) -> Any:
    """("ok", value) or ("raises",) (the exception types differ: Megatron-Core
    raises RuntimeError, AssertionError, KeyError or ValueError, rank-layout
    LayoutError)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ("ok", f())
    except LayoutError:
        return ("raises",)
    except (RuntimeError, AssertionError, KeyError, ValueError, IndexError):
        return ("raises",)


def random_generators(count: int) -> list[dict[str, Any]]:
    rng = random.Random(19)
    out = []
    for _ in range(count):
        sizes = dict(
            tp=rng.choice([1, 1, 2, 3]),
            ep=rng.choice([1, 1, 2, 3]),
            dp=rng.choice([1, 2, 4]),
            pp=rng.choice([1, 2, 3]),
            cp=rng.choice([1, 1, 2]),
        )
        if rng.random() < 0.9 and sizes["ep"] > 1:
            sizes["cp"] = 1  # mostly what Megatron-Core accepts
        if HAS_GTP:
            sizes["gtp_remat"] = rng.choice([1, 1, 2, 3])
        # The order: the axes of size > 1 (mostly), a few of size 1, shuffled.
        names = [a for a in AXES if sizes.get(a, 1) > 1 and rng.random() < 0.97]
        names += [a for a in AXES if sizes.get(a, 1) == 1 and a not in names and rng.random() < 0.4]
        rng.shuffle(names)
        order = "-".join(names) if names else "tp"
        if rng.random() < 0.1:
            order = order.upper()
        sizes["order"] = order
        sizes["rank_offset"] = rng.choice([0, 0, 0, 5, 16])
        out.append(sizes)
    # Fixed cases: Megatron-Core's own layouts and its corner cases.
    out += [
        dict(tp=2, ep=1, dp=3, pp=4, cp=1, order="tp-dp-pp", rank_offset=0),
        dict(tp=2, ep=4, dp=2, pp=2, cp=1, order="tp-cp-ep-dp-pp", rank_offset=0),
        dict(tp=2, ep=2, dp=2, pp=1, cp=2, order="tp-cp-ep-dp-pp", rank_offset=0),  # ep and cp: refused
        dict(tp=1, ep=1, dp=2, pp=1, cp=1, order="dp-xx", rank_offset=0),  # unknown axis: refused
        dict(tp=2, ep=1, dp=2, pp=1, cp=1, order="dp", rank_offset=0),  # tp missing: refused
    ]
    if HAS_GTP:
        out += [
            dict(tp=2, ep=1, dp=2, pp=2, cp=2, order="tp-gtp_remat-cp-ep-dp-pp", rank_offset=0, gtp_remat=2),
            dict(tp=2, ep=4, dp=2, pp=2, cp=1, order="tp-cp-ep-gtp_remat-dp-pp", rank_offset=0, gtp_remat=2),
            dict(tp=1, ep=1, dp=4, pp=1, cp=1, order="gtp_remat-dp", rank_offset=0, gtp_remat=2),  # no tp axis
            dict(tp=2, ep=1, dp=2, pp=1, cp=1, order="gtp_remat-dp", rank_offset=0, gtp_remat=2),  # refused here only
            dict(tp=2, ep=1, dp=2, pp=1, cp=1, order="tp-dp", rank_offset=0, gtp_remat=2),  # gtp missing: refused
        ]
    return out


GENERATORS = random_generators(240)


def tokens(order: str) -> list[str]:
    """Every subset of the axes (in the completed order's order, and one
    reordered), and two tokens no order has."""
    axes = order.split("-")
    out = []
    for k in range(1, len(axes) + 1):
        for subset in itertools.combinations(axes, k):
            out.append("-".join(subset))
            if k > 1:
                out.append("-".join(reversed(subset)))
    return out + ["xx", "tp-tp"]


def as_016(attr: str, value: Any) -> Any:
    """Under megatron-core 0.16.1, whose generator has no gtp_remat axis:
    rank-layout's completed order without its last axis, gtp_remat (of size
    1, appended as Megatron-Core 0.19 does)."""
    if HAS_GTP:
        return value
    if attr == "order":
        assert value.endswith("-gtp_remat"), value
        return value[: -len("-gtp_remat")]
    if attr == "ordered_size":
        assert value[-1] in (1, False), value
        return value[:-1]
    return value


def test_core_rank_generator_is_megatron_cores() -> None:
    mismatches: list[str] = []
    compared = refused = stricter = calls = 0
    for args in GENERATORS:
        theirs = outcome(lambda: parallel_state.RankGenerator(**args))
        ours = outcome(lambda: CoreRankGenerator(**args))
        written = args["order"].lower().split("-")
        if theirs[0] == "ok" and ours[0] == "raises" and args["tp"] > 1 and "tp" not in written and "gtp_remat" in written:
            stricter += 1  # Megatron-Core's wrong groups, refused here
            continue
        if theirs[0] != ours[0]:
            mismatches.append(f"{args}: megatron-core {theirs[0]}, rank-layout {ours[0]}")
            continue
        if theirs[0] == "raises":
            refused += 1
            continue
        g, r = theirs[1], ours[1]
        for attr in ("order", "world_size", "ordered_size", "rank_offset", *AXES):
            if getattr(g, attr) != as_016(attr, getattr(r, attr)):
                mismatches.append(f"{args}: {attr} megatron-core {getattr(g, attr)!r} rank-layout {getattr(r, attr)!r}")
        for token in tokens(g.order):
            calls += 1
            a, b = outcome(lambda: g.get_ranks(token)), outcome(lambda: r.get_ranks(token))
            if a != b:
                mismatches.append(f"{args} get_ranks({token!r}): megatron-core {a} rank-layout {b}")
            a, b = outcome(lambda: g.get_mask(g.order, token)), outcome(lambda: r.get_mask(r.order, token))
            if a != (b if b[0] == "raises" else ("ok", as_016("ordered_size", b[1]))):
                mismatches.append(f"{args} get_mask({token!r}): megatron-core {a} rank-layout {b}")
        if HAS_GTP:
            for n in (g.gtp_remat, g.gtp_remat + 1):
                a, b = outcome(lambda: g.get_gtp_ranks(n)), outcome(lambda: r.get_gtp_ranks(n))
                if a != b:
                    mismatches.append(f"{args} get_gtp_ranks({n}): megatron-core {a} rank-layout {b}")
        compared += 1
    assert not mismatches, "\n".join(mismatches[:20])
    assert compared >= 200 and refused >= 5 and calls > 5000, (compared, refused, calls)
    assert stricter >= (1 if HAS_GTP else 0), stricter
    print(f"{compared} generators alike ({calls} tokens), {refused} refused by both, {stricter} refused here only")


def test_signature_is_megatron_cores() -> None:
    theirs = [(p.name, p.default) for p in inspect.signature(parallel_state.RankGenerator).parameters.values()]
    ours = [("tp", inspect.Parameter.empty), ("ep", inspect.Parameter.empty), ("dp", inspect.Parameter.empty),
            ("pp", inspect.Parameter.empty), ("cp", inspect.Parameter.empty), ("order", inspect.Parameter.empty),
            ("rank_offset", 0), ("gtp_remat", 1)]
    assert theirs == ours[: len(theirs)]
    g = CoreRankGenerator(*[2, 1, 2, 2, 1], "tp-gtp_remat-dp-pp", 3, 2)  # positionally, as Megatron-Core 0.19
    assert (g.gtp_remat, g.rank_offset, g.world_size) == (2, 3, 16)


def test_the_2024_generator_is_unchanged() -> None:
    """RankGenerator keeps Megatron-LM 2024's grid: ep carved out of dp."""
    old = RankGenerator(1, 2, 4, 1, 1, "tp-cp-ep-dp-pp")
    new = CoreRankGenerator(1, 2, 4, 1, 1, "tp-cp-ep-dp-pp")
    assert sum(map(len, old.get_ranks("dp"))) == 4 and new.world_size == 8
    with pytest.raises(TypeError):
        RankGenerator(1, 1, 2, 1, 1, "tp-dp", 0, 2)  # no gtp_remat there
