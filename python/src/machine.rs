//! `place`: a layout or mesh placed on a host table (the crate's
//! `machine` module), as a dict.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use rank_layout::Kind;
use rank_layout::machine::{
    self, Host, Hosts, KindGroups, Launcher, NodePlan, PlaceOptions, Shortfall, default_must_fit,
    place_layout,
};

use crate::error::{OrRaise, raise};
use crate::kind::kind;
use crate::layout::{PyLayout, package_layout};
use crate::mesh::PyMesh;
use crate::value::{describe, size};

/// Places ``target`` (a :class:`Layout` or :class:`Mesh`) on ``hosts``:
/// the node order that keeps the groups of the ``must_fit`` kinds (default:
/// ``tp``, ``cp`` and ``etp-ep`` of a layout; a mesh's ``tp``, ``cp``,
/// ``ep`` dims) inside one domain, as ``rank-layout place`` does (the
/// rules: the semantics, section 10).
///
/// ``hosts`` is the plain table's text (``host domain [gpus] [state]`` per
/// line) or a list of dicts (``host``, ``domain`` or ``keys``, ``gpus``,
/// ``healthy``). ``gpus_per_node`` when the table gives no GPUs;
/// ``on_shortfall`` ``"straddle"`` (every rank used, fewest crossing
/// groups), ``"shrink"`` (a smaller dp, layouts only) or ``"fail"``.
///
/// Returns a dict: ``node_hosts`` (the host of logical node 0, 1, ...),
/// ``idle``, ``unhealthy``, ``unit_nodes``, ``units``, ``whole_units``,
/// ``straddling_units``, ``crossing`` (must-fit kind -> its groups spanning
/// more than one domain), ``plain_crossing`` (the same with the hosts in
/// the table's order), ``notes``, ``target`` (the layout placed: a smaller
/// one after ``"shrink"``) and ``files`` (launcher -> file text:
/// ``slurm-hostfile``, ``rankfile``, ``torchrun``, ``dlrover``,
/// ``device-mesh``). No
/// placement raises :class:`LayoutError`.
///
/// >>> from rank_layout import Layout, place
/// >>> hosts = "a0 r0 4\na1 r1 4\na2 r0 4\na3 r1 4\n"
/// >>> p = place(Layout(tp=8, world_size=16), hosts, must_fit=["tp"])
/// >>> p["node_hosts"], p["crossing"], p["plain_crossing"]
/// (['a0', 'a2', 'a1', 'a3'], {'tp': 0}, {'tp': 2})
/// >>> p["files"]["torchrun"].splitlines()[1]
/// 'a2 1'
#[pyfunction]
#[pyo3(signature = (target, hosts, *, must_fit=None, gpus_per_node=None, on_shortfall="straddle"))]
pub(crate) fn place<'py>(
    py: Python<'py>,
    target: &Bound<'py, PyAny>,
    hosts: &Bound<'py, PyAny>,
    must_fit: Option<Vec<String>>,
    gpus_per_node: Option<&Bound<'py, PyAny>>,
    on_shortfall: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let hosts = host_table(hosts)?;
    let mut options = PlaceOptions::default().shortfall(match on_shortfall {
        "straddle" => Shortfall::Straddle,
        "shrink" => Shortfall::Shrink,
        "fail" => Shortfall::Fail,
        other => {
            return Err(raise(format!(
                "on_shortfall must be 'straddle', 'shrink' or 'fail', got {other:?}"
            )));
        }
    });
    if let Some(g) = gpus_per_node.filter(|g| !g.is_none()) {
        options = options.gpus_per_node(size("gpus_per_node", g)?);
    }
    let out = PyDict::new(py);
    let (plan, must, placed): (NodePlan, Vec<KindGroups>, Bound<'py, PyAny>) =
        if let Ok(layout) = target.cast::<PyLayout>() {
            let layout = &layout.get().inner;
            let kinds: Vec<Kind> = match &must_fit {
                Some(names) => names
                    .iter()
                    .map(|n| kind(&PyString::new(py, n).into_any()))
                    .collect::<PyResult<_>>()?,
                None => default_must_fit(layout),
            };
            let (placed, plan) = place_layout(layout, &kinds, &hosts, &options).or_raise()?;
            let must = kinds
                .iter()
                .map(|&k| KindGroups::of_layout(&placed, k))
                .collect::<Result<Vec<_>, _>>()
                .or_raise()?;
            let obj = package_layout(py, placed)?;
            (plan, must, obj)
        } else if let Ok(mesh) = target.cast::<PyMesh>() {
            if options.shortfall == Shortfall::Shrink {
                return Err(raise(
                    "on_shortfall='shrink' takes a Layout (its dp shrinks), not a Mesh".to_string(),
                ));
            }
            let m = &mesh.get().inner;
            let names: Vec<String> = match &must_fit {
                Some(names) => names.clone(),
                None => ["tp", "cp", "ep"]
                    .into_iter()
                    .filter(|n| m.groups(n).is_ok())
                    .map(str::to_string)
                    .collect(),
            };
            let offset = m.rank_offset();
            let must = names
                .iter()
                .map(|n| {
                    m.groups(n).map(|groups| {
                        KindGroups::new(
                            n.clone(),
                            groups
                                .map(|g| g.iter().map(|r| r - offset).collect())
                                .collect(),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .or_raise()?;
            let plan = machine::place(m.world_size(), &must, &[], &hosts, &options).or_raise()?;
            (plan, must, target.clone())
        } else {
            return Err(raise(format!(
                "place takes a Layout or a Mesh, got {}",
                describe(target)
            )));
        };
    let name = |i: &usize| hosts.get(*i).map(|h| h.name.clone()).unwrap_or_default();
    let world = plan.node_hosts.len() as u32 * plan.gpus_per_node;
    let plain = NodePlan::plain(world, &hosts, plan.gpus_per_node).ok();
    let crossing = PyDict::new(py);
    let plain_crossing = PyDict::new(py);
    for kind in &must {
        crossing.set_item(&kind.name, plan.crossing(&hosts, kind).domain_crossing())?;
        if let Some(p) = &plain {
            plain_crossing.set_item(&kind.name, p.crossing(&hosts, kind).domain_crossing())?;
        }
    }
    let files = PyDict::new(py);
    for launcher in Launcher::ALL {
        files.set_item(launcher.name(), launcher.file(&plan, &hosts))?;
    }
    out.set_item(
        "node_hosts",
        plan.node_hosts.iter().map(name).collect::<Vec<_>>(),
    )?;
    out.set_item("idle", plan.idle.iter().map(name).collect::<Vec<_>>())?;
    out.set_item(
        "unhealthy",
        plan.unhealthy.iter().map(name).collect::<Vec<_>>(),
    )?;
    out.set_item("gpus_per_node", plan.gpus_per_node)?;
    out.set_item("unit_nodes", plan.unit_nodes)?;
    out.set_item("units", plan.units)?;
    out.set_item("whole_units", plan.whole_units)?;
    out.set_item("straddling_units", plan.straddling_units)?;
    out.set_item("crossing", crossing)?;
    out.set_item("plain_crossing", plain_crossing)?;
    out.set_item("notes", plan.notes.clone())?;
    out.set_item("target", placed)?;
    out.set_item("files", files)?;
    Ok(out)
}

/// The host table of a plain table's text or a list of dicts.
fn host_table(obj: &Bound<'_, PyAny>) -> PyResult<Hosts> {
    if let Ok(text) = obj.cast::<PyString>() {
        return Hosts::parse_plain(&text.to_cow()?).or_raise();
    }
    let list = obj.cast::<PyList>().map_err(|_| {
        raise(format!(
            "hosts must be the plain table's text or a list of dicts, got {}",
            describe(obj)
        ))
    })?;
    let mut hosts = Vec::with_capacity(list.len());
    for item in list.iter() {
        let row = item
            .cast::<PyDict>()
            .map_err(|_| raise(format!("a host must be a dict, got {}", describe(&item))))?;
        for key in row.keys() {
            let key: String = key.extract()?;
            if !matches!(
                key.as_str(),
                "host" | "name" | "domain" | "keys" | "gpus" | "healthy"
            ) {
                return Err(raise(format!(
                    "unknown host key {key:?} (expected host, domain or keys, gpus, healthy)"
                )));
            }
        }
        let name: String = match row.get_item("host")?.or(row.get_item("name")?) {
            Some(n) => n
                .extract()
                .map_err(|_| raise(format!("a host's name must be a str, got {}", describe(&n))))?,
            None => return Err(raise("a host needs its \"host\" name".to_string())),
        };
        let keys: Vec<String> = match (row.get_item("keys")?, row.get_item("domain")?) {
            (Some(_), Some(_)) => {
                return Err(raise(format!(
                    "host {name:?}: give domain or keys, not both"
                )));
            }
            (Some(k), None) => k.extract()?,
            (None, Some(d)) if d.is_none() => Vec::new(),
            (None, Some(d)) => {
                let d: String = d.extract()?;
                if d == "-" || d == "unknown" || d.is_empty() {
                    Vec::new()
                } else {
                    d.split('/').map(str::to_string).collect()
                }
            }
            (None, None) => Vec::new(),
        };
        let gpus = match row.get_item("gpus")? {
            Some(g) if !g.is_none() => Some(size("gpus", &g)?),
            _ => None,
        };
        let healthy = match row.get_item("healthy")? {
            Some(h) => h.extract::<bool>()?,
            None => true,
        };
        hosts.push(Host::new(name, None).gpus(gpus).healthy(healthy).keys(keys));
    }
    Hosts::new(hosts).or_raise()
}
