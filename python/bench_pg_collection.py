"""What one rank's set-up of inference shards costs: megatron-core 0.19.2's
``build_inference_pg_collections_for_shards`` against rank-layout's
(``rank_layout.torch.megatron.build_inference_pg_collections_for_shards``),
on a world of 16,384 ranks in 4 shards.

    python python/bench_pg_collection.py                  # megatron-core 0.19.2's environment
    python python/bench_pg_collection.py --ranks 0 9000 --runs 5

torch's ``fake`` backend lets one process act as rank r of a world of W
ranks (``init_process_group("fake", rank=r, world_size=W, store=FakeStore())``):
every ``new_group`` call runs torch's Python for it and, for the rank's own
groups, builds a fake backend, with no communication. So the figures are
the set-up's Python and bookkeeping per rank; real backends add the
rendezvous and communicators of the rank's own groups, to both.

Each (rank, set-up) runs in a process of its own, ``--runs`` times (default
3; the fastest is reported, the machine being shared). ``new_group`` calls
are counted by wrapping ``torch.distributed.new_group`` under both names it
is called by (``torch.distributed`` and ``distributed_c10d``, where
``new_subgroups_by_enumeration`` calls it). Both results are checked
alike: the rank's own shard holds the collection, with the same members
in each field.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
import warnings
from typing import Any

WORLD = 16384
#: 4 shards of 4,096 ranks: two prefill, two decode, each of its own tp,
#: pp, ep and expt_tp.
SPEC = (
    "tp=8,pp=4,dp=128,ep=8,expt_tp=1,role=prefill"
    "+tp=4,pp=8,dp=128,ep=4,role=prefill"
    "+tp=8,pp=2,dp=256,ep=16,expt_tp=1,role=decode"
    "+tp=2,pp=8,dp=256,ep=8,role=decode"
)
SETUPS = ("megatron-core", "rank-layout")


def measure(setup: str, rank: int) -> dict[str, Any]:
    """In this process: rank ``rank`` of the fake world builds the shards'
    collections with ``setup``; its time, its new_group calls, and its own
    collection's members by field."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d
    from torch.testing._internal.distributed.fake_pg import FakeStore

    warnings.simplefilter("ignore")
    # Megatron-Core's modules are imported before the clock starts, for
    # both set-ups (rank-layout's builds Megatron-Core's classes; a program
    # serving with it has imported them already).
    from megatron.core.inference.shards import build_inference_pg_collections_for_shards

    if setup == "rank-layout":
        from rank_layout.torch.megatron import build_inference_pg_collections_for_shards
    dist.init_process_group("fake", rank=rank, world_size=WORLD, store=FakeStore())
    calls = [0]
    original = distributed_c10d.new_group

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(*args, **kwargs)

    dist.new_group = distributed_c10d.new_group = counted
    start = time.perf_counter()
    shards = build_inference_pg_collections_for_shards(WORLD, SPEC)
    seconds = time.perf_counter() - start
    dist.new_group = distributed_c10d.new_group = original
    own = [s for s in shards if s.pg_collection is not None]
    assert len(own) == 1 and own[0].rank_offset <= rank < own[0].rank_offset + own[0].world_size
    fields = {
        name: None if pg is None else dist.get_process_group_ranks(pg)
        for name, pg in sorted(vars(own[0].pg_collection).items())
    }
    return {"seconds": seconds, "calls": calls[0], "shard": shards.index(own[0]), "fields": fields}


def run(setup: str, rank: int, runs: int) -> dict[str, Any]:
    """The fastest of ``runs`` processes."""
    best = None
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, __file__, "--child", setup, str(rank)], check=True, capture_output=True, text=True
        )
        got = json.loads(out.stdout.strip().splitlines()[-1])
        if best is None or got["seconds"] < best["seconds"]:
            if best is not None:
                assert got["fields"] == best["fields"] and got["calls"] == best["calls"]
            best = got
    assert best is not None
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[0, 5000, 9000, 16383])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child[0], int(args.child[1]))))
        return
    import megatron.core
    import torch

    print(f"world {WORLD:,} in 4 shards: {SPEC}")
    print(f"Python {platform.python_version()}, torch {torch.__version__}, megatron-core {megatron.core.__version__}, "
          f"{platform.processor() or platform.machine()}; fastest of {args.runs} runs\n")
    print("| rank | shard | megatron-core | new_group calls | rank-layout | new_group calls | time ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for rank in args.ranks:
        theirs, ours = (run(setup, rank, args.runs) for setup in SETUPS)
        assert ours["fields"] == theirs["fields"] and ours["shard"] == theirs["shard"], rank
        print(f"| {rank:,} | {ours['shard']} | {theirs['seconds']:.2f} s | {theirs['calls']:,} | "
              f"{ours['seconds'] * 1e3:.1f} ms | {ours['calls']} | {theirs['seconds'] / ours['seconds']:,.0f}x |",
              flush=True)


if __name__ == "__main__":
    main()
