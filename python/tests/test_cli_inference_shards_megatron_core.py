"""The command line's inference shards against megatron-core 0.19.2's own
``build_inference_pg_collections_for_shards``, on torch's fake backend.

The ``rank-layout`` command (``test_one_vocabulary.command``: ``.ci/run``'s
build, ``RANK_LAYOUT_COMMAND``, or the workspace's debug build, made when
missing) prints
``groups --inference-shards SPEC --world-size W --format json``; for random
specs (seeded; worlds up to a few hundred ranks; both mappings; roles) every
shard's offset, size, role and every kind's groups must be exactly those
Megatron-Core creates, recorded as ``test_inference_shards_megatron_core``
records them (its helpers are imported, not copied). The same spec pasted
in ``--megatron-args`` gives the same JSON. For random texts, valid or not,
the command exits 2 exactly where Megatron-Core raises, naming the shard.

Without cargo the tests fail under CI and are skipped elsewhere.
megatron-core 0.16.1 has no inference shards: there the imported
module skips this file; python/ci.sh runs it under 0.19.2
(MEGATRON_CORE_TESTS)."""

from __future__ import annotations

import json
import random
import re
import shlex
import subprocess
from typing import Any

import pytest

import test_inference_shards_megatron_core as ref
from test_one_vocabulary import command


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([command(), *args], capture_output=True, text=True, timeout=120)


def cli_shards(spec: str, world: int, mapping: bool, pasted: bool = False) -> subprocess.CompletedProcess[str]:
    """``groups`` of ``spec`` over ``world`` ranks: from the flags, or
    pasted into ``--megatron-args`` as Megatron-LM's arguments."""
    flags = ["--use-tp-pp-dp-mapping"] if mapping else []
    if pasted:
        line = shlex.join(["--inference-shards", spec, "--world-size", str(world), *flags])
        return run("groups", "--megatron-args", line, "--format", "json")
    return run("groups", "--inference-shards", spec, "--world-size", str(world), *flags, "--format", "json")


def specs(n: int, seed: int) -> list[tuple[str, int, bool]]:
    """Valid specs as the reference writes them (sizes, roles, spacing,
    digits of every script), dp scaled up so that worlds reach a few
    hundred ranks (a larger dp keeps the expert grid tiling the shard and
    the pipelines as they were)."""
    rng = random.Random(seed)
    out: list[tuple[str, int, bool]] = []
    while len(out) < n:
        mapping = len(out) % 2 == 1
        shards = [ref.valid_shard(rng, mapping) for _ in range(rng.randint(1, 4))]
        for shard in shards:
            shard["dp"] *= rng.choice([1, 1, 2, 4, 8])
        world = sum(s["tp"] * s["pp"] * s["dp"] for s in shards)
        if world > 400:
            continue
        text = "".join(
            (rng.choice(["+", ";", " + "]) if i else "") + ref.write_shard(s, rng) for i, s in enumerate(shards)
        )
        out.append((text, world, mapping))
    return out


SPECS = specs(30, seed=2026)


def test_every_shard_s_every_kind_is_megatron_cores() -> None:
    """Every random spec: the command's shards (offsets, sizes, roles) and
    every kind's groups, members in order, equal Megatron-Core's; pasted
    into --megatron-args, the same JSON."""
    mismatches: list[str] = []
    for spec, world, mapping in SPECS:
        record: list = []
        theirs, refused = ref.megatron(spec, world, mapping, 0, record)
        assert refused is None, f"{spec!r} {world}: {refused}"
        out = cli_shards(spec, world, mapping)
        assert out.returncode == 0, f"{spec!r} {world}: {out.stderr}"
        mine = json.loads(out.stdout)
        assert mine["world_size"] == world
        assert mine["mapping"] == ("tp-cp-ep-pp-dp" if mapping else "tp-cp-ep-dp-pp")
        shards = mine["shards"]
        assert [(s["rank_offset"], s["world_size"], s["role"]) for s in shards] == [
            (s.rank_offset, s.world_size, s.spec.role) for s in theirs
        ], spec
        for shard, kinds in zip(shards, ref.recorded_groups(record, theirs)):
            assert list(shard["groups"]) == list(ref.FIELDS), "the 15 kinds, in the interface's order"
            for kind, want in kinds.items():
                if shard["groups"][kind] != want:
                    mismatches.append(
                        f"{spec!r} shard {shard['shard']} {kind}: megatron-core {want}, cli {shard['groups'][kind]}"
                    )
        pasted = cli_shards(spec, world, mapping, pasted=True)
        assert pasted.returncode == 0, f"{spec!r}: {pasted.stderr}"
        assert json.loads(pasted.stdout) == mine, spec
    assert not mismatches, "\n".join(mismatches[:20])
    assert max(w for _, w, _ in SPECS) > 100
    assert {m for _, _, m in SPECS} == {False, True}


def test_the_same_texts_are_refused() -> None:
    """Random texts, valid ones changed at random (the reference's
    mutations: keys, values of every sign and script, separators, roles,
    the world, the mapping): the command exits 2, nothing on stdout, the
    reason on stderr naming the shard, exactly where Megatron-Core raises;
    where both accept, the same shards."""
    mismatches: list[str] = []
    refused = accepted = 0
    for text, world, mapping in ref.random_texts(300, seed=131):
        theirs, their_error = ref.megatron(text, world, mapping)
        out = cli_shards(text, world, mapping)
        assert out.returncode in (0, 2), f"{text!r}: exit {out.returncode}: {out.stderr}"
        if (their_error is None) != (out.returncode == 0):
            mismatches.append(
                f"{text!r} world {world} mapping {mapping}: megatron-core {their_error or 'accepts'}; "
                f"cli exit {out.returncode} {out.stderr.strip()}"
            )
            continue
        if out.returncode == 2:
            refused += 1
            assert out.stdout == ""
            assert out.stderr.startswith("error: --inference-shards "), out.stderr
            assert re.search(
                r": (inference shard \d+: |the inference shards hold |--inference-shards names no shard)", out.stderr
            ), (text, out.stderr)
            continue
        accepted += 1
        shards = json.loads(out.stdout)["shards"]
        assert [(s["rank_offset"], s["world_size"], s["role"]) for s in shards] == [
            (s.rank_offset, s.world_size, s.spec.role) for s in theirs
        ], text
    assert not mismatches, "\n".join(mismatches[:20])
    assert refused > 100 and accepted > 40, (refused, accepted)
