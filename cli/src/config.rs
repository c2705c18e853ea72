//! Flags merged over a configuration file, in one place.
//!
//! The file (JSON or TOML) and the flags have the same keys: the flags are
//! serialized ([`SetupArgs`] field names are the keys), laid over the
//! file's keys, and the result is read as a library [`Config`] plus the
//! machine keys. A new layout key is therefore one new field of
//! [`SetupArgs`]; the file reading and the merge never name keys.

use std::path::Path;

use rank_layout::{Config, Topology};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::args::SetupArgs;
use crate::error::Failure;

/// What a command works on: the layout's configuration and the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// The layout's configuration, as given (nothing derived yet).
    pub config: Config,
    /// GPUs per node and nodes per domain.
    pub topology: Topology,
}

/// The keys of the machine, which are not the library's [`Config`].
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Machine {
    gpus_per_node: Option<u32>,
    nodes_per_domain: Option<u32>,
}

/// The names of [`Machine`]'s keys, taken out of the merged keys before the
/// rest is read as a [`Config`].
const MACHINE_KEYS: [&str; 2] = ["gpus_per_node", "nodes_per_domain"];

/// GPUs per node when not given.
pub const DEFAULT_GPUS_PER_NODE: u32 = 8;

impl SetupArgs {
    /// The configuration file, overridden by the flags given.
    ///
    /// # Errors
    /// [`Failure::Message`] for a file that cannot be read or parsed or has an
    /// unknown key (the message names the file); [`Failure::Input`] for a
    /// machine size of 0.
    pub fn setup(&self) -> Result<Setup, Failure> {
        let mut keys = match &self.config {
            Some(path) => {
                let keys = read_file(path)?;
                // Read the file alone first, so its mistakes name it.
                split(keys.clone()).map_err(|e| file_error(path, e))?;
                keys
            }
            None => Map::new(),
        };
        keys.extend(self.flags()?);
        let (config, machine) = split(keys).map_err(Failure::Message)?;
        let topology = Topology::new(
            machine.gpus_per_node.unwrap_or(DEFAULT_GPUS_PER_NODE),
            machine.nodes_per_domain,
        )?;
        Ok(Setup { config, topology })
    }

    /// The flags given, as keys and values (flags left out are absent).
    fn flags(&self) -> Result<Map<String, Value>, Failure> {
        let value = serde_json::to_value(self).map_err(|e| Failure::Message(e.to_string()))?;
        let Value::Object(map) = value else {
            return Ok(Map::new());
        };
        Ok(map.into_iter().filter(|(_, v)| !v.is_null()).collect())
    }
}

/// The keys of the file at `path`: TOML for a `.toml` file, JSON for a
/// `.json` one, else JSON when it starts with `{` and TOML otherwise.
fn read_file(path: &Path) -> Result<Map<String, Value>, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| file_error(path, e))?;
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let toml = match extension.as_deref() {
        Some("toml") => true,
        Some("json") => false,
        _ => !text.trim_start().starts_with('{'),
    };
    let value: Value = if toml {
        toml::from_str(&text).map_err(|e| file_error(path, e))?
    } else {
        serde_json::from_str(&text).map_err(|e| file_error(path, e))?
    };
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(Failure::Message(format!(
            "{}: expected a table of keys (tp, cp, world_size, ...)",
            path.display()
        ))),
    }
}

/// The merged keys read as a [`Config`] and a [`Machine`].
fn split(keys: Map<String, Value>) -> Result<(Config, Machine), String> {
    read_keys(keys).map_err(|e| {
        let message = e.to_string();
        if message.starts_with("unknown field") {
            format!("{message}, or the machine's {}", MACHINE_KEYS.join(", "))
        } else {
            message
        }
    })
}

/// [`split`], with serde's error.
fn read_keys(mut keys: Map<String, Value>) -> Result<(Config, Machine), serde_json::Error> {
    let mut machine = Map::new();
    for key in MACHINE_KEYS {
        if let Some(v) = keys.remove(key) {
            machine.insert(key.to_owned(), v);
        }
    }
    let config = serde_json::from_value(Value::Object(keys))?;
    let machine = serde_json::from_value(Value::Object(machine))?;
    Ok((config, machine))
}

/// An error about the configuration file at `path`.
fn file_error(path: &Path, e: impl std::fmt::Display) -> Failure {
    Failure::Message(format!(
        "invalid configuration: {}: {}",
        path.display(),
        e.to_string().trim_end()
    ))
}
