"""rank_layout.megatron.audit against what Megatron-LM built: the joined
pipelines 4ff9e66 and 5a3b6bcf1f created for 210 encoder + decoder layouts
(tests/data/megatron/encoder_joins.json, their output), classified here
from each boundary rank's coordinates, independently of the audit."""

import json
from pathlib import Path

import pytest

from rank_layout import Layout, LayoutError
from rank_layout.megatron import audit

REPO = Path(__file__).resolve().parents[2]
DATA = json.loads((REPO / "tests/data/megatron/encoder_joins.json").read_text())
COMMITS = {"4ff9e66": "2024", "5a3b6bcf1f": "2025"}


def layout_of(config):
    """The layout of a case, folded experts first, else nested (2024's)."""
    keys = {k: v for k, v in config.items() if k in ("tp", "encoder_tp", "encoder_pp", "pp", "cp", "dp", "order")}
    keys["encoder_tp"] = keys["encoder_tp"] or keys["tp"]  # 0: Megatron-LM's default, tp
    last = None
    for extra in ({}, {"expert_layout": "nested"}):
        try:
            return Layout(**keys, **extra)
        except LayoutError as e:
            last = e
    raise last


def classify(layout, pipelines, encoder_pp):
    """(mixing, other tp pairing) of Megatron-LM's joined pipelines."""
    joined = [g for g in layout.groups("pp")]
    mixing = other = 0
    for p in pipelines:
        enc, dec = layout.rank(p[encoder_pp - 1]), layout.rank(p[encoder_pp])
        e, d = enc["coord"], dec["coord"]
        if (e["cp"], e["dp"]) != (d["cp"], d["dp"]):
            mixing += 1
        elif not any(p[encoder_pp] in g and p[encoder_pp - 1] in g for g in joined):
            other += 1
    return mixing, other


@pytest.mark.parametrize("commit", sorted(COMMITS))
def test_audit_counts_equal_a_classification_of_megatrons_groups(commit):
    compared = refused = 0
    for case in DATA["cases"]:
        built = case.get(commit)
        if built is not None and "error" in built:
            built = None  # Megatron-LM refused this layout
        try:
            layout = layout_of(case["config"])
            result = audit(layout, COMMITS[commit])
        except LayoutError:
            assert not built, case["config"]
            refused += 1
            continue
        assert built, case["config"]
        pipelines = built["pp"]
        encoder_pp = case["config"]["encoder_pp"]
        mixing, other = classify(layout, pipelines, encoder_pp)
        assert (result["pipelines"], result["mixing"], result["other_tp_pairing"]) == (
            len(pipelines),
            mixing,
            other,
        ), case["config"]
        assert result["megatron"].startswith(commit)
        for ex in result["examples"]:
            assert ex["megatron"] in pipelines
        compared += 1
    print(f"{commit}: {compared} compared, {refused} refused by both")
    assert compared >= 100, (compared, refused)


def test_audit_of_the_worked_example_and_its_errors():
    # docs/semantics.md 3.3: 2024 joined encoder rank 2 (cp slice 1) to
    # decoder rank 6 (cp slice 0); rank-layout joins rank 1.
    a = audit(Layout(tp=4, cp=2, encoder_tp=2), "2024")
    first = a["examples"][0]
    assert (first["class"], first["megatron"], first["rank_layout"]) == ("mixing", [2, 6], [1, 6])
    assert (first["encoder"]["cp"], first["decoder"]["cp"]) == (1, 0)
    with pytest.raises(LayoutError, match="no encoder"):
        audit(Layout(tp=4), "2024")
    with pytest.raises(LayoutError, match="2023"):
        audit(Layout(tp=4, encoder_tp=2), "2023")
