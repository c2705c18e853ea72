//! `rank_layout.InferenceShards`: the crate's [`InferenceShards`]
//! (Megatron-Core 0.19's `--inference-shards`) as a Python class.

use pyo3::prelude::*;
use pyo3::types::PyList;
use rank_layout::megatron::{InferenceShard, InferenceShards, ShardMapping};
use rank_layout::{Error, Kind};

use crate::error::{OrRaise, from_crate, raise};
use crate::kind::kind as parse_kind;
use crate::layout::package_layout;
use crate::megatron::parsed_args;
use crate::mesh::split_or_none;
use crate::value::{index, size, string};

/// Megatron-Core 0.19's inference shards: the world cut into contiguous
/// shards, each an inference model of its own parallelism (``tp``, ``pp``,
/// ``ep``, ``expt_tp``, ``dp``; cp 1) and, for disaggregated serving, a
/// role (``"prefill"`` or ``"decode"``).
///
/// ``spec`` is the text of ``--inference-shards``, read exactly as
/// megatron-core 0.19.2 reads it: shards separated by ``+`` or ``;``,
/// ``key=value`` entries separated by ``,`` (``expt_tp`` defaults to
/// ``tp``, the others to 1). ``world_size`` (default: as many ranks as the
/// shards hold) must be what they hold. ``use_tp_pp_dp_mapping`` orders
/// each shard's ranks tp-cp-ep-pp-dp instead of tp-cp-ep-dp-pp, as
/// Megatron-LM's switch of that name. Each shard is a :class:`Layout` at
/// its rank offset with every group Megatron-Core's
/// ``build_inference_pg_collections_for_shards`` makes for it, in its
/// order (:attr:`kinds`). What Megatron-Core refuses raises
/// :class:`LayoutError` naming the shard (numbered from 0) and the value.
///
/// >>> from rank_layout import InferenceShards
/// >>> shards = InferenceShards("tp=2,pp=2,role=prefill + tp=1,dp=4,role=decode")
/// >>> shards.world_size, [s.role for s in shards.shards]
/// (8, ['prefill', 'decode'])
/// >>> decode = shards.shard_of(5)
/// >>> decode.rank_offset, decode.world_size, decode.layout.groups("dp")
/// (4, 4, [[4, 5, 6, 7]])
/// >>> shards.split(6, "tp")  # numbered over every shard's groups: prefill's are 0 and 1
/// Split(color=4, key=0)
/// >>> InferenceShards("tp=2;tp=1,cp=2")
/// Traceback (most recent call last):
///     ...
/// rank_layout.LayoutError: inference shard 1: cp = 2, but inference shards have no context parallelism (cp must be 1)
#[pyclass(frozen, name = "InferenceShards", module = "rank_layout._native")]
pub(crate) struct PyInferenceShards {
    inner: InferenceShards,
}

/// One shard of :class:`InferenceShards`: its number, role, rank span,
/// sizes and :class:`Layout`.
#[pyclass(frozen, name = "InferenceShard", module = "rank_layout._native")]
pub(crate) struct PyInferenceShard {
    inner: InferenceShard,
}

impl PyInferenceShards {
    /// `obj` as a rank of the shards: past the world, the crate's error.
    fn rank_arg(&self, obj: &Bound<'_, PyAny>) -> PyResult<u32> {
        let last = u64::from(self.inner.world_size().saturating_sub(1));
        index("rank", obj, |v| match v.parse::<u64>() {
            Ok(rank) => from_crate(Error::RankOutOfRange {
                rank,
                first: 0,
                last,
            }),
            Err(_) => raise(format!(
                "rank {v} is outside the shards (ranks 0..{last}, both included)"
            )),
        })
    }
}

#[pymethods]
impl PyInferenceShards {
    #[new]
    #[pyo3(signature = (spec, world_size = None, use_tp_pp_dp_mapping = false))]
    fn new(
        spec: &Bound<'_, PyAny>,
        world_size: Option<&Bound<'_, PyAny>>,
        use_tp_pp_dp_mapping: bool,
    ) -> PyResult<Self> {
        let spec = string("spec", "'tp=2,role=prefill+tp=1,dp=2,role=decode'", spec)?;
        let world = world_size
            .filter(|w| !w.is_none())
            .map(|w| size("world_size", w))
            .transpose()?;
        let mapping = ShardMapping::from_flag(use_tp_pp_dp_mapping);
        Ok(PyInferenceShards {
            inner: InferenceShards::parse(&spec, world, mapping).or_raise()?,
        })
    }

    /// The inference shards of Megatron-LM's arguments
    /// (``inference_shards``, ``use_tp_pp_dp_mapping``, over
    /// ``world_size`` when given), in any form ``megatron_config`` takes;
    /// ``None`` when they give no ``inference_shards``.
    ///
    /// >>> shards = InferenceShards.from_megatron_args(
    /// ...     "serve.py --inference-shards 'tp=2,pp=2+tp=2' --use-tp-pp-dp-mapping")
    /// >>> shards.use_tp_pp_dp_mapping, shards.shards[0].layout.groups("pp")
    /// (True, [[0, 2], [1, 3]])
    #[staticmethod]
    fn from_megatron_args(args: &Bound<'_, PyAny>) -> PyResult<Option<Self>> {
        Ok(parsed_args(args)?
            .inference_shards()
            .or_raise()?
            .map(|inner| PyInferenceShards { inner }))
    }

    /// The kinds of every shard, in the order Megatron-Core's
    /// ``ProcessGroupCollection`` of a shard lists its groups: ``tp``,
    /// ``cp``, ``pp``, ``dp``, ``tp-pp`` (``mp``), ``tp-cp``, ``dp-cp``,
    /// ``tp-dp-cp``, ``ep``, ``etp`` (``expt_tp``), ``edp``
    /// (``expt_dp``), ``etp-ep`` (``tp_ep``), ``etp-ep-pp``
    /// (``tp_ep_pp``), ``embd``, ``pos-embd``.
    #[getter]
    fn kinds(&self) -> Vec<String> {
        InferenceShards::KINDS.iter().map(Kind::to_string).collect()
    }

    /// The shards, in rank order.
    #[getter]
    fn shards<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(
            py,
            self.inner
                .shards()
                .iter()
                .map(|s| PyInferenceShard { inner: s.clone() }),
        )
    }

    /// The number of ranks of all shards.
    #[getter]
    fn world_size(&self) -> u32 {
        self.inner.world_size()
    }

    /// Whether each shard's ranks are ordered tp-cp-ep-pp-dp.
    #[getter]
    fn use_tp_pp_dp_mapping(&self) -> bool {
        self.inner.mapping().is_tp_pp_dp()
    }

    /// The spec, every key of every shard written (``expt_tp`` too).
    #[getter]
    fn spec(&self) -> String {
        spec_text(&self.inner)
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// The shard holding ``rank``.
    ///
    /// >>> InferenceShards("tp=2;dp=2").shard_of(3).index
    /// 1
    fn shard_of(&self, rank: &Bound<'_, PyAny>) -> PyResult<PyInferenceShard> {
        let rank = self.rank_arg(rank)?;
        Ok(PyInferenceShard {
            inner: self.inner.shard_of(rank).or_raise()?.clone(),
        })
    }

    /// The role of ``rank``'s shard (``None`` when it has none).
    fn role_of(&self, rank: &Bound<'_, PyAny>) -> PyResult<Option<&'static str>> {
        let rank = self.rank_arg(rank)?;
        Ok(self.inner.role_of(rank).or_raise()?.map(|r| r.name()))
    }

    /// ``rank``'s :class:`Split` in the ``kind`` groups of all shards,
    /// numbered shard after shard (one comm-split of the world builds every
    /// shard's groups of a kind); ``None`` where it is in none (``embd``,
    /// ``pos-embd``).
    fn split<'py>(
        &self,
        py: Python<'py>,
        rank: &Bound<'_, PyAny>,
        kind: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let rank = self.rank_arg(rank)?;
        split_or_none(py, self.inner.split(rank, parse_kind(kind)?).or_raise()?)
    }

    /// ``rank``'s ``(kind, Split or None)`` for every kind of
    /// :attr:`kinds`, numbered as :meth:`split` numbers them.
    fn splits<'py>(
        &self,
        py: Python<'py>,
        rank: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
        let rank = self.rank_arg(rank)?;
        self.inner
            .splits(rank)
            .or_raise()?
            .into_iter()
            .map(|(k, s)| Ok((k.to_string(), split_or_none(py, s)?)))
            .collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "InferenceShards({:?}, world_size={}{})",
            spec_text(&self.inner),
            self.inner.world_size(),
            if self.inner.mapping().is_tp_pp_dp() {
                ", use_tp_pp_dp_mapping=True"
            } else {
                ""
            }
        )
    }
}

/// The shards' spec as text, shard after shard.
fn spec_text(shards: &InferenceShards) -> String {
    shards
        .shards()
        .iter()
        .map(|s| s.spec().to_string())
        .collect::<Vec<_>>()
        .join("+")
}

#[pymethods]
impl PyInferenceShard {
    /// Its number, from 0, in rank order.
    #[getter]
    fn index(&self) -> usize {
        self.inner.index()
    }

    /// ``"prefill"``, ``"decode"`` or ``None``.
    #[getter]
    fn role(&self) -> Option<&'static str> {
        self.inner.role().map(|r| r.name())
    }

    /// Its first rank.
    #[getter]
    fn rank_offset(&self) -> u32 {
        self.inner.rank_offset()
    }

    /// Its number of ranks, ``tp * pp * dp``.
    #[getter]
    fn world_size(&self) -> u32 {
        self.inner.world_size()
    }

    /// Its tensor-parallel size.
    #[getter]
    fn tp(&self) -> u32 {
        self.inner.spec().tp
    }

    /// Its pipeline-parallel size.
    #[getter]
    fn pp(&self) -> u32 {
        self.inner.spec().pp
    }

    /// Its expert-parallel size.
    #[getter]
    fn ep(&self) -> u32 {
        self.inner.spec().ep
    }

    /// Its expert tensor-parallel size (``tp`` unless given).
    #[getter]
    fn expt_tp(&self) -> u32 {
        self.inner.spec().expt_tp_size()
    }

    /// Its data-parallel size (independent replicas).
    #[getter]
    fn dp(&self) -> u32 {
        self.inner.spec().dp
    }

    /// Its :class:`Layout`: every group of every kind (ranks global,
    /// groups numbered within the shard).
    ///
    /// >>> InferenceShards("tp=2;tp=2,ep=2,expt_tp=1").shards[1].layout.groups("ep")
    /// [[2, 3]]
    #[getter]
    fn layout<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        package_layout(py, self.inner.layout().clone())
    }

    fn __repr__(&self) -> String {
        format!(
            "InferenceShard({}, index={}, rank_offset={}, world_size={})",
            self.inner.spec(),
            self.inner.index(),
            self.inner.rank_offset(),
            self.inner.world_size()
        )
    }
}
