"""rank_layout.torch.torchtitan_meshes against torchtitan's own
``ParallelDims.build_mesh`` (torchtitan 0.3.0), on torch's ``fake``
backend: one process acting as rank ``r`` of a world ``W``, both set-ups in
the same process, compared with device_mesh_worker.describe_titan (every
global and 1-D mesh: names, shape, rank tensor, layout, root, coordinate,
each dim's group ranks and local rank, sub-meshes; every query:
``get_mesh``, ``get_optional_mesh`` of every name and name list, with and
without singleton axes, ``get_all_one_dimensional_meshes``,
``spmd_meshes``, ``resolve_mesh``, the properties). The gloo runs are in
test_device_mesh_gloo.py.

Without torch or torchtitan these tests are reported as skipped; under CI
they fail (conftest.require)."""

from __future__ import annotations

import logging
import random
import warnings
from typing import Any

import pytest
from conftest import require

torch = require("torch")
require("torch.testing._internal.distributed.fake_pg")
ParallelDims = require("torchtitan.distributed.parallel_dims").ParallelDims
import torch.distributed as dist  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402

from device_mesh_worker import describe_titan, differences  # noqa: E402
from rank_layout import LayoutError  # noqa: E402
from rank_layout.torch import torchtitan_meshes  # noqa: E402
from rank_layout.torch.torchtitan import TORCHTITAN_VERSION  # noqa: E402

SPMD_BACKENDS = ("spmd_types", "full_dtensor", "partial_dtensor")


@pytest.fixture
def fake_world() -> Any:
    def init(rank: int, world: int) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
        dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())

    logging.disable(logging.WARNING)  # torchtitan's info lines
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield init
    logging.disable(logging.NOTSET)
    if dist.is_initialized():
        dist.destroy_process_group()


class Calls:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import torch.distributed.device_mesh as device_mesh
        from torch.distributed import distributed_c10d

        self.n = 0
        real = distributed_c10d.new_group

        def counting(*args: Any, **kwargs: Any) -> Any:
            self.n += 1
            return real(*args, **kwargs)

        for module in (dist, distributed_c10d, device_mesh):
            monkeypatch.setattr(module, "new_group", counting)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    return Calls(monkeypatch)


def test_version() -> None:
    from importlib.metadata import version

    assert version("torchtitan") == TORCHTITAN_VERSION


def random_config(rng: random.Random, max_world: int = 64) -> dict[str, Any]:
    while True:
        dp_replicate, dp_shard, cp, tp, pp = (rng.choice([1, 1, 2, 2, 3, 4]) for _ in range(5))
        world = dp_replicate * dp_shard * cp * tp * pp
        if world <= max_world:
            break
    dense = dp_shard * cp * tp
    ep = rng.choice([d for d in range(1, dense + 1) if dense % d == 0])
    return dict(dp_replicate=dp_replicate, dp_shard=-1 if rng.random() < 0.3 else dp_shard, cp=cp, tp=tp, pp=pp,
                ep=ep, world_size=world, spmd_backend=rng.choice(SPMD_BACKENDS))


FIXED = [
    dict(dp_replicate=2, dp_shard=2, cp=2, tp=2, pp=2, ep=4, world_size=32),
    dict(dp_replicate=1, dp_shard=-1, cp=1, tp=2, pp=1, ep=2, world_size=8),
    dict(dp_replicate=2, dp_shard=-1, cp=1, tp=2, pp=1, ep=1, world_size=8),
    dict(dp_replicate=1, dp_shard=1, cp=1, tp=1, pp=8, ep=1, world_size=8),
    dict(dp_replicate=1, dp_shard=1, cp=4, tp=2, pp=1, ep=8, world_size=8),
    dict(dp_replicate=1, dp_shard=-1, cp=1, tp=1, pp=1, ep=1, world_size=1),
]


def compare(kwargs: dict[str, Any], rank: int, world: int, calls: Calls, fake_world: Any) -> tuple[int, int]:
    fake_world(rank, world)
    before = calls.n
    pd = ParallelDims(**{**dict(dp_replicate=1, dp_shard=-1, cp=1, tp=1, pp=1, ep=1), **kwargs})
    pd.build_mesh()
    theirs = calls.n - before
    before = calls.n
    ours = torchtitan_meshes(**kwargs)
    mine = calls.n - before
    diff = differences(describe_titan(pd), describe_titan(ours))
    assert not diff, f"ParallelDims({kwargs}) on rank {rank}:\n" + "\n".join(diff[:5])
    return theirs, mine


@pytest.mark.parametrize("spmd_backend", SPMD_BACKENDS)
@pytest.mark.parametrize("config", FIXED, ids=[f"W{c['world_size']}-ep{c['ep']}" for c in FIXED])
def test_fixed_configurations_every_rank(config: dict[str, Any], spmd_backend: str, calls: Calls,
                                         fake_world: Any) -> None:
    kwargs = dict(config, spmd_backend=spmd_backend)
    ours = set()
    for rank in range(kwargs["world_size"]):
        _, mine = compare(kwargs, rank, kwargs["world_size"], calls, fake_world)
        ours.add(mine)
    assert len(ours) == 1 and ours.pop() <= 11  # every rank alike, one call per distinct group family


def test_random_configurations(calls: Calls, fake_world: Any) -> None:
    rng = random.Random(16_16)
    for _ in range(40):
        kwargs = random_config(rng)
        rank = rng.randrange(kwargs["world_size"])
        compare(kwargs, rank, kwargs["world_size"], calls, fake_world)


def test_calls_at_scale(calls: Calls, fake_world: Any) -> None:
    """At 16,384 ranks, rank-layout makes 8 calls (its distinct group families) where torchtitan makes
    tens of thousands, and the meshes agree."""
    kwargs = dict(dp_replicate=2, dp_shard=-1, cp=2, tp=8, pp=8, ep=8, world_size=16384)
    theirs, mine = compare(kwargs, 8195, 16384, calls, fake_world)
    assert mine <= 9 and theirs > 50_000, (theirs, mine)


def test_parallel_dims_object_and_install(calls: Calls, fake_world: Any) -> None:
    """A ParallelDims is read (dp_shard -1 resolved by it); install() puts
    the meshes into it, whose own queries then answer with them without
    building anything."""
    fake_world(5, 16)
    pd = ParallelDims(dp_replicate=2, dp_shard=-1, cp=2, tp=2, pp=1, ep=2, world_size=16, spmd_backend="full_dtensor")
    ours = torchtitan_meshes(pd)
    assert (ours.dp_shard, ours.spmd_backend) == (2, "full_dtensor")
    before = calls.n
    assert ours.install(pd) is pd
    assert pd.get_mesh("tp") is ours.get_mesh("tp")
    assert pd.world_mesh is ours.world_mesh
    assert not differences(describe_titan(pd), describe_titan(ours))
    assert calls.n == before
    with pytest.raises(LayoutError, match="differs"):
        ours.install(ParallelDims(dp_replicate=1, dp_shard=-1, cp=2, tp=2, pp=1, ep=2, world_size=16))


def test_ranks_past_world_size(calls: Calls, fake_world: Any) -> None:
    """world_size smaller than the default group: ranks inside agree with
    torchtitan; ranks past it (where torchtitan's build_mesh fails) make as
    many calls and get no meshes, said by a LayoutError."""
    kwargs = dict(dp_shard=2, tp=2, ep=2, world_size=4)
    counts = set()
    for rank in range(6):
        if rank < 4:
            compare(kwargs, rank, 6, calls, fake_world)
        fake_world(rank, 6)
        before = calls.n
        ours = torchtitan_meshes(**kwargs)
        counts.add(calls.n - before)
        if rank >= 4:
            assert ours.world_mesh.get_coordinate() is None
            with pytest.raises(LayoutError, match="outside torchtitan's world of 4"):
                ours.get_mesh("tp")
    assert len(counts) == 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(tp=0), "should be >= 1"),
        (dict(dp_shard=0), "dp_shard must -1 or >=1"),
        (dict(dp_shard=3), r"Invalid parallel dims: .* != WORLD_SIZE\(8\)"),
        (dict(tp=16, world_size=8), "leaves no ranks"),
        (dict(tp=2, ep=3), r"ep \(3\) must divide dp_shard \* cp \* tp = 8"),
        (dict(tp=2, ep=16), r"ep \(16\) must divide"),
        (dict(world_size=16, dp_shard=16), "larger than torch.distributed's world of 8"),
        (dict(spmd_backend="dtensor"), "spmd_backend must be one of"),
        (dict(tp=2.0), "tp must be an int"),
        (dict(device_type=None), "device_type must be a str"),
    ],
)
def test_refusals_before_any_group(kwargs: dict[str, Any], message: str, calls: Calls, fake_world: Any) -> None:
    fake_world(3, 8)
    with pytest.raises(LayoutError, match=message):
        torchtitan_meshes(**kwargs)
    assert calls.n == 0


def test_refusals_parallel_dims(calls: Calls, fake_world: Any) -> None:
    fake_world(3, 8)
    pd = ParallelDims(dp_replicate=1, dp_shard=-1, cp=1, tp=2, pp=1, ep=1, world_size=8)
    with pytest.raises(LayoutError, match="not both"):
        torchtitan_meshes(pd, tp=2)
    with pytest.raises(LayoutError, match="not a torchtitan ParallelDims"):
        torchtitan_meshes(object())
    assert calls.n == 0


def test_without_layouts(calls: Calls, fake_world: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    fake_world(3, 8)
    monkeypatch.setattr(sys.modules["rank_layout.torch.device_mesh"], "_layout_classes", lambda: None)
    with pytest.raises(LayoutError, match="has no layouts"):
        torchtitan_meshes(tp=2)
    assert calls.n == 0
