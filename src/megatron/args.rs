//! Megatron-LM's parallelism arguments: one table of their names, and how
//! Megatron-Core's defaults turn them into a [`Config`].

use std::fmt;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::order::Order;

/// The value of one Megatron-LM argument, as a command line, a JSON or TOML
/// file, or Python gives it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MegatronValue {
    /// An integer (sizes).
    Int(i64),
    /// A switch (`--use-tp-pp-dp-mapping`).
    Bool(bool),
    /// A list of integers (`--hierarchical-context-parallel-sizes 2 4`).
    Ints(Vec<i64>),
    /// Text that is none of these (reported in errors).
    Text(String),
}

impl fmt::Display for MegatronValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MegatronValue::Int(n) => write!(f, "{n}"),
            MegatronValue::Bool(b) => write!(f, "{b}"),
            MegatronValue::Ints(list) => {
                let items: Vec<String> = list.iter().map(i64::to_string).collect();
                write!(f, "[{}]", items.join(", "))
            }
            MegatronValue::Text(t) => write!(f, "{t:?}"),
        }
    }
}

/// What kind of value an argument takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ArgType {
    /// One integer.
    Int,
    /// A switch, given without a value on a command line.
    Flag,
    /// One or more integers (`nargs='+'`).
    Ints,
}

/// One Megatron-LM parallelism argument: its name, the configuration key
/// it sets and what Megatron-Core does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct MegatronArg {
    /// The argument's name in `megatron.training.arguments` (`tensor_model_parallel_size`).
    pub name: &'static str,
    /// The command-line flag (`--tensor-model-parallel-size`).
    pub flag: &'static str,
    /// The [`Config`] key it sets (`tp`).
    pub key: &'static str,
    /// The value it takes.
    pub takes: ArgType,
    /// Megatron-Core's default and meaning, in words.
    pub meaning: &'static str,
}

/// Every Megatron-LM argument rank-layout reads, with Megatron-Core's
/// defaults: the one table behind the command line's flags, configuration
/// files with Megatron-LM names as keys, `--megatron-args` and Python's
/// `Layout.from_megatron_args`.
pub const MEGATRON_ARGS: [MegatronArg; 12] = [
    arg(
        "tensor_model_parallel_size",
        "--tensor-model-parallel-size",
        "tp",
        ArgType::Int,
        "default 1",
    ),
    arg(
        "pipeline_model_parallel_size",
        "--pipeline-model-parallel-size",
        "pp",
        ArgType::Int,
        "default 1",
    ),
    arg(
        "context_parallel_size",
        "--context-parallel-size",
        "cp",
        ArgType::Int,
        "default 1",
    ),
    arg(
        "expert_model_parallel_size",
        "--expert-model-parallel-size",
        "ep",
        ArgType::Int,
        "default 1",
    ),
    arg(
        "expert_tensor_parallel_size",
        "--expert-tensor-parallel-size",
        "etp",
        ArgType::Int,
        "default: tp (the folded expert grid)",
    ),
    arg(
        "data_parallel_size",
        "--data-parallel-size",
        "dp",
        ArgType::Int,
        "derived from the world; checked against it when both are given",
    ),
    arg(
        "world_size",
        "--world-size",
        "world_size",
        ArgType::Int,
        "the number of ranks",
    ),
    arg(
        "encoder_tensor_model_parallel_size",
        "--encoder-tensor-model-parallel-size",
        "encoder_tp",
        ArgType::Int,
        "0 (the default): tp",
    ),
    arg(
        "encoder_pipeline_model_parallel_size",
        "--encoder-pipeline-model-parallel-size",
        "encoder_pp",
        ArgType::Int,
        "0 (the default): no encoder",
    ),
    arg(
        "hierarchical_context_parallel_sizes",
        "--hierarchical-context-parallel-sizes",
        "hierarchical_cp",
        ArgType::Ints,
        "sizes of the context-parallel levels, innermost first; none by default",
    ),
    arg(
        "num_distributed_optimizer_instances",
        "--num-distributed-optimizer-instances",
        "dist_opt_instances",
        ArgType::Int,
        "default 1 (none)",
    ),
    arg(
        "use_tp_pp_dp_mapping",
        "--use-tp-pp-dp-mapping",
        "order",
        ArgType::Flag,
        "order tp-cp-ep-pp-dp instead of tp-cp-ep-dp-pp",
    ),
];

const fn arg(
    name: &'static str,
    flag: &'static str,
    key: &'static str,
    takes: ArgType,
    meaning: &'static str,
) -> MegatronArg {
    MegatronArg {
        name,
        flag,
        key,
        takes,
        meaning,
    }
}

impl MegatronArg {
    /// The [`Config`] keys this argument decides: its own, and both encoder
    /// keys for either encoder argument (whether there is an encoder, and
    /// its tp, depend on both).
    ///
    /// ```
    /// use rank_layout::megatron::MegatronArg;
    /// let arg = MegatronArg::find("--encoder-pipeline-model-parallel-size").unwrap();
    /// assert_eq!(arg.decides(), &["encoder_tp", "encoder_pp"]);
    /// ```
    pub fn decides(&self) -> &[&'static str] {
        const ENCODER: [&str; 2] = ["encoder_tp", "encoder_pp"];
        match self.key {
            "encoder_tp" | "encoder_pp" => &ENCODER,
            _ => std::slice::from_ref(&self.key),
        }
    }

    /// The argument named `name`: its underscore name (`tensor_model_parallel_size`),
    /// its flag (`--tensor-model-parallel-size`) or the flag without dashes.
    pub fn find(name: &str) -> Option<&'static MegatronArg> {
        let bare = name.trim_start_matches('-').replace('-', "_");
        MEGATRON_ARGS.iter().find(|a| a.name == bare)
    }
}

/// Megatron-LM arguments collected from a command line, a file or Python,
/// turned into a [`Config`] with Megatron-Core's defaults.
///
/// ```
/// use rank_layout::megatron::{MegatronArgs, MegatronValue};
/// use rank_layout::Layout;
/// let mut args = MegatronArgs::new();
/// args.set("tensor_model_parallel_size", MegatronValue::Int(2))?;
/// args.set("--context-parallel-size", MegatronValue::Int(2))?;
/// args.set("expert_model_parallel_size", MegatronValue::Int(4))?;
/// args.set("world_size", MegatronValue::Int(64))?;
/// assert!(!args.set("lr", MegatronValue::Int(1))?); // not a parallelism argument: ignored
/// let layout = Layout::new(&args.config()?)?;
/// assert_eq!(layout.sizes().edp, 8); // folded experts: 64 / (etp 2 * ep 4)
/// assert!(args.set("tensor_model_parallel_size", MegatronValue::Int(-1)).is_err());
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MegatronArgs {
    given: Vec<(&'static MegatronArg, MegatronValue)>,
}

/// An integer argument as a `u32`, or the error naming it.
fn to_u32(arg: &MegatronArg, n: i64, min: u32) -> Result<u32> {
    u32::try_from(n)
        .ok()
        .filter(|v| *v >= min)
        .ok_or_else(|| Error::InvalidArgument {
            name: arg.name.to_owned(),
            value: n.to_string(),
            expected: if min == 0 {
                "an integer from 0 to 4294967295"
            } else {
                "an integer from 1 to 4294967295"
            },
        })
}

impl MegatronArgs {
    /// No arguments: [`config`](Self::config) gives Megatron-Core's defaults.
    pub fn new() -> MegatronArgs {
        MegatronArgs::default()
    }

    /// Records argument `name` (underscore name or flag) with `value`;
    /// `Ok(false)` for a name that is not a parallelism argument (ignored).
    /// A later value of the same argument replaces an earlier one, as on a
    /// command line.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a value of the wrong type or range
    /// (`tensor_model_parallel_size = -1`), naming the argument and value.
    pub fn set(&mut self, name: &str, value: MegatronValue) -> Result<bool> {
        let Some(arg) = MegatronArg::find(name) else {
            return Ok(false);
        };
        let bad = |expected: &'static str| Error::InvalidArgument {
            name: arg.name.to_owned(),
            value: value.to_string(),
            expected,
        };
        let value = match (arg.takes, value.clone()) {
            (ArgType::Int, MegatronValue::Int(n)) => {
                let min = if arg.name.starts_with("encoder_") {
                    0
                } else {
                    1
                };
                to_u32(arg, n, min)?;
                MegatronValue::Int(n)
            }
            (ArgType::Flag, MegatronValue::Bool(b)) => MegatronValue::Bool(b),
            (ArgType::Ints, MegatronValue::Ints(list)) => {
                for n in &list {
                    to_u32(arg, *n, 1)?;
                }
                MegatronValue::Ints(list)
            }
            (ArgType::Ints, MegatronValue::Int(n)) => {
                to_u32(arg, n, 1)?;
                MegatronValue::Ints(vec![n])
            }
            (ArgType::Int, _) => return Err(bad("an integer")),
            (ArgType::Flag, _) => return Err(bad("true or false")),
            (ArgType::Ints, _) => return Err(bad("a list of integers")),
        };
        self.given.retain(|(a, _)| a.name != arg.name);
        self.given.push((arg, value));
        Ok(true)
    }

    /// The [`Config`] keys the recorded arguments decide, each once, in the
    /// order given ([`MegatronArg::decides`]): the keys of
    /// [`config`](Self::config) these arguments set, default or not.
    pub fn keys(&self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for key in self.given.iter().flat_map(|(a, _)| a.decides()) {
            if !out.contains(key) {
                out.push(key);
            }
        }
        out
    }

    /// The arguments recorded, in the order given, with their values.
    pub fn given(&self) -> impl Iterator<Item = (&'static MegatronArg, &MegatronValue)> + '_ {
        self.given.iter().map(|(a, v)| (*a, v))
    }

    fn int(&self, name: &str) -> Option<u32> {
        self.given.iter().find_map(|(a, v)| match v {
            MegatronValue::Int(n) if a.name == name => u32::try_from(*n).ok(),
            _ => None,
        })
    }

    /// The configuration Megatron-Core builds from these arguments: sizes
    /// default to 1; folded experts with `etp` = `tp` unless given; an
    /// encoder when `encoder_pipeline_model_parallel_size` > 0, its tp
    /// `encoder_tensor_model_parallel_size` or, when 0, `tp`;
    /// `use_tp_pp_dp_mapping` gives order `tp-cp-ep-pp-dp`; `data_parallel_size`
    /// and `world_size` both kept, so that [`Layout::new`](crate::Layout::new)
    /// checks one against the other.
    ///
    /// # Errors
    /// None today; a `Result` so that checks can be added.
    pub fn config(&self) -> Result<Config> {
        let mut c = Config::new();
        c.tp = self.int("tensor_model_parallel_size").unwrap_or(1);
        c.pp = self.int("pipeline_model_parallel_size").unwrap_or(1);
        c.cp = self.int("context_parallel_size").unwrap_or(1);
        c.ep = self.int("expert_model_parallel_size").unwrap_or(1);
        c.dp = self.int("data_parallel_size");
        c.world_size = self.int("world_size");
        // etp defaults to tp: kept only when it differs, so that the nested
        // layout (which has no etp of its own) can be asked for on top.
        c.etp = self
            .int("expert_tensor_parallel_size")
            .filter(|etp| *etp != c.tp);
        if let Some(encoder_pp) = self
            .int("encoder_pipeline_model_parallel_size")
            .filter(|n| *n > 0)
        {
            c.encoder_pp = Some(encoder_pp);
            c.encoder_tp = self
                .int("encoder_tensor_model_parallel_size")
                .filter(|n| *n > 0);
        }
        for (a, v) in &self.given {
            match (a.name, v) {
                ("hierarchical_context_parallel_sizes", MegatronValue::Ints(list)) => {
                    c.hierarchical_cp =
                        list.iter().filter_map(|n| u32::try_from(*n).ok()).collect();
                }
                ("num_distributed_optimizer_instances", MegatronValue::Int(n)) => {
                    c.dist_opt_instances = u32::try_from(*n).unwrap_or(1);
                }
                ("use_tp_pp_dp_mapping", MegatronValue::Bool(true)) => {
                    c.order = "tp-cp-ep-pp-dp".parse::<Order>()?;
                }
                _ => {}
            }
        }
        Ok(c)
    }
}
