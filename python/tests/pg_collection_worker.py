"""The body of each spawned process of test_pg_collection.py (a module of
its own, so that spawned processes can import it): Megatron-Core's
ProcessGroupCollection and rank-layout's, made in the same gloo world one
after the other, each written down as its groups' ranks."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Callable

import megatron_core_worker as mcw
import worlds


class CountCalls:
    """Counts torch.distributed.new_group calls, by whatever name they are
    made (Megatron-Core's HyperCommGrid reaches it through
    new_subgroups_by_enumeration, inside distributed_c10d)."""

    def __enter__(self) -> "CountCalls":
        import torch.distributed as dist
        from torch.distributed import distributed_c10d

        self.calls = 0
        self.original = distributed_c10d.new_group
        self.modules = (dist, distributed_c10d)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return self.original(*args, **kwargs)

        for module in self.modules:
            module.new_group = counted
        return self

    def __exit__(self, *exc: Any) -> None:
        for module in self.modules:
            module.new_group = self.original


def field_ranks(value: Any) -> Any:
    """A field as its group's ranks (in group order), a list of them (hcp),
    or None."""
    import torch.distributed as dist

    if value is None:
        return None
    if isinstance(value, list):
        return [field_ranks(v) for v in value]
    return dist.get_process_group_ranks(value)


def written(collection: Any) -> dict[str, Any]:
    """Every field the collection sets (``vars``: set to None included),
    as ranks."""
    return {name: field_ranks(value) for name, value in sorted(vars(collection).items())}


def outcome(make: Callable[[], Any]) -> Any:
    """The collection written down, or the exception it raised."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return {"fields": written(make())}
    except Exception as e:  # noqa: BLE001 (compared by the test)
        return {"raises": type(e).__name__, "message": str(e)}


def all_reduce_fields(collection: Any) -> int:
    """An all-reduce of the ranks on each distinct group of the collection,
    in field order (the same on every rank: no hang); how many."""
    import torch
    import torch.distributed as dist

    done, seen = 0, set()
    for name, value in sorted(vars(collection).items()):
        for pg in value if isinstance(value, list) else [value]:
            if pg is None or id(pg) in seen:
                continue
            seen.add(id(pg))
            t = torch.tensor([dist.get_rank()], dtype=torch.int64)
            dist.all_reduce(t, group=pg)
            assert t.item() == sum(dist.get_process_group_ranks(pg)), (name, t.item())
            done += 1
    return done


def job_training(rank: int, world: int, args: dict[str, Any]) -> dict[str, Any]:
    """Megatron-Core's initialize_model_parallel and its
    ProcessGroupCollection.use_mpu_process_groups() (all fields, and a
    few); then rank-layout's drop-in and pg_collection, of the returned
    state and of the installed parallel_state."""
    from megatron.core import parallel_state as ps
    from megatron.core.process_groups_config import ProcessGroupCollection

    from rank_layout.torch import megatron as rl_megatron

    some = ["tp", "dp", "embd", "ep"]
    mcw.reset(ps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ps.initialize_model_parallel(**args)
    theirs = outcome(ProcessGroupCollection.use_mpu_process_groups)
    theirs_some = outcome(lambda: ProcessGroupCollection.use_mpu_process_groups(some))
    mcw.reset(ps)
    state = rl_megatron.initialize_model_parallel(**args)
    ours = outcome(lambda: rl_megatron.pg_collection(state))
    installed = outcome(rl_megatron.pg_collection)
    ours_some = outcome(lambda: rl_megatron.pg_collection(state, some))
    reduced = all_reduce_fields(rl_megatron.pg_collection(state)) if "fields" in ours else 0
    mcw.reset(ps)
    mcw.destroy_subgroups()
    return {
        "class_fields": [f.name for f in dataclasses.fields(ProcessGroupCollection)],
        "theirs": theirs, "ours": ours, "installed": installed,
        "theirs_some": theirs_some, "ours_some": ours_some, "all_reduced": reduced,
    }


def shard_view(shards: Any) -> list[dict[str, Any]]:
    """Each InferenceShard: its spec, window, and collection written down."""
    return [
        {"spec": dataclasses.asdict(s.spec), "rank_offset": s.rank_offset, "world_size": s.world_size,
         "pg_collection": None if s.pg_collection is None else written(s.pg_collection)}
        for s in shards
    ]


def job_shards(rank: int, world: int, spec: str, mapping: bool) -> dict[str, Any]:
    """Megatron-Core 0.19.2's build_inference_pg_collections_for_shards,
    then rank-layout's, each new_group call counted; under a release
    without inference shards, rank-layout's refusal (no group made)."""
    from rank_layout.torch import megatron as rl_megatron

    if mcw.version() == "0.16.1":
        before = mcw.group_count()
        try:
            rl_megatron.build_inference_pg_collections_for_shards(world, spec, mapping)
        except ImportError as e:
            refused = str(e)
        else:
            raise AssertionError("megatron-core 0.16.1: no ImportError")
        return {"refused": refused, "made": mcw.group_count() - before}
    from megatron.core.inference.shards import build_inference_pg_collections_for_shards

    with CountCalls() as theirs_count, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = shard_view(build_inference_pg_collections_for_shards(world, spec, use_tp_pp_dp_mapping=mapping))
    with CountCalls() as ours_count:
        built = rl_megatron.build_inference_pg_collections_for_shards(world, spec, mapping)
    ours = shard_view(built)
    reduced = sum(all_reduce_fields(s.pg_collection) for s in built if s.pg_collection is not None)
    mcw.destroy_subgroups()
    return {"theirs": theirs, "ours": ours, "calls": [theirs_count.calls, ours_count.calls], "all_reduced": reduced}


JOBS: dict[str, Callable[..., Any]] = {
    "training": job_training,
    "shards": job_shards,
}


def run(rank: int, world: int, port: int, out: str, jobs: list) -> None:
    """Joins the gloo world and runs each job (name, kind, parameters);
    writes what it saw to ``out``/rank.json."""
    result: dict[str, Any] = {"rank": rank, "results": {}, "error": None}
    with worlds.recorded(out, rank, result):
        import torch
        import torch.distributed as dist

        warnings.filterwarnings("ignore")
        torch.set_num_threads(1)
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=mcw.TIMEOUT
        )
        for name, kind, params in jobs:
            result["results"][name] = JOBS[kind](rank, world, **params)
        worlds.closing_all_reduce(world)
