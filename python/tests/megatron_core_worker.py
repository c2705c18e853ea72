"""Shared by the tests against the real megatron-core: whether it may be
missing, the getters of its parallel_state (listed from the module), what
they answer, and the body of each spawned process of the gloo tests."""

from __future__ import annotations

import functools
import inspect
import itertools
import json
import os
import re
import traceback
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

import pytest

import worlds

#: The releases the drop-in fills; CI runs these tests under each, in its
#: own environment, and names the one it installed in
#: RANK_LAYOUT_MEGATRON_CORE (then any other fails the tests).
SUPPORTED = ("0.16.1", "0.19.2")
EXPECTED = os.environ.get("RANK_LAYOUT_MEGATRON_CORE")
TIMEOUT = timedelta(seconds=90)

# parallel_state functions whose names look like getters but that are not
# called, and why. Everything else named get_*, is_*, has_* or
# model_parallel_is_initialized is called, with every combination of its
# flags; a getter with a required argument not listed here fails the tests.
NOT_CALLED = {
    "get_nccl_options": "a helper turning a communicator configuration into NCCL options "
    "(required arguments pg_name, nccl_comm_cfgs); it reads no state",
}
# Getters ParallelState does not offer, and why.
NOT_ON_PARALLEL_STATE = {
    "get_global_memory_buffer": "a memory buffer, not a group (installed into parallel_state as Megatron-Core does)",
    "get_global_symmetric_memory_buffer": "a memory buffer, not a group (not made by initialize_model_parallel)",
    "get_nccl_options": NOT_CALLED["get_nccl_options"],
}


def require_megatron() -> Any:
    """megatron.core.parallel_state; without it the test module fails in CI
    (CI=true) and is skipped, with the reason, elsewhere."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import megatron.core
            from megatron.core import parallel_state
    except ImportError as e:
        wanted = EXPECTED or " or ".join(SUPPORTED)
        reason = f"megatron-core {wanted} is not installed ({e}); pip install megatron-core=={EXPECTED or SUPPORTED[-1]} einops"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI needs it: {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)
    version = megatron.core.__version__
    if version not in SUPPORTED or (EXPECTED is not None and version != EXPECTED):
        message = f"these tests follow megatron-core {EXPECTED or ' or '.join(SUPPORTED)}, not {version}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message, allow_module_level=True)
    return parallel_state


def version() -> str:
    """The installed megatron-core's version."""
    import megatron.core

    return megatron.core.__version__


def getter_names(module: Any) -> list[str]:
    """The getters of ``module``: its own functions named get_*, is_*,
    has_*, and model_parallel_is_initialized."""
    names = []
    for name, f in sorted(vars(module).items()):
        if not inspect.isfunction(f) or f.__module__ != module.__name__:
            continue
        if re.match(r"(get|is|has)_", name) or name == "model_parallel_is_initialized":
            names.append(name)
    return names


def _variants(param: inspect.Parameter) -> list[Any]:
    if param.default is inspect.Parameter.empty:
        raise AssertionError(f"required argument {param.name}")
    if isinstance(param.default, bool):
        return [False, True]
    if param.name == "vp_stage":
        return [None, 0, 1]
    if param.name == "group_size":
        return [None, 1, 2, 4, 8, 16]
    return [param.default]


def getter_calls(module: Any) -> list[tuple[str, dict[str, Any]]]:
    """(name, keyword arguments) of every call made of the getters: every
    combination of each one's flags. A getter with a required argument that
    NOT_CALLED does not list fails here."""
    calls = []
    for name in getter_names(module):
        if name in NOT_CALLED:
            continue
        params = list(inspect.signature(getattr(module, name)).parameters.values())
        for combo in itertools.product(*(_variants(p) for p in params)):
            calls.append((name, {p.name: v for p, v in zip(params, combo)}))
    return calls


def normalize(value: Any) -> Any:
    """A comparable form: a process group as its ranks, this rank's place
    and size, and its backend."""
    import torch.distributed as dist

    if isinstance(value, dist.ProcessGroup):
        return ["group", dist.get_process_group_ranks(value), value.rank(), value.size(), str(dist.get_backend(value))]
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    if isinstance(value, dict):
        return [[k, normalize(v)] for k, v in sorted(value.items())]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return ["object", type(value).__name__]


def call(f: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return normalize(f(**kwargs))
        except Exception as e:  # noqa: BLE001 (an answer like any other)
            return ["raises", type(e).__name__, str(e)]


def answers(source: Any, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """What each call answers, by ``name(arguments)``."""
    return {f"{name}({json.dumps(kw, sort_keys=True)})": call(getattr(source, name), kw) for name, kw in calls}


def module_globals(module: Any) -> dict[str, Any]:
    """Every state global of parallel_state (``_UPPER_CASE``), normalized;
    ``_global_process_group_list`` as a set of distinct groups (rank-layout
    lists each process group once, and shares groups between families;
    Megatron-Core lists a group per family, and the gloo inter-instance group
    it makes and never uses, which on a gloo world is the same set)."""
    out = {}
    for name, value in sorted(vars(module).items()):
        if re.fullmatch(r"_[A-Z][A-Z0-9_]*", name):
            out[name] = normalize(value)
    groups = module._global_process_group_list
    out["_global_process_group_list"] = None if groups is None else sorted(
        {json.dumps(normalize(g)) for g in groups}
    )
    return out


def compare(theirs: dict[str, Any], ours: dict[str, Any], what: str) -> list[str]:
    """The differences, as messages."""
    diffs = []
    for key in sorted(set(theirs) | set(ours)):
        a, b = theirs.get(key, "<missing>"), ours.get(key, "<missing>")
        if a != b:
            diffs.append(f"{what}: {key}: megatron-core {a!r} != rank-layout {b!r}")
    return diffs


def reset(module: Any) -> None:
    """parallel_state as before any initialization."""
    from rank_layout.torch import megatron as rl_megatron

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rl_megatron.destroy_model_parallel()
    # Only the buffers this release has (0.19 has no symmetric one): a global
    # added here would differ from a fresh module's in the next comparison.
    for name in ("_GLOBAL_MEMORY_BUFFER", "_GLOBAL_SYMMETRIC_MEMORY_BUFFER"):
        if hasattr(module, name):
            setattr(module, name, None)


# -- processes ---------------------------------------------------------



def spawn(world: int, jobs: list, tmp_path: Path, deadline_s: float) -> list[dict[str, Any]]:
    """Runs :func:`run` in ``world`` processes on a gloo world over
    loopback (worlds.run_world). Each rank's results, by job name."""
    return worlds.run_world(run, world, jobs, tmp_path, deadline_s)


def run(rank: int, world: int, rdzv: str, out: str, jobs: list) -> None:
    """Joins the gloo world and runs each job (name, kind, parameters);
    writes what it saw to ``out``/rank.json."""
    result: dict[str, Any] = {"rank": rank, "results": {}, "error": None}
    try:
        import torch
        import torch.distributed as dist

        warnings.filterwarnings("ignore")
        torch.set_num_threads(1)
        worlds.init_gloo(rank, world, rdzv, TIMEOUT)
        for name, kind, params in jobs:
            result["results"][name] = JOBS[kind](rank, world, **params)
        # After all that, the world still works: a last all-reduce.
        t = torch.ones(1)
        dist.all_reduce(t)
        assert t.item() == world
        dist.destroy_process_group()
    except BaseException:
        result["error"] = traceback.format_exc()
        raise
    finally:
        Path(out, f"{rank}.json").write_text(json.dumps(result))



class CountNewGroups:
    """Counts torch.distributed.new_group calls (the process groups a rank
    creates or takes part in creating) while active."""

    def __enter__(self) -> "CountNewGroups":
        import torch.distributed as dist

        self.calls = 0
        self._dist, self._orig = dist, dist.new_group

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return self._orig(*args, **kwargs)

        dist.new_group = counted
        return self

    def __exit__(self, *exc: Any) -> None:
        self._dist.new_group = self._orig


def group_count() -> int:
    """torch's count of the groups this rank created (group names are
    salted with it, so it must stay equal on every rank)."""
    import torch.distributed as dist

    return dist.distributed_c10d._world.group_count


def all_reduce_each(groups: dict[str, Any]) -> int:
    """An all-reduce of the ranks on each group, in the families' order
    (the same on every rank, so no hang): the sum of the members."""
    import torch
    import torch.distributed as dist

    done = 0
    for label, pg in groups.items():
        if pg is None:
            continue
        t = torch.tensor([dist.get_rank()], dtype=torch.int64)
        dist.all_reduce(t, group=pg)
        assert t.item() == sum(dist.get_process_group_ranks(pg)), (label, t.item())
        done += 1
    return done


def job_options(rank: int, world: int) -> dict[str, Any]:
    """new_groups: shared groups, backend and pg_options by kind, the same
    calls on every rank."""
    import torch.distributed as dist

    import dist_worker
    from rank_layout import Layout, LayoutError
    from rank_layout.torch import new_groups

    layout = Layout(tp=2, pp=2, world_size=world)  # cp = 1, ep = 1
    before = group_count()
    with CountNewGroups() as count:
        shared = new_groups(layout, timeout=TIMEOUT)
    dist_worker.check(layout, shared, rank)
    assert shared["dp-cp"] is shared["dp"] and shared["tp-cp"] is shared["tp"]
    assert shared["tp-dp-cp"] is shared["tp-dp"] and shared["ep"] is shared["cp"]
    distinct = len({id(g) for g in shared.values() if g is not None} | {0})
    with CountNewGroups() as count_all:
        separate = new_groups(layout, timeout=TIMEOUT, share=False)
    dist_worker.check(layout, separate, rank)
    assert separate["dp-cp"] is not separate["dp"]
    # Gloo beside the default backend, and options by kind: a kind with
    # options of its own shares with no other (gloo ignores the options).
    opts = dist.ProcessGroupGloo._Options()
    mixed = new_groups(
        layout, ["dp", "dp-cp", "tp", "tp-cp"], backend={"dp": "gloo", "dp-cp": "gloo"},
        pg_options={"tp-cp": opts}, timeout=TIMEOUT,
    )
    assert mixed["dp"] is mixed["dp-cp"] and mixed["tp"] is not mixed["tp-cp"]
    assert all(str(dist.get_backend(g)) == "gloo" for g in mixed.values())
    all_reduce_each(mixed)
    everything_gloo = new_groups(layout, ["dp", "cp"], backend="gloo", method="global", timeout=TIMEOUT)
    all_reduce_each({k: v for k, v in everything_gloo.items()})
    for bad, message in (
        (lambda: new_groups(layout, ["dp"], backend={"tp": "gloo"}), "backend names kinds not built here: tp"),
        (lambda: new_groups(layout, ["dp"], pg_options={"pp": opts}), "pg_options names kinds not built here"),
    ):
        try:
            bad()
        except LayoutError as e:
            assert message in str(e), e
        else:
            raise AssertionError(message)
    counts = [None] * world
    dist.all_gather_object(counts, group_count())
    assert len(set(counts)) == 1, counts  # every rank made the same calls
    return {"calls_shared": count.calls, "calls_separate": count_all.calls, "distinct": distinct - 1,
            "kinds": len(layout.kinds), "made": group_count() - before}


def job_compare(rank: int, world: int, args: dict[str, Any]) -> dict[str, Any]:
    """Megatron-Core's initialize_model_parallel, then rank-layout's, on
    this world: every getter of parallel_state (every combination of its
    flags), every global, and ParallelState's getters answer alike; an
    all-reduce on each of rank-layout's groups; destroy_model_parallel
    after it."""
    from megatron.core import parallel_state as ps

    from rank_layout.torch import megatron as rl_megatron

    calls = getter_calls(ps)
    reset(ps)
    with CountNewGroups() as theirs_count:
        ps.initialize_model_parallel(**args)
    theirs = answers(ps, calls)
    their_globals = module_globals(ps)
    reset(ps)
    with CountNewGroups() as ours_count:
        state = rl_megatron.initialize_model_parallel(**args)
    ours = answers(ps, calls)
    our_globals = module_globals(ps)
    from_state = answers(state, [(n, kw) for n, kw in calls if n not in NOT_ON_PARALLEL_STATE])
    diffs = compare(theirs, ours, "getters") + compare(their_globals, our_globals, "globals")
    diffs += compare({k: theirs[k] for k in from_state}, from_state, "ParallelState")
    reduced = all_reduce_each(state.groups)
    # Megatron-Core's own destroy_model_parallel after rank-layout's.
    ps.destroy_model_parallel()
    assert not ps.model_parallel_is_initialized() and not ps.is_initialized()
    reset(ps)
    destroy_subgroups()
    return {
        "diffs": diffs,
        "calls": len(calls),
        "getters": sorted({n for n, _ in calls}),
        "new_group_calls": [theirs_count.calls, ours_count.calls],
        "groups": len({id(g) for g in state.groups.values() if g is not None}),
        "all_reduced": reduced,
        "inside": state.layout.rank_offset <= rank < state.layout.rank_offset + state.layout.world_size,
    }


def destroy_subgroups() -> None:
    """Destroys every process group but the default one: each gloo group
    keeps threads, and a 16-process world building Megatron-Core's hundred
    groups per layout, layout after layout, would otherwise run thousands
    of them. Every rank calls it at the same point (after a barrier)."""
    import torch.distributed as dist

    dist.barrier()
    default = dist.distributed_c10d._get_default_group()
    for pg in list(dist.distributed_c10d._world.pg_map):
        if pg is not default:
            dist.destroy_process_group(pg)


def job_bad(rank: int, world: int) -> dict[str, Any]:
    """Arguments the drop-in refuses: a LayoutError naming them on every
    rank, before any group is made (torch's group count unchanged)."""
    import torch.distributed as dist
    from megatron.core import parallel_state as ps

    from rank_layout import LayoutError
    from rank_layout.torch import megatron as rl_megatron

    reset(ps)
    cases = [
        (dict(use_sharp=True), "cannot honour use_sharp=True"),
        (dict(use_sharp=True, sharp_enabled_group="dp"), "use_sharp=True, sharp_enabled_group='dp'"),
        (dict(tensor_model_parallel_size=2 * world), f"world_size ({world}) is not divisible by {2 * world}"),
        (dict(tensor_model_parallel_size=3), f"world_size ({world}) is not divisible by 3"),
        (dict(expert_model_parallel_size=2 * world), "expert_tensor_model_pipeline_parallel size"),
        (dict(context_parallel_size=2, order="tp-pp-dp"), "cp has size 2 but is missing from order"),
        (dict(context_parallel_size=4, hierarchical_context_parallel_sizes=[2, 4]), "product must be"),
        (dict(virtual_pipeline_model_parallel_size=2), "greater than 1 with interleaved schedule"),
        (dict(num_distributed_optimizer_instances=3), "divisible by partial DistOpt shard factor"),
        (dict(pipeline_model_parallel_comm_backend="mpi"), "backend for PP communication"),
        (dict(pipeline_model_parallel_size=2, get_embedding_ranks=lambda p: [0]), "get_embedding_ranks("),
        (dict(tensor_model_parallel_size=0), "tensor_model_parallel_size must be a positive int"),
    ]
    if version() != "0.16.1":
        cases += [
            (dict(gtp_remat_size=2, num_distributed_optimizer_instances=2), "GTP_remat with num_distributed"),
            (dict(gtp_remat_size=3), f"world_size ({world}) is not divisible by 3"),
            (dict(expert_gtp_remat_size=2 * world), "expert_tensor_model_pipeline_parallel size"),
            (dict(rank_offset=world // 2), f"ranks {world // 2}..{world // 2 + world}"),
        ]
    refused = []
    for kwargs, message in cases:
        before = group_count()
        try:
            rl_megatron.initialize_model_parallel(**kwargs)
        except LayoutError as e:
            assert message in str(e), (kwargs, str(e))
            refused.append(str(e))
        else:
            raise AssertionError(f"no LayoutError for {kwargs}")
        assert group_count() == before, kwargs  # no group was made
        assert not ps.is_initialized()
    # Initialized already: refused, parallel_state untouched.
    rl_megatron.initialize_model_parallel(tensor_model_parallel_size=2)
    tp = ps.get_tensor_model_parallel_group()
    before = group_count()
    try:
        rl_megatron.initialize_model_parallel(tensor_model_parallel_size=2)
    except LayoutError as e:
        assert "already initialized" in str(e), e
    else:
        raise AssertionError("initialized twice")
    assert group_count() == before and ps.get_tensor_model_parallel_group() is tp
    rl_megatron.destroy_model_parallel()
    # ParallelState.create refuses the same, and does not need parallel_state.
    try:
        rl_megatron.ParallelState.create(use_sharp=True)
    except LayoutError:
        pass
    else:
        raise AssertionError("ParallelState.create(use_sharp=True)")
    state = rl_megatron.ParallelState.create(tensor_model_parallel_size=2, create_gloo_process_groups=False)
    assert not ps.is_initialized() and state.get_tensor_model_parallel_world_size() == 2
    assert dist.get_process_group_ranks(state.get_tensor_model_parallel_group()) == [rank - rank % 2, rank - rank % 2 + 1]
    return {"refused": refused, "cases": len(cases)}


def tiny_step(seed: int = 0, vocab: int = 64, hidden: int = 16, steps: int = 2) -> list[float]:
    """A tiny language model of Megatron-Core modules on the installed
    parallel state: a VocabParallelEmbedding, Megatron-Core's MLP (its GPT
    layer spec's: ColumnParallelLinear, gelu, RowParallelLinear), a
    ColumnParallelLinear output layer and vocab_parallel_cross_entropy
    (all-reduces on the tensor-parallel group), the gradients averaged over
    the data-parallel group with cp, an SGD step. The losses (averaged over
    the data-parallel group), and the first one again from the logits
    gathered over the tensor-parallel group (torch's all-gather:
    Megatron-Core's gather_from_tensor_model_parallel_region allocates its
    output on CUDA)."""
    import torch
    import torch.distributed as dist
    from megatron.core import parallel_state as ps
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.tensor_parallel import (
        ColumnParallelLinear,
        VocabParallelEmbedding,
        vocab_parallel_cross_entropy,
    )
    from megatron.core.transformer.spec_utils import build_module
    from megatron.core.transformer.transformer_config import TransformerConfig

    torch.manual_seed(seed)  # the master weights, split by tensor-parallel rank
    config = TransformerConfig(
        num_layers=1, hidden_size=hidden, num_attention_heads=4, use_cpu_initialization=True,
        pipeline_dtype=torch.float32, tensor_model_parallel_size=ps.get_tensor_model_parallel_world_size(),
    )
    embedding = VocabParallelEmbedding(vocab, hidden, init_method=config.init_method, config=config)
    mlp_spec = get_gpt_layer_local_spec().submodules.mlp
    if isinstance(mlp_spec, functools.partial):
        # 0.19: the spec is MLP.as_mlp_submodule with its submodules bound;
        # the MLP itself, on parallel_state's tensor-parallel group.
        from megatron.core.transformer.mlp import MLP

        mlp = MLP(config=config, submodules=mlp_spec.keywords["submodules"])
    else:
        mlp = build_module(mlp_spec, config=config)
    output = ColumnParallelLinear(hidden, vocab, config=config, init_method=config.init_method, bias=False,
                                  gather_output=False)
    params = [*embedding.parameters(), *mlp.parameters(), *output.parameters()]
    dp_group = ps.get_data_parallel_group(with_context_parallel=True)
    data = torch.Generator().manual_seed(100 + ps.get_data_parallel_rank(with_context_parallel=True))
    tokens = torch.randint(0, vocab, (8, 2), generator=data)  # [sequence, batch]
    labels = torch.roll(tokens, -1, dims=0)
    losses, gathered = [], None
    for step in range(steps):
        hidden_states = embedding(tokens)
        mlp_out, _ = mlp(hidden_states)
        logits, _ = output(hidden_states + mlp_out)
        if step == 0:
            # Megatron-Core's gather_from_tensor_model_parallel_region
            # allocates on CUDA: torch's all-gather on the same group.
            tp_group = ps.get_tensor_model_parallel_group()
            parts = [torch.empty_like(logits) for _ in range(dist.get_world_size(tp_group))]
            dist.all_gather(parts, logits.detach().clone(), group=tp_group)
            full = torch.cat(parts, dim=-1)
            assert full.shape[-1] == vocab
            gathered = torch.nn.functional.cross_entropy(full.reshape(-1, vocab), labels.reshape(-1))
        # (vocab_parallel_cross_entropy works in place on the logits: gathered first.)
        loss = vocab_parallel_cross_entropy(logits, labels).mean()
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in params:
                if p.grad is not None:
                    dist.all_reduce(p.grad, group=dp_group)
                    p.grad /= dist.get_world_size(dp_group)
                    p -= 0.5 * p.grad
        reported = loss.detach().clone()
        dist.all_reduce(reported, group=dp_group)
        losses.append(reported.item() / dist.get_world_size(dp_group))
    gathered_mean = gathered.detach().clone()
    dist.all_reduce(gathered_mean, group=dp_group)
    return losses + [gathered_mean.item() / dist.get_world_size(dp_group)]


def job_step(rank: int, world: int, args: dict[str, Any]) -> dict[str, Any]:
    """The tiny model's step after Megatron-Core's initialize_model_parallel,
    then after rank-layout's."""
    from megatron.core import parallel_state as ps

    from rank_layout.torch import megatron as rl_megatron

    reset(ps)
    ps.initialize_model_parallel(**args)
    theirs = tiny_step()
    reset(ps)
    rl_megatron.initialize_model_parallel(**args)
    ours = tiny_step()
    reset(ps)
    return {"megatron-core": theirs, "rank-layout": ours}


JOBS: dict[str, Callable[..., Any]] = {
    "options": job_options,
    "compare": job_compare,
    "bad": job_bad,
    "step": job_step,
}
