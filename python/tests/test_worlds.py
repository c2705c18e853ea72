"""The harness of the torch.distributed tests (worlds.py) still runs
workers written for a port, ``target(rank, world, port, out, jobs)``, as
it did before the rendezvous file: process 0 makes the store on the port,
the others connect, and exit codes (a process killed by SIGKILL) are
checked as for every world."""

from __future__ import annotations

import os
import signal
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import require

require("torch")

import worlds  # noqa: E402

pytestmark = pytest.mark.slow  # worlds of several processes

TIMEOUT = timedelta(seconds=60)


def port_worker(rank: int, world: int, port: int, out: str, jobs: dict[str, Any]) -> None:
    """A worker in the harness's first form: its own store on ``port``, a
    gloo world, an all-reduce of the ranks; ``jobs["killed"]`` (if any)
    then kills itself with SIGKILL."""
    import torch
    import torch.distributed as dist

    result: dict[str, Any] = {"rank": rank, "error": None, "port": port}
    with worlds.recorded(out, rank, result):
        store = dist.TCPStore("127.0.0.1", port, world, is_master=rank == 0, timeout=TIMEOUT)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=TIMEOUT)
        t = torch.tensor([float(rank)])
        dist.all_reduce(t)
        result["sum"] = t.item()
        dist.destroy_process_group()
    if rank == jobs.get("killed"):
        os.kill(os.getpid(), signal.SIGKILL)


def test_a_worker_given_a_port_gets_one_port_below_the_ephemeral_range(tmp_path: Path) -> None:
    world = 4
    results = worlds.run_world(port_worker, world, {}, tmp_path, deadline_s=120)
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {r["port"] for r in results}
    assert len(ports) == 1, ports
    (port,) = ports
    assert isinstance(port, int) and 10000 <= port < low, (port, low)
    assert [r["sum"] for r in results] == [sum(range(world))] * world


def test_a_worker_given_a_port_may_be_meant_to_die(tmp_path: Path) -> None:
    meant, unmeant = tmp_path / "meant", tmp_path / "unmeant"
    meant.mkdir()
    unmeant.mkdir()
    results = worlds.run_world(port_worker, 2, {"killed": 1}, meant, deadline_s=120, exit_codes={1: -signal.SIGKILL})
    assert [r["sum"] for r in results] == [1.0, 1.0]
    # Not meant to: the run fails, naming the exit codes (process 0 may
    # have ended, or been killed when process 1's end was seen).
    with pytest.raises(pytest.fail.Exception, match=r"exit codes \[(0|-9), -9\] \(expected \[0, 0\]\)"):
        worlds.run_world(port_worker, 2, {"killed": 1}, unmeant, deadline_s=120)
