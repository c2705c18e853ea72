"""The Layout class: properties, a rank's card, splits, pipeline questions,
value semantics, and the docstrings' examples."""

from __future__ import annotations

import doctest
import importlib
import pickle
from typing import Any

import pytest

import rank_layout
import rank_layout.megatron
from rank_layout import CONFIG_KEYS, Layout


def test_properties() -> None:
    layout = Layout(tp=2, ep=4, world_size=64, expert_layout="nested")
    assert layout.world_size == 64 and layout.rank_offset == 0
    assert layout.shape == "nested" and layout.encoder_world_size == 0
    assert Layout(tp=2, ep=4, world_size=64).shape == "folded"  # Megatron-Core's default
    assert layout.sizes == {"tp": 2, "cp": 1, "ep": 4, "dp": 32, "pp": 1, "etp": 2, "edp": 8, "gtp_remat": 1, "egtp_remat": 1}
    assert layout.encoder_sizes is None
    assert list(layout.config) == CONFIG_KEYS
    assert layout.config["dp"] == 32 and layout.config["world_size"] == 64
    enc = Layout(tp=4, cp=2, encoder_tp=2)
    assert enc.shape == "encoder+decoder" and enc.encoder_world_size == 4
    assert enc.encoder_sizes == {"tp": 2, "cp": 2, "ep": 1, "dp": 1, "pp": 1, "etp": 2, "edp": 1, "gtp_remat": 1,
                                 "egtp_remat": 1}
    assert enc.config["encoder_tp"] == 2 and enc.config["encoder_pp"] == 1
    folded = Layout(tp=2, cp=2, dp=2, pp=2, ep=4, etp=1, expert_layout="folded")
    assert folded.shape == "folded" and folded.config["etp"] == 1 and folded.sizes["edp"] == 2
    assert Layout(rank_offset=8, tp=2).groups("tp") == [[8, 9]]


def test_config_round_trip_and_value_semantics(layout_config: dict[str, Any]) -> None:
    layout = Layout(**layout_config)
    again = Layout(**layout.config)
    assert again == layout and hash(again) == hash(layout)
    assert pickle.loads(pickle.dumps(layout)) == layout
    assert type(pickle.loads(pickle.dumps(layout))) is Layout
    assert eval(repr(layout), {"Layout": Layout}) == layout
    assert layout != Layout(tp=3) and layout != "tp=2"


def test_repr() -> None:
    assert repr(Layout(tp=2, cp=2, pp=2, world_size=16)) == "Layout(tp=2, cp=2, dp=2, pp=2, world_size=16)"
    assert (
        repr(Layout(cp=4, expert_layout="folded", hierarchical_cp=[2, 2], order="tp-cp-dp-ep-pp"))
        == "Layout(cp=4, dp=1, world_size=4, order='tp-cp-dp-ep-pp', hierarchical_cp=[2, 2])"
    )
    assert (
        repr(Layout(tp=2, ep=2, world_size=8, expert_layout="nested"))
        == "Layout(tp=2, ep=2, dp=4, world_size=8, expert_layout='nested')"
    )


def test_weight_shard_axes() -> None:
    """gtp_remat and expert_gtp_remat (Megatron-Core 0.19's GTP): keyword
    arguments, sizes, configuration, value semantics, kinds, the mesh."""
    layout = Layout(tp=2, gtp_remat=2, cp=2, ep=2, expert_gtp_remat=2, world_size=32)
    assert layout.sizes == {"tp": 2, "cp": 2, "ep": 2, "dp": 4, "pp": 1, "etp": 2, "edp": 4, "gtp_remat": 2,
                            "egtp_remat": 2}
    assert layout.config["gtp_remat"] == 2 and layout.config["expert_gtp_remat"] == 2
    assert Layout(**layout.config) == layout and hash(Layout(**layout.config)) == hash(layout)
    assert pickle.loads(pickle.dumps(layout)) == layout
    assert repr(layout) == "Layout(tp=2, cp=2, ep=2, dp=4, world_size=32, gtp_remat=2, expert_gtp_remat=2)"
    assert eval(repr(layout), {"Layout": Layout}) == layout
    assert layout != Layout(tp=2, gtp_remat=2, cp=2, ep=2, world_size=32)
    assert Layout(gtp_remat=1, expert_gtp_remat=None) == Layout()
    gtp = ["gtp_remat", "gtp_remat-dp", "gtp_remat-dp-cp", "tp-gtp_remat-pp", "tp-gtp_remat-dp", "tp-gtp_remat-dp-cp"]
    egtp = ["egtp_remat", "egtp_remat-edp", "etp-ep-egtp_remat-pp"]
    assert set(gtp + egtp) <= set(layout.kinds)
    assert not set(gtp + egtp) & set(Layout(tp=2, world_size=8).kinds)
    assert layout.groups("gtp_remat")[:2] == [[0, 2], [1, 3]]  # right after tp
    assert layout.groups("egtp_remat")[:2] == [[0, 4], [1, 5]]  # right after ep
    assert Layout(tp=2, gtp_remat=2, world_size=8, order="gtp_remat-tp-cp-ep-dp-pp").groups("gtp_remat")[0] == [0, 1]
    mesh = layout.mesh()
    assert mesh.dims == [("tp", 2), ("gtp_remat", 2), ("cp", 2), ("dp", 4), ("pp", 1)]
    assert mesh.views == [("expert", [("etp", 2), ("ep", 2), ("egtp_remat", 2), ("edp", 4), ("pp", 1)])]
    for kind in gtp:
        assert mesh.groups(kind) == layout.groups(kind), kind
    for kind in egtp:
        assert mesh.groups(kind, view="expert") == layout.groups(kind), kind
    with pytest.raises(rank_layout.LayoutError, match="gtp_remat = 2 cannot be combined with expert_layout = nested"):
        Layout(gtp_remat=2, world_size=4, expert_layout="nested")
    with pytest.raises(rank_layout.LayoutError, match="dist_opt_instances"):
        Layout(expert_gtp_remat=2, dp=4, dist_opt_instances=2)
    with pytest.raises(rank_layout.LayoutError, match="gtp_remat must be"):
        Layout(gtp_remat=0)


def test_rank_card() -> None:
    layout = Layout(tp=4, cp=2, encoder_tp=2)
    card = layout.rank(9)
    assert card["rank"] == 9 and card["part"] == "decoder"
    # Folded experts: the decoder's expert grid has edp = 8 / (etp 4 * ep 1) = 2.
    assert card["coord"] == {"tp": 1, "cp": 1, "ep": 0, "dp": 0, "pp": 0, "etp": 1, "edp": 1}
    assert card["pipeline"] == {"stage": 1, "stages": 2, "prev": [2], "next": []}
    assert list(card["groups"]) == layout.kinds
    assert card["groups"]["tp"] == [{"color": 3, "key": 1, "members": [8, 9, 10, 11]}]
    assert card["groups"]["pp"] == [{"color": 5, "key": 1, "members": [2, 9]}]
    assert layout.rank(0)["part"] == "encoder"
    assert layout.rank(0)["groups"]["pp"] == layout.memberships(0, "pp")
    assert [m["members"] for m in layout.memberships(0, "pp")] == [[0, 4], [0, 5]]


def test_splits_cover_every_kind_and_round(layout_config: dict[str, Any]) -> None:
    layout = Layout(**layout_config)
    steps = [(kind, r) for kind in layout.kinds for r in range(layout.split_rounds(kind))]
    for rank in range(layout.rank_offset, layout.rank_offset + layout.world_size):
        splits = layout.splits(rank)
        assert [(k, r) for k, r, _, _ in splits] == steps
        for kind, rnd, rounds, split in splits:
            assert rounds == layout.split_rounds(kind)
            assert split == layout.split(rank, kind, round=rnd)
            if split is not None:
                assert layout.group(kind, split[0])[split[1]] == rank


def test_pipeline_questions() -> None:
    layout = Layout(tp=2, pp=4, world_size=16, order="tp-dp-pp")
    assert layout.pipeline_next(8) == [12] and layout.pipeline_prev(8) == [4]
    assert layout.pipeline_next(12) == [] and layout.pipeline_prev(0) == []
    assert [layout.is_first_stage(r) for r in (0, 4, 12)] == [True, False, False]
    assert [layout.is_last_stage(r) for r in (0, 4, 12)] == [False, False, True]
    assert [layout.is_embedding_rank(r) for r in (0, 4, 12)] == [True, False, True]
    assert [layout.is_position_embedding_rank(r) for r in (0, 4, 12)] == [True, False, False]
    fan_out = Layout(tp=4, cp=2, encoder_tp=2)
    assert fan_out.pipeline_next(0) == [4, 5] and fan_out.pipeline_prev(5) == [0]
    fan_in = Layout(tp=1, cp=2, encoder_tp=2)
    assert fan_in.pipeline_prev(4) == [0, 1] and fan_in.pipeline_next(1) == [4]


def docstring_tests() -> list[doctest.DocTest]:
    """Every docstring example of the package: the module, the Python and
    the native classes, their methods and properties."""
    parser, finder = doctest.DocTestParser(), doctest.DocTestFinder()
    globs = vars(rank_layout)
    tests = finder.find(rank_layout)
    try:  # rank_layout.torch needs torch
        torch_module = importlib.import_module("rank_layout.torch")
    except ImportError:
        torch_module = None
    if torch_module is not None:
        tests += finder.find(torch_module)
    seen = {t.name for t in tests}
    tests += finder.find(rank_layout.megatron)
    globs = {**globs, **vars(rank_layout.megatron)}
    seen = {t.name for t in tests}
    for owner in (
        rank_layout._native.Layout,
        rank_layout._native.LayoutError,
        rank_layout._native.RankGenerator,
        rank_layout._native.CoreRankGenerator,
        rank_layout._native.Mesh,
        rank_layout._native.torchtitan_mesh,
        rank_layout._native.megatron_config,
        rank_layout._native.place,
    ):
        # Sorted: a native class's attribute order differs between
        # processes, and parallel test workers must collect the same tests.
        members = sorted(vars(owner).items()) if isinstance(owner, type) else []
        for name, obj in [("", owner), *members]:
            doc = getattr(obj, "__doc__", None)
            qual = f"{owner.__name__}.{name}".rstrip(".")
            if doc and ">>>" in doc and qual not in seen:
                tests.append(parser.get_doctest(doc, dict(globs), qual, None, 0))
    return tests


@pytest.mark.parametrize("test", docstring_tests(), ids=lambda t: t.name)
def test_docstring_examples(test: doctest.DocTest) -> None:
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.failures == 0, f"{test.name}: see the output above"


def test_every_method_has_a_docstring_with_an_example() -> None:
    owners = [Layout, rank_layout._native.Layout, rank_layout.LayoutError, rank_layout, rank_layout.megatron]
    owners += [rank_layout._native.RankGenerator, rank_layout._native.CoreRankGenerator]
    owners += [rank_layout._native.megatron_config]
    for owner in owners:
        assert ">>>" in (owner.__doc__ or ""), owner
    skip = {"is_embedding_rank", "is_position_embedding_rank", "rank_offset", "encoder_world_size",
            "shape", "encoder_sizes"}
    for name, obj in vars(rank_layout._native.Layout).items():
        if name.startswith("_"):
            continue
        doc = obj.__doc__ or ""
        assert doc.strip(), name
        if name not in skip:
            assert ">>>" in doc, name


def test_readme_examples() -> None:
    """The ``>>>`` examples of python/README.md."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if ">>>" in b]
    assert blocks
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for i, block in enumerate(blocks):
        runner.run(doctest.DocTestParser().get_doctest(block, dict(vars(rank_layout)), f"README[{i}]", None, 0))
    assert runner.failures == 0, "see the output above"
