"""rank_layout.InferenceShards against megatron-core 0.19.2's own
``build_inference_pg_collections_for_shards``, in this process, on torch's
fake backend (one process acts as one rank of a world).

For random specs (sizes, roles, both mappings, the text written in every
way Megatron-Core's parser accepts): Megatron-Core creates every shard's
groups on every rank, so one run on rank 0, recorded at
``new_subgroups_by_enumeration`` and ``new_group``, lists every group of
every shard in its order, each kind in the order ``build_inference_pg_collection``
creates them; every shard's every kind of rank-layout must be exactly that
list (groups and members in order). Then, rank by rank, the
``ProcessGroupCollection`` Megatron-Core hands each rank (the rank's own
shard only) must hold, field by field, the group rank-layout's split names.
For random texts, valid or not, both refuse the same ones (messages our own:
rank-layout's name the shard).

megatron-core 0.16.1 has no inference shards: under it (the 3.11
environment of python/ci.sh) this file is skipped; python/ci.sh runs it
under 0.19.2 (MEGATRON_CORE_TESTS)."""

from __future__ import annotations

import random
import re
import warnings
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

import megatron_core_worker as mcw

mcw.require_megatron()
if mcw.version() == "0.16.1":
    pytest.skip(
        "megatron-core 0.16.1 has no inference shards; python/ci.sh runs this file under 0.19.2",
        allow_module_level=True,
    )

import torch.distributed as dist  # noqa: E402
from megatron.core.inference.shards import build_inference_pg_collections_for_shards  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402

from rank_layout import InferenceShards, LayoutError  # noqa: E402

#: The kinds in the order build_inference_pg_collection creates their
#: groups with HyperCommGrid.create_pg (new_subgroups_by_enumeration): the
#: decoder grid's eight, then the expert grid's five.
ENUMERATED = ["tp", "cp", "pp", "dp", "tp-pp", "tp-cp", "dp-cp", "tp-dp-cp", "ep", "etp", "edp", "etp-ep", "etp-ep-pp"]
#: ProcessGroupCollection's field of each kind.
FIELDS = {
    "tp": "tp", "cp": "cp", "pp": "pp", "dp": "dp", "tp-pp": "mp", "tp-cp": "tp_cp", "dp-cp": "dp_cp",
    "tp-dp-cp": "tp_dp_cp", "ep": "ep", "etp": "expt_tp", "edp": "expt_dp", "etp-ep": "tp_ep",
    "etp-ep-pp": "tp_ep_pp", "embd": "embd", "pos-embd": "pos_embd",
}

_new_group = dist.new_group
_new_subgroups = dist.new_subgroups_by_enumeration


@contextmanager
def fake_world(world: int, rank: int, record: list | None = None) -> Iterator[None]:
    """A fake world; ``record`` gets ("enum", rank lists) for each
    new_subgroups_by_enumeration and ("group", ranks) for each new_group
    made outside one."""
    dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())
    inside = [0]

    def new_subgroups(ranks_per_subgroup_list: Any, *args: Any, **kwargs: Any) -> Any:
        if record is not None:
            record.append(("enum", [list(r) for r in ranks_per_subgroup_list]))
        inside[0] += 1
        try:
            return _new_subgroups(ranks_per_subgroup_list, *args, **kwargs)
        finally:
            inside[0] -= 1

    def new_group(ranks: Any = None, *args: Any, **kwargs: Any) -> Any:
        if record is not None and not inside[0]:
            record.append(("group", list(ranks)))
        return _new_group(ranks, *args, **kwargs)

    dist.new_subgroups_by_enumeration = new_subgroups
    dist.new_group = new_group
    try:
        yield
    finally:
        dist.new_subgroups_by_enumeration = _new_subgroups
        dist.new_group = _new_group
        dist.destroy_process_group()


def megatron(spec: str, world: int, mapping: bool, rank: int = 0, record: list | None = None) -> Any:
    """Megatron-Core's shards of ``spec`` on ``rank``: (the shards, None),
    or (None, its refusal)."""
    with fake_world(world, rank, record):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return build_inference_pg_collections_for_shards(world, spec, use_tp_pp_dp_mapping=mapping), None
        except Exception as e:  # noqa: BLE001 (a refusal, compared below)
            return None, f"{type(e).__name__}: {e}"


def ours(spec: str, world: int, mapping: bool) -> Any:
    """rank-layout's shards of ``spec``: (the shards, None) or (None, the
    LayoutError's message)."""
    try:
        return InferenceShards(spec, world, use_tp_pp_dp_mapping=mapping), None
    except LayoutError as e:
        return None, str(e)


# -- random specs ---------------------------------------------------------------

DIGITS = {"0": "\u0660", "1": "\u0661", "2": "\u0662", "3": "\u0663", "4": "\u0664"}


def write_int(n: int, rng: random.Random) -> str:
    """``n`` as Python's int() reads it: plain, with leading zeros, with
    underscores, in Arabic-Indic digits."""
    text = str(n)
    style = rng.randrange(6)
    if style == 0:
        return "0" + text
    if style == 1 and n >= 10:
        return text[0] + "_" + text[1:]
    if style == 2 and text in DIGITS:
        return DIGITS[text]
    return text


def space(rng: random.Random) -> str:
    return rng.choice(["", "", "", " ", "\t", "\u3000", "\x1c"])


def write_shard(sizes: dict[str, Any], rng: random.Random) -> str:
    """One shard, keys shuffled, defaults sometimes written, spaced."""
    entries = []
    for key, value in sizes.items():
        default = value == sizes["tp"] if key == "expt_tp" else value == 1
        if key == "role":
            if value is not None:
                entries.append(f"role={rng.choice([value, value.upper(), value.title()])}")
        elif not default or rng.random() < 0.3:
            entries.append(f"{space(rng)}{key}{space(rng)}={space(rng)}{write_int(value, rng)}{space(rng)}")
    if rng.random() < 0.2:
        entries.append("cp=1")
    rng.shuffle(entries)
    if rng.random() < 0.1:
        entries.insert(0, "")  # an empty entry
    return ",".join(entries) if entries else ","


def valid_shard(rng: random.Random, mapping: bool) -> dict[str, Any]:
    """Sizes whose expert grid tiles the shard (and, with the tp-pp-dp
    mapping, whose grids share their pipelines)."""
    tp, pp, dp = rng.choice([1, 1, 2, 2, 4]), rng.choice([1, 1, 2, 3]), rng.choice([1, 1, 2, 3, 4])
    model = tp * dp
    pairs = [(e, p) for e in range(1, model + 1) for p in range(1, model + 1) if model % (e * p) == 0]
    if mapping and pp > 1:
        pairs = [(e, p) for e, p in pairs if e * p == tp]
    expt_tp, ep = rng.choice(pairs)
    return {"tp": tp, "pp": pp, "ep": ep, "expt_tp": expt_tp, "dp": dp, "role": rng.choice([None, "prefill", "decode"])}


def valid_specs(n: int, seed: int) -> list[tuple[str, int, bool]]:
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        mapping = rng.random() < 0.5
        shards = [valid_shard(rng, mapping) for _ in range(rng.randint(1, 4))]
        world = sum(s["tp"] * s["pp"] * s["dp"] for s in shards)
        if world > 24:
            continue
        text = "".join(
            (rng.choice(["+", ";", " + ", ";;"]) if i else "") + write_shard(s, rng) for i, s in enumerate(shards)
        )
        out.append((text, world, mapping))
    return out


def mutate(text: str, rng: random.Random) -> str:
    """A spec with one thing changed that may or may not break it."""
    edits = [
        lambda t: t.replace("=", "", 1),
        lambda t: t + ",foo=1",
        lambda t: t + ",TP=2",
        lambda t: t + ",role=both",
        lambda t: t + ",role= prefill ",
        lambda t: t + ",cp=2",
        lambda t: t + ",cp=0",
        lambda t: t + ",cp=01",
        lambda t: t + ",tp=0",
        lambda t: t + ",dp=0",
        lambda t: t + ",pp=0",
        lambda t: t + ",ep=0",
        lambda t: t + ",expt_tp=0",
        lambda t: t + ",tp=-1",
        lambda t: t + ",tp=-1,dp=-1",
        lambda t: t + ",tp=-1,pp=-1",
        lambda t: t + ",ep=-1,expt_tp=-2",
        lambda t: t + ",ep=-2",
        lambda t: t + ",tp=+2",
        lambda t: t + ",tp=2_",
        lambda t: t + ",tp=1__0",
        lambda t: t + ",tp=_1",
        lambda t: t + ",dp=\u00b2",
        lambda t: t + ",dp=\u0662",
        lambda t: t + ",tp=4294967296,dp=0",
        lambda t: t + ",ep=" + str(rng.choice([2, 3, 4, 8])),
        lambda t: t + ",expt_tp=" + str(rng.choice([1, 2, 3, 4])),
        lambda t: t + ",pp=2",
        lambda t: t + ";",
        lambda t: t + "+,",
        lambda t: t + "+ ",
        lambda t: t + ",,",
        lambda t: t + ", x ",
        lambda t: t.replace(",", ";", 1),
        lambda t: t.replace("+", ",", 1),
        lambda t: "",
        lambda t: " ;+ ",
        lambda t: t + ",tp=1.0",
        lambda t: t + ",dp=2=3",
        lambda t: t + ",tp = 0x2",
    ]
    return rng.choice(edits)(text)


def random_texts(n: int, seed: int) -> list[tuple[str, int, bool]]:
    rng = random.Random(seed)
    out = []
    for text, world, mapping in valid_specs(n, seed + 1):
        if rng.random() < 0.7:
            text = mutate(text, rng)
        if rng.random() < 0.2:
            text = mutate(text, rng)
        if rng.random() < 0.1:
            world += rng.choice([-1, 1, 2])
        if rng.random() < 0.2:
            mapping = not mapping
        out.append((text, max(world, 1), mapping))
    return out


# -- the groups -------------------------------------------------------------------


def recorded_groups(record: list, shards: Any) -> list[dict[str, list[list[int]]]]:
    """Megatron-Core's groups of each shard, by kind, from the calls
    recorded: per shard, the 13 enumerations, then an embd and a pos-embd
    group per pipeline."""
    out = []
    calls = iter(record)
    for shard in shards:
        kinds: dict[str, list[list[int]]] = {}
        for kind in ENUMERATED:
            what, ranks = next(calls)
            assert what == "enum", (kind, what)
            kinds[kind] = ranks
        kinds["embd"], kinds["pos-embd"] = [], []
        for _ in kinds["pp"]:
            for kind in ("embd", "pos-embd"):
                what, ranks = next(calls)
                assert what == "group", (kind, what)
                kinds[kind].append(ranks)
        out.append(kinds)
    assert next(calls, None) is None, "calls left over"
    return out


SPECS = valid_specs(150, seed=19)


def test_every_shard_s_every_kind_is_megatron_cores() -> None:
    """Every random spec: the same shards (offsets, sizes, roles) and, for
    every shard and kind, Megatron-Core's group list exactly."""
    mismatches: list[str] = []
    mappings = set()
    for spec, world, mapping in SPECS:
        record: list = []
        theirs, refused = megatron(spec, world, mapping, 0, record)
        assert refused is None, f"{spec!r} {world}: {refused}"
        mine, error = ours(spec, world, mapping)
        assert error is None, f"{spec!r} {world}: {error}"
        assert mine.kinds == list(FIELDS)
        mappings.add(mapping)
        assert [(s.rank_offset, s.world_size, s.role) for s in mine.shards] == [
            (s.rank_offset, s.world_size, s.spec.role) for s in theirs
        ], spec
        assert [(s.tp, s.pp, s.ep, s.expt_tp, s.dp) for s in mine.shards] == [
            (s.spec.tp, s.spec.pp, s.spec.ep, s.spec.expt_tp, s.spec.dp) for s in theirs
        ], spec
        for shard, kinds in zip(mine.shards, recorded_groups(record, theirs)):
            for kind, want in kinds.items():
                got = shard.layout.groups(kind)
                if got != want:
                    mismatches.append(f"{spec!r} shard {shard.index} {kind}: megatron-core {want}, rank-layout {got}")
    assert not mismatches, "\n".join(mismatches[:20])
    assert mappings == {False, True}


def rank_view(spec: str, world: int, mapping: bool, rank: int) -> tuple[list[int], dict[str, Any]]:
    """What Megatron-Core gives ``rank``: the shards whose collection it
    holds, and each field of that collection as its group's ranks (None
    for no group), read inside the rank's world (the groups die with it)."""
    with fake_world(world, rank):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            shards = build_inference_pg_collections_for_shards(world, spec, use_tp_pp_dp_mapping=mapping)
        own = [i for i, s in enumerate(shards) if s.pg_collection is not None]
        pgc = shards[own[0]].pg_collection
        fields = {}
        for field in FIELDS.values():
            group = getattr(pgc, field)
            fields[field] = None if group is None else dist.get_process_group_ranks(group)
        return own, fields


def test_every_rank_s_collection_holds_the_groups_its_splits_name() -> None:
    """Rank by rank (every rank of the smaller worlds, a sample of the
    others): Megatron-Core's InferenceShard list gives the rank a
    ProcessGroupCollection in its own shard only, and each field's ranks
    are the group rank-layout's global split names, the rank at its key
    (None where the rank is in no embd or pos-embd group)."""
    checked = 0
    for spec, world, mapping in SPECS[:60]:
        mine, _ = ours(spec, world, mapping)
        everything = {kind: [g for s in mine.shards for g in s.layout.groups(kind)] for kind in mine.kinds}
        ranks = range(world) if world <= 12 else sorted(random.Random(world).sample(range(world), 6))
        for rank in ranks:
            own, fields = rank_view(spec, world, mapping, rank)
            assert own == [mine.shard_of(rank).index], (spec, rank)
            splits = dict(mine.splits(rank))
            for kind, field in FIELDS.items():
                split, want = splits[kind], fields[field]
                assert split == mine.split(rank, kind)
                if split is None:
                    assert want is None, (spec, rank, kind, want)
                    continue
                assert everything[kind][split.color] == want, (spec, rank, kind)
                assert want[split.key] == rank
            checked += 1
    assert checked > 350, checked


def test_the_same_texts_are_refused() -> None:
    """Random texts, valid ones changed at random (keys, values of every
    sign and script, separators, roles, the world, the mapping): refused
    by both or by neither; rank-layout's refusal names the shard where one
    is at fault. Accepted ones give the same shards."""
    mismatches: list[str] = []
    refused = accepted = 0
    for text, world, mapping in random_texts(1000, seed=31):
        theirs, their_error = megatron(text, world, mapping)
        mine, my_error = ours(text, world, mapping)
        if (their_error is None) != (my_error is None):
            mismatches.append(f"{text!r} world {world} mapping {mapping}: megatron-core {their_error or 'accepts'}; "
                              f"rank-layout {my_error or 'accepts'}")
            continue
        if my_error is not None:
            refused += 1
            assert re.match(r"inference shard \d+: |the inference shards hold |--inference-shards names no shard",
                            my_error), my_error
            continue
        accepted += 1
        assert [(s.rank_offset, s.world_size, s.role) for s in mine.shards] == [
            (s.rank_offset, s.world_size, s.spec.role) for s in theirs
        ], text
    assert not mismatches, "\n".join(mismatches[:20])
    assert refused > 400 and accepted > 150, (refused, accepted)
    print(f"{refused} texts refused by both, {accepted} accepted by both")
