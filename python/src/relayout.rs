//! `relayout`: the re-layout after a failure (the crate's `relayout`
//! module), as a :class:`Relayout`.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use rank_layout::Topology;
use rank_layout::relayout::{Failure, Policy, Relayout, RelayoutOptions, parse_rank_list};

use crate::error::{OrRaise, raise};
use crate::kind::kind;
use crate::layout::{PyLayout, package_layout};
use crate::mesh::split_or_none;
use crate::value::{describe, offset, round_of, size};

/// The re-layout of ``layout`` after ``failed_ranks`` (a list of ranks, or
/// the text ``"200-203,517"``) fail, under ``policy``
/// (``"drop-replica"``, ``"spare"``, ``"next-grid"``, ``"shift-ranks"``
/// or ``"fill-gaps"``; the semantics, section 11, say what each keeps),
/// as ``rank-layout relayout`` plans it.
///
/// ``gpus_per_node`` sizes the nodes (the spare policy replaces whole
/// nodes; default 8, as the command line's, or with ``hosts`` the table's
/// count) and the ``spare_nodes`` numbered after the old world;
/// ``min_dp`` is the smallest data-parallel size allowed;
/// ``global_batch`` and ``micro_batch`` the batch to keep by gradient
/// accumulation; ``kinds`` the kinds to classify (default: ``tp``,
/// ``cp``, ``ep``, ``dp``, ``pp``, and ``etp``, ``edp`` with experts,
/// those of more than one rank per group).
///
/// With ``hosts`` (a host table, as :func:`place` takes it, with
/// ``hosts_format``, ``clique_label``, ``topology``, ``nodelist``) the job
/// is the one :func:`place` places there (its default must-fit kinds), as
/// ``rank-layout relayout --hosts``: the ``failed_hosts``' nodes fail with
/// ``failed_ranks``, the idle healthy hosts are the spares (no
/// ``spare_nodes``), and the spare policy takes a spare of the failed
/// host's domain first.
///
/// Every surviving process computes the same plan from the same
/// arguments, with no communication: compare :attr:`Relayout.hash`.
///
/// >>> from rank_layout import Layout, relayout
/// >>> layout = Layout(tp=8, pp=4, dp=36, order="tp-dp-pp")
/// >>> plan = relayout(layout, "200-203", policy="drop-replica", gpus_per_node=4)
/// >>> plan.world_size, plan.kinds["tp"], plan.new_communicators
/// (1120, {'kept': 140, 'shrunk': 0, 'new': 0, 'alone': 0, 'gone': 4}, 0)
/// >>> plan.changes("dp")["shrunk"][0]
/// {'old': 0, 'new': 0, 'exclude': [25]}
#[pyfunction]
#[pyo3(signature = (layout, failed_ranks, *, policy, gpus_per_node=None, spare_nodes=None, min_dp=None, global_batch=None, micro_batch=None, kinds=None, hosts=None, failed_hosts=None, hosts_format="auto", clique_label=None, topology=None, nodelist=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn relayout<'py>(
    py: Python<'py>,
    layout: &Bound<'py, PyAny>,
    failed_ranks: &Bound<'py, PyAny>,
    policy: &str,
    gpus_per_node: Option<&Bound<'py, PyAny>>,
    spare_nodes: Option<&Bound<'py, PyAny>>,
    min_dp: Option<&Bound<'py, PyAny>>,
    global_batch: Option<&Bound<'py, PyAny>>,
    micro_batch: Option<&Bound<'py, PyAny>>,
    kinds: Option<Vec<Bound<'py, PyAny>>>,
    hosts: Option<&Bound<'py, PyAny>>,
    failed_hosts: Option<Vec<String>>,
    hosts_format: &str,
    clique_label: Option<String>,
    topology: Option<String>,
    nodelist: Option<String>,
) -> PyResult<PyRelayout> {
    let layout = layout
        .cast::<PyLayout>()
        .map_err(|_| raise(format!("relayout takes a Layout, got {}", describe(layout))))?;
    let layout = &layout.get().inner;
    let failed: Vec<u32> = if let Ok(text) = failed_ranks.cast::<PyString>() {
        parse_rank_list(&text.to_cow()?).or_raise()?
    } else {
        let mut ranks = Vec::new();
        for item in failed_ranks.try_iter().map_err(|_| {
            raise(format!(
                "failed_ranks must be a list of ranks or a str such as '200-203,517', got {}",
                describe(failed_ranks)
            ))
        })? {
            ranks.push(offset("a failed rank", &item?)?);
        }
        ranks
    };
    let policy: Policy = policy.parse().or_raise()?;
    let or = |name: &str, v: Option<&Bound<'py, PyAny>>, default: u32| match v {
        Some(v) if !v.is_none() => size(name, v),
        _ => Ok(default),
    };
    let reader = crate::machine::reader(hosts_format, clique_label, topology, nodelist)?;
    let failure = match hosts.filter(|h| !h.is_none()) {
        Some(hosts) => {
            if spare_nodes.is_some_and(|s| !s.is_none()) {
                return Err(raise(
                    "spare_nodes is for a job without hosts: with hosts, the idle hosts are the spares".to_string(),
                ));
            }
            let failed_hosts = failed_hosts.unwrap_or_default();
            crate::machine::placed_failure(
                py,
                layout,
                hosts,
                &reader,
                &failed_hosts,
                &failed,
                gpus_per_node,
            )?
        }
        None => {
            if failed_hosts.is_some() {
                return Err(raise(
                    "failed_hosts needs the hosts they are in: give hosts".to_string(),
                ));
            }
            let g = or(
                "gpus_per_node",
                gpus_per_node,
                Topology::default().gpus_per_node(),
            )?;
            let spare_nodes = match spare_nodes {
                Some(v) if !v.is_none() => offset("spare_nodes", v)?,
                _ => 0,
            };
            Failure::new(g, failed).spare_nodes(spare_nodes)
        }
    };
    let mut options = RelayoutOptions::default().min_dp(or("min_dp", min_dp, 1)?);
    if let Some(g) = global_batch.filter(|g| !g.is_none()) {
        options =
            options.global_batch(size("global_batch", g)?, or("micro_batch", micro_batch, 1)?);
    }
    if let Some(kinds) = kinds {
        options = options.kinds(kinds.iter().map(kind).collect::<PyResult<_>>()?);
    }
    let inner = rank_layout::relayout::relayout(layout, &failure, policy, &options).or_raise()?;
    Ok(PyRelayout { inner })
}

/// A re-layout plan (see :func:`relayout`): the new layout, every
/// process's new rank, and every kind's groups kept, shrunk, new or gone.
///
/// Processes are the old layout's ranks (counted from its
/// ``rank_offset``), then the spares' ranks after them.
#[pyclass(frozen, name = "Relayout", module = "rank_layout._native")]
pub(crate) struct PyRelayout {
    pub(crate) inner: Relayout,
}

#[pymethods]
impl PyRelayout {
    /// The policy's name.
    #[getter]
    fn policy(&self) -> &'static str {
        self.inner.policy().name()
    }

    /// The new :class:`Layout`.
    #[getter]
    fn layout<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        package_layout(py, self.inner.layout().clone())
    }

    /// The layout before the failure.
    #[getter]
    fn old_layout<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        package_layout(py, self.inner.old_layout().clone())
    }

    /// The new layout's ranks.
    #[getter]
    fn world_size(&self) -> u32 {
        self.inner.layout().world_size()
    }

    /// Every process's new rank (old ranks, then spares; ``None``: failed,
    /// or alive and waiting).
    #[getter]
    fn new_rank(&self) -> Vec<Option<u32>> {
        self.inner.rank_map().iter().collect()
    }

    /// The process (old rank minus offset, or spare) that runs new rank
    /// ``rank``.
    fn process(&self, rank: &Bound<'_, PyAny>) -> PyResult<u32> {
        let n = offset("rank", rank)?;
        self.inner.rank_map().process(n).ok_or_else(|| {
            raise(format!(
                "rank {n} is not a rank of the new layout (0..{})",
                self.inner.layout().world_size()
            ))
        })
    }

    /// Kind -> ``{"kept", "shrunk", "new", "alone", "gone"}`` counts
    /// (``alone``: new groups of one process, which need no communicator).
    #[getter]
    fn kinds<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for c in self.inner.kinds() {
            let d = PyDict::new(py);
            d.set_item("kept", c.kept)?;
            d.set_item("shrunk", c.shrunk.len())?;
            d.set_item("new", c.new.len())?;
            d.set_item("alone", c.alone.len())?;
            d.set_item("gone", c.gone.len())?;
            out.set_item(c.kind.to_string(), d)?;
        }
        Ok(out)
    }

    /// One kind's changed groups: ``shrunk`` (dicts of the old group's
    /// number, the new group's and the positions in the old group to
    /// exclude, in the order ``shrink_group`` keeps), ``new`` (the new
    /// layout's group numbers that need a communicator), ``alone`` (the
    /// new groups of one process, which need none) and ``gone`` (old
    /// group numbers), with ``kept`` the number kept.
    fn changes<'py>(
        &self,
        py: Python<'py>,
        kind: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let k = self::kind(kind)?;
        let c = self
            .inner
            .changes(k)
            .ok_or_else(|| raise(format!("kind {k} was not classified by this plan")))?;
        let out = PyDict::new(py);
        out.set_item("kept", c.kept)?;
        let shrunk = c
            .shrunk
            .iter()
            .map(|s| {
                let d = PyDict::new(py);
                d.set_item("old", s.old_color)?;
                d.set_item("new", s.new_color)?;
                d.set_item("exclude", s.exclude.clone())?;
                Ok(d)
            })
            .collect::<PyResult<Vec<_>>>()?;
        out.set_item("shrunk", shrunk)?;
        out.set_item("new", c.new.clone())?;
        out.set_item("alone", c.alone.clone())?;
        out.set_item("gone", c.gone.clone())?;
        Ok(out)
    }

    /// The :class:`Split` that process ``process`` makes of the survivors
    /// for ``kind`` when its new group is new; ``None`` when it is kept,
    /// shrunk or the process alone, or the process has no new rank. For a
    /// kind whose groups overlap (an encoder's fan-out ``pp``), give
    /// ``round`` (``0`` to ``layout.split_rounds(kind) - 1``), as
    /// :meth:`Layout.split`. Raises :class:`LayoutError` for a process
    /// that is not the plan's or a kind it did not classify.
    #[pyo3(signature = (process, kind, round=None))]
    fn split<'py>(
        &self,
        py: Python<'py>,
        process: &Bound<'py, PyAny>,
        kind: &Bound<'py, PyAny>,
        round: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let p = offset("process", process)?;
        let kind = self::kind(kind)?;
        let split = match round {
            None => self.inner.split(p, kind),
            Some(round) => {
                let rounds = self.inner.layout().split_rounds(kind).or_raise()?;
                let round = round_of(kind, rounds, round)?;
                self.inner.split_in_round(p, kind, round)
            }
        };
        split_or_none(py, split.or_raise()?)
    }

    /// Communicators to create (the sum of every kind's ``new``).
    #[getter]
    fn new_communicators(&self) -> u64 {
        self.inner.cost().new_communicators
    }

    /// The cost: ``new_communicators``, ``shrinks``, ``kept``, ``moved``
    /// (ranks that must receive model state), ``lost_dp``, ``idle``.
    #[getter]
    fn cost<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.inner.cost();
        let out = PyDict::new(py);
        out.set_item("new_communicators", c.new_communicators)?;
        out.set_item("shrinks", c.shrinks)?;
        out.set_item("kept", c.kept)?;
        out.set_item("moved", c.moved)?;
        out.set_item("lost_dp", c.lost_dp)?;
        out.set_item("idle", c.idle)?;
        Ok(out)
    }

    /// The plan's content hash (64 bits): equal on every process that
    /// holds the same plan. Printed as 16 hex digits (``f"{plan.hash:016x}"``),
    /// as ``rank-layout relayout`` prints it.
    #[getter]
    fn hash(&self) -> u64 {
        self.inner.hash()
    }

    /// What the policy noticed, in words.
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.inner.notes().to_vec()
    }

    fn __repr__(&self) -> String {
        format!(
            "Relayout(policy={:?}, world_size={}, new_communicators={}, hash={:016x})",
            self.inner.policy().name(),
            self.inner.layout().world_size(),
            self.inner.cost().new_communicators,
            self.inner.hash()
        )
    }
}
