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
        Handling::Refused => true,
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
fn parsed_args(args: &Bound<'_, PyAny>) -> PyResult<MegatronArgs> {
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
/// ``"refused"`` or ``"no group change"``, ``source`` ``"main"``,
/// ``"removed"``, ``"attribute"`` or ``"torchrun"``.
pub(crate) fn table<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
    let rows = PyList::empty(py);
    for a in MEGATRON_ARGS.iter() {
        let handling = match a.handling {
            Handling::Modelled => "modelled",
            Handling::Refused => "refused",
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
        crate::memory::check_ints(self.world)?;
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
