"""Every group of the project's reference vectors (tests/data/vectors),
through every way the Python API answers it."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import load_vector, vector_config, vector_files
from rank_layout import Layout, LayoutError


@pytest.fixture(params=vector_files(), ids=lambda p: p.stem)
def vector(request: pytest.FixtureRequest) -> dict:
    return load_vector(request.param)


def test_sizes_and_kinds(vector: dict) -> None:
    config, expected = vector["config"], vector["groups"]
    layout = Layout(**vector_config(config))
    assert layout.world_size == config["world_size"]
    if "edp" in config:
        assert layout.sizes["edp"] == config["edp"]
    if "encoder_world_size" in config:
        assert layout.encoder_world_size == config["encoder_world_size"]
        assert layout.shape == "encoder+decoder"
    # json keeps the file's order: the kinds in listing order.
    assert layout.kinds == list(expected)


def test_every_group(vector: dict) -> None:
    layout = Layout(**vector_config(vector["config"]))
    for kind, groups in vector["groups"].items():
        assert layout.groups(kind) == groups, kind
        for i, group in enumerate(groups):
            assert layout.group(kind, i) == group, (kind, i)
        if len({len(g) for g in groups}) == 1:
            array = layout.groups_array(kind)
            assert array.dtype == np.uint32 and array.flags.c_contiguous
            assert array.tolist() == groups, kind
        else:
            with pytest.raises(LayoutError, match="an array needs one"):
                layout.groups_array(kind)


def test_every_rank_answers_its_groups(vector: dict) -> None:
    layout = Layout(**vector_config(vector["config"]))
    expected = vector["groups"]
    first = layout.rank_offset
    for rank in range(first, first + layout.world_size):
        card = layout.rank(rank)
        assert card["rank"] == rank
        splits = {(kind, rnd): split for kind, rnd, _rounds, split in layout.splits(rank)}
        for kind, groups in expected.items():
            want = [
                {"color": color, "key": group.index(rank), "members": group}
                for color, group in enumerate(groups)
                if rank in group
            ]
            assert layout.memberships(rank, kind) == want, (rank, kind)
            assert card["groups"][kind] == want, (rank, kind)
            rounds = layout.split_rounds(kind)
            by_round = [layout.split(rank, kind, round=r) for r in range(rounds)]
            assert by_round == [splits[(kind, r)] for r in range(rounds)], (rank, kind)
            assert sorted(s for s in by_round if s is not None) == [
                (m["color"], m["key"]) for m in want
            ], (rank, kind)
            if rounds == 1:
                assert layout.split(rank, kind) == by_round[0]


def test_rounds_are_disjoint(vector: dict) -> None:
    """The groups of one split round never share a rank: the property that
    makes rank_layout.torch.new_groups deadlock-free."""
    layout = Layout(**vector_config(vector["config"]))
    first = layout.rank_offset
    for kind in layout.kinds:
        for rnd in range(layout.split_rounds(kind)):
            seen: dict[int, int] = {}
            for rank in range(first, first + layout.world_size):
                split = layout.split(rank, kind, round=rnd)
                if split is None:
                    continue
                color, key = split
                members = layout.group(kind, color)
                assert members[key] == rank
                seen[rank] = color
            for rank, color in seen.items():
                assert all(seen.get(m) == color for m in layout.group(kind, color)), (kind, rnd)
