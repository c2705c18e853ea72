//! `rank_layout.Modules`: the crate's [`Modules`] (named modules, the
//! edges between them and each edge's bridge plan) as a Python class.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyMapping, PyString, PyTuple};
use rank_layout::{
    Layout, Mesh, Modules, Selection,
    modules::{Bridge, BridgeKind, BridgeRole, ColocatedPlan, GroupList, Spans},
};

use crate::config;
use crate::error::{OrRaise, raise};
use crate::layout::PyLayout;
use crate::mesh::{PyMesh, split_or_none};
use crate::value::{describe, index, string};

/// The dims a module's mesh may have (the crate's module vocabulary).
const MODULE_DIMS: [&str; 5] = ["tp", "gtp", "cp", "dp", "pp"];

/// Named modules (a vision encoder, an audio encoder, a language model),
/// each a mesh of ``tp``, ``gtp``, ``cp``, ``dp`` and ``pp``, on
/// consecutive rank spans or all on the same ranks, joined by the edges of
/// a directed acyclic graph, with the bridge plan of every edge
/// (Megatron-Core's MIMO, computed by coordinates).
///
/// ``modules`` is a list of ``(name, mesh)`` pairs (tuples or two-item
/// lists; a dict name -> mesh too), in declaration order. Each mesh is a
/// :class:`Mesh`, a :class:`Layout` (its :meth:`Layout.mesh`) or a dict of
/// :class:`Layout` keywords (a Megatron configuration). The modules follow
/// each other from the first module's ``rank_offset``; with
/// ``colocated=True`` they all share the first module's ranks (and must be
/// as many). ``edges`` is a sequence of ``(src, dst)`` pairs, or a
/// topology dict as Megatron-Core's MIMO takes it (``{"vision": ["llm"],
/// "llm": []}``), where every module is a key.
///
/// Anything invalid (a cycle, an unknown module, lane counts that do not
/// divide, a dim outside the module vocabulary) raises
/// :class:`LayoutError` naming it.
///
/// >>> from rank_layout import Mesh, Modules
/// >>> modules = Modules([("vision", Mesh([("tp", 2), ("dp", 4)])),
/// ...                    ("llm", Mesh([("tp", 4), ("dp", 2)]))],
/// ...                   edges=[("vision", "llm")])
/// >>> plan = modules.bridge("vision", "llm")
/// >>> plan["src_leaders"], plan["dst_leaders"]
/// ([1, 3, 5, 7], [8, 12])
/// >>> plan["pairs"]
/// [(1, 8), (3, 8), (5, 12), (7, 12)]
/// >>> modules.module_of(9), modules.total_stages
/// ('llm', 2)
/// >>> Modules([("a", Mesh([("dp", 2)])), ("b", Mesh([("dp", 3)]))], edges={"a": ["b"], "b": []})
/// Traceback (most recent call last):
///     ...
/// rank_layout.LayoutError: edge a -> b: a has 2 data lanes (gtp*dp) and b 3; one count must divide the other
#[pyclass(frozen, name = "Modules", module = "rank_layout._native")]
pub(crate) struct PyModules {
    inner: Modules,
}

/// The mesh of module `name` from a `Mesh`, a `Layout` or a dict of
/// `Layout` keywords.
fn mesh_of(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Mesh> {
    let in_module = |e: PyErr| {
        let py = obj.py();
        raise(format!("module {name}: {}", e.value(py)))
    };
    if let Ok(mesh) = obj.cast::<PyMesh>() {
        return Ok(mesh.get().inner.clone());
    }
    if let Ok(layout) = obj.cast::<PyLayout>() {
        return layout.get().inner.mesh().or_raise().map_err(in_module);
    }
    if let Ok(kwargs) = obj.cast::<PyDict>() {
        for key in kwargs.keys() {
            if !key.is_instance_of::<PyString>() {
                return Err(raise(format!(
                    "module {name}: Layout keywords are str, got {}",
                    describe(&key)
                )));
            }
        }
        let config = config::from_kwargs(Some(kwargs)).map_err(in_module)?;
        return Layout::new(&config)
            .and_then(|l| l.mesh())
            .or_raise()
            .map_err(in_module);
    }
    Err(raise(format!(
        "module {name}: its mesh must be a Mesh, a Layout or a dict of Layout keywords, got {}",
        describe(obj)
    )))
}

/// The items of a sequence (not a str), or `None`.
fn items<'py>(obj: &Bound<'py, PyAny>) -> Option<Vec<Bound<'py, PyAny>>> {
    if obj.is_instance_of::<PyString>() {
        return None;
    }
    obj.try_iter().ok()?.collect::<PyResult<Vec<_>>>().ok()
}

/// A two-item pair (tuple or list), or `None`.
fn pair<'py>(obj: &Bound<'py, PyAny>) -> Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let mut it = items(obj)?.into_iter();
    match (it.next(), it.next(), it.next()) {
        (Some(a), Some(b), None) => Some((a, b)),
        _ => None,
    }
}

/// `(name, mesh)` of every module, in declaration order.
fn module_list(obj: &Bound<'_, PyAny>) -> PyResult<Vec<(String, Mesh)>> {
    let bad = || {
        raise(format!(
            "modules must be a list of (name, mesh) pairs, got {}",
            describe(obj)
        ))
    };
    let entries: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = match obj.cast::<PyMapping>() {
        Ok(m) => m
            .items()?
            .iter()
            .map(|i| pair(&i).ok_or_else(bad))
            .collect::<PyResult<_>>()?,
        Err(_) => items(obj)
            .ok_or_else(bad)?
            .iter()
            .map(|item| {
                pair(item).ok_or_else(|| {
                    raise(format!(
                        "modules: each module is a (name, mesh) pair, got {}",
                        describe(item)
                    ))
                })
            })
            .collect::<PyResult<_>>()?,
    };
    entries
        .iter()
        .map(|(name, mesh)| {
            let name = string("a module name", "'vision'", name)?;
            let mesh = mesh_of(&name, mesh)?;
            Ok((name, mesh))
        })
        .collect()
}

/// A module name in `what`.
fn name_in(what: &str, obj: &Bound<'_, PyAny>) -> PyResult<String> {
    string(what, "'vision'", obj)
}

/// The edges: `(src, dst)` pairs, or a topology dict in which every module
/// is a key.
fn edge_list(obj: &Bound<'_, PyAny>, names: &[String]) -> PyResult<Vec<(String, String)>> {
    if obj.is_none() {
        return Ok(Vec::new());
    }
    if let Ok(topology) = obj.cast::<PyDict>() {
        let mut keys = Vec::new();
        let mut out = Vec::new();
        for (key, value) in topology.iter() {
            let src = name_in("a topology key", &key)?;
            if !names.contains(&src) {
                return Err(raise(format!(
                    "the topology names module {src:?}, which is not one (the modules: {})",
                    names.join(", ")
                )));
            }
            let dsts = items(&value).ok_or_else(|| {
                raise(format!(
                    "topology[{src:?}] must be a list of module names, got {}",
                    describe(&value)
                ))
            })?;
            for d in &dsts {
                out.push((src.clone(), name_in(&format!("topology[{src:?}]"), d)?));
            }
            keys.push(src);
        }
        if let Some(missing) = names.iter().find(|n| !keys.contains(n)) {
            return Err(raise(format!(
                "module {missing:?} is not in the topology (every module is a key, with [] for no edge)"
            )));
        }
        return Ok(out);
    }
    let bad = || {
        raise(format!(
            "edges must be a sequence of (src, dst) pairs or a topology dict, got {}",
            describe(obj)
        ))
    };
    items(obj)
        .ok_or_else(bad)?
        .iter()
        .map(|item| {
            let (s, d) = pair(item).ok_or_else(|| {
                raise(format!(
                    "edges: each edge is a (src, dst) pair, got {}",
                    describe(item)
                ))
            })?;
            Ok((name_in("an edge's src", &s)?, name_in("an edge's dst", &d)?))
        })
        .collect()
}

/// A dim set: a str (`"tp-dp"`) or a sequence of dim names.
fn dims_spec(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    if obj.is_instance_of::<PyString>() {
        return string("dims", "'tp-dp'", obj);
    }
    let names = items(obj).ok_or_else(|| {
        raise(format!(
            "dims must be a str or a sequence of str, got {}",
            describe(obj)
        ))
    })?;
    let names = names
        .iter()
        .map(|n| string("a dim name", "'tp'", n))
        .collect::<PyResult<Vec<String>>>()?;
    Ok(names.join("-"))
}

/// A plan's groups as a list of lists of ints ([`crate::lists`]).
fn groups<'py>(py: Python<'py>, g: &GroupList) -> PyResult<Bound<'py, PyList>> {
    let members = crate::lists::try_copy(g.members())?;
    crate::lists::rows(py, members, g.len(), g.group_size())
}

/// Ranks as a list of ints ([`crate::lists`]).
fn ints<'py>(py: Python<'py>, ranks: &[u32]) -> PyResult<Bound<'py, PyList>> {
    crate::lists::ints(py, crate::lists::try_copy(ranks)?)
}

/// Pairs of ranks as a list of tuples, made by NumPy and Python (every
/// allocation fallible).
fn pairs<'py>(py: Python<'py>, pairs: &[(u32, u32)]) -> PyResult<Bound<'py, PyAny>> {
    let mut flat = Vec::new();
    flat.try_reserve_exact(pairs.len().saturating_mul(2))
        .map_err(|_| pyo3::exceptions::PyMemoryError::new_err("cannot allocate the pairs"))?;
    flat.extend(pairs.iter().flat_map(|(a, b)| [*a, *b]));
    let rows = crate::lists::rows(py, flat, pairs.len(), 2)?;
    let builtins = py.import("builtins")?;
    let tuples = builtins
        .getattr("map")?
        .call1((builtins.getattr("tuple")?, rows))?;
    builtins.getattr("list")?.call1((tuples,))
}

/// A bridge plan as a dict (see [`PyModules::bridge`]).
fn bridge_dict<'py>(py: Python<'py>, b: &Bridge) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("src_leaders", ints(py, &b.src_leaders)?)?;
    d.set_item("dst_leaders", ints(py, &b.dst_leaders)?)?;
    d.set_item("pairs", pairs(py, &b.pairs)?)?;
    d.set_item("src_broadcast", groups(py, &b.src_broadcast)?)?;
    d.set_item("dst_broadcast", groups(py, &b.dst_broadcast)?)?;
    if let Some(g) = &b.dst_cp_reduce {
        d.set_item("dst_cp_reduce", groups(py, g)?)?;
    }
    if let Some(g) = &b.src_cp_gather {
        d.set_item("src_cp_gather", groups(py, g)?)?;
    }
    d.set_item("bridge_group", ints(py, &b.bridge_group)?)?;
    if let Some(c) = &b.colocated {
        d.set_item("colocated", colocated_dict(py, b, c)?)?;
    }
    Ok(d)
}

fn colocated_dict<'py>(
    py: Python<'py>,
    b: &Bridge,
    c: &ColocatedPlan,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("mode", c.mode.name())?;
    d.set_item("direction", b.direction.name())?;
    d.set_item("scale", b.scale)?;
    d.set_item("gather_groups", groups(py, &c.gather_groups)?)?;
    d.set_item("slots", ints(py, &c.slots)?)?;
    d.set_item("reason", c.reason.clone())?;
    if let Some(g) = &c.src_cp_gather {
        d.set_item("src_cp_gather", groups(py, g)?)?;
    }
    if let Some(g) = &c.dst_cp_reduce {
        d.set_item("dst_cp_reduce", groups(py, g)?)?;
    }
    Ok(d)
}

fn role_dict<'py>(py: Python<'py>, r: &BridgeRole) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("src", r.src.clone())?;
    d.set_item("dst", r.dst.clone())?;
    d.set_item("src_leader", r.src_leader)?;
    d.set_item("dst_leader", r.dst_leader)?;
    d.set_item("sends_to", r.sends_to.clone())?;
    d.set_item("receives_from", r.receives_from.clone())?;
    d.set_item("slot", r.slot)?;
    let splits = PyDict::new(py);
    for (kind, s) in &r.splits {
        splits.set_item(kind.name(), split_or_none(py, *s)?)?;
    }
    d.set_item("splits", splits)?;
    Ok(d)
}

fn kind_of(obj: &Bound<'_, PyAny>) -> PyResult<BridgeKind> {
    string("kind", "'src_broadcast'", obj)?
        .parse::<BridgeKind>()
        .or_raise()
}

/// The group of `rank` in `selection` of `mesh`, members in key order.
fn group_of(mesh: &Mesh, selection: Selection, rank: u32) -> PyResult<Vec<u32>> {
    let s = mesh.split_selected(rank, selection).or_raise()?;
    mesh.groups_selected(selection)
        .or_raise()?
        .nth(s.color as usize)
        .map(|g| g.to_vec())
        .ok_or_else(|| raise(format!("rank {rank}'s group {} is not there", s.color)))
}

impl PyModules {
    fn rank_arg(&self, obj: &Bound<'_, PyAny>) -> PyResult<u32> {
        let first = self.inner.rank_offset();
        let last = self.inner.rank_end().saturating_sub(1);
        index("rank", obj, |v| {
            raise(format!(
                "rank {v} is outside the modules (ranks {first}..{last}, both included)"
            ))
        })
    }

    /// `MemoryError` before a plan whose Python lists would not fit: at
    /// most four ranks per rank of its two modules, each a Python int.
    fn check_plan(&self, src: &str, dst: &str) -> PyResult<()> {
        let world = |name: &str| -> PyResult<u64> {
            Ok(u64::from(self.inner.module(name).or_raise()?.world_size()))
        };
        crate::memory::check_ints(4 * (world(src)? + world(dst)?))
    }

    fn round_arg(&self, obj: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
        let rounds = self.inner.rounds();
        match obj {
            None => Ok(0),
            Some(o) if o.is_none() => Ok(0),
            Some(o) => {
                let past = |v: String| {
                    raise(format!(
                        "round {v} does not exist: the modules' groups are built in {rounds} round(s) (Modules.rounds)"
                    ))
                };
                let r = index("round", o, past)? as usize;
                if r >= rounds {
                    return Err(past(r.to_string()));
                }
                Ok(r)
            }
        }
    }
}

#[pymethods]
impl PyModules {
    #[new]
    #[pyo3(signature = (modules, edges=None, colocated=None), text_signature = "(modules, edges=(), colocated=False)")]
    fn new(
        modules: &Bound<'_, PyAny>,
        edges: Option<&Bound<'_, PyAny>>,
        colocated: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let colocated = match colocated {
            None => false,
            Some(c) => c
                .cast::<PyBool>()
                .map(|b| b.is_true())
                .map_err(|_| raise(format!("colocated must be a bool, got {}", describe(c))))?,
        };
        let list = module_list(modules)?;
        let names: Vec<String> = list.iter().map(|(n, _)| n.clone()).collect();
        let spans = if colocated {
            Spans::Colocated
        } else {
            Spans::Consecutive
        };
        let mut inner = Modules::new(list, spans).or_raise()?;
        if let Some(edges) = edges {
            for (s, d) in edge_list(edges, &names)? {
                inner = inner.edge(&s, &d).or_raise()?;
            }
        }
        Ok(PyModules { inner })
    }

    /// The bridge plan of the edge ``src -> dst``, ranks global, as a dict:
    ///
    /// - ``src_leaders``, ``dst_leaders``: one leader per data lane, in lane
    ///   order (the source's at every model coordinate's last value, the
    ///   destination's at 0);
    /// - ``pairs``: ``(source leader, destination leader)`` tuples, by
    ///   source lane then destination lane;
    /// - ``src_broadcast``, ``dst_broadcast``: per lane, its ranks at the
    ///   source's last stage and the destination's first stage;
    /// - ``dst_cp_reduce`` (only with destination cp > 1) and
    ///   ``src_cp_gather`` (only with source cp > 1): per lane, its cp ranks;
    /// - ``bridge_group``: every leader, sorted;
    /// - ``colocated`` (colocated modules only): ``mode`` (``"collective"``
    ///   or ``"p2p"``), ``direction`` (``"fan_in"``, ``"fan_out"`` or
    ///   ``"equal"``), ``scale``, ``gather_groups``, ``slots`` (by rank),
    ///   ``reason`` (why p2p, else ``None``), and ``src_cp_gather`` /
    ///   ``dst_cp_reduce`` when present.
    ///
    /// >>> m = Modules([("enc", Mesh([("tp", 2), ("dp", 2)])), ("llm", Mesh([("tp", 4)]))], [("enc", "llm")])
    /// >>> m.bridge("enc", "llm")
    /// {'src_leaders': [1, 3], 'dst_leaders': [4], 'pairs': [(1, 4), (3, 4)], 'src_broadcast': [[0, 1], [2, 3]], 'dst_broadcast': [[4, 5, 6, 7]], 'bridge_group': [1, 3, 4]}
    fn bridge<'py>(&self, py: Python<'py>, src: &str, dst: &str) -> PyResult<Bound<'py, PyDict>> {
        self.check_plan(src, dst)?;
        bridge_dict(py, &self.inner.bridge(src, dst).or_raise()?)
    }

    /// Every edge's bridge plan (as :meth:`bridge`), in a dict keyed by
    /// ``(src, dst)``, in :attr:`edges` order.
    fn bridges<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (src, dst) in self.inner.edges() {
            self.check_plan(src, dst)?;
        }
        for b in self.inner.bridges().or_raise()? {
            d.set_item((b.src.clone(), b.dst.clone()), bridge_dict(py, &b)?)?;
        }
        Ok(d)
    }

    /// The modules' names, in declaration order.
    #[getter]
    fn names(&self) -> Vec<String> {
        self.inner.names().map(str::to_owned).collect()
    }

    /// The edges ``(src, dst)``, by source's declaration order, then in the
    /// order given.
    #[getter]
    fn edges(&self) -> Vec<(String, String)> {
        self.inner
            .edges()
            .map(|(s, d)| (s.to_owned(), d.to_owned()))
            .collect()
    }

    /// Whether every module is on the same ranks.
    #[getter]
    fn colocated(&self) -> bool {
        self.inner.is_colocated()
    }

    /// The number of ranks of all modules together.
    #[getter]
    fn world_size(&self) -> u64 {
        self.inner.world_size()
    }

    /// The first rank.
    #[getter]
    fn rank_offset(&self) -> u32 {
        self.inner.rank_offset()
    }

    /// The number of pipeline stages: the longest path through the graph,
    /// each module weighted by its pp.
    ///
    /// >>> Modules([("a", Mesh([("pp", 2)])), ("b", Mesh([("pp", 3)]))], [("a", "b")]).total_stages
    /// 5
    #[getter]
    fn total_stages(&self) -> u32 {
        self.inner.total_stages()
    }

    /// The rounds of a dim set's groups (see :meth:`split`): 1 on separate
    /// spans, one per module when colocated.
    #[getter]
    fn rounds(&self) -> usize {
        self.inner.rounds()
    }

    /// The mesh of module ``name``, at its own rank offset.
    ///
    /// >>> Modules([("a", Mesh([("dp", 2)])), ("b", Mesh([("tp", 2)]))]).module("b")
    /// Mesh([('tp', 2)], rank_offset=2)
    fn module(&self, name: &str) -> PyResult<PyMesh> {
        Ok(PyMesh {
            inner: self.inner.module(name).or_raise()?.clone(),
        })
    }

    /// The first module ``rank`` belongs to.
    fn module_of(&self, rank: &Bound<'_, PyAny>) -> PyResult<String> {
        let rank = self.rank_arg(rank)?;
        self.inner.module_of(rank).map(str::to_owned).or_raise()
    }

    /// Every module ``rank`` belongs to, in declaration order (one on
    /// separate spans, all when colocated; none outside the modules).
    fn modules_of(&self, rank: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        let rank = self.rank_arg(rank)?;
        Ok(self.inner.modules_of(rank).map(str::to_owned).collect())
    }

    /// ``rank``'s global pipeline stage in its first module.
    fn stage(&self, rank: &Bound<'_, PyAny>) -> PyResult<u32> {
        let rank = self.rank_arg(rank)?;
        self.inner.stage(rank).or_raise()
    }

    /// ``rank``'s global pipeline stage in module ``name``.
    fn stage_in(&self, rank: &Bound<'_, PyAny>, name: &str) -> PyResult<u32> {
        let rank = self.rank_arg(rank)?;
        self.inner.stage_in(rank, name).or_raise()
    }

    /// Module ``name``'s first stage: the longest path into it.
    fn first_stage(&self, name: &str) -> PyResult<u32> {
        self.inner.first_stage(name).or_raise()
    }

    /// The communicator kinds the edge ``src -> dst`` needs: ``bridge``,
    /// ``src_broadcast``, ``dst_broadcast``, ``dst_cp_reduce``,
    /// ``src_cp_gather`` (leader plan); ``gather``, ``colocated_cp_gather``,
    /// ``colocated_cp_reduce`` (colocated gather plan).
    ///
    /// >>> Modules([("a", Mesh([("dp", 2)])), ("b", Mesh([("dp", 2)]))], [("a", "b")]).bridge_kinds("a", "b")
    /// ['bridge', 'src_broadcast', 'dst_broadcast']
    fn bridge_kinds(&self, src: &str, dst: &str) -> PyResult<Vec<&'static str>> {
        Ok(self
            .inner
            .bridge_kinds(src, dst)
            .or_raise()?
            .into_iter()
            .map(BridgeKind::name)
            .collect())
    }

    /// ``rank``'s :class:`Split` ``(color, key)`` in the ``kind`` groups of
    /// the edge ``src -> dst``, or ``None`` when it is in none of them.
    fn bridge_split<'py>(
        &self,
        py: Python<'py>,
        rank: &Bound<'py, PyAny>,
        src: &str,
        dst: &str,
        kind: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let rank = self.rank_arg(rank)?;
        let s = self
            .inner
            .bridge_split(rank, src, dst, kind_of(kind)?)
            .or_raise()?;
        split_or_none(py, s)
    }

    /// The members of ``rank``'s group of ``kind`` on the edge ``src ->
    /// dst``, in key order (so a rank's place is its key), or ``None`` when
    /// it is in no such group.
    ///
    /// >>> m = Modules([("enc", Mesh([("tp", 2), ("dp", 2)])), ("llm", Mesh([("tp", 4)]))], [("enc", "llm")])
    /// >>> m.bridge_members(3, "enc", "llm", "bridge"), m.bridge_members(0, "enc", "llm", "bridge")
    /// ([1, 3, 4], None)
    fn bridge_members(
        &self,
        rank: &Bound<'_, PyAny>,
        src: &str,
        dst: &str,
        kind: &Bound<'_, PyAny>,
    ) -> PyResult<Option<Vec<u32>>> {
        let rank = self.rank_arg(rank)?;
        let kind = kind_of(kind)?;
        let Some(split) = self.inner.bridge_split(rank, src, dst, kind).or_raise()? else {
            return Ok(None);
        };
        let members = self
            .inner
            .bridge_group_of(rank, src, dst, kind)
            .or_raise()?
            .ok_or_else(|| {
                raise(format!(
                    "the {kind} groups of {src} -> {dst}: rank {rank}'s group {} has no members",
                    split.color
                ))
            })?;
        Ok(Some(members))
    }

    /// ``rank``'s role on the edge ``src -> dst``, as a dict: ``src``,
    /// ``dst``, ``src_leader``, ``dst_leader`` (bools), ``sends_to``,
    /// ``receives_from`` (its peer leaders; leader plan), ``slot`` (its
    /// slot in the colocated gather plan, else ``None``) and ``splits``
    /// (kind -> :class:`Split` or ``None``, for every kind the edge builds).
    ///
    /// >>> m = Modules([("enc", Mesh([("tp", 2), ("dp", 2)])), ("llm", Mesh([("tp", 4)]))], [("enc", "llm")])
    /// >>> r = m.role(3, "enc", "llm")
    /// >>> r["src_leader"], r["sends_to"], r["splits"]["src_broadcast"]
    /// (True, [4], Split(color=1, key=1))
    fn role<'py>(
        &self,
        py: Python<'py>,
        rank: &Bound<'py, PyAny>,
        src: &str,
        dst: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        let rank = self.rank_arg(rank)?;
        role_dict(py, &self.inner.role(rank, src, dst).or_raise()?)
    }

    /// ``rank``'s role (as :meth:`role`) on every edge, in :attr:`edges`
    /// order.
    fn roles<'py>(
        &self,
        py: Python<'py>,
        rank: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let rank = self.rank_arg(rank)?;
        let out = PyList::empty(py);
        for r in self.inner.roles(rank).or_raise()? {
            out.append(role_dict(py, &r)?)?;
        }
        Ok(out)
    }

    /// ``rank``'s :class:`Split` in the groups of the dim set ``dims``
    /// (``"tp"``, ``"tp-dp"`` or a sequence of names) in round ``round``
    /// (see :attr:`rounds`): on separate spans every module's groups in one
    /// round, numbered module after module; colocated, module ``round``'s.
    /// A dim a module lacks has size 1 there. ``None`` for a rank outside
    /// the round's modules.
    ///
    /// >>> m = Modules([("enc", Mesh([("tp", 2), ("dp", 2)])), ("llm", Mesh([("tp", 4)]))])
    /// >>> m.split(6, "tp"), m.split(3, "dp")
    /// (Split(color=2, key=2), Split(color=1, key=1))
    #[pyo3(signature = (rank, dims, round=None))]
    fn split<'py>(
        &self,
        py: Python<'py>,
        rank: &Bound<'py, PyAny>,
        dims: &Bound<'py, PyAny>,
        round: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let rank = self.rank_arg(rank)?;
        let spec = dims_spec(dims)?;
        let round = self.round_arg(round)?;
        split_or_none(py, self.inner.split(rank, &spec, round).or_raise()?)
    }

    /// The members of ``rank``'s group of ``dims`` in round ``round`` (as
    /// :meth:`split`), in key order, or ``None`` where :meth:`split` is.
    ///
    /// >>> m = Modules([("enc", Mesh([("tp", 2), ("dp", 2)])), ("llm", Mesh([("tp", 4)]))])
    /// >>> m.members(6, "tp"), m.members(2, "dp"), m.members(5, "dp")
    /// ([4, 5, 6, 7], [0, 2], [5])
    #[pyo3(signature = (rank, dims, round=None))]
    fn members(
        &self,
        rank: &Bound<'_, PyAny>,
        dims: &Bound<'_, PyAny>,
        round: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Vec<u32>>> {
        let rank = self.rank_arg(rank)?;
        let spec = dims_spec(dims)?;
        let round = self.round_arg(round)?;
        let Some(split) = self.inner.split(rank, &spec, round).or_raise()? else {
            return Ok(None);
        };
        let name = if self.inner.is_colocated() {
            self.inner.names().nth(round).unwrap_or_default().to_owned()
        } else {
            self.inner.module_of(rank).or_raise()?.to_owned()
        };
        let mesh = self.inner.module(&name).or_raise()?;
        let names: Vec<&str> = spec.split('-').collect();
        let members = if names.iter().all(|n| MODULE_DIMS.contains(n)) {
            let present: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| mesh.dims().any(|(d, _)| d == *n))
                .collect();
            if present.is_empty() {
                vec![rank]
            } else {
                group_of(mesh, mesh.select_dims(None, &present).or_raise()?, rank)?
            }
        } else {
            group_of(mesh, mesh.select(&spec).or_raise()?, rank)?
        };
        if members.get(split.key as usize) != Some(&rank) {
            return Err(raise(format!(
                "rank {rank}'s {spec} group in module {name} does not match its split"
            )));
        }
        Ok(Some(members))
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// Pickles as the arguments that build it again: each module's mesh
    /// (pickled as a :class:`Mesh`), the edges and the placement.
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let this = slf.get();
        let mut modules = Vec::new();
        for name in this.inner.names() {
            let inner = this.inner.module(name).or_raise()?.clone();
            modules.push((name.to_owned(), PyMesh { inner }));
        }
        let edges: Vec<(String, String)> = this
            .inner
            .edges()
            .map(|(s, d)| (s.to_owned(), d.to_owned()))
            .collect();
        let args = (modules, edges, this.inner.is_colocated()).into_pyobject(py)?;
        Ok((slf.get_type().into_any(), args))
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyModules>()
            .is_ok_and(|o| o.get().inner == self.inner)
    }

    fn __hash__(&self) -> u64 {
        let mut h = DefaultHasher::new();
        self.inner.hash(&mut h);
        h.finish()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let mut parts = Vec::new();
        for name in self.inner.names() {
            let mesh = Bound::new(
                py,
                PyMesh {
                    inner: self.inner.module(name).or_raise()?.clone(),
                },
            )?;
            parts.push(format!("({name:?}, {})", mesh.repr()?).replace('"', "'"));
        }
        let edges: Vec<String> = self
            .inner
            .edges()
            .map(|(s, d)| format!("('{s}', '{d}')"))
            .collect();
        let mut out = format!("Modules([{}]", parts.join(", "));
        if !edges.is_empty() {
            out.push_str(&format!(", edges=[{}]", edges.join(", ")));
        }
        if self.inner.is_colocated() {
            out.push_str(", colocated=True");
        }
        out.push(')');
        Ok(out)
    }
}
