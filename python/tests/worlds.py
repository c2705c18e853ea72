"""Worlds of spawned processes for the torch.distributed tests: one
harness for every test that runs a worker on several gloo processes over
loopback."""

from __future__ import annotations

import json
import multiprocessing
import socket
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest


def free_port() -> int:
    """A TCP port free on loopback now (for the rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_world(
    target: Callable[..., None],
    world: int,
    jobs: Any,
    tmp_path: Path,
    deadline_s: float,
    exit_codes: Optional[dict[int, int]] = None,
) -> list[dict[str, Any]]:
    """Runs ``target(rank, world, port, out_dir, jobs)`` in ``world``
    spawned processes; each writes ``out_dir/<rank>.json`` with at least
    ``rank`` and ``error``. A process that fails (exits other than 0, or
    than ``exit_codes[rank]`` for the processes meant to die) ends the run
    at once; a run past ``deadline_s`` (a hang) is killed; either fails the
    test. Each rank's result, by rank."""
    ctx = multiprocessing.get_context("spawn")
    port = free_port()
    procs = [
        ctx.Process(target=target, args=(rank, world, port, str(tmp_path), jobs), daemon=True) for rank in range(world)
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
