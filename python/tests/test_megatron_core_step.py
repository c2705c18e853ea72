"""A training step of Megatron-Core modules on the groups of
rank_layout.torch.megatron.initialize_model_parallel: tp=2, pp=1, dp=2 on 4
gloo processes, the same losses as on Megatron-Core's own groups.

Megatron-Core's GPTModel cannot run on a CPU (torch 2.15, megatron-core
0.16.1, no Transformer Engine): ``tensor_parallel.model_parallel_cuda_manual_seed``
calls ``torch.cuda.get_rng_state()``, and the local attention
(``DotProductAttention.forward``) takes its score buffer from
``parallel_state.get_global_memory_buffer().get_tensor(...)``, which
allocates on ``torch.cuda.current_device()``: both raise "RuntimeError: Found
no NVIDIA driver on your system". test_gpt_model_needs_cuda shows it.
(``gather_from_tensor_model_parallel_region`` allocates on CUDA too: the
logits are gathered with torch's all-gather on Megatron's group.) The
step is therefore the largest part of a GPT that does run on a CPU: the
vocab-parallel embedding, the GPT layer spec's MLP, a column-parallel output
layer and vocab-parallel cross-entropy (all-reduces on the tensor-parallel
group), logits gathered over it (an all-gather), gradients averaged over the
data-parallel group."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
import torch

import megatron_core_worker as mcw

parallel_state = mcw.require_megatron()


def test_tiny_model_step_same_loss_4_processes(tmp_path: Path) -> None:
    args = dict(tensor_model_parallel_size=2, pipeline_model_parallel_size=1)
    results = mcw.spawn(4, [("step", "step", {"args": args})], tmp_path, deadline_s=300)
    losses = {tuple(r["results"]["step"]["megatron-core"]) for r in results}
    ours = {tuple(r["results"]["step"]["rank-layout"]) for r in results}
    assert len(losses) == 1, losses  # every rank reports the same (dp-averaged) losses
    assert ours == losses, (ours, losses)
    (first, second, gathered), = losses
    assert second < first  # the step learned something
    assert gathered == pytest.approx(first, rel=1e-5)  # parallel and gathered cross-entropy agree
    print("losses (step 1, step 2, from the gathered logits):", losses)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: GPTModel may run")
def test_gpt_model_needs_cuda(tmp_path: Path) -> None:
    """Why the step above is not a GPTModel: the two CUDA calls, each an
    error on a machine without a GPU."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rdzv'}", rank=0, world_size=1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from megatron.core import tensor_parallel
            from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
            from megatron.core.models.gpt.gpt_model import GPTModel
            from megatron.core.transformer.transformer_config import TransformerConfig

            from rank_layout.torch import megatron as rl_megatron

            rl_megatron.initialize_model_parallel()
            with pytest.raises(RuntimeError, match="NVIDIA driver"):
                tensor_parallel.model_parallel_cuda_manual_seed(123)
            config = TransformerConfig(num_layers=1, hidden_size=16, num_attention_heads=4,
                                       use_cpu_initialization=True, attention_dropout=0.0, hidden_dropout=0.0)
            model = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=64,
                             max_sequence_length=8)
            tokens = torch.randint(0, 64, (2, 8))
            mask = torch.ones(2, 1, 8, 8, dtype=torch.bool).tril().logical_not()
            with pytest.raises(RuntimeError, match="NVIDIA driver") as e:
                model(tokens, torch.arange(8).expand(2, 8), mask, labels=tokens)
            assert any(f.name == "get_tensor" for f in e.traceback), e.traceback
    finally:
        mcw.reset(parallel_state)
        dist.destroy_process_group()
