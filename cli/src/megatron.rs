//! Megatron-LM's parallelism arguments at the command line's edges: the
//! flags as Megatron-LM names them (`--tensor-model-parallel-size`,
//! `--data-parallel-size`, `--use-tp-pp-dp-mapping`, ...), a whole pasted
//! command line (`--megatron-args`), and Megatron-LM's names as keys of a
//! configuration file.
//!
//! Every name comes from the library's one table,
//! [`MEGATRON_ARGS`]: the flags are made from its modelled rows, its
//! refused rows are errors naming them (in files and pasted lines), and the
//! arguments given are turned into configuration keys by
//! [`MegatronArgs::config`] (Megatron-Core's defaults: `etp` = `tp`,
//! encoder tp 0 = `tp`, encoder pp 0 = no encoder, the tp-pp-dp mapping as
//! an order). The weight-shard counts stay under their Megatron-LM names
//! until every layer is merged ([`SHARD_KEYS`]): they are divided by the
//! tp (etp) the layout ends with. The CLI keeps no list of names of its own.

use clap::{Arg, ArgAction, ArgMatches, Args, FromArgMatches};
use rank_layout::megatron::{
    ArgType, Handling, MEGATRON_ARGS, MegatronArg, MegatronArgs, MegatronValue, Source,
};
use serde_json::{Map, Value};

use crate::error::Failure;
use crate::values::{parse_levels, whole_u32};

/// The heading of the Megatron-LM flags in `--help`.
const HEADING: &str = "Megatron-LM arguments (Megatron-Core's defaults)";

/// The Megatron-LM weight-shard counts, each with the key it decides:
/// kept under the Megatron-LM name (as a key of its own) until the layers
/// are merged, then divided by the tp (etp) they end with.
pub const SHARD_KEYS: [(&str, &str); 2] = [
    ("tensor_parallel_num_weight_shards", "gtp_remat"),
    (
        "expert_tensor_parallel_num_weight_shards",
        "expert_gtp_remat",
    ),
];

/// The key a (pseudo) key decides: `gtp_remat` for
/// `tensor_parallel_num_weight_shards`, the key itself otherwise.
pub fn canonical(key: &str) -> &str {
    SHARD_KEYS
        .iter()
        .find(|(shards, _)| *shards == key)
        .map_or(key, |(_, k)| k)
}

/// The other name of a key given under two (`gtp_remat` and
/// `tensor_parallel_num_weight_shards`).
pub fn partner(key: &str) -> Option<&'static str> {
    SHARD_KEYS.iter().find_map(|(shards, k)| {
        if *shards == key {
            Some(*k)
        } else if *k == key {
            Some(*shards)
        } else {
            None
        }
    })
}

/// The table's Megatron-LM arguments that are read (not torchrun's).
fn modelled() -> impl Iterator<Item = &'static MegatronArg> {
    MEGATRON_ARGS
        .iter()
        .filter(|a| a.handling == Handling::Modelled && a.source != Source::Torchrun)
}

/// The table's arguments that get a flag of their own: the modelled ones
/// but those whose flag is already one of ours with the same meaning
/// (`--world-size`).
fn flagged() -> impl Iterator<Item = &'static MegatronArg> {
    modelled().filter(|a| a.flag.trim_start_matches('-').replace('-', "_") != a.key)
}

/// The Megatron-LM arguments given as flags, in command-line order.
#[derive(Debug, Clone, Default)]
pub struct MegatronFlags {
    given: Vec<(&'static MegatronArg, MegatronValue)>,
}

impl MegatronFlags {
    /// The flags given, as Megatron-LM arguments.
    ///
    /// # Errors
    /// [`Failure::Message`] for a value the table's argument does not take
    /// (`--tensor-model-parallel-size 0`), naming the flag and the value.
    pub fn args(&self) -> Result<MegatronArgs, Failure> {
        let mut args = MegatronArgs::new();
        for (arg, value) in &self.given {
            args.set(arg.name, value.clone())
                .map_err(|e| Failure::Message(format!("{}: {e}", as_flag(arg, value))))?;
        }
        Ok(args)
    }
}

impl Args for MegatronFlags {
    fn augment_args(mut cmd: clap::Command) -> clap::Command {
        for a in flagged() {
            let long = a.flag.trim_start_matches('-');
            let arg = Arg::new(a.name)
                .long(long)
                .help_heading(HEADING)
                .help(format!("Sets {}: {}.", a.key, a.meaning));
            let arg = match a.takes {
                ArgType::Flag => arg.action(ArgAction::SetTrue),
                ArgType::Ints => arg
                    .value_name("S0 S1 ...")
                    .num_args(1..)
                    .action(ArgAction::Append)
                    .allow_negative_numbers(true)
                    .value_parser(parse_levels),
                _ => arg
                    .value_name("N")
                    .allow_negative_numbers(true)
                    .value_parser(whole_u32),
            };
            cmd = cmd.arg(arg);
        }
        cmd
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for MegatronFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut given: Vec<(usize, &'static MegatronArg, MegatronValue)> = Vec::new();
        for a in flagged() {
            let at = matches.index_of(a.name).unwrap_or(usize::MAX);
            let value = match a.takes {
                ArgType::Flag => matches
                    .get_flag(a.name)
                    .then_some(MegatronValue::Bool(true)),
                ArgType::Ints => matches.get_many::<Vec<u32>>(a.name).map(|levels| {
                    MegatronValue::Ints(levels.flatten().map(|n| i64::from(*n)).collect())
                }),
                _ => matches
                    .get_one::<u32>(a.name)
                    .map(|n| MegatronValue::Int(i64::from(*n))),
            };
            if let Some(value) = value {
                given.push((at, a, value));
            }
        }
        given.sort_by_key(|(at, _, _)| *at);
        Ok(MegatronFlags {
            given: given.into_iter().map(|(_, a, v)| (a, v)).collect(),
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

/// Whether `key` of a file is a Megatron-LM argument's name (other than
/// one that is also our key, `world_size`): a modelled one, or a refused
/// one (an error naming it unless its value is `false`).
pub fn is_megatron_key(key: &str) -> bool {
    modelled().any(|a| a.name == key && a.name != a.key)
        || MEGATRON_ARGS
            .iter()
            .any(|a| a.name == key && a.handling == Handling::Refused)
}

/// The Megatron-LM names a file may use as keys, for messages.
pub fn megatron_keys() -> Vec<&'static str> {
    modelled()
        .filter(|a| a.name != a.key)
        .map(|a| a.name)
        .collect()
}

/// A file's value as a Megatron-LM argument's value: an integer, a switch,
/// a list of integers, or (reported by the table's check) something else.
pub fn value_of(value: &Value) -> MegatronValue {
    match value {
        Value::Bool(b) => MegatronValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => MegatronValue::Int(i),
            None => MegatronValue::Text(n.to_string()),
        },
        Value::Array(items) => {
            let ints: Option<Vec<i64>> = items.iter().map(Value::as_i64).collect();
            match ints {
                Some(ints) => MegatronValue::Ints(ints),
                None => MegatronValue::Text(value.to_string()),
            }
        }
        Value::String(text) => MegatronValue::Text(text.clone()),
        other => MegatronValue::Text(other.to_string()),
    }
}

/// The configuration keys the arguments decide, each with its value under
/// Megatron-Core's defaults (`None`: the key left out, its default, such as
/// `etp` equal to `tp` or no encoder). The two encoder arguments decide
/// both encoder keys together. A weight-shard count is given under its
/// Megatron-LM name ([`SHARD_KEYS`]), to be divided by the tp the merged
/// keys end with.
///
/// # Errors
/// [`Failure::Input`] from the library's [`MegatronArgs::config`].
pub fn keys(args: &MegatronArgs) -> Result<Vec<(&'static str, Option<Value>)>, Failure> {
    let config = args.config()?;
    let all = match serde_json::to_value(&config) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let shards = |key: &str| {
        let (name, _) = SHARD_KEYS.iter().find(|(_, k)| *k == key)?;
        args.given().find_map(|(a, v)| match v {
            MegatronValue::Int(n) if a.name == *name => Some((*name, Value::from(*n))),
            _ => None,
        })
    };
    Ok(args
        .keys()
        .into_iter()
        .map(|key| match shards(key) {
            Some((name, value)) => (name, Some(value)),
            None => (key, all.get(key).cloned()),
        })
        .collect())
}

/// The world size torchrun's flags give, when the arguments have any.
///
/// # Errors
/// [`Failure::Input`] from the library's [`MegatronArgs::config`].
pub fn launch_world(args: &MegatronArgs) -> Result<Option<u32>, Failure> {
    if args.given().any(|(a, _)| a.source == Source::Torchrun) {
        Ok(args.config()?.world_size)
    } else {
        Ok(None)
    }
}

/// `--tensor-model-parallel-size 8`, `--use-tp-pp-dp-mapping`,
/// `--hierarchical-context-parallel-sizes 2 4`: an argument as a command
/// line gives it.
pub fn as_flag(arg: &MegatronArg, value: &MegatronValue) -> String {
    match value {
        MegatronValue::Bool(true) => arg.flag.to_owned(),
        MegatronValue::Ints(list) => {
            let items: Vec<String> = list.iter().map(i64::to_string).collect();
            format!("{} {}", arg.flag, items.join(" "))
        }
        other => format!("{} {other}", arg.flag),
    }
}
