"""Worlds of processes for the torch.distributed tests: one harness for
every test that runs a worker on several gloo processes over loopback.

The processes are forked from a fork server that has imported torch,
Megatron-Core and the package once (importing them takes 2 to 5 s of CPU
per process, more than most worlds' work); each world meets through a
TCP store whose port the kernel gives its first process and a file tells
the others, so no port is chosen before it is bound (tests run in
parallel workers, and a port found free and let go may be taken before it
is used). Workers written for a port (``target(rank, world, port, ...)``)
still run: their port is one below the kernel's ephemeral range
(:func:`unbound_port`), handed through the same file."""

from __future__ import annotations

import inspect
import json
import multiprocessing
import os
import random
import socket
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


def unbound_port() -> int:
    """A port to name before it is bound (a launcher's ``--master-port``, a
    worker that makes its store on a given port): a random one below the
    kernel's range of ephemeral ports (``net.ipv4.ip_local_port_range``),
    which the kernel never hands to ``bind(0)`` or ``connect()`` (a free
    port found by ``bind(0)`` and let go may be taken by another test's
    connections before it is used), and not bound now."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(100):
        port = random.randrange(10000, low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise OSError(f"no free port in 10000..{low}")


def _hand(rdzv: str, port: int) -> None:
    """Writes ``port`` to the rendezvous file ``rdzv`` at once: the others
    never read a half-written port."""
    written = f"{rdzv}.{os.getpid()}"
    Path(written).write_text(str(port))
    os.replace(written, rdzv)


def _handed(rdzv: str, timeout: timedelta) -> int:
    """The port in the rendezvous file ``rdzv``, once process 0 wrote it
    (waited for at most ``timeout``)."""
    end = time.monotonic() + timeout.total_seconds()
    while not os.path.exists(rdzv):
        if time.monotonic() > end:
            raise TimeoutError(f"no rendezvous file {rdzv} after {timeout}")
        time.sleep(0.01)
    return int(Path(rdzv).read_text())


def join(rank: int, world: int, rdzv: str, timeout: timedelta) -> Any:
    """The world's store (a ``torch.distributed.TCPStore``) for process
    ``rank``: process 0 serves it on a port the kernel picks and writes the
    port to the file ``rdzv``; the others wait for that file (at most
    ``timeout``) and connect. Pass it to ``init_process_group(store=...)``."""
    import torch.distributed as dist

    if rank == 0:
        store = dist.TCPStore("127.0.0.1", 0, world, is_master=True, timeout=timeout, wait_for_workers=False)
        _hand(rdzv, store.port)
        return store
    return dist.TCPStore("127.0.0.1", _handed(rdzv, timeout), world, is_master=False, timeout=timeout)


#: How long the processes of a world given a port wait for process 0 to
#: name it (it does at once).
PORT_WAIT = timedelta(seconds=60)


def _with_port(target: Callable[..., None], rank: int, world: int, rdzv: str, out: str, jobs: Any) -> None:
    """A process of a worker written for a port: process 0 picks it
    (:func:`unbound_port`) and hands it through ``rdzv``, the others read
    it there; then ``target(rank, world, port, out, jobs)``."""
    if rank == 0:
        port = unbound_port()
        _hand(rdzv, port)
    else:
        port = _handed(rdzv, PORT_WAIT)
    target(rank, world, port, out, jobs)


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
    with at least ``rank`` and ``error``. A target whose third parameter is
    named ``port`` gets a port instead (its process 0 makes the store on
    it; see :func:`_with_port`). A process that fails (exits other than 0,
    or than ``exit_codes[rank]`` for the processes meant to die, such as
    -9 for one killed by SIGKILL) ends the run at once; a run past
    ``deadline_s`` (a hang) is killed; either fails the test. Each rank's
    result, by rank."""
    ctx = _context()
    rdzv = os.path.join(tempfile.mkdtemp(prefix="rdzv-", dir=tmp_path), "port")
    out = str(tmp_path)
    if list(inspect.signature(target).parameters)[2:3] == ["port"]:
        procs = [
            ctx.Process(target=_with_port, args=(target, rank, world, rdzv, out, jobs), daemon=True)
            for rank in range(world)
        ]
    else:
        procs = [ctx.Process(target=target, args=(rank, world, rdzv, out, jobs), daemon=True) for rank in range(world)]
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


def refusals(cases: list[tuple[Callable[[], Any], str]]) -> int:
    """Each ``(call, message)`` of ``cases``: the call raises a
    ``rank_layout.LayoutError`` whose text holds ``message``. How many."""
    from rank_layout import LayoutError

    for bad, message in cases:
        try:
            bad()
        except LayoutError as e:
            assert message in str(e), (message, str(e))
        else:
            raise AssertionError(f"no LayoutError ({message})")
    return len(cases)


def closing_all_reduce(world: int) -> None:
    """The world still works after everything: a last all-reduce over the
    default group, then its end."""
    import torch
    import torch.distributed as dist

    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == world
    dist.destroy_process_group()
