//! `rank_layout.Layout`: the crate's [`Layout`] as a Python class.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use numpy::PyArray2;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use rank_layout::{Error, ExpertLayout, Kind, Layout, Order, Split};

use crate::array;
use crate::card;
use crate::config;
use crate::error::{OrRaise, from_crate, raise};
use crate::kind::kind;
use crate::mesh::split_or_none;
use crate::value::{index, round_of};

/// One entry of [`PyLayout::splits`]: `(kind, round, rounds, (color, key) or None)`.
type SplitStep = (String, u32, u32, Option<(u32, u32)>);

/// A validated rank layout: every kind's process groups, in Megatron-LM's
/// order, and every rank's answers, computed arithmetically.
///
/// Keyword arguments are the keys of the JSON configuration
/// (``rank-layout --config``), all optional; ``None`` is the same as
/// leaving a key out:
///
/// - ``tp``, ``cp``, ``ep``, ``pp``: tensor, context, expert and pipeline
///   parallel sizes (default 1);
/// - ``dp``: data-parallel size (default ``world_size / (tp*cp*pp)``, or 1);
/// - ``world_size``: the number of ranks, checked against ``dp`` when both
///   are given;
/// - ``order``: the axis order, first fastest (default ``"tp-cp-ep-dp-pp"``);
/// - ``rank_offset``: the first rank (default 0);
/// - ``encoder_tp``, ``encoder_pp``: giving either makes an encoder +
///   decoder layout (an encoder grid with its own tp and pp before the
///   decoder);
/// - ``expert_layout``: ``"folded"`` (default: a second expert grid,
///   Megatron-Core's MoE folding) or ``"nested"`` (experts carved out of dp,
///   Megatron-LM 2024);
/// - ``etp``: expert tensor-parallel size (folded; default ``tp``);
/// - ``hierarchical_cp``: context-parallel level sizes, innermost first,
///   whose product is ``cp``;
/// - ``dist_opt_instances``: distributed-optimizer instances (folded);
/// - ``gtp_remat``, ``expert_gtp_remat``: Megatron-Core 0.19's weight-shard
///   axes ("GTP", default 1: none; folded): ``gtp_remat`` is a dense-grid
///   axis right after ``tp`` (or where ``order`` writes ``gtp_remat``),
///   counted in the model size (``dp = world_size / (tp*cp*pp*gtp_remat)``,
///   the replicate degree); ``expert_gtp_remat`` the expert grid's
///   ``egtp_remat`` axis right after ``ep`` (``edp = world_size /
///   (etp*ep*pp*expert_gtp_remat)``). Either > 1 adds its kinds
///   (``gtp_remat``, ``gtp_remat-dp``, ``tp-gtp_remat-pp``, ...,
///   ``egtp_remat``, ``egtp_remat-edp``, ``etp-ep-egtp_remat-pp``).
///
/// Kinds are named as in rank-layout (``"tp"``, ``"dp-cp"``,
/// ``"dp-mod-ep"``, ``"embd"``, ...), ranks are ints. Anything invalid
/// raises :class:`LayoutError` (a ``ValueError``) with rank-layout's message.
///
/// >>> from rank_layout import Layout
/// >>> layout = Layout(tp=2, cp=2, pp=2, world_size=16)
/// >>> layout.sizes["dp"]
/// 2
/// >>> layout.groups("cp")[:2]
/// [[0, 2], [1, 3]]
/// >>> layout.groups_array("pp").shape
/// (8, 2)
/// >>> layout.split(13, "pp")  # the group's number (color), the rank's place (key)
/// Split(color=5, key=1)
/// >>> Layout(tp=4, world_size=10)
/// Traceback (most recent call last):
///     ...
/// rank_layout.LayoutError: world_size (10) is not divisible by tp*cp*pp = 4
#[pyclass(frozen, subclass, name = "Layout", module = "rank_layout._native")]
pub(crate) struct PyLayout {
    pub(crate) inner: Layout,
}

impl PyLayout {
    /// `obj` as a rank of this layout: a rank no `u32` holds is outside it.
    fn rank_arg(&self, obj: &Bound<'_, PyAny>) -> PyResult<u32> {
        let (first, last) = (self.inner.rank_offset(), self.inner.rank_end() - 1);
        index("rank", obj, |v| match v.parse::<u64>() {
            Ok(rank) => from_crate(Error::RankOutOfRange { rank, first, last }),
            Err(_) => raise(format!(
                "rank {v} is outside the layout (ranks {first}..{last}, both included)"
            )),
        })
    }
}

#[pymethods]
impl PyLayout {
    #[new]
    #[pyo3(
        signature = (*args, **config),
        text_signature = "(*, tp=1, cp=1, ep=1, dp=None, pp=1, world_size=None, order='tp-cp-ep-dp-pp', rank_offset=0, encoder_tp=None, encoder_pp=None, expert_layout='folded', etp=None, hierarchical_cp=None, dist_opt_instances=None, gtp_remat=1, expert_gtp_remat=1)"
    )]
    fn new(args: &Bound<'_, PyTuple>, config: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        if !args.is_empty() {
            return Err(raise(format!(
                "Layout takes keyword arguments only (the configuration keys {}), got {} positional",
                config::KEYS.join(", "),
                args.len()
            )));
        }
        let config = config::from_kwargs(config)?;
        Ok(PyLayout {
            inner: Layout::new(&config).or_raise()?,
        })
    }

    /// Every kind of this layout, in listing order: the dense kinds, the
    /// expert kinds, ``embd``, ``pos-embd``, then ``hcp-*`` and the
    /// distributed-optimizer kinds when configured.
    ///
    /// >>> Layout(tp=2, world_size=8).kinds[:5]
    /// ['tp', 'pp', 'dp', 'cp', 'dp-cp']
    #[getter]
    fn kinds(&self) -> Vec<String> {
        self.inner.kinds().iter().map(Kind::to_string).collect()
    }

    /// The number of ranks.
    ///
    /// >>> Layout(tp=4, encoder_tp=2).world_size  # 2 encoder ranks, 4 decoder ranks
    /// 6
    #[getter]
    fn world_size(&self) -> u32 {
        self.inner.world_size()
    }

    /// The first rank.
    #[getter]
    fn rank_offset(&self) -> u32 {
        self.inner.rank_offset()
    }

    /// The number of encoder ranks (0 without an encoder); they come first.
    #[getter]
    fn encoder_world_size(&self) -> u32 {
        self.inner.encoder_world_size()
    }

    /// ``"nested"``, ``"folded"`` or ``"encoder+decoder"``.
    #[getter]
    fn shape(&self) -> &'static str {
        self.inner.shape().name()
    }

    /// The sizes of the decoder (or only) grid, derived ones included:
    /// ``tp``, ``cp``, ``ep``, ``dp``, ``pp``, ``etp``, ``edp``, and the
    /// weight-shard axes ``gtp_remat`` and ``egtp_remat`` (1 without them).
    ///
    /// >>> Layout(tp=2, ep=4, world_size=64).sizes
    /// {'tp': 2, 'cp': 1, 'ep': 4, 'dp': 32, 'pp': 1, 'etp': 2, 'edp': 8, 'gtp_remat': 1, 'egtp_remat': 1}
    /// >>> Layout(tp=2, gtp_remat=2, ep=2, expert_gtp_remat=2, world_size=16).sizes
    /// {'tp': 2, 'cp': 1, 'ep': 2, 'dp': 4, 'pp': 1, 'etp': 2, 'edp': 2, 'gtp_remat': 2, 'egtp_remat': 2}
    #[getter]
    fn sizes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        config::sizes(py, &self.inner.sizes())
    }

    /// The encoder grid's sizes, or ``None`` without an encoder.
    #[getter]
    fn encoder_sizes<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.inner
            .encoder_sizes()
            .map(|s| config::sizes(py, &s))
            .transpose()
    }

    /// The configuration with the derived sizes filled in (``dp``,
    /// ``world_size``, and ``etp`` or ``encoder_tp``/``encoder_pp`` where
    /// the layout has them): ``Layout(**layout.config) == layout``.
    ///
    /// >>> Layout(tp=2, world_size=8).config["dp"]
    /// 4
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        config::to_dict(py, self.inner.config())
    }

    /// The groups of ``kind``, in Megatron-LM's order, as lists of ranks.
    ///
    /// >>> Layout(tp=2, dp=3, pp=4, order="tp-dp-pp").groups("dp")[-1]
    /// [19, 21, 23]
    fn groups<'py>(
        &self,
        py: Python<'py>,
        kind: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let groups = self.inner.groups(self::kind(kind)?).or_raise()?;
        crate::memory::check_ints(groups.member_count())?;
        crate::lists::table_rows(py, groups.table().or_raise()?)
    }

    /// The groups of ``kind`` as a NumPy ``uint32`` array of shape
    /// (groups, group size), row ``i`` the group of color ``i``. Written
    /// by rank-layout's fill (vectorised copies, no Python loop, the GIL
    /// released), handed to NumPy without a copy.
    ///
    /// Raises :class:`LayoutError` when the groups have two sizes (an
    /// encoder + decoder layout whose encoder and decoder differ): use
    /// :meth:`groups` there.
    ///
    /// >>> a = Layout(tp=2, cp=2, pp=2, world_size=16).groups_array("dp-cp")
    /// >>> a.dtype, a.shape
    /// (dtype('uint32'), (4, 4))
    /// >>> a[0].tolist()
    /// [0, 2, 4, 6]
    fn groups_array<'py>(
        &self,
        py: Python<'py>,
        kind: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray2<u32>>> {
        let kind = self::kind(kind)?;
        array::array_of(py, &kind.to_string(), self.inner.groups(kind).or_raise()?)
    }

    /// The groups of every kind of ``kinds`` (default: every kind of the
    /// layout) as NumPy arrays, by kind: views of one allocation, filled in
    /// one pass without the GIL. Cheaper than one :meth:`groups_array` per
    /// kind when the arrays are kept (one set of page faults).
    ///
    /// >>> arrays = Layout(tp=2, cp=2, pp=2, world_size=16).groups_arrays()
    /// >>> arrays["dp-cp"][0].tolist(), arrays["tp"].shape
    /// ([0, 2, 4, 6], (8, 2))
    #[pyo3(signature = (kinds=None))]
    fn groups_arrays<'py>(
        &self,
        py: Python<'py>,
        kinds: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let chosen: Vec<Kind> = match kinds {
            Some(list) if !list.is_none() => list
                .try_iter()?
                .map(|k| self::kind(&k?))
                .collect::<PyResult<_>>()?,
            _ => self.inner.kinds().to_vec(),
        };
        let mut groups = Vec::with_capacity(chosen.len());
        for kind in chosen {
            groups.push((kind.to_string(), self.inner.groups(kind).or_raise()?));
        }
        array::arrays_of(py, &groups)
    }

    /// Group ``index`` (its color) of ``kind``, as a list of ranks.
    ///
    /// >>> Layout(tp=2, pp=4, world_size=16, order="tp-dp-pp").group("pp", 1)
    /// [1, 5, 9, 13]
    fn group<'py>(
        &self,
        py: Python<'py>,
        kind: &Bound<'py, PyAny>,
        index: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let kind = self::kind(kind)?;
        let mut groups = self.inner.groups(kind).or_raise()?;
        let count = groups.len();
        let past = |i: String| {
            raise(format!(
                "kind {kind} has {count} groups, group {i} does not exist"
            ))
        };
        let i = self::index("index", index, past)?;
        let group = groups.nth(i as usize).ok_or_else(|| past(i.to_string()))?;
        crate::memory::check_ints(group.len() as u64)?;
        crate::lists::ints(py, group.try_to_vec().or_raise()?)
    }

    /// Everything about ``rank``: its grid (``part``), its coordinates, and
    /// per kind the groups holding it, each with its color (the group's
    /// index), the rank's key (its place) and the members. Computed in
    /// O(axes) per kind, plus the members.
    ///
    /// >>> card = Layout(tp=2, cp=2, pp=2, world_size=16).rank(13)
    /// >>> card["coord"]  # folded experts: edp = 16 / (etp 2 * ep 1 * pp 2) = 4
    /// {'tp': 1, 'cp': 0, 'ep': 0, 'dp': 1, 'pp': 1, 'etp': 1, 'edp': 2}
    /// >>> card["pipeline"]
    /// {'stage': 1, 'stages': 2, 'prev': [5], 'next': []}
    /// >>> card["groups"]["pp"]
    /// [{'color': 5, 'key': 1, 'members': [5, 13]}]
    /// >>> card["groups"]["pos-embd"]  # not on the first stage
    /// []
    fn rank<'py>(&self, py: Python<'py>, rank: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
        card::card(py, &self.inner, self.rank_arg(rank)?)
    }

    /// The groups of ``kind`` holding ``rank``, by ascending color: one for
    /// most kinds, none where the rank is in no group (``embd``,
    /// ``pos-embd``), several where groups overlap (encoder fan-out and
    /// fan-in).
    ///
    /// >>> Layout(tp=4, cp=2, encoder_tp=2).memberships(0, "pp")
    /// [{'color': 0, 'key': 0, 'members': [0, 4]}, {'color': 1, 'key': 0, 'members': [0, 5]}]
    fn memberships<'py>(
        &self,
        py: Python<'py>,
        rank: &Bound<'py, PyAny>,
        kind: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let ms = self
            .inner
            .memberships(self.rank_arg(rank)?, self::kind(kind)?)
            .or_raise()?;
        card::memberships(py, &ms)
    }

    /// The comm-split :class:`Split` ``(color, key)`` of ``rank`` for
    /// ``kind``: the number of its group and its place there; ``None`` when
    /// it is in no group.
    /// For a kind whose groups overlap, give the ``round`` (see
    /// :meth:`split_rounds`): the groups of one round are disjoint.
    ///
    /// >>> layout = Layout(tp=4, cp=2, encoder_tp=2)
    /// >>> layout.split(5, "tp")  # encoder tp groups [0, 1], [2, 3], then [4, 5, 6, 7]
    /// Split(color=2, key=1)
    /// >>> [layout.split(5, "pp", round=r) for r in range(layout.split_rounds("pp"))]
    /// [None, Split(color=1, key=1)]
    #[pyo3(signature = (rank, kind, round=None))]
    fn split<'py>(
        &self,
        py: Python<'py>,
        rank: &Bound<'py, PyAny>,
        kind: &Bound<'py, PyAny>,
        round: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let rank = self.rank_arg(rank)?;
        let kind = self::kind(kind)?;
        let split = match round {
            None => self.inner.split(rank, kind),
            Some(round) => {
                let rounds = self.inner.split_rounds(kind).or_raise()?;
                let round = round_of(kind, rounds, round)?;
                self.inner.split_in_round(rank, kind, round)
            }
        };
        split_or_none(py, split.or_raise()?)
    }

    /// How many rounds of disjoint groups build ``kind``: 1, or the largest
    /// fan-out or fan-in of an encoder + decoder layout.
    ///
    /// >>> Layout(tp=4, cp=2, encoder_tp=2).split_rounds("pp")
    /// 2
    fn split_rounds(&self, kind: &Bound<'_, PyAny>) -> PyResult<u32> {
        self.inner.split_rounds(self::kind(kind)?).or_raise()
    }

    /// Every comm-split of ``rank``: for each kind and each of its rounds, a
    /// :class:`SplitRound` ``(kind, round, rounds, split)`` with ``split`` the
    /// :class:`Split` ``(color, key)`` or ``None``. The same sequence of (kind, round) on every rank of a
    /// grid, computed in O(kinds) from the rank's coordinates.
    ///
    /// >>> Layout(tp=2, world_size=4).splits(3)[0]
    /// SplitRound(kind='tp', round=0, rounds=1, split=Split(color=1, key=1))
    /// >>> [tuple(s) for s in Layout(tp=2, world_size=4).splits(3)[1:3]]
    /// [('pp', 0, 1, Split(color=3, key=0)), ('dp', 0, 1, Split(color=1, key=1))]
    fn splits(&self, rank: &Bound<'_, PyAny>) -> PyResult<Vec<SplitStep>> {
        Ok(self
            .inner
            .splits(self.rank_arg(rank)?)
            .or_raise()?
            .map(|s| {
                (
                    s.kind.to_string(),
                    s.round,
                    s.rounds,
                    s.split.map(|Split { color, key }| (color, key)),
                )
            })
            .collect())
    }

    /// The next pipeline stage(s) of ``rank``: one rank inside a pipeline,
    /// every decoder rank an encoder rank feeds (fan-out), none at the last
    /// stage (no wrap-around).
    ///
    /// >>> layout = Layout(tp=4, cp=2, encoder_tp=2)
    /// >>> layout.pipeline_next(0), layout.pipeline_next(4)
    /// ([4, 5], [])
    fn pipeline_next(&self, rank: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        self.inner.pipeline_next(self.rank_arg(rank)?).or_raise()
    }

    /// The previous pipeline stage(s) of ``rank`` (several when
    /// ``encoder_tp > tp``: fan-in), none at the first stage.
    ///
    /// >>> Layout(tp=4, cp=2, encoder_tp=2).pipeline_prev(5)
    /// [0]
    fn pipeline_prev(&self, rank: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        self.inner.pipeline_prev(self.rank_arg(rank)?).or_raise()
    }

    /// Whether ``rank`` is on the first stage of its (joined) pipeline.
    ///
    /// >>> layout = Layout(pp=4, world_size=8)
    /// >>> [layout.is_first_stage(r) for r in (0, 2)]
    /// [True, False]
    fn is_first_stage(&self, rank: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.inner.is_first_stage(self.rank_arg(rank)?).or_raise()
    }

    /// Whether ``rank`` is on the last stage of its (joined) pipeline.
    ///
    /// >>> Layout(pp=4, world_size=8).is_last_stage(7)
    /// True
    fn is_last_stage(&self, rank: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.inner.is_last_stage(self.rank_arg(rank)?).or_raise()
    }

    /// Whether ``rank`` holds the word embedding (is in an ``embd`` group:
    /// first or last stage).
    fn is_embedding_rank(&self, rank: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.inner
            .is_embedding_rank(self.rank_arg(rank)?)
            .or_raise()
    }

    /// Whether ``rank`` holds the position embedding (is in a ``pos-embd``
    /// group: first stage).
    fn is_position_embedding_rank(&self, rank: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.inner
            .is_position_embedding_rank(self.rank_arg(rank)?)
            .or_raise()
    }

    /// The layout's grid as a :class:`Mesh`: dims ``tp``, ``cp``, ``dp``,
    /// ``pp`` in the layout's order and the expert grid as the view
    /// ``expert`` (folded: ``etp``, ``ep``, ``edp``, ``pp``); with
    /// weight-shard axes, the dim ``gtp_remat`` (after ``tp``) and the
    /// expert dim ``egtp_remat`` (after ``ep``). A kind of axes is the
    /// mesh's dim set of the same names.
    ///
    /// >>> layout = Layout(tp=2, cp=2, ep=2, pp=2, world_size=16)
    /// >>> layout.mesh().groups("expert:ep") == layout.groups("ep")
    /// True
    /// >>> mesh = Layout(tp=2, gtp_remat=2, ep=2, expert_gtp_remat=2, world_size=16).mesh()
    /// >>> mesh.dims
    /// [('tp', 2), ('gtp_remat', 2), ('cp', 1), ('dp', 4), ('pp', 1)]
    /// >>> mesh.views
    /// [('expert', [('etp', 2), ('ep', 2), ('egtp_remat', 2), ('edp', 2), ('pp', 1)])]
    fn mesh(&self) -> PyResult<crate::mesh::PyMesh> {
        Ok(crate::mesh::PyMesh {
            inner: self.inner.mesh().or_raise()?,
        })
    }

    fn __eq__(&self, other: &Bound<'_, PyLayout>) -> bool {
        self.inner == other.get().inner
    }

    fn __hash__(&self) -> u64 {
        let mut h = DefaultHasher::new();
        self.inner.config().hash(&mut h);
        h.finish()
    }

    /// ``Layout(...)`` with the keys that differ from the defaults, and the
    /// derived ``dp`` and ``world_size``.
    fn __repr__(&self) -> String {
        let c = self.inner.config();
        let size = |name: &str, value: Option<u32>, default: Option<u32>| {
            value
                .filter(|v| Some(*v) != default)
                .map(|v| format!("{name}={v}"))
        };
        let parts: Vec<String> = [
            size("tp", Some(c.tp), Some(1)),
            size("cp", Some(c.cp), Some(1)),
            size("ep", Some(c.ep), Some(1)),
            size("dp", c.dp, None),
            size("pp", Some(c.pp), Some(1)),
            size("world_size", c.world_size, None),
            (c.order != Order::default()).then(|| format!("order='{}'", c.order)),
            size("rank_offset", Some(c.rank_offset), Some(0)),
            size("encoder_tp", c.encoder_tp, None),
            size("encoder_pp", c.encoder_pp, None),
            (c.expert_layout != ExpertLayout::default())
                .then(|| format!("expert_layout='{}'", c.expert_layout)),
            size("etp", c.etp.filter(|etp| *etp != c.tp), None),
            (!c.hierarchical_cp.is_empty())
                .then(|| format!("hierarchical_cp={:?}", c.hierarchical_cp)),
            size("dist_opt_instances", Some(c.dist_opt_instances), Some(1)),
            size("gtp_remat", Some(c.gtp_remat), Some(1)),
            size("expert_gtp_remat", Some(c.expert_gtp_remat), Some(1)),
        ]
        .into_iter()
        .flatten()
        .collect();
        format!("Layout({})", parts.join(", "))
    }
}

/// `layout` as the package's :class:`rank_layout.Layout` (the Python class,
/// whose ``splits`` answers :class:`SplitRound`\ s and which pickles), made
/// from its configuration; the native class when the package's cannot be
/// imported.
pub(crate) fn package_layout(py: Python<'_>, layout: Layout) -> PyResult<Bound<'_, PyAny>> {
    let native = Bound::new(py, PyLayout { inner: layout })?.into_any();
    match py.import("rank_layout").and_then(|m| m.getattr("Layout")) {
        Ok(class) => {
            let config = native.getattr("config")?;
            let config = config.cast::<pyo3::types::PyDict>()?;
            class.call((), Some(config))
        }
        Err(_) => Ok(native),
    }
}
