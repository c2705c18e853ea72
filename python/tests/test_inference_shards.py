"""rank_layout.InferenceShards (Megatron-Core 0.19's ``--inference-shards``)
in Python: the crate's answers as Python values, its refusals as
LayoutError naming the shard, the Megatron-LM arguments that give the
shards, and the docstring examples. The groups against megatron-core 0.19.2
itself: test_inference_shards_megatron_core.py."""

from __future__ import annotations

import argparse
import doctest
import re

import pytest

import rank_layout
from rank_layout import InferenceShard, InferenceShards, Layout, LayoutError, Split, megatron_config

KINDS = ["tp", "cp", "pp", "dp", "tp-pp", "tp-cp", "dp-cp", "tp-dp-cp",
         "ep", "etp", "edp", "etp-ep", "etp-ep-pp", "embd", "pos-embd"]


def test_shards_are_layouts_at_their_offsets() -> None:
    shards = InferenceShards("tp=2,pp=2,role=prefill + tp=2,dp=2,ep=4,expt_tp=1,role=decode", 8)
    assert len(shards) == 2 and shards.world_size == 8 and not shards.use_tp_pp_dp_mapping
    assert shards.kinds == KINDS
    prefill, decode = shards.shards
    assert isinstance(prefill, InferenceShard) and isinstance(prefill.layout, Layout)
    assert (prefill.index, prefill.role, prefill.rank_offset, prefill.world_size) == (0, "prefill", 0, 4)
    assert (decode.tp, decode.pp, decode.ep, decode.expt_tp, decode.dp) == (2, 1, 4, 1, 2)
    # The decode shard's layout: ranks 4..7, folded experts etp 1, ep 4.
    assert decode.layout.groups("ep") == [[4, 5, 6, 7]]
    assert decode.layout.groups("tp") == [[4, 5], [6, 7]]
    assert prefill.layout.groups("embd") == [[0, 2], [1, 3]]
    assert shards.spec == "tp=2,pp=2,ep=1,dp=1,expt_tp=2,role=prefill+tp=2,pp=1,ep=4,dp=2,expt_tp=1,role=decode"
    assert InferenceShards(shards.spec).spec == shards.spec
    assert repr(shards).startswith("InferenceShards(\"tp=2,pp=2,")


def test_splits_number_every_shard_s_groups() -> None:
    """A rank's split in a kind names its group among every shard's
    groups of the kind, shard after shard, at its key."""
    shards = InferenceShards("tp=2,pp=2;dp=3;tp=2,ep=2,expt_tp=1", use_tp_pp_dp_mapping=True)
    for kind in shards.kinds:
        listed = [g for s in shards.shards for g in s.layout.groups(kind)]
        for rank in range(shards.world_size):
            split = shards.split(rank, kind)
            holding = [Split(c, g.index(rank)) for c, g in enumerate(listed) if rank in g]
            assert ([split] if split is not None else []) == holding, (kind, rank)
            assert dict(shards.splits(rank))[kind] == split
    assert shards.role_of(4) is None and shards.shard_of(4).index == 1


def test_refusals_name_the_shard() -> None:
    cases = {
        ("tp=2;dp", None): "inference shard 1: entry \"dp\" is not key=value",
        ("tp=2,foo=1", None): "inference shard 0: unknown key \"foo\"",
        ("tp=1,role=both", None): "inference shard 0: unknown role \"both\"",
        ("tp=x", None): "inference shard 0: tp = \"x\" is not an integer",
        ("tp=1;dp=0", None): "inference shard 1: dp = 0 is not a size from 1 to 4294967295",
        ("tp=1,cp=2", None): "inference shard 0: cp = 2, but inference shards have no context parallelism",
        ("tp=2,ep=4", None): "inference shard 0: expt_tp*ep*pp = 2*4*1 does not divide its tp*pp*dp = 2 ranks",
        ("tp=2+tp=1,dp=2", 5): "the inference shards hold 2 + 2 = 4 ranks, but the world has 5",
        (" ; ", None): "--inference-shards names no shard",
    }
    for (spec, world), message in cases.items():
        with pytest.raises(LayoutError, match="^" + re.escape(message)):
            InferenceShards(spec, world)
    with pytest.raises(LayoutError, match="inference shard 0: with --use-tp-pp-dp-mapping"):
        InferenceShards("tp=2,pp=2,dp=2,ep=2", use_tp_pp_dp_mapping=True)
    assert InferenceShards("tp=2,pp=2,dp=2,ep=2").world_size == 8  # the default mapping shares the pipelines
    with pytest.raises(LayoutError, match="spec must be a str"):
        InferenceShards(42)  # type: ignore[arg-type]
    shards = InferenceShards("tp=2")
    with pytest.raises(LayoutError, match="rank 2 is outside"):
        shards.shard_of(2)
    with pytest.raises(LayoutError, match="rank -1"):
        shards.split(-1, "tp")
    with pytest.raises(LayoutError, match="kind tp-dp is not part of"):
        shards.split(0, "tp-dp")


def test_megatron_arguments_give_the_shards() -> None:
    base = {"tensor_model_parallel_size": 2, "world_size": 6, "inference_shards": "tp=2,pp=2+tp=2"}
    for args in (base, argparse.Namespace(**base),
                 "serve.py --tensor-model-parallel-size 2 --world-size 6 --inference-shards 'tp=2,pp=2+tp=2'"):
        shards = InferenceShards.from_megatron_args(args)
        assert shards is not None and [s.world_size for s in shards.shards] == [4, 2]
    mapped = InferenceShards.from_megatron_args({**base, "use_tp_pp_dp_mapping": True})
    assert mapped is not None and mapped.use_tp_pp_dp_mapping
    assert InferenceShards.from_megatron_args({"tensor_model_parallel_size": 2}) is None
    assert InferenceShards.from_megatron_args({**base, "inference_shards": None}) is None
    with pytest.raises(LayoutError, match="the inference shards hold 4 \\+ 2 = 6 ranks, but the world has 8"):
        InferenceShards.from_megatron_args({**base, "world_size": 8})
    # One configuration of them is an error that says where the shards are.
    with pytest.raises(LayoutError, match="^--inference-shards partitions the world .*InferenceShards.from_megatron_args"):
        megatron_config(base)
    assert rank_layout.MEGATRON_ARGS.get("inference_shards") is None
    assert "inference_shards" not in rank_layout.MEGATRON_REFUSED


@pytest.mark.parametrize("owner", [rank_layout._native.InferenceShards, rank_layout._native.InferenceShard])
def test_docstring_examples(owner: type) -> None:
    parser = doctest.DocTestParser()
    examples = 0
    for name, obj in [("", owner), *vars(owner).items()]:
        doc = getattr(obj, "__doc__", None)
        if doc and ">>>" in doc:
            test = parser.get_doctest(doc, dict(vars(rank_layout)), f"{owner.__name__}.{name}", None, 0)
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
            runner.run(test)
            assert runner.failures == 0, f"{test.name}: see the output above"
            examples += 1
    assert examples >= 1
