//! `reshard`: the plan that moves a model's tensors from one layout to
//! another (the crate's `reshard` module), as a :class:`Reshard` whose
//! answers are plain dicts and lists (picklable, and the keys of
//! `rank-layout reshard --format json`).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use rank_layout::machine::NodePlan;
use rank_layout::megatron::MegatronArgs;
use rank_layout::reshard::{
    Cost, GptModel, LayerSplit, Locality, Model, Region, Reshard, Shard, Side, Transfer,
};
use rank_layout::{Layout, Topology};

use crate::error::{OrRaise, raise};
use crate::layout::{PyLayout, package_layout};
use crate::machine::host_table;
use crate::megatron::parsed_args;
use crate::relayout::PyRelayout;
use crate::value::{describe, offset, size, string};

/// The plan that moves a model's tensors from ``source`` (a
/// :class:`Layout`) to ``target`` (another), or onto the new layout of a
/// :class:`Relayout` (``source`` the plan, no ``target``: its old layout
/// with the failed processes dead, to its new one run by the survivors),
/// as ``rank-layout reshard`` plans it (the semantics, section 12, state
/// the rules).
///
/// The model: ``tensors``, a tensors file as a dict
/// (``{"num_layers", "num_experts", "tensors": [{"name", "shape",
/// "element_bytes", "layer", "tp_dim", "tp_stride" | "tp_sizes",
/// "expert" | "ep_dim", "pp_dim", "gtp", "dp_dim"}]}``) or its JSON
/// text; or ``model_args``, Megatron-LM's model arguments in any form
/// :meth:`Layout.from_megatron_args` takes (a GPT or MoE of
/// Megatron-Core's parameter names). ``from_layers`` and ``to_layers``:
/// how each side puts the layers on its stages, as Megatron-LM's layer
/// arguments (``"--decoder-first-pipeline-num-layers 3"``,
/// ``--pipeline-model-parallel-layout``, ...) or a list of the layers of
/// each model chunk; default those of ``model_args``, else the even
/// split.
///
/// Processes are the job's ranks: by default rank ``r`` of a layout is
/// process ``r`` (two layouts at different ``rank_offset``\ s are
/// disjoint); ``from_processes`` and ``to_processes`` list the process
/// of each rank instead; ``dead`` processes hold, send and receive
/// nothing. Where they run: ``gpus_per_node`` (default 8) and
/// ``nodes_per_domain``, or ``hosts`` (a host table, as :func:`place`
/// takes) with ``placement`` (what :func:`place` returned, or the host
/// of each logical node; default the table's order).
///
/// Every process computes the same plan from the same arguments, with no
/// communication; :meth:`Reshard.plan_of` gives one process's part in
/// O(its own transfers).
///
/// >>> from rank_layout import Layout, reshard
/// >>> model = {"num_layers": 1, "tensors": [{"name": "w", "shape": [8, 4], "layer": 0, "tp_dim": 0}]}
/// >>> plan = reshard(Layout(tp=2, world_size=2), Layout(world_size=2, rank_offset=2), tensors=model)
/// >>> [(t["src"], t["dst"], t["box"]) for t in plan.plan_of(2)["recvs"]]
/// [(0, 2, [[0, 4], [0, 4]]), (1, 2, [[4, 8], [0, 4]])]
/// >>> plan.cost()["bytes"], plan.cost()["messages"]
/// (128, 4)
/// >>> reshard(Layout(tp=3, world_size=3), Layout(world_size=1), tensors=model)
/// Traceback (most recent call last):
///     ...
/// rank_layout.LayoutError: tensor w: dim 0 (8) is not divisible by 3 (tp 3) on the from side
#[pyfunction]
#[pyo3(signature = (source, target=None, *, tensors=None, model_args=None, from_layers=None, to_layers=None, from_processes=None, to_processes=None, dead=None, gpus_per_node=None, nodes_per_domain=None, hosts=None, placement=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn reshard<'py>(
    py: Python<'py>,
    source: &Bound<'py, PyAny>,
    target: Option<&Bound<'py, PyAny>>,
    tensors: Option<&Bound<'py, PyAny>>,
    model_args: Option<&Bound<'py, PyAny>>,
    from_layers: Option<&Bound<'py, PyAny>>,
    to_layers: Option<&Bound<'py, PyAny>>,
    from_processes: Option<&Bound<'py, PyAny>>,
    to_processes: Option<&Bound<'py, PyAny>>,
    dead: Option<&Bound<'py, PyAny>>,
    gpus_per_node: Option<&Bound<'py, PyAny>>,
    nodes_per_domain: Option<&Bound<'py, PyAny>>,
    hosts: Option<&Bound<'py, PyAny>>,
    placement: Option<&Bound<'py, PyAny>>,
) -> PyResult<PyReshard> {
    let given = |v: Option<&Bound<'py, PyAny>>| v.filter(|v| !v.is_none()).cloned();
    let (tensors, model_args, target) = (given(tensors), given(model_args), given(target));
    let relayout = source.cast::<PyRelayout>().ok();
    let (from, to): (Layout, Option<Layout>) = match (&relayout, &target) {
        (Some(r), None) => (r.get().inner.old_layout().clone(), None),
        (Some(_), Some(_)) => {
            return Err(raise(
                "reshard takes a Relayout alone (its old and new layouts), or two Layouts"
                    .to_string(),
            ));
        }
        (None, Some(t)) => (layout_of("source", source)?, Some(layout_of("target", t)?)),
        (None, None) => {
            return Err(raise(format!(
                "reshard takes two Layouts (source, target) or a Relayout, got {}",
                describe(source)
            )));
        }
    };
    let (model, model_layers) = match (&tensors, &model_args) {
        (Some(t), None) => (model_of_tensors(py, t)?, LayerSplit::even()),
        (None, Some(a)) => {
            let args = parsed_args(a)?;
            let mut tps = vec![from.sizes().tp];
            tps.extend(to.as_ref().map(|t| t.sizes().tp));
            let model = GptModel::from_megatron_args(&args)
                .and_then(|g| g.model(&tps))
                .or_raise()?;
            (model, LayerSplit::from_megatron_args(&args).or_raise()?)
        }
        _ => {
            return Err(raise(
                "give the model: tensors (a tensors file as a dict or JSON text) or model_args \
                 (Megatron-LM's model arguments), one of them"
                    .to_string(),
            ));
        }
    };
    let from_split = layer_split("from_layers", given(from_layers), &model_layers)?;
    let to_split = layer_split("to_layers", given(to_layers), &model_layers)?;
    let (from_side, to_side) = match (relayout, to) {
        (Some(r), _) => {
            for (name, v) in [
                ("from_processes", &from_processes),
                ("to_processes", &to_processes),
                ("dead", &dead),
            ] {
                if given(*v).is_some() {
                    return Err(raise(format!(
                        "{name} comes from the Relayout (its rank map and failed processes); \
                         do not give it"
                    )));
                }
            }
            let r = &r.get().inner;
            (
                Side::before(r).layers(from_split),
                Side::after(r).or_raise()?.layers(to_split),
            )
        }
        (None, Some(to)) => {
            let dead = match given(dead) {
                Some(d) => ranks("dead", &d)?,
                None => Vec::new(),
            };
            let side = |layout: Layout, split: LayerSplit, processes: Option<Bound<'py, PyAny>>| {
                let mut side = Side::new(layout).layers(split).dead(dead.iter().copied());
                if let Some(p) = processes {
                    side = side.with_processes(ranks("processes", &p)?).or_raise()?;
                }
                Ok::<Side, PyErr>(side)
            };
            (
                side(from, from_split, given(from_processes))?,
                side(to, to_split, given(to_processes))?,
            )
        }
        (None, None) => return Err(raise("reshard needs a target layout".to_string())),
    };
    let locality = locality(
        &from_side,
        &to_side,
        given(gpus_per_node),
        given(nodes_per_domain),
        given(hosts),
        given(placement),
    )?;
    let inner = Reshard::new(model, from_side, to_side, locality).or_raise()?;
    Ok(PyReshard { inner })
}

/// `obj` as a layout, or an error naming the argument.
fn layout_of(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Layout> {
    obj.cast::<PyLayout>()
        .map(|l| l.get().inner.clone())
        .map_err(|_| raise(format!("{name} must be a Layout, got {}", describe(obj))))
}

/// The model of a tensors file given as a dict (written as JSON by
/// Python's `json`) or as JSON text.
fn model_of_tensors(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Model> {
    let text: String = if let Ok(s) = obj.cast::<PyString>() {
        s.extract()?
    } else if obj.cast::<PyDict>().is_ok() {
        py.import("json")?
            .call_method1("dumps", (obj,))
            .map_err(|e| raise(format!("tensors: not JSON-serializable: {e}")))?
            .extract()?
    } else {
        return Err(raise(format!(
            "tensors must be a dict (a tensors file) or its JSON text, got {}",
            describe(obj)
        )));
    };
    Model::from_json(&text).or_raise()
}

/// A side's layer split: Megatron-LM's layer arguments, or the layers of
/// each chunk; `default` when not given.
fn layer_split(
    name: &str,
    obj: Option<Bound<'_, PyAny>>,
    default: &LayerSplit,
) -> PyResult<LayerSplit> {
    let Some(obj) = obj else {
        return Ok(default.clone());
    };
    if let Ok(list) = obj.cast::<PyList>() {
        if !list.is_empty() && list.iter().all(|x| crate::value::u32_of(&x).is_ok()) {
            let chunks = list
                .iter()
                .map(|x| size(name, &x))
                .collect::<PyResult<Vec<u32>>>()?;
            return Ok(LayerSplit::chunks(chunks));
        }
    }
    let args: MegatronArgs = parsed_args(&obj)?;
    LayerSplit::from_megatron_args(&args).or_raise()
}

/// A list of process numbers.
fn ranks(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
    let items = obj.try_iter().map_err(|_| {
        raise(format!(
            "{name} must be a list of processes, got {}",
            describe(obj)
        ))
    })?;
    items
        .map(|item| offset(&format!("a process of {name}"), &item?))
        .collect()
}

/// Where the processes run: a host table (placed, or in its order), or
/// GPUs per node and nodes per domain.
fn locality(
    from: &Side,
    to: &Side,
    gpus_per_node: Option<Bound<'_, PyAny>>,
    nodes_per_domain: Option<Bound<'_, PyAny>>,
    hosts: Option<Bound<'_, PyAny>>,
    placement: Option<Bound<'_, PyAny>>,
) -> PyResult<Locality> {
    let mut g = match &gpus_per_node {
        Some(g) => Some(size("gpus_per_node", g)?),
        None => None,
    };
    let m = match &nodes_per_domain {
        Some(m) => Some(size("nodes_per_domain", m)?),
        None => None,
    };
    let Some(hosts) = hosts else {
        if placement.is_some() {
            return Err(raise(
                "placement needs hosts (the host table it was placed on)".to_string(),
            ));
        }
        return Topology::new(g.unwrap_or(8), m)
            .map(Locality::new)
            .or_raise();
    };
    if m.is_some() {
        return Err(raise(
            "nodes_per_domain comes from the host table's domains; give hosts or \
             nodes_per_domain, not both"
                .to_string(),
        ));
    }
    let hosts = host_table(&hosts)?;
    let mut names: Option<Vec<String>> = None;
    if let Some(p) = &placement {
        let nodes = match p.cast::<PyDict>() {
            Ok(d) => {
                if g.is_none() {
                    if let Some(per) = d.get_item("gpus_per_node")? {
                        g = Some(size("placement's gpus_per_node", &per)?);
                    }
                }
                d.get_item("node_hosts")?.ok_or_else(|| {
                    raise("placement has no node_hosts (pass what place returned)".to_string())
                })?
            }
            Err(_) => p.clone(),
        };
        let list = nodes
            .try_iter()
            .map_err(|_| {
                raise(format!(
                    "placement must be place()'s dict or a list of host names, got {}",
                    describe(p)
                ))
            })?
            .map(|h| string("a placed host", "'node-17'", &h?))
            .collect::<PyResult<Vec<String>>>()?;
        names = Some(list);
    }
    let g = g.unwrap_or(8);
    let plan = match names {
        Some(names) => {
            let mut plan = NodePlan::plain(0, &hosts, g).or_raise()?;
            plan.node_hosts = names
                .iter()
                .map(|n| {
                    hosts.iter().position(|h| h.name == *n).ok_or_else(|| {
                        raise(format!("placement: host {n:?} is not in the host table"))
                    })
                })
                .collect::<PyResult<Vec<usize>>>()?;
            plan
        }
        None => {
            let end = from.layout().rank_end().max(to.layout().rank_end());
            let processes = u32::try_from(end)
                .map_err(|_| raise("hosts: the processes pass 2^32".to_string()))?;
            let world = processes.div_ceil(g).saturating_mul(g);
            NodePlan::plain(world, &hosts, g).or_raise()?
        }
    };
    Ok(Locality::hosts(&plan, &hosts))
}

/// A reshard plan (see :func:`reshard`): every process's sends, receives
/// and local copies, the whole plan, its cost and every process's shards.
///
/// A transfer is a dict: ``id`` (shared by the send and its receive,
/// unique in the plan), ``tensor`` (its name), ``src`` and ``dst``
/// (processes; equal for a local copy), ``box`` (``[[lo, hi], ...]`` in
/// the tensor's global coordinates), ``src_offset`` and ``dst_offset``
/// (where the box starts in the source's and the destination's local
/// tensors), ``bytes`` and ``tier`` (``"local"``, ``"node"``,
/// ``"domain"`` or ``"any"``: where the source sits).
///
/// >>> from rank_layout import Layout, reshard
/// >>> model = {"num_layers": 1, "tensors": [{"name": "w", "shape": [4, 2], "tp_dim": 0}]}
/// >>> plan = reshard(Layout(tp=2, world_size=2), Layout(world_size=1, rank_offset=2), tensors=model)
/// >>> plan.plan_of(2)["recvs"][1]  # id: element 4 (row 2) x 3 processes + process 2
/// {'id': 14, 'tensor': 'w', 'src': 1, 'dst': 2, 'box': [[2, 4], [0, 2]], 'src_offset': [0, 0], 'dst_offset': [2, 0], 'bytes': 8, 'tier': 'node'}
#[pyclass(frozen, name = "Reshard", module = "rank_layout._native")]
pub(crate) struct PyReshard {
    inner: Reshard,
}

impl PyReshard {
    /// The index of the tensor named, or numbered, by `obj`.
    fn tensor_arg(&self, obj: &Bound<'_, PyAny>) -> PyResult<u32> {
        let model = self.inner.model();
        if let Ok(name) = obj.cast::<PyString>() {
            let name = name.to_cow()?;
            return model
                .index_of(&name)
                .ok_or_else(|| raise(format!("no tensor named {name:?} in the model")));
        }
        let i = offset("tensor", obj)?;
        if (i as usize) < model.tensors().len() {
            Ok(i)
        } else {
            Err(raise(format!(
                "tensor {i} is past the model's {} tensors",
                model.tensors().len()
            )))
        }
    }

    fn transfer<'py>(&self, py: Python<'py>, t: &Transfer) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let name = self
            .inner
            .model()
            .tensor(t.tensor)
            .map_or("", |x| x.name.as_str());
        d.set_item("id", t.id)?;
        d.set_item("tensor", name)?;
        d.set_item("src", t.src)?;
        d.set_item("dst", t.dst)?;
        d.set_item("box", ranges(&t.region))?;
        d.set_item("src_offset", t.src_offset.to_vec())?;
        d.set_item("dst_offset", t.dst_offset.to_vec())?;
        d.set_item("bytes", t.bytes)?;
        d.set_item("tier", t.tier.name())?;
        Ok(d)
    }

    fn list<'py>(&self, py: Python<'py>, ts: &[Transfer]) -> PyResult<Bound<'py, PyList>> {
        let items = ts
            .iter()
            .map(|t| self.transfer(py, t))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// `process`'s shard of `tensor` on one side (`side`: the crate's
    /// `source_shard` or `destination_shard`) as a dict, or `None`.
    fn shard<'py>(
        &self,
        py: Python<'py>,
        process: &Bound<'py, PyAny>,
        tensor: &Bound<'py, PyAny>,
        side: fn(&Reshard, u32, u32) -> rank_layout::Result<Option<Shard>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let p = offset("process", process)?;
        let t = self.tensor_arg(tensor)?;
        let Some(s) = side(&self.inner, p, t).or_raise()? else {
            return Ok(py.None().into_bound(py));
        };
        let d = PyDict::new(py);
        d.set_item("local_shape", s.local_shape.to_vec())?;
        let boxes = s
            .boxes
            .iter()
            .map(|(region, at)| {
                let b = PyDict::new(py);
                b.set_item("box", ranges(region))?;
                b.set_item("offset", at.to_vec())?;
                Ok(b)
            })
            .collect::<PyResult<Vec<_>>>()?;
        d.set_item("boxes", boxes)?;
        Ok(d.into_any())
    }
}

/// A box as `[[lo, hi], ...]`.
fn ranges(region: &Region) -> Vec<[u64; 2]> {
    (0..region.dims())
        .filter_map(|d| region.range(d).map(|(lo, hi)| [lo, hi]))
        .collect()
}

/// A cost as a dict.
fn cost_dict<'py>(py: Python<'py>, c: &Cost) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("bytes", c.bytes)?;
    d.set_item("local_bytes", c.local_bytes)?;
    d.set_item("cross_node_bytes", c.cross_node_bytes)?;
    d.set_item("cross_domain_bytes", c.cross_domain_bytes)?;
    d.set_item("max_send_bytes", c.max_send_bytes)?;
    d.set_item("max_recv_bytes", c.max_recv_bytes)?;
    d.set_item("messages", c.messages)?;
    d.set_item("local_copies", c.local_copies)?;
    Ok(d)
}

#[pymethods]
impl PyReshard {
    /// Process ``process``'s part: a dict of ``process``, ``sends``,
    /// ``recvs`` and ``copies`` (local), each a list of transfers in
    /// ``id`` order (so a send and its receive come in the same order on
    /// both processes, per peer). O(its own transfers).
    ///
    /// >>> from rank_layout import Layout, reshard
    /// >>> model = {"num_layers": 1, "tensors": [{"name": "w", "shape": [8, 4], "tp_dim": 0}]}
    /// >>> plan = reshard(Layout(tp=2, world_size=4), Layout(tp=4, world_size=4), tensors=model)
    /// >>> mine = plan.plan_of(1)  # it held rows 4-7 (tp 1 of 2); it needs rows 2-3 (tp 1 of 4)
    /// >>> # Processes 0 and 2 hold rows 0-3 on its node; the rotation picks 2.
    /// >>> [(t["src"], t["box"], t["src_offset"], t["tier"]) for t in mine["recvs"]]
    /// [(2, [[2, 4], [0, 4]], [2, 0], 'node')]
    /// >>> [(t["dst"], t["box"]) for t in mine["sends"]]
    /// [(2, [[4, 6], [0, 4]])]
    /// >>> plan.plan_of(9)
    /// Traceback (most recent call last):
    ///     ...
    /// rank_layout.LayoutError: process 9 is in neither layout (from: 0..3; to: 0..3)
    fn plan_of<'py>(
        &self,
        py: Python<'py>,
        process: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let p = offset("process", process)?;
        let plan = self.inner.plan_of(p).or_raise()?;
        let d = PyDict::new(py);
        d.set_item("process", plan.process)?;
        d.set_item("sends", self.list(py, &plan.sends)?)?;
        d.set_item("recvs", self.list(py, &plan.recvs)?)?;
        d.set_item("copies", self.list(py, &plan.copies)?)?;
        Ok(d)
    }

    /// The whole plan: every transfer once, destination by destination
    /// (processes ascending), each destination's in ``id`` order.
    ///
    /// >>> from rank_layout import Layout, reshard
    /// >>> model = {"num_layers": 1, "tensors": [{"name": "w", "shape": [4], "tp_dim": 0}]}
    /// >>> plan = reshard(Layout(tp=2, world_size=2), Layout(world_size=2), tensors=model)
    /// >>> [(t["src"], t["dst"], t["tier"]) for t in plan.transfers()]
    /// [(0, 0, 'local'), (1, 0, 'node'), (0, 1, 'node'), (1, 1, 'local')]
    fn transfers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let all = self
            .inner
            .transfers()
            .collect::<Result<Vec<Transfer>, _>>()
            .or_raise()?;
        self.list(py, &all)
    }

    /// The cost of the whole plan, or of ``process``'s transfers: a dict
    /// of ``bytes`` (over the network), ``local_bytes``,
    /// ``cross_node_bytes``, ``cross_domain_bytes``, ``max_send_bytes``
    /// and ``max_recv_bytes`` (the most one process sends, receives),
    /// ``messages`` and ``local_copies``.
    ///
    /// >>> from rank_layout import Layout, reshard
    /// >>> model = {"num_layers": 1, "tensors": [{"name": "w", "shape": [4], "tp_dim": 0}]}
    /// >>> plan = reshard(Layout(tp=2, world_size=2), Layout(world_size=2), tensors=model, gpus_per_node=1)
    /// >>> c = plan.cost()
    /// >>> c["bytes"], c["cross_node_bytes"], c["local_bytes"], c["max_send_bytes"]
    /// (8, 8, 8, 4)
    /// >>> plan.cost(0)["messages"]  # it receives one piece, sends one
    /// 2
    #[pyo3(signature = (process=None))]
    fn cost<'py>(
        &self,
        py: Python<'py>,
        process: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let cost = match process.filter(|p| !p.is_none()) {
            None => self.inner.cost().or_raise()?,
            Some(p) => {
                let mine = self.inner.plan_of(offset("process", p)?).or_raise()?;
                self.inner.cost_of(&mine.all())
            }
        };
        cost_dict(py, &cost)
    }

    /// What ``process`` holds of ``tensor`` (a name or an index) on the
    /// source side: ``None`` (nothing), or a dict of ``local_shape`` and
    /// ``boxes``, each box a dict of ``box`` (global coordinates) and
    /// ``offset`` (where it starts in the local tensor).
    ///
    /// >>> from rank_layout import Layout, reshard
    /// >>> model = {"num_layers": 1, "tensors": [{"name": "fc1", "shape": [8, 2], "tp_dim": 0, "tp_stride": 2}]}
    /// >>> plan = reshard(Layout(tp=2, world_size=2), Layout(world_size=2), tensors=model)
    /// >>> plan.source_shard(1, "fc1")  # segments 1 and 3 of 4 (stride 2)
    /// {'local_shape': [4, 2], 'boxes': [{'box': [[2, 4], [0, 2]], 'offset': [0, 0]}, {'box': [[6, 8], [0, 2]], 'offset': [2, 0]}]}
    fn source_shard<'py>(
        &self,
        py: Python<'py>,
        process: &Bound<'py, PyAny>,
        tensor: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.shard(py, process, tensor, Reshard::source_shard)
    }

    /// What ``process`` holds of ``tensor`` on the destination side (as
    /// :meth:`source_shard`): the local tensor an executor allocates.
    ///
    /// >>> from rank_layout import Layout, reshard
    /// >>> model = {"num_layers": 1, "tensors": [{"name": "w", "shape": [8, 4], "tp_dim": 1}]}
    /// >>> plan = reshard(Layout(world_size=1), Layout(tp=2, world_size=2, rank_offset=1), tensors=model)
    /// >>> plan.destination_shard(2, "w"), plan.destination_shard(0, 0)
    /// ({'local_shape': [8, 2], 'boxes': [{'box': [[0, 8], [2, 4]], 'offset': [0, 0]}]}, None)
    fn destination_shard<'py>(
        &self,
        py: Python<'py>,
        process: &Bound<'py, PyAny>,
        tensor: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.shard(py, process, tensor, Reshard::destination_shard)
    }

    /// The tensors' names, in the model's order.
    ///
    /// >>> from rank_layout import Layout, reshard
    /// >>> plan = reshard(Layout(world_size=1), Layout(world_size=1), model_args="--num-layers 1 --hidden-size 8 --num-attention-heads 2 --vocab-size 10 --position-embedding-type rope --normalization RMSNorm --disable-bias-linear")
    /// >>> plan.tensor_names[:2]
    /// ['embedding.word_embeddings.weight', 'decoder.layers.0.self_attention.linear_qkv.layer_norm_weight']
    #[getter]
    fn tensor_names(&self) -> Vec<String> {
        self.inner
            .model()
            .tensors()
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }

    /// The model as a tensors file (a dict: :func:`reshard`'s
    /// ``tensors`` reads it back).
    ///
    /// >>> from rank_layout import Layout, reshard
    /// >>> model = {"num_layers": 1, "tensors": [{"name": "w", "shape": [8, 4], "tp_dim": 1}]}
    /// >>> reshard(Layout(world_size=1), Layout(world_size=1), tensors=model).model["tensors"][0]["shape"]
    /// [8, 4]
    #[getter]
    fn model<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("json")?
            .call_method1("loads", (self.inner.model().to_json(),))
    }

    /// The source side's :class:`Layout`.
    ///
    /// >>> from rank_layout import Layout, reshard, relayout
    /// >>> model = {"num_layers": 1, "tensors": [{"name": "w", "shape": [8], "tp_dim": 0}]}
    /// >>> plan = reshard(relayout(Layout(tp=2, dp=2), [3], policy="drop-replica"), tensors=model)
    /// >>> plan.from_layout.sizes["dp"], plan.to_layout.sizes["dp"]
    /// (2, 1)
    #[getter(from_layout)]
    fn source_layout<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        package_layout(py, self.inner.from().layout().clone())
    }

    /// The destination side's :class:`Layout`.
    #[getter(to_layout)]
    fn target_layout<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        package_layout(py, self.inner.to().layout().clone())
    }

    /// Each side's layers per model chunk (chunk ``c`` on stage ``c mod
    /// pp``): ``{"from": [...], "to": [...]}``.
    ///
    /// >>> from rank_layout import Layout, reshard
    /// >>> model = {"num_layers": 10, "tensors": [{"name": "w", "shape": [8]}]}
    /// >>> reshard(Layout(pp=4, world_size=4), Layout(world_size=1), tensors=model,
    /// ...         from_layers="--decoder-first-pipeline-num-layers 1 --decoder-last-pipeline-num-layers 3").layers
    /// {'from': [1, 3, 3, 3], 'to': [10]}
    #[getter]
    fn layers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("from", self.inner.from_layers().chunks().to_vec())?;
        d.set_item("to", self.inner.to_layers().chunks().to_vec())?;
        Ok(d)
    }

    /// One past the largest process of either side (the ids are
    /// ``element * process_bound + dst``).
    #[getter]
    fn process_bound(&self) -> u64 {
        self.inner.process_bound()
    }

    fn __repr__(&self) -> String {
        let (f, t) = (self.inner.from().layout(), self.inner.to().layout());
        format!(
            "Reshard({} tensors, from ranks {}..{}, to ranks {}..{})",
            self.inner.model().tensors().len(),
            f.rank_offset(),
            f.rank_end().saturating_sub(1),
            t.rank_offset(),
            t.rank_end().saturating_sub(1)
        )
    }
}
