//! `place`: a layout or mesh placed on a host table (the crate's
//! `machine` module, its `Placed` value), as a dict; and the host table
//! and the failure of a placed job that `relayout(hosts=...)` takes.

use pyo3::exceptions::PyUserWarning;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use rank_layout::Kind;
use rank_layout::Layout;
use rank_layout::machine::{
    Hosts, HostsFormat, HostsReader, Launcher, PlaceOptions, Placed, Shortfall,
};
use rank_layout::relayout::Failure;

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
/// ``hosts`` is a host table's text in ``hosts_format`` (``"auto"``: JSON
/// when it starts with ``[`` or ``{``, else the plain table ``host domain
/// [gpus] [state]`` per line; ``"plain"``, ``"json"``, ``"nvidia-smi"``,
/// ``"topology-conf"``, ``"topology-yaml"``, ``"scontrol"``,
/// ``"slurm-topology-addr"``, ``"kubectl"``: every format the command line
/// reads), a list of dicts (``host``, ``domain`` or ``keys``, ``gpus``,
/// ``healthy``: the JSON table), or, for ``"nvidia-smi"``, a dict of host
/// -> its ``nvidia-smi -q`` output. ``clique_label`` (kubectl),
/// ``topology`` (topology-yaml) and ``nodelist`` (a Slurm hostlist of the
/// job's hosts) are the command line's ``--clique-label``, ``--topology``
/// and ``--nodelist``; what the reading notices (a nodelist host the table
/// lacks) is a ``UserWarning``. ``gpus_per_node``: default the GPU count
/// of the table's healthy hosts (needed when it gives none);
/// ``on_shortfall`` ``"straddle"`` (every rank used, fewest crossing
/// groups), ``"shrink"`` (a smaller dp, layouts only) or ``"fail"``.
///
/// Returns a dict: ``node_hosts`` (the host of logical node 0, 1, ...),
/// ``idle``, ``unhealthy``, ``gpus_per_node``, ``unit_nodes``, ``units``,
/// ``whole_units``, ``straddling_units``, ``crossing`` (must-fit kind ->
/// its groups spanning more than one domain), ``plain_crossing`` (the same
/// with the hosts in the table's order), ``notes``, ``target`` (the layout
/// placed: a smaller one after ``"shrink"``) and ``files`` (launcher ->
/// file text: ``slurm-hostfile``, ``rankfile``, ``torchrun``, ``dlrover``,
/// ``device-mesh``). No placement raises :class:`LayoutError`.
///
/// >>> from rank_layout import Layout, place
/// >>> hosts = "a0 r0 4\na1 r1 4\na2 r0 4\na3 r1 4\n"
/// >>> p = place(Layout(tp=8, world_size=16), hosts, must_fit=["tp"])
/// >>> p["node_hosts"], p["crossing"], p["plain_crossing"]
/// (['a0', 'a2', 'a1', 'a3'], {'tp': 0}, {'tp': 2})
/// >>> p["files"]["torchrun"].splitlines()[1]
/// 'a2 1'
/// >>> conf = "BlockName=b1 Nodes=a[0-1]\nBlockName=b2 Nodes=a[2-3]\n"
/// >>> place(Layout(tp=8, world_size=16), conf, must_fit=["tp"], hosts_format="topology-conf", gpus_per_node=4)["crossing"]
/// {'tp': 0}
#[pyfunction]
#[pyo3(signature = (target, hosts, *, must_fit=None, gpus_per_node=None, on_shortfall="straddle", hosts_format="auto", clique_label=None, topology=None, nodelist=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn place<'py>(
    py: Python<'py>,
    target: &Bound<'py, PyAny>,
    hosts: &Bound<'py, PyAny>,
    must_fit: Option<Vec<String>>,
    gpus_per_node: Option<&Bound<'py, PyAny>>,
    on_shortfall: &str,
    hosts_format: &str,
    clique_label: Option<String>,
    topology: Option<String>,
    nodelist: Option<String>,
) -> PyResult<Bound<'py, PyDict>> {
    let reader = reader(hosts_format, clique_label, topology, nodelist)?;
    let shortfall: Shortfall = on_shortfall
        .parse()
        .map_err(|e| raise(format!("on_shortfall: {e}")))?;
    let options = place_options(gpus_per_node, shortfall)?;
    let hosts = read_hosts(py, hosts, &reader)?;
    let placed = if let Ok(layout) = target.cast::<PyLayout>() {
        let kinds: Option<Vec<Kind>> = match &must_fit {
            Some(names) => Some(
                names
                    .iter()
                    .map(|n| kind(&PyString::new(py, n).into_any()))
                    .collect::<PyResult<_>>()?,
            ),
            None => None,
        };
        Placed::layout(&layout.get().inner, kinds.as_deref(), hosts, &options).or_raise()?
    } else if let Ok(mesh) = target.cast::<PyMesh>() {
        let names: Option<Vec<&str>> = must_fit
            .as_ref()
            .map(|n| n.iter().map(String::as_str).collect());
        Placed::mesh(&mesh.get().inner, names.as_deref(), hosts, &options).or_raise()?
    } else {
        return Err(raise(format!(
            "place takes a Layout or a Mesh, got {}",
            describe(target)
        )));
    };
    let crossing = PyDict::new(py);
    let plain_crossing = PyDict::new(py);
    for k in placed.crossings() {
        crossing.set_item(&k.placed.name, k.placed.domain_crossing())?;
        if let Some(p) = &k.plain {
            plain_crossing.set_item(&k.placed.name, p.domain_crossing())?;
        }
    }
    let files = PyDict::new(py);
    for launcher in Launcher::ALL {
        files.set_item(launcher.name(), placed.file(launcher))?;
    }
    let plan = placed.plan();
    let out = PyDict::new(py);
    out.set_item("node_hosts", placed.node_hosts())?;
    out.set_item("idle", placed.idle_hosts())?;
    out.set_item("unhealthy", placed.unhealthy_hosts())?;
    out.set_item("gpus_per_node", plan.gpus_per_node)?;
    out.set_item("unit_nodes", plan.unit_nodes)?;
    out.set_item("units", plan.units)?;
    out.set_item("whole_units", plan.whole_units)?;
    out.set_item("straddling_units", plan.straddling_units)?;
    out.set_item("crossing", crossing)?;
    out.set_item("plain_crossing", plain_crossing)?;
    out.set_item("notes", plan.notes.clone())?;
    let placed_target = match placed.placed_layout() {
        Some(layout) => package_layout(py, layout.clone())?,
        None => target.clone(),
    };
    out.set_item("target", placed_target)?;
    out.set_item("files", files)?;
    Ok(out)
}

/// The host table of `obj` in any format (`hosts_format="auto"`): a
/// table's text, a list of host dicts or a dict of host -> `nvidia-smi -q`
/// output, as :func:`place` reads it.
///
/// # Errors
/// `LayoutError` for a table that is not one.
pub(crate) fn host_table(obj: &Bound<'_, PyAny>) -> PyResult<Hosts> {
    read_hosts(obj.py(), obj, &HostsReader::new(HostsFormat::Auto))
}

/// The failure of `layout`'s job as `place` places it on `hosts` (its
/// default must-fit kinds, every rank used) when the hosts `failed_hosts`
/// fail and the ranks `failed` besides: what `relayout(hosts=...)` plans
/// for.
///
/// # Errors
/// `LayoutError` for a host table or a reading option that is not one,
/// no placement, a failed host the table lacks.
#[allow(clippy::too_many_arguments)]
pub(crate) fn placed_failure(
    py: Python<'_>,
    layout: &Layout,
    hosts: &Bound<'_, PyAny>,
    reader: &HostsReader,
    failed_hosts: &[String],
    failed: &[u32],
    gpus_per_node: Option<&Bound<'_, PyAny>>,
) -> PyResult<Failure> {
    let hosts = read_hosts(py, hosts, reader)?;
    let options = place_options(gpus_per_node, Shortfall::Straddle)?;
    let placed = Placed::layout(layout, None, hosts, &options).or_raise()?;
    let names: Vec<&str> = failed_hosts.iter().map(String::as_str).collect();
    let lost = placed.fail(&names, failed).or_raise()?;
    Ok(Failure::from(&lost))
}

/// The reader of the keyword arguments `hosts_format`, `clique_label`,
/// `topology` and `nodelist`.
///
/// # Errors
/// `LayoutError` for a format that is not one.
pub(crate) fn reader(
    hosts_format: &str,
    clique_label: Option<String>,
    topology: Option<String>,
    nodelist: Option<String>,
) -> PyResult<HostsReader> {
    let format: HostsFormat = hosts_format
        .parse()
        .map_err(|e| raise(format!("hosts_format: {e}")))?;
    let mut reader = HostsReader::new(format);
    if let Some(label) = clique_label {
        reader = reader.clique_label(label);
    }
    if let Some(topology) = topology {
        reader = reader.topology(topology);
    }
    if let Some(list) = nodelist {
        reader = reader.nodelist(list);
    }
    Ok(reader)
}

/// How to place: `gpus_per_node` (`None`: the table's) and `shortfall`.
fn place_options(
    gpus_per_node: Option<&Bound<'_, PyAny>>,
    shortfall: Shortfall,
) -> PyResult<PlaceOptions> {
    let mut options = PlaceOptions::default().shortfall(shortfall);
    if let Some(g) = gpus_per_node.filter(|g| !g.is_none()) {
        options = options.gpus_per_node(size("gpus_per_node", g)?);
    }
    Ok(options)
}

/// The host table of `obj`: a table's text, a list of host dicts (the JSON
/// table, through `json.dumps`), or a dict of host -> `nvidia-smi -q`
/// output; read by `reader`, its notes raised as `UserWarning`s.
fn read_hosts(py: Python<'_>, obj: &Bound<'_, PyAny>, reader: &HostsReader) -> PyResult<Hosts> {
    let read = if let Ok(text) = obj.cast::<PyString>() {
        reader.read(&text.to_cow()?).or_raise()?
    } else if obj.cast::<PyList>().is_ok() {
        if !matches!(reader.format(), HostsFormat::Auto | HostsFormat::Json) {
            return Err(raise(format!(
                "hosts as a list of dicts is the JSON table, not hosts_format={:?}",
                reader.format().name()
            )));
        }
        // Any index (a numpy integer) is written as the int it is.
        let json = py.import("json")?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("default", py.import("operator")?.getattr("index")?)?;
        let text: String = json
            .call_method("dumps", (obj,), Some(&kwargs))
            .map_err(|e| raise(format!("hosts: a host's value is not JSON: {e}")))?
            .extract()?;
        reader.read(&text).or_raise()?
    } else if let Ok(outputs) = obj.cast::<PyDict>() {
        let mut files: Vec<(String, String)> = Vec::with_capacity(outputs.len());
        for (host, text) in outputs.iter() {
            let pair = (host.extract::<String>(), text.extract::<String>());
            let (Ok(host), Ok(text)) = pair else {
                return Err(raise(format!(
                    "hosts as a dict is host -> its nvidia-smi -q output (str -> str), got {}: {}",
                    describe(&host),
                    describe(&text)
                )));
            };
            files.push((host, text));
        }
        let pairs: Vec<(&str, &str)> = files
            .iter()
            .map(|(h, t)| (h.as_str(), t.as_str()))
            .collect();
        reader.read_nvidia_smi_files(&pairs).or_raise()?
    } else {
        return Err(raise(format!(
            "hosts must be a host table's text, a list of dicts or (nvidia-smi) a dict of host -> output, got {}",
            describe(obj)
        )));
    };
    for note in &read.notes {
        // A note quotes the table's text: no NUL reaches a C string.
        let message = std::ffi::CString::new(note.replace('\0', "\\0")).unwrap_or_default();
        PyErr::warn(py, &py.get_type::<PyUserWarning>(), &message, 1)?;
    }
    Ok(read.hosts)
}
