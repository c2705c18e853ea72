//! `rank_layout.Mesh`: the crate's [`Mesh`] as a Python class.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use numpy::PyArray2;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyMapping, PyString, PyTuple};
use rank_layout::{Mesh, Selection, Split};

use crate::array;
use crate::error::{OrRaise, raise};
use crate::value::{describe, index, offset, size, string};

/// A named N-D mesh of ranks: any dims, several views of the same ranks,
/// named flattened dim sets, answered per rank in O(dims).
///
/// ``dims`` is a sequence of ``(name, size)`` pairs (tuples or two-item
/// lists, as JSON gives them) or a dict, listed **first-fastest**
/// (Megatron's and HyperCommGrid's order: ``rank = rank_offset + sum(coord *
/// stride)``, the first dim's stride 1). ``rank_map`` maps positions to
/// ranks (a permutation, as a DeviceMesh's mesh tensor). For DeviceMesh's
/// order (the last dim fastest) use :meth:`from_device_mesh`.
///
/// >>> from rank_layout import Mesh
/// >>> mesh = Mesh([("tp", 2), ("cp", 2), ("dp", 4)])
/// >>> mesh.groups("dp")[0], mesh.groups(["dp", "cp"])[1]
/// ([0, 4, 8, 12], [1, 3, 5, 7, 9, 11, 13, 15])
/// >>> mesh.coord(13)
/// {'tp': 1, 'cp': 0, 'dp': 3}
/// >>> mesh.split(13, "cp-dp")
/// Split(color=1, key=6)
/// >>> Mesh({"tp": 2, "tp ": 2})
/// Traceback (most recent call last):
///     ...
/// rank_layout.LayoutError: dim name "tp " is not a name (letters, digits and _, not starting with a digit)
#[pyclass(frozen, subclass, name = "Mesh", module = "rank_layout._native")]
pub(crate) struct PyMesh {
    pub(crate) inner: Mesh,
}

/// A view's name and its dims.
type NamedDims = (String, Vec<(String, u32)>);

/// `(name, size)` pairs from a sequence of pairs or a mapping.
fn pairs(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<(String, u32)>> {
    let bad = || {
        raise(format!(
            "{what} must be a sequence of (name, size) pairs or a dict, got {}",
            describe(obj)
        ))
    };
    if obj.is_instance_of::<PyString>() {
        return Err(bad());
    }
    let items: Vec<Bound<'_, PyAny>> = match obj.cast::<PyMapping>() {
        Ok(m) => m.items()?.iter().collect(),
        Err(_) => obj
            .try_iter()
            .map_err(|_| bad())?
            .collect::<PyResult<_>>()?,
    };
    items
        .iter()
        .map(|item| {
            let pair: Vec<Bound<'_, PyAny>> = if item.is_instance_of::<PyString>() {
                Vec::new()
            } else {
                item.try_iter()
                    .map(|it| it.collect::<PyResult<Vec<_>>>())
                    .map_err(|_| bad())??
            };
            let [name, value] = pair.as_slice() else {
                return Err(raise(format!(
                    "{what}: each dim is a (name, size) pair, got {}",
                    describe(item)
                )));
            };
            let name = string("a dim name", "'tp'", name)?;
            let value = size(&format!("the size of {name}"), value)?;
            Ok((name, value))
        })
        .collect()
}

/// Sizes and names of a shape given as two sequences.
fn shape(shape: &Bound<'_, PyAny>, names: &Bound<'_, PyAny>) -> PyResult<(Vec<u32>, Vec<String>)> {
    let sizes = shape
        .try_iter()
        .map_err(|_| {
            raise(format!(
                "shape must be a sequence of ints, got {}",
                describe(shape)
            ))
        })?
        .map(|s| size("a shape entry", &s?))
        .collect::<PyResult<Vec<u32>>>()?;
    if names.is_instance_of::<PyString>() {
        return Err(raise(format!(
            "names must be a sequence of str, got {}",
            describe(names)
        )));
    }
    let names = names
        .try_iter()
        .map_err(|_| {
            raise(format!(
                "names must be a sequence of str, got {}",
                describe(names)
            ))
        })?
        .map(|n| string("a dim name", "'tp'", &n?))
        .collect::<PyResult<Vec<String>>>()?;
    Ok((sizes, names))
}

impl PyMesh {
    /// The selection of `dims` (a str spec or a sequence of names) in
    /// `view` (or the mesh).
    fn selection(&self, dims: &Bound<'_, PyAny>, view: Option<&str>) -> PyResult<Selection> {
        if dims.is_instance_of::<PyString>() {
            let spec = string("dims", "'dp-cp'", dims)?;
            let spec = match view {
                Some(v) => format!("{v}:{spec}"),
                None => spec,
            };
            return self.inner.select(&spec).or_raise();
        }
        let names = dims
            .try_iter()
            .map_err(|_| {
                raise(format!(
                    "dims must be a str or a sequence of str, got {}",
                    describe(dims)
                ))
            })?
            .map(|n| string("a dim name", "'tp'", &n?))
            .collect::<PyResult<Vec<String>>>()?;
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        self.inner.select_dims(view, &refs).or_raise()
    }

    fn rank_arg(&self, obj: &Bound<'_, PyAny>) -> PyResult<u32> {
        let (first, last) = (self.inner.rank_offset(), self.inner.rank_end() - 1);
        index("rank", obj, |v| {
            raise(format!(
                "rank {v} is outside the mesh (ranks {first}..{last}, both included)"
            ))
        })
    }
}

#[pymethods]
impl PyMesh {
    #[new]
    #[pyo3(signature = (dims, *, rank_offset=None, rank_map=None))]
    fn new(
        dims: &Bound<'_, PyAny>,
        rank_offset: Option<&Bound<'_, PyAny>>,
        rank_map: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let mut mesh = Mesh::new(pairs(dims, "dims")?).or_raise()?;
        if let Some(o) = rank_offset {
            mesh = mesh
                .with_rank_offset(offset("rank_offset", o)?)
                .or_raise()?;
        }
        if let Some(map) = rank_map.filter(|m| !m.is_none()) {
            let ranks = map
                .try_iter()
                .map_err(|_| {
                    raise(format!(
                        "rank_map must be a sequence of ints, got {}",
                        describe(map)
                    ))
                })?
                .map(|r| offset("a rank_map entry", &r?))
                .collect::<PyResult<Vec<u32>>>()?;
            mesh = mesh.with_rank_map(ranks).or_raise()?;
        }
        Ok(PyMesh { inner: mesh })
    }

    /// A mesh in PyTorch DeviceMesh's order: ``shape[i]`` is the size of
    /// ``names[i]`` and the **last** dim varies fastest, as
    /// ``init_device_mesh(device, shape, mesh_dim_names=names)`` lays ranks.
    ///
    /// >>> Mesh.from_device_mesh((2, 4), ("dp", "tp")).groups("tp")[1]
    /// [4, 5, 6, 7]
    #[staticmethod]
    #[pyo3(signature = (shape, names, *, rank_offset=None))]
    fn from_device_mesh(
        shape: &Bound<'_, PyAny>,
        names: &Bound<'_, PyAny>,
        rank_offset: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyMesh> {
        let (sizes, names) = self::shape(shape, names)?;
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut mesh = Mesh::from_device_mesh(&sizes, &refs).or_raise()?;
        if let Some(o) = rank_offset {
            mesh = mesh
                .with_rank_offset(offset("rank_offset", o)?)
                .or_raise()?;
        }
        Ok(PyMesh { inner: mesh })
    }

    /// A mesh in Megatron-Core ``HyperCommGrid``'s order: ``shape[i]`` is
    /// the size of ``dim_names[i]``, the first dim fastest.
    ///
    /// >>> Mesh.from_hyper_comm_grid([2, 4], ["tp", "dp"], 8).groups("dp")[0]
    /// [8, 10, 12, 14]
    #[staticmethod]
    #[pyo3(signature = (shape, dim_names, rank_offset=None))]
    fn from_hyper_comm_grid(
        shape: &Bound<'_, PyAny>,
        dim_names: &Bound<'_, PyAny>,
        rank_offset: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyMesh> {
        let (sizes, names) = self::shape(shape, dim_names)?;
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let o = rank_offset
            .map(|o| offset("rank_offset", o))
            .transpose()?
            .unwrap_or(0);
        Ok(PyMesh {
            inner: Mesh::from_hyper_comm_grid(&sizes, &refs, o).or_raise()?,
        })
    }

    /// The dims, first fastest, as ``(name, size)`` pairs.
    ///
    /// >>> Mesh.from_device_mesh((2, 4), ("dp", "tp")).dims
    /// [('tp', 4), ('dp', 2)]
    #[getter]
    fn dims(&self) -> Vec<(String, u32)> {
        self.inner.dims().map(|(n, s)| (n.to_owned(), s)).collect()
    }

    /// The views, by name: their dims, first fastest.
    #[getter]
    fn views(&self) -> PyResult<Vec<NamedDims>> {
        self.inner
            .views()
            .map(|v| {
                let dims = self.inner.view_dims(v).or_raise()?;
                Ok((v.to_owned(), dims.map(|(n, s)| (n.to_owned(), s)).collect()))
            })
            .collect()
    }

    /// The flattens: each name and the dim set it names (``"expert:ep-edp"``).
    #[getter]
    fn flattens(&self) -> Vec<(String, String)> {
        self.inner
            .flattens()
            .map(|(n, s)| (n.to_owned(), self.inner.name_of(s)))
            .collect()
    }

    /// The number of ranks.
    #[getter]
    fn world_size(&self) -> u32 {
        self.inner.world_size()
    }

    /// The first rank.
    #[getter]
    fn rank_offset(&self) -> u32 {
        self.inner.rank_offset()
    }

    /// The rank map (position -> rank - rank_offset), or ``None``.
    #[getter]
    fn rank_map(&self) -> Option<Vec<u32>> {
        self.inner.rank_map().map(<[u32]>::to_vec)
    }

    /// The same mesh with a view: ``dims`` another factorisation of the same
    /// ranks, ``(name, size)`` pairs first fastest; each dim of ``shared``
    /// must enumerate exactly as in the mesh (checked from sizes and
    /// strides), else a :class:`LayoutError` naming it.
    ///
    /// >>> mesh = Mesh([("tp", 2), ("cp", 2), ("dp", 2), ("pp", 2)])
    /// >>> expert = mesh.view("expert", [("etp", 1), ("ep", 4), ("edp", 2), ("pp", 2)], shared=["pp"])
    /// >>> expert.groups("ep", view="expert")[0]
    /// [0, 1, 2, 3]
    #[pyo3(signature = (name, dims, shared=None))]
    fn view(
        &self,
        name: &Bound<'_, PyAny>,
        dims: &Bound<'_, PyAny>,
        shared: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyMesh> {
        let name = string("view", "'expert'", name)?;
        let dims = pairs(dims, "view dims")?;
        let shared: Vec<String> = match shared {
            Some(s) if !s.is_none() => {
                if s.is_instance_of::<PyString>() {
                    vec![string("shared", "['pp']", s)?]
                } else {
                    s.try_iter()?
                        .map(|n| string("a shared dim", "'pp'", &n?))
                        .collect::<PyResult<_>>()?
                }
            }
            _ => Vec::new(),
        };
        let refs: Vec<(&str, u32)> = dims.iter().map(|(n, s)| (n.as_str(), *s)).collect();
        let shared_refs: Vec<&str> = shared.iter().map(String::as_str).collect();
        Ok(PyMesh {
            inner: self
                .inner
                .clone()
                .view(&name, &refs, &shared_refs)
                .or_raise()?,
        })
    }

    /// The same mesh with ``name`` naming the dim set ``dims`` (of the mesh,
    /// or of ``view``), usable wherever a dim set is: DeviceMesh's
    /// ``_flatten``.
    ///
    /// >>> Mesh([("tp", 2), ("cp", 2), ("dp", 2)]).flatten("dp_cp", ["dp", "cp"]).groups("dp_cp")[0]
    /// [0, 2, 4, 6]
    #[pyo3(signature = (name, dims, view=None))]
    fn flatten(
        &self,
        name: &Bound<'_, PyAny>,
        dims: &Bound<'_, PyAny>,
        view: Option<&str>,
    ) -> PyResult<PyMesh> {
        let name = string("flatten", "'dp_cp'", name)?;
        let selection = self.selection(dims, view)?;
        let spec = self.inner.name_of(selection);
        Ok(PyMesh {
            inner: self.inner.clone().flatten(&name, &spec).or_raise()?,
        })
    }

    /// The groups of ``dims`` (``"cp-dp"``, ``["dp", "cp"]``, a flatten's
    /// name, or ``"expert:ep"``; with ``view``, dims of that view): the
    /// ranks that agree on every other dim, members in the mesh's dim order,
    /// groups by the other dims' coordinates (by first member).
    ///
    /// >>> Mesh([("tp", 2), ("dp", 2)]).groups("dp")
    /// [[0, 2], [1, 3]]
    #[pyo3(signature = (dims, view=None))]
    fn groups<'py>(
        &self,
        py: Python<'py>,
        dims: &Bound<'py, PyAny>,
        view: Option<&str>,
    ) -> PyResult<Bound<'py, PyList>> {
        let groups = self
            .inner
            .groups_selected(self.selection(dims, view)?)
            .or_raise()?;
        crate::memory::check_ints(groups.member_count())?;
        crate::lists::table_rows(py, groups.table().or_raise()?)
    }

    /// The groups of ``dims`` as a NumPy ``uint32`` array (groups, size),
    /// filled by rank-layout.
    ///
    /// >>> Mesh([("tp", 2), ("dp", 2)]).groups_array("dp").tolist()
    /// [[0, 2], [1, 3]]
    #[pyo3(signature = (dims, view=None))]
    fn groups_array<'py>(
        &self,
        py: Python<'py>,
        dims: &Bound<'py, PyAny>,
        view: Option<&str>,
    ) -> PyResult<Bound<'py, PyArray2<u32>>> {
        let selection = self.selection(dims, view)?;
        let name = self.inner.name_of(selection);
        array::array_of(py, &name, self.inner.groups_selected(selection).or_raise()?)
    }

    /// ``rank``'s coordinates (in ``view``'s dims with ``view``) as a dict
    /// name -> index, or ``None`` for a rank outside the mesh.
    ///
    /// >>> Mesh([("tp", 2), ("dp", 2)], rank_offset=4).coord(7), Mesh([("tp", 2)]).coord(9)
    /// ({'tp': 1, 'dp': 1}, None)
    #[pyo3(signature = (rank, view=None))]
    fn coord<'py>(
        &self,
        py: Python<'py>,
        rank: &Bound<'py, PyAny>,
        view: Option<&str>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Ok(rank) = self.rank_arg(rank) else {
            return Ok(None);
        };
        let found = match view {
            Some(v) => self.inner.placement_in(rank, v),
            None => self.inner.placement(rank),
        };
        let coord = match found {
            Ok(c) => c,
            Err(rank_layout::Error::RankOutOfRange { .. }) => return Ok(None),
            Err(e) => return Err(crate::error::from_crate(e)),
        };
        let d = PyDict::new(py);
        for (name, value) in coord.iter() {
            d.set_item(name, value)?;
        }
        Ok(Some(d))
    }

    /// ``rank``'s comm-split :class:`Split` ``(color, key)`` in ``dims``:
    /// its group's number and its place there, in O(dims).
    ///
    /// >>> Mesh([("tp", 2), ("dp", 2)]).split(3, "dp")
    /// Split(color=1, key=1)
    #[pyo3(signature = (rank, dims, view=None))]
    fn split<'py>(
        &self,
        py: Python<'py>,
        rank: &Bound<'py, PyAny>,
        dims: &Bound<'py, PyAny>,
        view: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let s = self
            .inner
            .split_selected(self.rank_arg(rank)?, self.selection(dims, view)?)
            .or_raise()?;
        split_tuple(py, s)
    }

    /// ``rank``'s :class:`Split` in every dim set of ``dim_sets``, in one
    /// pass.
    ///
    /// >>> Mesh([("tp", 2), ("dp", 2)]).splits(3, ["tp", "dp"])
    /// [Split(color=1, key=1), Split(color=1, key=1)]
    fn splits<'py>(
        &self,
        py: Python<'py>,
        rank: &Bound<'py, PyAny>,
        dim_sets: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let rank = self.rank_arg(rank)?;
        let specs: Vec<String> = if dim_sets.is_instance_of::<PyString>() {
            vec![string("dim_sets", "['tp', 'dp']", dim_sets)?]
        } else {
            dim_sets
                .try_iter()?
                .map(|s| string("a dim set", "'dp-cp'", &s?))
                .collect::<PyResult<_>>()?
        };
        let refs: Vec<&str> = specs.iter().map(String::as_str).collect();
        let plan = self.inner.split_plan(&refs).or_raise()?;
        let out = PyList::empty(py);
        for s in plan.splits(rank).or_raise()? {
            out.append(split_tuple(py, s)?)?;
        }
        Ok(out)
    }

    /// Pickles as the mesh's dims, rank offset, rank map, views and
    /// flattens, rebuilt (and checked again) by ``rank_layout._rebuild_mesh``
    /// on unpickling: what ``torch.multiprocessing`` or a launcher's worker
    /// pool needs to hand a mesh to other processes.
    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let rebuild = py.import("rank_layout")?.getattr("_rebuild_mesh")?;
        let parts = (
            self.dims(),
            self.rank_offset(),
            self.rank_map(),
            self.views()?,
            self.flattens(),
        );
        Ok((rebuild, parts.into_pyobject(py)?))
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyMesh>()
            .is_ok_and(|o| o.get().inner == self.inner)
    }

    fn __hash__(&self) -> u64 {
        let mut h = DefaultHasher::new();
        self.inner.hash(&mut h);
        h.finish()
    }

    fn __repr__(&self) -> String {
        let dims: Vec<String> = self
            .inner
            .dims()
            .map(|(n, s)| format!("({n:?}, {s})"))
            .collect();
        let mut out = format!("Mesh([{}]", dims.join(", ")).replace('"', "'");
        if self.inner.rank_offset() != 0 {
            out.push_str(&format!(", rank_offset={}", self.inner.rank_offset()));
        }
        if let Some(map) = self.inner.rank_map() {
            out.push_str(&format!(", rank_map={map:?}"));
        }
        out.push(')');
        for v in self.inner.views() {
            if let Ok(dims) = self.inner.view_dims(v) {
                let d: Vec<String> = dims.map(|(n, s)| format!("('{n}', {s})")).collect();
                out.push_str(&format!(".view('{v}', [{}])", d.join(", ")));
            }
        }
        for (n, s) in self.inner.flattens() {
            out.push_str(&format!(".flatten('{n}', '{}')", self.inner.name_of(s)));
        }
        out
    }
}

/// torchtitan's ``ParallelDims(dp_replicate, dp_shard, cp, tp, pp, ep,
/// world_size, spmd_backend)`` (0.3.0) as one :class:`Mesh`: dims ``tp``,
/// ``cp``, ``dp_shard``, ``dp_replicate``, ``pp`` (first fastest), the view
/// ``expert`` (``ep``, ``efsdp``, ``dp_replicate``, ``pp``, with ``efsdp =
/// dp_shard*cp*tp/ep``) and the names ``batch``, ``dp``, ``loss``,
/// ``fsdp``, ``ep``, ``efsdp``: every name of its ``get_mesh`` is a dim set.
/// ``dp_shard=-1`` is inferred from ``world_size``; ``spmd_backend`` is
/// accepted (every backend's names are there).
///
/// >>> from rank_layout import torchtitan_mesh
/// >>> mesh = torchtitan_mesh(dp_shard=-1, tp=2, ep=2, world_size=8)
/// >>> mesh.groups("efsdp")[0], mesh.groups("ep")[0], mesh.groups("batch")[0]
/// ([0, 2, 4, 6], [0, 1], [0, 2, 4, 6])
#[pyfunction]
#[pyo3(signature = (*, dp_replicate=None, dp_shard=None, cp=None, tp=None, pp=None, ep=None, world_size, spmd_backend=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn torchtitan_mesh(
    dp_replicate: Option<&Bound<'_, PyAny>>,
    dp_shard: Option<&Bound<'_, PyAny>>,
    cp: Option<&Bound<'_, PyAny>>,
    tp: Option<&Bound<'_, PyAny>>,
    pp: Option<&Bound<'_, PyAny>>,
    ep: Option<&Bound<'_, PyAny>>,
    world_size: &Bound<'_, PyAny>,
    spmd_backend: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyMesh> {
    let degree = |name: &str, v: Option<&Bound<'_, PyAny>>| match v {
        Some(v) if !v.is_none() => size(name, v),
        _ => Ok(1),
    };
    let shard = match dp_shard {
        Some(v) if !v.is_none() => match v.extract::<i64>() {
            Ok(-1) => None,
            _ => Some(size("dp_shard", v)?),
        },
        _ => None,
    };
    if let Some(b) = spmd_backend.filter(|b| !b.is_none()) {
        let b = string("spmd_backend", "'spmd_types'", b)?;
        if !["spmd_types", "full_dtensor", "partial_dtensor"].contains(&b.as_str()) {
            return Err(raise(format!(
                "spmd_backend must be 'spmd_types', 'full_dtensor' or 'partial_dtensor', got {b:?}"
            )));
        }
    }
    let mesh = rank_layout::torchtitan_mesh(
        degree("dp_replicate", dp_replicate)?,
        shard,
        degree("cp", cp)?,
        degree("tp", tp)?,
        degree("pp", pp)?,
        degree("ep", ep)?,
        size("world_size", world_size)?,
    )
    .or_raise()?;
    Ok(PyMesh { inner: mesh })
}

/// A split as `rank_layout.Split` (a named tuple), or a plain tuple when
/// the package's Python half is not loaded.
pub(crate) fn split_tuple(py: Python<'_>, s: Split) -> PyResult<Bound<'_, PyAny>> {
    let plain = PyTuple::new(py, [s.color, s.key])?.into_any();
    match py.import("rank_layout").and_then(|m| m.getattr("Split")) {
        Ok(class) => class.call1(plain.cast::<PyTuple>()?),
        Err(_) => Ok(plain),
    }
}

/// A split as [`split_tuple`] makes it, or `None`.
pub(crate) fn split_or_none(py: Python<'_>, s: Option<Split>) -> PyResult<Bound<'_, PyAny>> {
    match s {
        Some(s) => split_tuple(py, s),
        None => Ok(py.None().into_bound(py)),
    }
}
