"""Worlds of processes for the torch.distributed tests: one harness for
every test that runs a worker on several gloo processes over loopback.

The processes are forked from a fork server that has imported torch,
Megatron-Core and the package once (importing them takes 2 to 5 s of CPU
per process, more than most worlds' work); each world meets through a
TCP store whose port the kernel gives its first process and a file tells
the others, so no port is chosen before it is bound (tests run in
parallel workers, and a port found free and let go may be taken before it
is used)."""

from __future__ import annotations

import inspect
import json
import multiprocessing
import os
import tempfile
import time
import traceback
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

#: What the fork server imports before it forks a world's processes (what
#: is not installed is left out; the workers still import what they use).
PRELOAD = [
    "torch",
    "torch.distributed",
    "torch.distributed.device_mesh",
    "numpy",
    "rank_layout",
    "rank_layout.torch",
    "rank_layout.torch.megatron",
    "megatron.core",
    "megatron.core.parallel_state",
    "torchtitan.distributed.parallel_dims",
]

_CONTEXT: Optional[Any] = None


def _context() -> Any:
    """The fork-server context, its imports set once per test process."""
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = multiprocessing.get_context("forkserver")
        _CONTEXT.set_forkserver_preload(PRELOAD)
    return _CONTEXT


def join(rank: int, world: int, rdzv: str, timeout: timedelta) -> Any:
    """The world's store (a ``torch.distributed.TCPStore``) for process
    ``rank``: process 0 serves it on a port the kernel picks and writes the
    port to the file ``rdzv``; the others wait for that file (at most
    ``timeout``) and connect. Pass it to ``init_process_group(store=...)``."""
    import torch.distributed as dist

    if rank == 0:
        store = dist.TCPStore("127.0.0.1", 0, world, is_master=True, timeout=timeout, wait_for_workers=False)
        written = f"{rdzv}.{os.getpid()}"
        Path(written).write_text(str(store.port))
        os.replace(written, rdzv)  # the others never read a half-written port
        return store
    end = time.monotonic() + timeout.total_seconds()
    while not os.path.exists(rdzv):
        if time.monotonic() > end:
            raise TimeoutError(f"no rendezvous file {rdzv} after {timeout}")
        time.sleep(0.01)
    port = int(Path(rdzv).read_text())
    return dist.TCPStore("127.0.0.1", port, world, is_master=False, timeout=timeout)


def init_gloo(rank: int, world: int, rdzv: str, timeout: timedelta) -> Any:
    """Joins the default gloo group of the world (through :func:`join`);
    the store."""
    import torch.distributed as dist

    store = join(rank, world, rdzv, timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)
    return store


def run_world(
    target: Callable[..., None],
    world: int,
    jobs: Any,
    tmp_path: Path,
    deadline_s: float,
    exit_codes: Optional[dict[int, int]] = None,
) -> list[dict[str, Any]]:
    """Runs ``target(rank, world, rdzv, out_dir, jobs)`` in ``world``
    processes; ``rdzv`` is the world's rendezvous file (see :func:`join`
    and :func:`init_gloo`) and each process writes ``out_dir/<rank>.json``
    with at least ``rank`` and ``error``. A process that fails (exits other
    than 0, or than ``exit_codes[rank]`` for the processes meant to die)
    ends the run at once; a run past ``deadline_s`` (a hang) is killed;
    either fails the test. Each rank's result, by rank."""
    third = list(inspect.signature(target).parameters)[2:3]
    if third == ["port"]:
        raise TypeError(
            f"{target.__module__}.{target.__qualname__} takes a port: workers take rdzv, "
            "the rendezvous file, and join with worlds.init_gloo(rank, world, rdzv, timeout)"
        )
    ctx = _context()
    rdzv = os.path.join(tempfile.mkdtemp(prefix="rdzv-", dir=tmp_path), "port")
    procs = [
        ctx.Process(target=target, args=(rank, world, rdzv, str(tmp_path), jobs), daemon=True) for rank in range(world)
    ]
    expected = [(exit_codes or {}).get(rank, 0) for rank in range(world)]
    start = time.monotonic()
    for p in procs:
        p.start()
    failure = None
    try:
        while any(p.is_alive() for p in procs):
            if any(p.exitcode not in (None, want) for p, want in zip(procs, expected)):
                failure = "a process failed"
                break
            if time.monotonic() - start > deadline_s:
                failure = f"hung (deadline {deadline_s:.0f} s), killed"
                break
            time.sleep(0.2)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        for p in procs:
            p.join(10)
    results = []
    for rank in range(world):
        f = tmp_path / f"{rank}.json"
        results.append(json.loads(f.read_text()) if f.exists() else {"rank": rank, "error": "no result"})
    errors = [f"rank {r['rank']}: {r['error']}" for r in results if r["error"]]
    codes = [p.exitcode for p in procs]
    if failure or errors or codes != expected:
        pytest.fail(
            f"{failure or 'failed'} after {time.monotonic() - start:.0f} s; exit codes {codes} (expected {expected})\n"
            + "\n".join(errors[:3])
        )
    print(f"{world} processes: {time.monotonic() - start:.1f} s")
    return results


@contextmanager
def recorded(out: Any, rank: int, result: dict[str, Any]) -> Iterator[None]:
    """A process's body: ``result`` is written to ``out/<rank>.json``
    however the body ends, with the traceback under ``error`` when it
    raised (and the exception raised on)."""
    try:
        yield
    except BaseException:
        result["error"] = traceback.format_exc()
        raise
    finally:
        Path(out, f"{rank}.json").write_text(json.dumps(result))


def closing_all_reduce(world: int) -> None:
    """The world still works after everything: a last all-reduce over the
    default group, then its end."""
    import torch
    import torch.distributed as dist

    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == world
    dist.destroy_process_group()
