//! Megatron-LM's vocabulary: its arguments read through the crate's one
//! table (`megatron_config`), and its `RankGenerator`.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyMapping, PyString, PyTuple};
use rank_layout::megatron::{
    ArgType, Handling, MEGATRON_ARGS, MegatronArg, MegatronArgs, MegatronValue, RankGenerator,
    Source,
};

use crate::config;
use crate::error::{OrRaise, raise};
use crate::value::{describe, offset, size, string};

/// A Python value as a Megatron-LM argument value (`None`: not given).
fn value(name: &str, takes: ArgType, obj: &Bound<'_, PyAny>) -> PyResult<Option<MegatronValue>> {
    if obj.is_none() {
        return Ok(None);
    }
    let int = |o: &Bound<'_, PyAny>| -> PyResult<i64> {
        if o.is_instance_of::<PyBool>() || o.is_instance_of::<PyString>() {
            return Err(raise(format!("{name} must be an int, got {}", describe(o))));
        }
        o.call_method0("__index__")
            .and_then(|i| i.extract::<i64>())
            .map_err(|_| raise(format!("{name} must be an int, got {}", describe(o))))
    };
    Ok(Some(match takes {
        ArgType::Flag => MegatronValue::Bool(obj.is_truthy()?),
        ArgType::Text | ArgType::Texts => MegatronValue::Text(obj.str()?.to_string()),
        ArgType::Ints => {
            if obj.is_instance_of::<PyString>() {
                return Err(raise(format!(
                    "{name} must be a list of ints, got {}",
                    describe(obj)
                )));
            }
            match obj.try_iter() {
                Ok(items) => {
                    MegatronValue::Ints(items.map(|i| int(&i?)).collect::<PyResult<Vec<i64>>>()?)
                }
                Err(_) => MegatronValue::Int(int(obj)?),
            }
        }
        _ => MegatronValue::Int(int(obj)?),
    }))
}

/// Whether Python reads the argument: a Megatron-LM argument modelled
/// (torchrun's flags are a command line's only), or one refused (an error
/// unless ``None`` or ``False``).
fn read_from_python(arg: &MegatronArg) -> bool {
    match arg.handling {
        Handling::Modelled => arg.source != Source::Torchrun,
        Handling::Refused | Handling::Separate => true,
        _ => false,
    }
}

/// What `megatron_config` and `Layout.from_megatron_args` take.
const FORMS: &str = "an argparse.Namespace (or any object with the arguments as attributes), a mapping, a command line (str) or its words (a list of str)";

/// The Megatron-LM arguments of `args`, in any of its [`FORMS`].
///
/// # Errors
/// `TypeError` naming the type of `args` (or of a word) when it is none of
/// the forms; `LayoutError` for a value out of range.
pub(crate) fn parsed_args(args: &Bound<'_, PyAny>) -> PyResult<MegatronArgs> {
    if args.is_instance_of::<PyString>() {
        return MegatronArgs::parse_command_line(&args.extract::<String>()?).or_raise();
    }
    if args.is_instance_of::<PyList>() || args.is_instance_of::<PyTuple>() {
        let words = args
            .try_iter()?
            .enumerate()
            .map(|(i, w)| {
                let w = w?;
                if !w.is_instance_of::<PyString>() {
                    return Err(PyTypeError::new_err(format!(
                        "megatron arguments as words must be str, got {} at index {i}",
                        describe(&w)
                    )));
                }
                w.extract::<String>()
            })
            .collect::<PyResult<Vec<String>>>()?;
        return MegatronArgs::parse_words(&words).or_raise();
    }
    let mapping = args.cast::<PyMapping>().ok();
    if mapping.is_none()
        && !args.hasattr("__dict__")?
        && !MEGATRON_ARGS
            .iter()
            .any(|a| args.hasattr(a.name).unwrap_or(false))
    {
        return Err(PyTypeError::new_err(format!(
            "megatron arguments must be {FORMS}; got {}",
            describe(args)
        )));
    }
    let mut parsed = MegatronArgs::new();
    for arg in MEGATRON_ARGS.iter().filter(|a| read_from_python(a)) {
        let obj = match &mapping {
            Some(m) => match m.contains(arg.name)? {
                true => m.get_item(arg.name)?,
                false => continue,
            },
            None => match args.getattr(arg.name) {
                Ok(v) => v,
                Err(_) => continue,
            },
        };
        if let Some(v) = value(arg.name, arg.takes, &obj)? {
            parsed.set(arg.name, v).or_raise()?;
        }
    }
    Ok(parsed)
}

/// The configuration keys of Megatron-LM arguments, read through the
/// crate's table with Megatron-Core's defaults: ``args`` is an
/// ``argparse.Namespace`` (Megatron-LM's ``get_args()``), a mapping, or any
/// object with the attributes (missing or ``None`` arguments are left
/// out); or a pasted command line (``str``, as the command line's
/// ``--megatron-args``) or its words (a list of ``str``, ``sys.argv``),
/// whose other arguments are ignored. Anything else is a ``TypeError``
/// naming its type. ``tensor_parallel_num_weight_shards`` S gives
/// ``gtp_remat`` S / tp (the expert one ``expert_gtp_remat`` S / etp); an
/// argument that changes the groups in a way rank-layout does not model
/// (``hybrid_context_parallel``, ...) raises unless ``None`` or ``False``.
///
/// >>> from rank_layout import megatron_config
/// >>> megatron_config({"tensor_model_parallel_size": 4, "world_size": 32})
/// {'tp': 4, 'world_size': 32}
/// >>> megatron_config("pretrain_gpt.py --tensor-model-parallel-size 4 --lr 1e-4")
/// {'tp': 4}
/// >>> megatron_config({"tensor_model_parallel_size": 2, "tensor_parallel_num_weight_shards": 8})
/// {'tp': 2, 'gtp_remat': 4}
#[pyfunction]
pub(crate) fn megatron_config<'py>(
    py: Python<'py>,
    args: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let parsed = parsed_args(args)?;
    let config = parsed.config().or_raise()?;
    let all = config::to_dict(py, &config)?;
    let out = PyDict::new(py);
    let given = parsed.keys();
    for (key, v) in all.iter() {
        let key: String = key.extract()?;
        // The keys the arguments set (etp only when it differs from tp).
        let set = match key.as_str() {
            "etp" | "encoder_tp" | "encoder_pp" => !v.is_none(),
            "order" => config.order != rank_layout::Order::default(),
            "hierarchical_cp" => !config.hierarchical_cp.is_empty(),
            "dist_opt_instances" => config.dist_opt_instances != 1,
            // Set below from the sizes the arguments resolve to.
            "gtp_remat" | "expert_gtp_remat" => false,
            k => given.contains(&k),
        };
        if set {
            out.set_item(key, v)?;
        }
    }
    // The weight-shard keys, when the arguments give an axis.
    for (key, size) in [
        ("gtp_remat", config.gtp_remat),
        ("expert_gtp_remat", config.expert_gtp_remat),
    ] {
        if size != 1 {
            out.set_item(key, size)?;
        }
    }
    Ok(out)
}

/// What Megatron-LM's encoder joins did to an encoder + decoder layout:
/// ``megatron`` is ``"2024"`` (commit 4ff9e66, ``zip(cycle(...))``) or
/// ``"2025"`` (5a3b6bcf1f, its block map), or a commit. Returns the
/// command line's ``audit --format json``: ``{"megatron": commit,
/// "pipelines", "mixing", "other_tp_pairing", "examples": [{"class",
/// "megatron", "rank_layout", "encoder", "decoder"}]}``, the boundary
/// ranks with their ``tp``, ``cp``, ``dp`` and ``pp``.
///
/// >>> from rank_layout import Layout
/// >>> from rank_layout.megatron import audit
/// >>> a = audit(Layout(tp=4, cp=2, encoder_tp=2), "2024")
/// >>> a["pipelines"], a["mixing"], a["other_tp_pairing"], a["examples"][0]["megatron"]
/// (8, 4, 2, [2, 6])
#[pyfunction]
pub(crate) fn audit<'py>(
    py: Python<'py>,
    layout: &crate::layout::PyLayout,
    megatron: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let join: rank_layout::megatron::MegatronJoin = megatron.parse().or_raise()?;
    let a = rank_layout::megatron::audit(&layout.inner, join).or_raise()?;
    let rank = |p: &rank_layout::Placement| -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("rank", p.rank)?;
        d.set_item("tp", p.coord.tp)?;
        d.set_item("cp", p.coord.cp)?;
        d.set_item("dp", p.coord.dp)?;
        d.set_item("pp", p.coord.pp)?;
        Ok(d)
    };
    let examples = PyList::empty(py);
    for e in &a.examples {
        let d = PyDict::new(py);
        d.set_item("class", e.class.name())?;
        d.set_item("megatron", e.megatron.clone())?;
        d.set_item("rank_layout", e.rank_layout.clone())?;
        d.set_item("encoder", rank(&e.encoder)?)?;
        d.set_item("decoder", rank(&e.decoder)?)?;
        examples.append(d)?;
    }
    let out = PyDict::new(py);
    out.set_item("megatron", a.join.commit())?;
    out.set_item("pipelines", a.pipelines)?;
    out.set_item("mixing", a.mixing)?;
    out.set_item("other_tp_pairing", a.other_tp_pairing)?;
    out.set_item("examples", examples)?;
    Ok(out)
}

/// The crate's one table of Megatron-LM arguments: ``(name, flag, key,
/// meaning, handling, source)`` rows, ``handling`` ``"modelled"``,
/// ``"refused"``, ``"separate"`` (``inference_shards``, read by
/// ``InferenceShards.from_megatron_args``), ``"model"`` (the model's
/// shape: layers, sizes, vocabulary; read by a reshard's model) or ``"no group change"``, ``source`` ``"main"``,
/// ``"removed"``, ``"attribute"`` or ``"torchrun"``.
pub(crate) fn table<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
    let rows = PyList::empty(py);
    for a in MEGATRON_ARGS.iter() {
        let handling = match a.handling {
            Handling::Modelled => "modelled",
            Handling::Refused => "refused",
            Handling::Separate => "separate",
            Handling::Model => "model",
            _ => "no group change",
        };
        let source = match a.source {
            Source::Main => "main",
            Source::Removed => "removed",
            Source::Attribute => "attribute",
            _ => "torchrun",
        };
        rows.append((a.name, a.flag, a.key, a.meaning, handling, source))?;
    }
    Ok(rows)
}

/// Megatron-LM's ``RankGenerator`` (commit 4ff9e66): the same arguments,
/// as keywords too, and ``get_ranks`` returning exactly its lists.
///
/// >>> from rank_layout.megatron import RankGenerator
/// >>> g = RankGenerator(tp=2, ep=1, dp=3, pp=4, cp=1, order="tp-dp-pp")
/// >>> g.get_ranks("dp")[-1]
/// [19, 21, 23]
/// >>> RankGenerator(1, 2, 4, 1, 1, "tp-cp-ep-dp-pp").get_ranks("ep", independent_ep=True)
/// [[0, 1], [2, 3]]
#[pyclass(frozen, name = "RankGenerator", module = "rank_layout.megatron")]
pub(crate) struct PyRankGenerator {
    inner: RankGenerator,
    /// `tp * dp * pp * cp`: the members of any token's groups.
    world: u64,
}

#[pymethods]
impl PyRankGenerator {
    #[new]
    #[pyo3(signature = (tp, ep, dp, pp, cp, order, rank_offset=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        tp: &Bound<'_, PyAny>,
        ep: &Bound<'_, PyAny>,
        dp: &Bound<'_, PyAny>,
        pp: &Bound<'_, PyAny>,
        cp: &Bound<'_, PyAny>,
        order: &Bound<'_, PyAny>,
        rank_offset: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let offset = match rank_offset {
            Some(o) => offset("rank_offset", o)?,
            None => 0,
        };
        let (tp, dp, pp, cp) = (
            size("tp", tp)?,
            size("dp", dp)?,
            size("pp", pp)?,
            size("cp", cp)?,
        );
        let inner = RankGenerator::new(
            tp,
            size("ep", ep)?,
            dp,
            pp,
            cp,
            &string("order", "'tp-cp-ep-dp-pp'", order)?,
            offset,
        )
        .or_raise()?;
        let world = [tp, dp, pp, cp]
            .into_iter()
            .fold(1u64, |w, s| w.saturating_mul(u64::from(s)));
        Ok(PyRankGenerator { inner, world })
    }

    /// The groups of the axes in ``token`` (``"tp-dp"``), as Megatron-LM
    /// lists them; with ``independent_ep``, ``ep`` is an axis and ``dp``
    /// means ``dp // ep``.
    #[pyo3(signature = (token, independent_ep=false))]
    fn get_ranks<'py>(
        &self,
        py: Python<'py>,
        token: &Bound<'py, PyAny>,
        independent_ep: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let token = string("token", "'tp-dp'", token)?;
        crate::memory::check_vectors(self.world)?;
        let groups = self.inner.get_ranks(&token, independent_ep).or_raise()?;
        let width = groups.first().map_or(0, Vec::len);
        let out = PyList::empty(py);
        if groups.iter().all(|g| g.len() == width) {
            let total = groups.len().saturating_mul(width);
            let mut members = Vec::new();
            members.try_reserve_exact(total).map_err(|_| {
                pyo3::exceptions::PyMemoryError::new_err(format!("cannot allocate {total} members"))
            })?;
            members.extend(groups.iter().flatten());
            return crate::lists::rows(py, members, groups.len(), width);
        }
        for g in groups {
            out.append(crate::lists::ints(py, g)?)?;
        }
        Ok(out)
    }
}

/// The axes of Megatron-Core's `RankGenerator`, in its `name_to_size` order
/// (the order in which missing ones are appended).
const CORE_AXES: [&str; 6] = ["tp", "pp", "dp", "ep", "cp", "gtp_remat"];

/// Megatron-Core's ``RankGenerator`` (``megatron.core.parallel_state``,
/// releases 0.16.1 to 0.19.2): ``ep`` is an axis of its own (``world_size
/// = tp*dp*pp*cp*ep*gtp_remat``; Megatron-Core builds one generator with
/// ``ep = 1`` for the dense groups and one with ``cp = 1`` for the expert
/// groups), ``gtp_remat`` is 0.19's weight-shard axis (1, the default,
/// is 0.16.1's generator, whose completed ``order`` lacks the trailing
/// ``-gtp_remat`` that 0.19 appends). The same arguments, attributes and
/// lists; the crate's :class:`Mesh` computes them.
///
/// As Megatron-Core: ``ep`` and ``cp`` may not both be > 1; an axis left out
/// of ``order`` is appended at its end (one of size > 1 is an error); the
/// tokens of ``get_ranks`` may be any axes of the order (``"tp-dp"``,
/// ``"gtp_remat-dp-cp"``), in any order. Megatron-Core finds a left-out axis
/// by looking for its name in the order string, and ``"tp"`` is in
/// ``"gtp_remat"``: an order naming ``gtp_remat`` but not ``tp`` has no
/// ``tp`` axis (``get_ranks("tp")`` is an error, as there); with ``tp > 1``
/// Megatron-Core's groups are wrong, and this generator refuses it. Also
/// refused where Megatron-Core's lists would be wrong: an axis twice in the
/// order, a size of 0. Errors are :class:`rank_layout.LayoutError`.
///
/// :class:`RankGenerator` is Megatron-LM's 2024 generator (``ep`` carved
/// out of ``dp``, ``independent_ep``): a different grid when ``ep > 1``,
/// hence a class of its own.
///
/// >>> from rank_layout.megatron import CoreRankGenerator
/// >>> g = CoreRankGenerator(tp=2, ep=1, dp=2, pp=2, cp=1, order="tp-gtp_remat-cp-ep-dp-pp", gtp_remat=2)
/// >>> g.world_size, g.get_ranks("gtp_remat")[:2], g.get_ranks("dp-gtp_remat")[0]
/// (16, [[0, 2], [1, 3]], [0, 2, 4, 6])
/// >>> CoreRankGenerator(1, 2, 2, 1, 1, "tp-cp-ep-dp-pp", rank_offset=8).get_ranks("ep")
/// [[8, 9], [10, 11]]
#[pyclass(frozen, name = "CoreRankGenerator", module = "rank_layout.megatron")]
pub(crate) struct PyCoreRankGenerator {
    /// The sizes, in [`CORE_AXES`] order.
    sizes: [u32; 6],
    rank_offset: u32,
    /// The order's tokens, left-out ones appended (Megatron-Core's `order`).
    tokens: Vec<String>,
    mesh: rank_layout::Mesh,
}

impl PyCoreRankGenerator {
    /// The size of axis `name` (one of [`CORE_AXES`]).
    fn size_of(&self, name: &str) -> u32 {
        CORE_AXES
            .iter()
            .position(|a| *a == name)
            .and_then(|i| self.sizes.get(i).copied())
            .unwrap_or(1)
    }

    /// The distinct axes of `token` (`"tp-dp"`), each one of the order's.
    fn axes_of<'a>(&self, token: &'a str) -> PyResult<Vec<&'a str>> {
        let mut axes: Vec<&str> = Vec::new();
        for t in token.split('-') {
            if !self.tokens.iter().any(|o| o == t) {
                return Err(raise(format!(
                    "'{t}' is not in list: token {token:?} names an axis that is not in the order {:?}",
                    self.tokens.join("-")
                )));
            }
            if !axes.contains(&t) {
                axes.push(t);
            }
        }
        Ok(axes)
    }
}

#[pymethods]
impl PyCoreRankGenerator {
    #[new]
    #[pyo3(signature = (tp, ep, dp, pp, cp, order, rank_offset=None, gtp_remat=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        tp: &Bound<'_, PyAny>,
        ep: &Bound<'_, PyAny>,
        dp: &Bound<'_, PyAny>,
        pp: &Bound<'_, PyAny>,
        cp: &Bound<'_, PyAny>,
        order: &Bound<'_, PyAny>,
        rank_offset: Option<&Bound<'_, PyAny>>,
        gtp_remat: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let gtp_remat = match gtp_remat {
            Some(g) if !g.is_none() => size("gtp_remat", g)?,
            _ => 1,
        };
        let rank_offset = match rank_offset {
            Some(o) if !o.is_none() => offset("rank_offset", o)?,
            _ => 0,
        };
        let sizes = [
            size("tp", tp)?,
            size("pp", pp)?,
            size("dp", dp)?,
            size("ep", ep)?,
            size("cp", cp)?,
            gtp_remat,
        ];
        let [tp, _, _, ep, cp, _] = sizes;
        if ep > 1 && cp > 1 {
            return Err(raise(format!(
                "ep ({ep}) and cp ({cp}) are both > 1: Megatron-Core's RankGenerator takes one \
                 (cp in its dense generator, ep in its expert generator)"
            )));
        }
        let written = string("order", "'tp-cp-ep-dp-pp'", order)?;
        let mut text = written.to_lowercase();
        let mut tokens: Vec<String> = Vec::new();
        for t in text.split('-') {
            if !CORE_AXES.contains(&t) {
                return Err(raise(format!(
                    "order {written:?}: unknown axis {t:?} (expected tp, cp, ep, dp, pp, gtp_remat)"
                )));
            }
            if tokens.iter().any(|o| o == t) {
                return Err(raise(format!("order {written:?}: axis {t} appears twice")));
            }
            tokens.push(t.to_owned());
        }
        // Megatron-Core's completion: a name not found in the order string
        // (a substring test) is appended, or an error when its size is > 1.
        for (name, s) in CORE_AXES.iter().zip(sizes) {
            if !text.contains(name) {
                if s != 1 {
                    return Err(raise(format!(
                        "the size of {name} is {s}, but the order {written:?} does not name it"
                    )));
                }
                text.push('-');
                text.push_str(name);
                tokens.push((*name).to_owned());
            }
        }
        if tp > 1 && !tokens.iter().any(|t| t == "tp") {
            return Err(raise(format!(
                "the size of tp is {tp}, but the order {written:?} does not name it (Megatron-Core \
                 finds 'tp' in 'gtp_remat', leaves tp out of its grid and lists wrong groups)"
            )));
        }
        let dims: Vec<(String, u32)> = tokens
            .iter()
            .map(|t| {
                let i = CORE_AXES.iter().position(|a| a == t).unwrap_or(0);
                (t.clone(), sizes.get(i).copied().unwrap_or(1))
            })
            .collect();
        let mesh = rank_layout::Mesh::new(dims)
            .and_then(|m| m.with_rank_offset(rank_offset))
            .or_raise()?;
        Ok(PyCoreRankGenerator {
            sizes,
            rank_offset,
            tokens,
            mesh,
        })
    }

    /// Tensor-parallel size.
    #[getter]
    fn tp(&self) -> u32 {
        self.size_of("tp")
    }

    /// Expert-parallel size.
    #[getter]
    fn ep(&self) -> u32 {
        self.size_of("ep")
    }

    /// Data-parallel size (the replicate degree with ``gtp_remat``).
    #[getter]
    fn dp(&self) -> u32 {
        self.size_of("dp")
    }

    /// Pipeline-parallel size.
    #[getter]
    fn pp(&self) -> u32 {
        self.size_of("pp")
    }

    /// Context-parallel size.
    #[getter]
    fn cp(&self) -> u32 {
        self.size_of("cp")
    }

    /// Weight-shard size (Megatron-Core 0.19's ``gtp_remat``; 1: none).
    #[getter]
    fn gtp_remat(&self) -> u32 {
        self.size_of("gtp_remat")
    }

    /// The first rank.
    #[getter]
    fn rank_offset(&self) -> u32 {
        self.rank_offset
    }

    /// ``tp * dp * pp * cp * ep * gtp_remat``.
    ///
    /// >>> CoreRankGenerator(2, 4, 2, 1, 1, "tp-ep-dp").world_size
    /// 16
    #[getter]
    fn world_size(&self) -> u64 {
        self.sizes.iter().map(|s| u64::from(*s)).product()
    }

    /// The order, lowercase, with the left-out axes appended (Megatron-Core's
    /// ``order`` attribute).
    ///
    /// >>> CoreRankGenerator(2, 1, 4, 1, 1, "tp-dp").order
    /// 'tp-dp-pp-ep-cp-gtp_remat'
    #[getter]
    fn order(&self) -> String {
        self.tokens.join("-")
    }

    /// The size of each axis of :attr:`order`.
    ///
    /// >>> CoreRankGenerator(2, 1, 4, 1, 1, "tp-dp").ordered_size
    /// [2, 4, 1, 1, 1, 1]
    #[getter]
    fn ordered_size(&self) -> Vec<u32> {
        self.tokens.iter().map(|t| self.size_of(t)).collect()
    }

    /// Megatron-Core's ``get_mask``: which axes of ``order`` ``token`` names.
    ///
    /// >>> CoreRankGenerator(2, 1, 4, 1, 1, "tp-dp").get_mask("tp-dp-pp", "pp-tp")
    /// [True, False, True]
    fn get_mask(&self, order: &str, token: &str) -> PyResult<Vec<bool>> {
        let ordered: Vec<&str> = order.split('-').collect();
        let mut mask = vec![false; ordered.len()];
        for t in token.split('-') {
            let i = ordered.iter().position(|o| *o == t).ok_or_else(|| {
                raise(format!(
                    "'{t}' is not in list: token {token:?} names an axis that is not in the order {order:?}"
                ))
            })?;
            if let Some(m) = mask.get_mut(i) {
                *m = true;
            }
        }
        Ok(mask)
    }

    /// The groups of the axes in ``token`` (``"tp-dp"``, any order, axes of
    /// :attr:`order`), as Megatron-Core lists them: members by the named
    /// axes' coordinates, groups by the others', first axis fastest.
    ///
    /// >>> CoreRankGenerator(2, 1, 3, 4, 1, "tp-dp-pp").get_ranks("dp")[-1]
    /// [19, 21, 23]
    fn get_ranks<'py>(&self, token: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let py = token.py();
        let token = string("token", "'tp-dp'", token)?;
        let axes = self.axes_of(&token)?;
        let selection = self.mesh.select_dims(None, &axes).or_raise()?;
        let groups = self.mesh.groups_selected(selection).or_raise()?;
        crate::memory::check_ints(groups.member_count())?;
        crate::lists::table_rows(py, groups.table().or_raise()?)
    }

    /// The weight-shard groups, ``get_ranks("gtp_remat")`` (ranks alone when
    /// ``gtp_remat`` is 1); ``gtp_remat_size`` must be this generator's.
    ///
    /// >>> CoreRankGenerator(1, 1, 2, 1, 1, "tp-gtp_remat-dp", gtp_remat=2).get_gtp_ranks(2)
    /// [[0, 1], [2, 3]]
    fn get_gtp_ranks<'py>(
        &self,
        gtp_remat_size: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let asked = size("gtp_remat_size", gtp_remat_size)?;
        let gtp_remat = self.size_of("gtp_remat");
        if asked != gtp_remat {
            return Err(raise(format!(
                "gtp_remat axis size ({gtp_remat}) != requested gtp_remat_size ({asked})"
            )));
        }
        let token = pyo3::types::PyString::new(gtp_remat_size.py(), "gtp_remat");
        self.get_ranks(token.as_any())
    }

    fn __repr__(&self) -> String {
        format!(
            "CoreRankGenerator(tp={}, ep={}, dp={}, pp={}, cp={}, order='{}', rank_offset={}, gtp_remat={})",
            self.size_of("tp"),
            self.size_of("ep"),
            self.size_of("dp"),
            self.size_of("pp"),
            self.size_of("cp"),
            self.order(),
            self.rank_offset,
            self.size_of("gtp_remat"),
        )
    }
}
