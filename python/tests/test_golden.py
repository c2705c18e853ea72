"""The golden layouts of tests/golden.rs (Megatron-LM's docstrings and
tests, the semantics' worked examples, the issues' examples), through Python."""

from __future__ import annotations

from rank_layout import Layout


def test_megatron_docstring_tp2_dp3_pp4() -> None:
    layout = Layout(tp=2, dp=3, pp=4, order="tp-dp-pp")
    assert layout.groups("dp") == [
        [0, 2, 4], [1, 3, 5], [6, 8, 10], [7, 9, 11],
        [12, 14, 16], [13, 15, 17], [18, 20, 22], [19, 21, 23],
    ]
    assert layout.groups_array("dp").tolist() == layout.groups("dp")


def test_megatron_docstring_16_ranks_tp2_pp4() -> None:
    layout = Layout(tp=2, pp=4, world_size=16, order="tp-dp-pp")
    assert layout.groups("tp") == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11], [12, 13], [14, 15]]
    assert layout.groups("pp") == [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]]
    assert layout.groups("dp") == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11], [12, 14], [13, 15]]
    assert layout.split(13, "pp") == (1, 3)
    assert layout.pipeline_next(8) == [12]


def test_megatron_context_parallel_8_gpus() -> None:
    layout = Layout(tp=4, cp=2, world_size=8)
    assert layout.groups("cp") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert layout.groups("tp") == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_spec_encdec_seed_case() -> None:
    layout = Layout(tp=4, cp=2, encoder_tp=2, encoder_pp=1, world_size=12)
    assert layout.groups("pp") == [[0, 4], [0, 5], [1, 6], [1, 7], [2, 8], [2, 9], [3, 10], [3, 11]]
    assert layout.groups_array("pp").tolist() == layout.groups("pp")


def test_spec_megatron_encdec_expectation() -> None:
    base = dict(tp=2, dp=2, encoder_tp=1, encoder_pp=1, order="tp-dp-pp")
    layout = Layout(**base)
    assert layout.world_size == 6
    assert layout.groups("tp") == [[0], [1], [2, 3], [4, 5]]
    assert layout.groups("dp") == [[0, 1], [2, 4], [3, 5]]
    assert layout.groups("pp") == [[0, 2], [0, 3], [1, 4], [1, 5]]
    layout = Layout(**{**base, "tp": 5, "dp": 1, "encoder_tp": 3})
    assert layout.groups("pp") == [[0, 3], [0, 4], [1, 5], [1, 6], [2, 7]]


def test_issue_hierarchical_cp_examples() -> None:
    layout = Layout(tp=2, cp=4, expert_layout="folded", hierarchical_cp=[2, 2])
    assert layout.groups("cp") == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert layout.groups("hcp-0") == [[0, 2], [4, 6], [1, 3], [5, 7]]
    assert layout.groups("hcp-1") == [[0, 4], [2, 6], [1, 5], [3, 7]]
    layout = Layout(cp=16, hierarchical_cp=[2, 2, 4])
    assert layout.groups("hcp-0")[:2] == [[0, 1], [2, 3]]
    assert layout.groups("hcp-1")[:3] == [[0, 2], [1, 3], [4, 6]]
    assert layout.groups("hcp-2")[:2] == [[0, 4, 8, 12], [1, 5, 9, 13]]


def test_issue_dist_opt_example() -> None:
    layout = Layout(cp=2, dp=4, ep=2, etp=1, expert_layout="folded", dist_opt_instances=2)
    assert layout.groups("dp-cp-intra") == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert layout.groups("edp-intra") == [[0, 2], [4, 6], [1, 3], [5, 7]]
    assert layout.groups("dp-cp-inter") == [[0, 4], [2, 6], [1, 5], [3, 7]]
    assert layout.groups("dist-opt-instance") == [[0, 1, 2, 3], [4, 5, 6, 7]]
    for kind in ("dp-cp-intra", "edp-intra", "dp-cp-inter", "dist-opt-instance"):
        assert layout.groups_array(kind).tolist() == layout.groups(kind)
