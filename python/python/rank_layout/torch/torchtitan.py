"""torchtitan's meshes, built by rank-layout: a drop-in for
``torchtitan.distributed.parallel_dims.ParallelDims.build_mesh``.

>>> from rank_layout.torch import torchtitan_meshes
>>> meshes = torchtitan_meshes(dp_shard=-1, tp=8, pp=4, ep=8,      # doctest: +SKIP
...                            device_type="cuda")
>>> meshes.get_mesh("efsdp"), meshes.get_optional_mesh("cp")      # doctest: +SKIP
(DeviceMesh((efsdp=...), 'cuda', stride=(8,)), None)

:func:`torchtitan_meshes` takes ``ParallelDims``'s arguments (torchtitan
0.3.0, ``TORCHTITAN_VERSION``), or a ``ParallelDims`` object, and builds
every ``DeviceMesh`` its ``build_mesh()`` builds, over the same ranks, with
the same dims, dim names, layouts (``_layout``, ``_rank_map``) and root (the
1-D ``("world",)`` mesh): the data-loading mesh ``(pp, batch, cp, tp)``,
``loss_mesh`` (flattened from ``batch`` and ``cp``, registered at the root
as ``_flatten`` registers it), the dense mesh (``(pp, dp_replicate,
dp_shard, cp, tp)``, or ``(pp, dp_replicate, fsdp, tp)`` under
``partial_dtensor``), under ``spmd_types`` the ``(dp, cp, tp)`` mesh, the
sparse mesh ``(pp, dp_replicate, efsdp, ep)``, and their 1-D meshes. Dims
torchtitan gives torch's ``fake`` backend (``_mesh_exist``: size 1 but
``dp_shard`` and ``fsdp``; ``efsdp`` without ep) get ``fake`` groups here
too, which never communicate (torch registers that backend when
``torch.testing._internal.distributed.fake_pg`` is imported, which this
module does when it needs one, as torchtitan's users must).

The groups come from rank-layout's :func:`rank_layout.torchtitan_mesh`
(the dense dims, the expert view and the named dim sets ``batch``,
``loss``, ``dp``, ``fsdp``, ``ep``, ``efsdp``), each rank creating only its
own (one ``new_group(members, use_local_synchronization=True)`` per
distinct group family: ``pp`` in the four meshes that have it is one
group, as are ``batch`` and ``dp``; the whole world is the default group).
torchtitan's ``build_mesh`` makes each mesh's groups anew, every group of
every dim on every rank: at 16,384 ranks 4,000 times as many calls (see
``python/README.md``). Sharing is safe for torchtitan's use, as torchtitan
notes where it builds them: the meshes' collectives are issued in program
order on every rank.

The object has ``ParallelDims``'s queries, answering as torchtitan's after
``build_mesh()``: ``get_mesh(name or names)``,
``get_optional_mesh(..., include_singleton_axes=False)``,
``get_all_one_dimensional_meshes()``, ``world_mesh``, ``build_mesh()``,
``spmd_meshes()``, ``spmd_dense_mesh()``, ``spmd_sparse_mesh()``,
``get_dense_tp_mesh()``, ``get_activated_mesh(axes)``,
``resolve_mesh(axes)``, ``resolve_shared_mesh(placements)``, the
``*_enabled`` properties, ``non_data_parallel_size``, ``seq_len_divisor``,
the degrees as attributes and the same private dicts
(``_global_meshes``, ``_single_axis_meshes``, ...). Errors torchtitan
raises as ``ValueError`` are :class:`~rank_layout.LayoutError` here (a
``ValueError``) with torchtitan's message. So torchtitan code can take it
where it takes a ``ParallelDims``; :meth:`TorchtitanMeshes.install` puts the
meshes into a ``ParallelDims`` object instead (its own methods then answer
with them, and ``build_mesh`` is never called).

Bad arguments (torchtitan's checks, and an ``ep`` that does not divide
``dp_shard * cp * tp``, which torchtitan finds late, in ``_unflatten``), a
``world_size`` past the default group, or a torch without what is needed:
:class:`~rank_layout.LayoutError` on every rank before any group exists. A
rank past ``world_size`` (torchtitan's ``build_mesh`` fails there) makes the
same calls, each a group of itself alone dropped at once, and gets an object
whose ``world_mesh`` has no coordinate and whose mesh queries raise
:class:`~rank_layout.LayoutError`.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any, Iterable, Optional, Union

import numpy as np
import torch
import torch.distributed as dist

from rank_layout import LayoutError, torchtitan_mesh
from rank_layout.torch.device_mesh import (
    Family,
    check_torch,
    factorisations,
    make_groups,
    parse_spec,
    sub_mesh,
)

__all__ = ["torchtitan_meshes", "TorchtitanMeshes", "TORCHTITAN_VERSION"]

#: The torchtitan release whose ``ParallelDims`` this module follows.
TORCHTITAN_VERSION = "0.3.0"

SPMD_BACKENDS = ("partial_dtensor", "full_dtensor", "spmd_types")

# The dim set of rank_layout.torchtitan_mesh behind each DeviceMesh dim name.
_DIM_SETS = {
    "pp": "pp",
    "batch": "batch",
    "cp": "cp",
    "tp": "tp",
    "dp_replicate": "dp_replicate",
    "dp_shard": "dp_shard",
    "fsdp": "fsdp",
    "dp": "dp",
    "efsdp": "efsdp",
    "ep": "ep",
    "loss_mesh": "loss",
}

_DEGREES = ("dp_replicate", "dp_shard", "cp", "tp", "pp", "ep")


def _degree(name: str, value: Any, *, shard: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise LayoutError(f"{name} must be an int, got {value!r}")
    value = int(value)
    if shard:
        if not (value == -1 or value >= 1):
            raise LayoutError(f"dp_shard must -1 or >=1. (got {value})")
    elif value < 1:
        raise LayoutError(f"Parallelism degree should be >= 1, except for dp_shard ({name} = {value})")
    return value


class TorchtitanMeshes:
    """torchtitan's ``ParallelDims`` after ``build_mesh()``, with meshes made
    by :func:`torchtitan_meshes` (see the module's documentation)."""

    def __init__(
        self,
        *,
        dp_replicate: int,
        dp_shard: int,
        cp: int,
        tp: int,
        pp: int,
        ep: int,
        world_size: int,
        spmd_backend: str,
        device_type: str,
        timeout: Optional[timedelta] = None,
    ) -> None:
        check_torch(layouts=True)
        if spmd_backend not in SPMD_BACKENDS:
            raise LayoutError(f"spmd_backend must be one of {', '.join(SPMD_BACKENDS)}, got {spmd_backend!r}")
        if not isinstance(device_type, str):
            raise LayoutError(f"device_type must be a str ('cuda', 'cpu'), got {device_type!r}")
        dp_replicate, cp, tp, pp, ep = (_degree(n, v) for n, v in zip(
            ("dp_replicate", "cp", "tp", "pp", "ep"), (dp_replicate, cp, tp, pp, ep)))
        dp_shard = _degree("dp_shard", dp_shard, shard=True)
        if isinstance(world_size, bool) or not isinstance(world_size, (int, np.integer)) or world_size < 1:
            raise LayoutError(f"world_size must be a positive int, got {world_size!r}")
        world_size = int(world_size)
        if dp_shard < 0:
            dp_shard = world_size // (dp_replicate * cp * tp * pp)
            if dp_shard < 1:
                raise LayoutError(
                    f"dp_shard = -1 leaves no ranks: WORLD_SIZE({world_size}) < "
                    f"dp_replicate({dp_replicate}) * cp({cp}) * tp({tp}) * pp({pp})"
                )
        if dp_replicate * dp_shard * cp * tp * pp != world_size:
            raise LayoutError(
                f"Invalid parallel dims: dp_replicate({dp_replicate}) * dp_shard({dp_shard}) * "
                f"cp({cp}) * tp({tp}) * pp({pp}) != WORLD_SIZE({world_size})"
            )
        if (dp_shard * cp * tp) % ep:
            raise LayoutError(
                f"ep ({ep}) must divide dp_shard * cp * tp = {dp_shard * cp * tp} "
                "(torchtitan's efsdp = dp_shard * cp * tp / ep)"
            )
        world = dist.get_world_size()
        if world_size > world:
            raise LayoutError(f"world_size {world_size} is larger than torch.distributed's world of {world} ranks")
        self.dp_replicate, self.dp_shard, self.cp, self.tp, self.pp, self.ep = dp_replicate, dp_shard, cp, tp, pp, ep
        self.world_size = world_size
        self.spmd_backend = spmd_backend
        self.device_type = device_type
        #: The rank_layout.Mesh behind the meshes.
        self.mesh = torchtitan_mesh(
            dp_replicate=dp_replicate, dp_shard=dp_shard, cp=cp, tp=tp, pp=pp, ep=ep,
            world_size=world_size, spmd_backend=spmd_backend,
        )
        self._global_meshes: dict[str, Any] = {}
        self._single_axis_meshes: dict[str, Any] = {}
        self._multi_axis_meshes: dict[tuple[str, ...], Any] = {}
        self._spmd_meshes: list[Any] = []
        self._world_mesh: Any = None
        self._build(timeout)

    # --- building -------------------------------------------------------

    def _family(self, name: str, degree: int, fake: bool) -> Family:
        """The groups of torchtitan's dim ``name``: rank-layout's dim set
        behind it, the slowest dim first, over the world's ranks."""
        spec = _DIM_SETS[name]
        view, dims = parse_spec(dict(self.mesh.flattens).get(spec, spec))
        sizes, strides = factorisations(self.mesh)[view].modes(dims)
        assert math.prod(sizes) == degree, (name, sizes, degree)
        return Family(name, sizes, strides, "fake" if fake else None)

    def _unflatten_plan(self) -> list[tuple[str, tuple[str, ...], tuple[int, ...]]]:
        """torchtitan's unflattens of the world mesh, in its order: key,
        dim names, degrees (``loss`` is a flatten, added apart)."""
        batch = self.dp_replicate * self.dp_shard
        fsdp = self.dp_shard * self.cp
        efsdp = fsdp * self.tp // self.ep
        plan: list[tuple[str, tuple[str, ...], tuple[int, ...]]] = [
            ("dataloading", ("pp", "batch", "cp", "tp"), (self.pp, batch, self.cp, self.tp))
        ]
        if self.spmd_backend in ("full_dtensor", "spmd_types"):
            plan.append(("dense", ("pp", "dp_replicate", "dp_shard", "cp", "tp"),
                         (self.pp, self.dp_replicate, self.dp_shard, self.cp, self.tp)))
        if self.spmd_backend == "spmd_types":
            plan.append(("fwdbwd", ("pp", "dp", "cp", "tp"), (self.pp, batch, self.cp, self.tp)))
        if self.spmd_backend == "partial_dtensor":
            plan.append(("dense", ("pp", "dp_replicate", "fsdp", "tp"), (self.pp, self.dp_replicate, fsdp, self.tp)))
        plan.append(("sparse", ("pp", "dp_replicate", "efsdp", "ep"), (self.pp, self.dp_replicate, efsdp, self.ep)))
        return plan

    def _build(self, timeout: Optional[timedelta]) -> None:
        from torch.distributed.device_mesh import DeviceMesh

        plan = self._unflatten_plan()
        world = Family("world", (self.world_size,), (1,))
        loss_size = self.dp_replicate * self.dp_shard * self.cp
        loss = self._family("loss_mesh", loss_size, fake=False)
        per_mesh = {
            key: [self._family(n, d, fake=not self._mesh_exist(n, d)) for n, d in zip(names, degrees)]
            for key, names, degrees in plan
        }
        # Group creation order: torchtitan's (world, data loading, loss,
        # dense, ..., sparse).
        order = [world, *per_mesh["dataloading"], loss]
        for key, _, _ in plan[1:]:
            order += per_mesh[key]
        me = dist.get_rank()
        ranks = np.arange(self.world_size, dtype=np.int64)
        index = me if me < self.world_size else None
        groups = make_groups(order, ranks, index, timeout)
        tensor = torch.arange(self.world_size, dtype=torch.int)
        if index is None:
            self._world_mesh = DeviceMesh(self.device_type, tensor, mesh_dim_names=("world",), _init_backend=False)
            self._world_mesh._dim_group_names = []
            return
        root = DeviceMesh.from_group(groups[0], self.device_type, mesh=tensor, mesh_dim_names=("world",))
        self._world_mesh = root
        loss_mesh = sub_mesh(root, ("loss_mesh",), [loss], [groups[len(per_mesh["dataloading"]) + 1]])
        meshes = {}
        at = 1  # groups[at:] are the dims of the meshes, in plan order (loss after data loading)
        for key, names, _ in plan:
            fams = per_mesh[key]
            meshes[key] = sub_mesh(root, names, fams, groups[at:at + len(fams)])
            at += len(fams) + (key == "dataloading")
        root._flatten_mapping["loss_mesh"] = loss_mesh

        dataloading, dense, sparse = meshes["dataloading"], meshes["dense"], meshes["sparse"]
        self._global_meshes = {"dataloading": dataloading, "loss": loss_mesh, "dense": dense, "sparse": sparse}
        if self.spmd_backend == "spmd_types":
            fwdbwd = meshes["fwdbwd"]["dp", "cp", "tp"]
            self._global_meshes["spmd_dense_for_fwdbwd"] = fwdbwd
        if self.spmd_backend == "spmd_types" and self.ep > 1:
            self._global_meshes["spmd_sparse_for_fwdbwd"] = sparse["dp_replicate", "efsdp", "ep"]
        self._single_axis_meshes = {
            "pp": dataloading["pp"],
            "batch": dataloading["batch"],
            "loss": loss_mesh,
            "dp_replicate": dense["dp_replicate"],
            "cp": dataloading["cp"],
            "tp": dataloading["tp"],
            "ep": sparse["ep"],
            "efsdp": sparse["efsdp"],
        }
        if self.spmd_backend == "full_dtensor":
            self._single_axis_meshes["dp_shard"] = dense["dp_shard"]
            dense_axes = ["dp_replicate", "dp_shard", "cp", "tp"]
        elif self.spmd_backend == "spmd_types":
            self._single_axis_meshes["dp"] = fwdbwd["dp"]
            self._single_axis_meshes["dp_shard"] = dense["dp_shard"]
            dense_axes = ["dp", "cp", "tp"]
        else:
            self._single_axis_meshes["fsdp"] = dense["fsdp"]
            dense_axes = ["dp_replicate", "fsdp", "tp"]
        activated = (self.get_activated_mesh(dense_axes), self.get_activated_mesh(["dp_replicate", "efsdp", "ep"]))
        self._spmd_meshes = [m for m in activated if m is not None]

    def _inside(self) -> None:
        if not self._single_axis_meshes:
            raise LayoutError(
                f"rank {dist.get_rank()} is outside torchtitan's world of {self.world_size} ranks: it has no meshes"
            )

    def install(self, parallel_dims: Any) -> Any:
        """Puts the meshes into torchtitan's ``parallel_dims`` (a
        ``ParallelDims`` with the same degrees, ``build_mesh`` not called
        yet), so that its own methods answer with them; returns it."""
        mine = {n: getattr(self, n) for n in (*_DEGREES, "world_size", "spmd_backend")}
        theirs = {n: getattr(parallel_dims, n, None) for n in mine}
        if mine != theirs:
            raise LayoutError(f"parallel_dims {theirs} differs from these meshes' {mine}")
        parallel_dims._world_mesh = self._world_mesh
        parallel_dims._global_meshes = self._global_meshes
        parallel_dims._single_axis_meshes = self._single_axis_meshes
        parallel_dims._multi_axis_meshes = self._multi_axis_meshes
        parallel_dims._spmd_meshes = self._spmd_meshes
        return parallel_dims

    # --- ParallelDims's queries (torchtitan 0.3.0) ------------------------

    def _mesh_exist(self, name: str, degree: int) -> bool:
        if name == "fsdp":
            return True
        if name == "dp_shard" and self.spmd_backend in ("full_dtensor", "spmd_types"):
            return True
        if name == "efsdp":
            return self.ep > 1
        return degree > 1

    def build_mesh(self) -> Any:
        """The world mesh (every mesh is built already)."""
        return self._world_mesh

    @property
    def world_mesh(self) -> Any:
        return self._world_mesh

    def get_optional_mesh(self, dims: Union[str, list[str]], *, include_singleton_axes: bool = False) -> Any:
        self._inside()
        if isinstance(dims, str):
            dims = [dims]
        for mesh_name in dims:
            if mesh_name not in self._single_axis_meshes:
                raise LayoutError(
                    f"Invalid mesh dim: '{mesh_name}'. Valid dimensions are: {list(self._single_axis_meshes.keys())}"
                )
        if not include_singleton_axes and any(
            not self._mesh_exist(d, self._single_axis_meshes[d].size()) for d in dims
        ):
            return None
        if len(dims) == 1:
            return self._single_axis_meshes[dims[0]]
        key = tuple(dims)
        if key in self._multi_axis_meshes:
            return self._multi_axis_meshes[key]
        candidates = [
            (name, m)
            for name, m in self._global_meshes.items()
            if m.mesh_dim_names is not None and set(dims).issubset(set(m.mesh_dim_names))
        ]
        if not candidates:
            raise LayoutError(f"Invalid mesh name combinations {dims}.")
        submesh = candidates[0][1][key]
        self._multi_axis_meshes[key] = submesh
        return submesh

    def get_mesh(self, dims: Union[str, list[str]]) -> Any:
        mesh = self.get_optional_mesh(dims)
        if mesh is None:
            enabled = "enabled (size > 1)" if isinstance(dims, str) else "all enabled"
            raise LayoutError(f"Mesh '{dims}' is not available. Ensure the corresponding parallelism dimension is {enabled}.")
        return mesh

    def get_all_one_dimensional_meshes(self) -> dict[str, Any]:
        self._inside()
        return {
            k: v
            for k, v in self._single_axis_meshes.items()
            if v.ndim == 1 and v.size() > 1 and self._mesh_exist(k, v.size())
        }

    def spmd_meshes(self) -> list[Any]:
        self._inside()
        return self._spmd_meshes

    def spmd_dense_mesh(self) -> Any:
        self._inside()
        return self._global_meshes["spmd_dense_for_fwdbwd"]

    def spmd_sparse_mesh(self) -> Any:
        self._inside()
        return self._global_meshes.get("spmd_sparse_for_fwdbwd")

    def get_dense_tp_mesh(self) -> Any:
        if self.spmd_backend == "spmd_types":
            return self.spmd_dense_mesh()["tp"]
        if self.spmd_backend == "full_dtensor":
            return self.spmd_meshes()[0]["tp"]
        return self.get_mesh("tp")

    def get_activated_mesh(self, axes: list[str]) -> Any:
        self._inside()
        axes = [a for a in axes if a in self._single_axis_meshes and self.get_optional_mesh(a) is not None]
        return self.get_optional_mesh(axes) if axes else None

    def resolve_mesh(self, axes: Iterable[Any]) -> Any:
        axes_list = [getattr(a, "value", a) for a in axes]
        if self.spmd_backend == "partial_dtensor":
            axes_list = [a for a in axes_list if a in ("tp", "ep")]
        elif self.spmd_backend == "full_dtensor":
            axes_list = [c for a in axes_list for c in (("dp_replicate", "dp_shard") if a == "dp" else (a,))]
        else:
            axes_list = [a for a in axes_list if a in ("dp", "cp", "tp", "ep")]
        mesh = self.get_activated_mesh(axes_list)
        if mesh is None:
            return None
        if self.spmd_backend == "full_dtensor" and mesh not in self.spmd_meshes():
            raise LayoutError(
                f"Resolved mesh {list(mesh.mesh_dim_names)} does not match any SPMD mesh. Valid meshes: "
                f"{[list(m.mesh_dim_names or ()) for m in self.spmd_meshes()]}."
            )
        return mesh

    def resolve_shared_mesh(self, placements: Iterable[Any]) -> Any:
        non_none = [p for p in placements if p is not None]
        if not non_none:
            return None
        axes = non_none[0].axes()
        for p in non_none[1:]:
            if p.axes() != axes:
                raise AssertionError(
                    f"Inconsistent mesh axes within a boundary: {sorted(getattr(k, 'value', k) for k in axes)} vs "
                    f"{sorted(getattr(k, 'value', k) for k in p.axes())}"
                )
        return self.resolve_mesh(axes)

    @property
    def dp_enabled(self) -> bool:
        return self.dp_replicate > 1 or self.dp_shard > 1

    @property
    def dp_replicate_enabled(self) -> bool:
        return self.dp_replicate > 1

    @property
    def dp_shard_enabled(self) -> bool:
        return self.dp_shard > 1

    @property
    def cp_enabled(self) -> bool:
        return self.cp > 1

    @property
    def dp_cp_enabled(self) -> bool:
        return self.dp_enabled or self.cp_enabled

    @property
    def fsdp_enabled(self) -> bool:
        return self.dp_shard_enabled or self.cp_enabled

    @property
    def tp_enabled(self) -> bool:
        return self.tp > 1

    @property
    def pp_enabled(self) -> bool:
        return self.pp > 1

    @property
    def ep_enabled(self) -> bool:
        return self.ep > 1

    @property
    def non_data_parallel_size(self) -> int:
        return self.cp * self.tp * self.pp

    @property
    def seq_len_divisor(self) -> int:
        return self.tp * (self.cp * 2)

    def __repr__(self) -> str:
        degrees = ", ".join(f"{n}={getattr(self, n)}" for n in (*_DEGREES, "world_size"))
        return f"TorchtitanMeshes({degrees}, spmd_backend={self.spmd_backend!r})"


def torchtitan_meshes(
    parallel_dims: Any = None,
    *,
    dp_replicate: int = 1,
    dp_shard: int = -1,
    cp: int = 1,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    world_size: Optional[int] = None,
    spmd_backend: str = "spmd_types",
    device_type: str = "cpu",
    timeout: Optional[timedelta] = None,
) -> TorchtitanMeshes:
    """Every mesh torchtitan's ``ParallelDims(...).build_mesh()`` builds,
    made from members-only groups, as an object with ``ParallelDims``'s
    queries (the module's documentation says what it has).

    ``parallel_dims`` is a torchtitan ``ParallelDims`` (its degrees,
    ``world_size`` and ``spmd_backend`` are read; give no other degree
    then), or ``None`` and the degrees as ``ParallelDims`` takes them
    (``world_size`` defaults to torch.distributed's). Every rank of the
    default process group calls it with the same arguments; ``timeout``
    goes to ``new_group``. Raises :class:`~rank_layout.LayoutError` before
    any group is made, on every rank, for anything it cannot build.
    """
    given = dict(dp_replicate=dp_replicate, dp_shard=dp_shard, cp=cp, tp=tp, pp=pp, ep=ep)
    if parallel_dims is not None:
        defaults = dict(dp_replicate=1, dp_shard=-1, cp=1, tp=1, pp=1, ep=1)
        changed = [k for k in given if given[k] != defaults[k]]
        if world_size is not None:
            changed.append("world_size")
        if changed:
            raise LayoutError(f"give parallel_dims or the degrees, not both (also given: {', '.join(changed)})")
        missing = [n for n in (*_DEGREES, "world_size") if not hasattr(parallel_dims, n)]
        if missing:
            raise LayoutError(f"parallel_dims has no {', '.join(missing)}: not a torchtitan ParallelDims")
        given = {n: getattr(parallel_dims, n) for n in _DEGREES}
        world_size = parallel_dims.world_size
        spmd_backend = getattr(parallel_dims, "spmd_backend", "spmd_types")
    if world_size is None:
        if not dist.is_available() or not dist.is_initialized():
            raise LayoutError("torch.distributed is not initialized: call init_process_group first")
        world_size = dist.get_world_size()
    return TorchtitanMeshes(**given, world_size=world_size, spmd_backend=spmd_backend, device_type=device_type,
                            timeout=timeout)
