"""Layout.from_megatron_args: Megatron-LM's argument names, from an argparse
namespace or a dict."""

from __future__ import annotations

import argparse

import pytest

from rank_layout import Layout, LayoutError, megatron_config


def megatron_parser() -> argparse.ArgumentParser:
    """The parallelism flags of Megatron-LM's arguments.py (defaults as there)."""
    p = argparse.ArgumentParser()
    p.add_argument("--tensor-model-parallel-size", type=int, default=1)
    p.add_argument("--pipeline-model-parallel-size", type=int, default=1)
    p.add_argument("--context-parallel-size", type=int, default=1)
    p.add_argument("--hierarchical-context-parallel-sizes", type=int, nargs="+", default=None)
    p.add_argument("--expert-model-parallel-size", type=int, default=1)
    p.add_argument("--expert-tensor-parallel-size", type=int, default=None)
    p.add_argument("--encoder-tensor-model-parallel-size", type=int, default=0)
    p.add_argument("--encoder-pipeline-model-parallel-size", type=int, default=0)
    p.add_argument("--num-distributed-optimizer-instances", type=int, default=1)
    p.add_argument("--use-tp-pp-dp-mapping", action="store_true")
    p.add_argument("--world-size", type=int, default=None)  # Megatron-LM sets it from WORLD_SIZE
    return p


def parse(*flags: str) -> argparse.Namespace:
    return megatron_parser().parse_args(list(flags))


def test_from_argparse_namespace() -> None:
    args = parse("--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
                 "--context-parallel-size", "2", "--world-size", "32")
    layout = Layout.from_megatron_args(args)
    assert layout.shape == "folded"
    assert layout.sizes == {"tp": 2, "cp": 2, "ep": 1, "dp": 4, "pp": 2, "etp": 2, "edp": 8, "gtp_remat": 1,
                            "egtp_remat": 1}
    assert layout.config["order"] == "tp-cp-ep-dp-pp"
    # The attention groups are the same as the nested layout's.
    nested = Layout(tp=2, cp=2, pp=2, world_size=32)
    for kind in ("tp", "cp", "dp", "pp", "dp-cp", "tp-pp", "embd", "pos-embd"):
        assert layout.groups(kind) == nested.groups(kind)


def test_moe_folding_with_experts() -> None:
    args = parse("--tensor-model-parallel-size", "2", "--expert-model-parallel-size", "4",
                 "--expert-tensor-parallel-size", "1", "--pipeline-model-parallel-size", "2",
                 "--context-parallel-size", "2", "--world-size", "16")
    layout = Layout.from_megatron_args(args)
    vector = Layout(tp=2, cp=2, dp=2, pp=2, ep=4, etp=1, expert_layout="folded")
    assert layout == vector
    assert layout.groups("etp-ep") == vector.groups("etp-ep")


def test_from_dict_and_other_objects() -> None:
    d = {"tensor_model_parallel_size": 8, "pipeline_model_parallel_size": 4, "world_size": 64}
    layout = Layout.from_megatron_args(d)
    assert layout.sizes["dp"] == 2 and layout.world_size == 64
    assert Layout.from_megatron_args(argparse.Namespace(**d)) == layout
    # data_parallel_size is read when there is no world size.
    assert Layout.from_megatron_args({"tensor_model_parallel_size": 2, "data_parallel_size": 4}).world_size == 8
    assert Layout.from_megatron_args({}) == Layout(expert_layout="folded")


def test_overrides_mapping_and_order() -> None:
    args = parse("--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
                 "--use-tp-pp-dp-mapping", "--world-size", "8")
    layout = Layout.from_megatron_args(args)
    assert layout.config["order"] == "tp-cp-ep-pp-dp"
    assert layout.groups("pp") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    # Megatron-LM 2024 (nested experts) spelled this order tp-pp-dp.
    nested = Layout.from_megatron_args(args, expert_layout="nested", order="tp-pp-dp", rank_offset=8)
    assert nested.shape == "nested" and nested.rank_offset == 8
    assert nested.groups("pp") == [[r + 8 for r in g] for g in layout.groups("pp")]


def test_encoder_and_families() -> None:
    args = parse("--tensor-model-parallel-size", "4", "--context-parallel-size", "2",
                 "--encoder-pipeline-model-parallel-size", "1", "--encoder-tensor-model-parallel-size", "2")
    layout = Layout.from_megatron_args(args)
    assert layout == Layout(tp=4, cp=2, encoder_tp=2, encoder_pp=1)
    # encoder_tp 0 means tp, as in Megatron-LM.
    zero = Layout.from_megatron_args(parse("--tensor-model-parallel-size", "2",
                                           "--encoder-pipeline-model-parallel-size", "1"))
    assert zero.encoder_sizes["tp"] == 2
    fam = Layout.from_megatron_args(parse("--context-parallel-size", "4", "--hierarchical-context-parallel-sizes",
                                          "2", "2", "--num-distributed-optimizer-instances", "2",
                                          "--world-size", "16"))
    assert "hcp-1" in fam.kinds and "dist-opt-instance" in fam.kinds
    assert megatron_config({"num_distributed_optimizer_instances": 1}) == {}


def test_errors_are_layout_errors() -> None:
    with pytest.raises(LayoutError, match=r"world_size \(10\) is not divisible by tp\*cp\*pp = 4"):
        Layout.from_megatron_args({"tensor_model_parallel_size": 4, "world_size": 10})
    with pytest.raises(LayoutError, match="tensor_model_parallel_size must be an int, got float 2.0"):
        Layout.from_megatron_args({"tensor_model_parallel_size": 2.0})
    with pytest.raises(LayoutError, match="unknown key"):
        Layout.from_megatron_args({}, tensor_model_parallel_size=2)


@pytest.mark.parametrize("args", [42, 4.2, None, True, b"--tensor-model-parallel-size 2", object()])
def test_an_argument_of_no_known_form_is_a_type_error(args) -> None:
    """from_megatron_args(42) was Layout(dp=1, world_size=1): an object
    with none of the arguments read as all defaults."""
    with pytest.raises(TypeError) as e:
        Layout.from_megatron_args(args)
    assert type(args).__name__ in str(e.value)
    assert "argparse.Namespace" in str(e.value)
    with pytest.raises(TypeError):
        megatron_config(args)


def test_a_command_line_or_its_words() -> None:
    """A pasted command line (str), as the command line's --megatron-args,
    or its words (a list of str, sys.argv), as Megatron-LM parses them."""
    line = "torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --lr 3e-4 --pipeline-model-parallel-size=2 --world-size 16"
    want = Layout.from_megatron_args({"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2,
                                      "world_size": 16})
    assert Layout.from_megatron_args(line) == want
    assert Layout.from_megatron_args(line.split()) == want
    assert Layout.from_megatron_args(tuple(line.split())) == want
    # Words are not split again: a word with a space or a quote stays one.
    assert Layout.from_megatron_args(["--data-path", "a b'c", "--tensor-model-parallel-size", "4"]).sizes["tp"] == 4
    with pytest.raises(TypeError, match="int"):
        Layout.from_megatron_args(["--tensor-model-parallel-size", 2])
    with pytest.raises(LayoutError, match="--tensor-model-parallel-size"):
        Layout.from_megatron_args("--tensor-model-parallel-size $TP")
    # Objects with attributes are still read, an empty namespace as defaults.
    import types

    assert Layout.from_megatron_args(types.SimpleNamespace(tensor_model_parallel_size=2)).sizes["tp"] == 2
    assert Layout.from_megatron_args(argparse.Namespace()) == Layout()


def test_rank_generator_against_megatron_4ff9e66() -> None:
    """rank_layout.megatron.RankGenerator against the lists Megatron-LM
    4ff9e66's own RankGenerator returned (tests/data/megatron), keywords and
    positional arguments alike."""
    import json

    from conftest import REPO
    from rank_layout.megatron import RankGenerator

    data = json.loads((REPO / "tests/data/megatron/rank_generator_4ff9e66.json").read_text())
    compared = 0
    for case in data["cases"][:60]:
        args = case["args"]
        g = RankGenerator(**args)
        divides = args["dp"] % args["ep"] == 0
        for key, want in case["ranks"].items():
            token, independent = key.split("|")
            if independent == "true" and not divides:
                with pytest.raises(LayoutError):
                    g.get_ranks(token, independent_ep=True)
                continue
            assert g.get_ranks(token, independent_ep=independent == "true") == want, (args, key)
            compared += 1
        for key in case.get("token_errors", {}):
            token, independent = key.split("|")
            with pytest.raises(LayoutError):
                g.get_ranks(token, independent == "true")
    assert compared > 1000
    with pytest.raises(LayoutError, match="cp has size 3 but is missing"):
        RankGenerator(1, 2, 6, 3, 3, "tp-dp-ep-pp", 8)


def test_megatron_table_is_the_crates() -> None:
    from rank_layout import MEGATRON_ARGS, megatron_config

    assert MEGATRON_ARGS["tensor_model_parallel_size"] == "tp"
    assert MEGATRON_ARGS["use_tp_pp_dp_mapping"] == "order"
    assert megatron_config({"use_tp_pp_dp_mapping": True, "encoder_pipeline_model_parallel_size": 1,
                            "encoder_tensor_model_parallel_size": 0, "tensor_model_parallel_size": 4}) == {
        "tp": 4, "order": "tp-cp-ep-pp-dp", "encoder_pp": 1}
    with pytest.raises(LayoutError, match="tensor_model_parallel_size = -1 is not an integer from 1"):
        megatron_config({"tensor_model_parallel_size": -1})


def test_one_megatron_args() -> None:
    """One MEGATRON_ARGS, the package's dict; the native rows it is read
    from are MEGATRON_TABLE."""
    import rank_layout.megatron
    from rank_layout import MEGATRON_ARGS, MEGATRON_REFUSED, _native

    assert not hasattr(_native, "MEGATRON_ARGS")
    assert rank_layout.megatron.MEGATRON_ARGS is MEGATRON_ARGS
    rows = _native.MEGATRON_TABLE
    assert all(isinstance(r, tuple) and len(r) == 6 for r in rows)
    modelled = {name: key for name, _, key, _, handling, source in rows if handling == "modelled" and source != "torchrun"}
    assert MEGATRON_ARGS == modelled
    assert set(MEGATRON_REFUSED) == {name for name, *_, handling, _ in rows if handling == "refused"}


def test_weight_shards() -> None:
    from rank_layout import MEGATRON_ARGS

    assert MEGATRON_ARGS["tensor_parallel_num_weight_shards"] == "gtp_remat"
    assert MEGATRON_ARGS["expert_tensor_parallel_num_weight_shards"] == "expert_gtp_remat"
    assert "nproc_per_node" not in MEGATRON_ARGS
    # Megatron-LM's get_args() after validation: S = tp * gtp_remat.
    args = argparse.Namespace(tensor_model_parallel_size=2, tensor_parallel_num_weight_shards=8,
                              expert_tensor_parallel_size=1,
                              expert_tensor_parallel_num_weight_shards=2, world_size=32)
    assert megatron_config(args) == {"tp": 2, "etp": 1, "world_size": 32, "gtp_remat": 4,
                                     "expert_gtp_remat": 2}
    # S = tp: no axis; None: not given.
    assert megatron_config({"tensor_model_parallel_size": 4,
                            "tensor_parallel_num_weight_shards": 4}) == {"tp": 4}
    assert megatron_config({"tensor_parallel_num_weight_shards": None}) == {}
    with pytest.raises(LayoutError, match=r"tensor_parallel_num_weight_shards \(6\) must be "
                                          r"divisible by tensor_model_parallel_size \(4\)"):
        megatron_config({"tensor_model_parallel_size": 4, "tensor_parallel_num_weight_shards": 6})
    with pytest.raises(LayoutError, match=r"expert_tensor_parallel_num_weight_shards \(2\) must be "
                                          r">= expert_tensor_parallel_size \(4\)"):
        megatron_config({"expert_tensor_parallel_size": 4,
                         "expert_tensor_parallel_num_weight_shards": 2})


@pytest.mark.skipif("gtp_remat" not in __import__("rank_layout").CONFIG_KEYS,
                    reason="Layout takes no gtp_remat key in this build")
def test_weight_shards_make_the_layout() -> None:
    layout = Layout.from_megatron_args({"tensor_model_parallel_size": 2,
                                        "tensor_parallel_num_weight_shards": 4, "world_size": 16})
    assert layout.config["gtp_remat"] == 2
    assert layout.sizes["dp"] == 4


def test_refused_arguments_raise_naming_them() -> None:
    from rank_layout import MEGATRON_REFUSED

    assert "hybrid_context_parallel" in MEGATRON_REFUSED
    assert "rl_inference_tensor_model_parallel_size" in MEGATRON_REFUSED
    base = {"tensor_model_parallel_size": 2, "world_size": 8}
    with pytest.raises(LayoutError, match="--hybrid-context-parallel changes Megatron-LM's process groups"):
        Layout.from_megatron_args({**base, "hybrid_context_parallel": True})
    with pytest.raises(LayoutError, match="--rl-inference-tensor-model-parallel-size"):
        megatron_config(argparse.Namespace(**base, rl_inference_tensor_model_parallel_size=4))
    with pytest.raises(LayoutError, match="--inference-shards"):
        megatron_config({**base, "inference_shards": "tp=2+tp=1,dp=2"})
    # A get_args() namespace holds them all, off: None and False are not given.
    args = argparse.Namespace(**base, hybrid_context_parallel=False,
                              rl_inference_tensor_model_parallel_size=None, inference_shards=None,
                              use_sharp=True, virtual_pipeline_model_parallel_size=2)
    assert Layout.from_megatron_args(args).sizes["dp"] == 4
