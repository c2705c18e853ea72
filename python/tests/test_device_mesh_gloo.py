"""rank_layout.torch.torchtitan_meshes and device_mesh on real process
groups: gloo, 8 and 16 processes on this machine (loopback only).

In each process, for each torchtitan configuration, torchtitan's own
``ParallelDims.build_mesh()`` runs first, then ``torchtitan_meshes`` with
the same arguments; every mesh and query is compared
(device_mesh_worker.describe_titan: for each name and dim, the group's
ranks, its backend (gloo, or fake where torchtitan makes a fake group),
``get_local_rank``, ``get_coordinate()``, the rank tensor and layout), and
an all-reduce runs on every real group of ours. Likewise ``device_mesh``
of a Mesh against ``init_device_mesh`` + ``_flatten`` of the same shape,
names and flattens, with a DTensor sharded over it and gathered back. A
process that fails ends the run; a run past its deadline (a hang) is killed
and fails.

Without torch or torchtitan these tests are reported as skipped; under CI
they fail (conftest.require)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import require

torch = require("torch")
require("torchtitan.distributed.parallel_dims")
import torch.distributed as dist  # noqa: E402

import device_mesh_worker  # noqa: E402
import worlds  # noqa: E402

pytestmark = pytest.mark.slow  # gloo worlds of 8 and 16 processes


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("GLOO_SOCKET_IFNAME", os.environ.get("GLOO_SOCKET_IFNAME", "lo"))
    # torch's store server resolves each new client by reverse DNS on its
    # only thread: bound a resolver that drops such queries.
    monkeypatch.setenv("RES_OPTIONS", os.environ.get("RES_OPTIONS", "timeout:1 attempts:1"))


def run_world(world: int, jobs: list, tmp_path: Path, deadline_s: float) -> list[dict[str, Any]]:
    """Runs device_mesh_worker.run in ``world`` spawned processes
    (worlds.run_world) and fails on any difference a rank found."""
    results = worlds.run_world(device_mesh_worker.run, world, jobs, tmp_path, deadline_s)
    for r in results:
        for name, job in r["jobs"].items():
            assert not job["differences"], f"rank {r['rank']}, {name}:\n" + "\n".join(job["differences"][:5])
    return results


def titan(name: str, **kwargs: Any) -> tuple[str, str, dict[str, Any]]:
    return (name, "torchtitan", kwargs)


def mesh(name: str, shape: list[int], names: list[str], flattens: list[list[str]]) -> tuple[str, str, list]:
    return (name, "mesh", [shape, names, flattens])


EIGHT = [
    titan("fsdp_tp", dp_shard=-1, tp=2),
    titan("hsdp_tp_ep", dp_replicate=2, dp_shard=-1, tp=2, ep=2),
    titan("cp_tp_ep8_full", cp=4, tp=2, ep=8, spmd_backend="full_dtensor"),
    titan("pp_fsdp_partial", dp_shard=-1, pp=2, ep=2, spmd_backend="partial_dtensor"),
    mesh("dp_cp_tp", [2, 2, 2], ["dp", "cp", "tp"], [["dp", "cp"], ["dp", "tp"]]),
    mesh("pp_dp", [4, 2], ["pp", "dp"], []),
]

SIXTEEN = [
    titan("all_dims", dp_replicate=2, dp_shard=2, cp=2, tp=2, pp=1, ep=4),
    titan("pp_cp_tp_partial", dp_shard=-1, cp=2, tp=2, pp=2, ep=2, spmd_backend="partial_dtensor"),
    titan("ep_over_tp_cp", dp_shard=-1, cp=2, tp=2, ep=8, spmd_backend="full_dtensor"),
    mesh("pp_dp_cp_tp", [2, 2, 2, 2], ["pp", "dp", "cp", "tp"], [["dp", "cp"], ["pp", "dp", "cp", "tp"], ["pp", "tp"]]),
    # Last: torch's _flatten (the reference) makes groups on the ranks inside
    # the mesh only, so the two halves have made different numbers of groups.
    mesh("half_world", [2, 4], ["dp", "tp"], [["dp", "tp"]]),
]


def test_gloo_8_processes(tmp_path: Path) -> None:
    assert dist.is_gloo_available()
    results = run_world(8, EIGHT, tmp_path, deadline_s=400)
    calls = results[3]["jobs"]["hsdp_tp_ep"]["calls"]
    assert calls[1] < calls[0], calls  # fewer new_group calls than torchtitan, even at 8 ranks
    assert all(r["jobs"]["fsdp_tp"]["collectives"] > 0 for r in results)


def test_gloo_16_processes(tmp_path: Path) -> None:
    results = run_world(16, SIXTEEN, tmp_path, deadline_s=600)
    # The half-world mesh: ranks 8..15 are outside it, and make as many
    # calls as ranks inside (torch's _flatten, only inside, makes more there).
    assert {r["jobs"]["half_world"]["calls"][1] for r in results} == {3}
