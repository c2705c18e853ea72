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
use serde::de::{Error as _, MapAccess, Visitor};
use serde_json::value::RawValue;
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
/// `.json` one, else JSON when it starts with `{` and TOML otherwise. A
/// UTF-8 byte-order mark is skipped; a key given twice is an error naming
/// it, and so is an integer too large for any key.
fn read_file(path: &Path) -> Result<Map<String, Value>, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| file_error(path, e))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let toml = match extension.as_deref() {
        Some("toml") => true,
        Some("json") => false,
        _ => !text.trim_start().starts_with('{'),
    };
    let value = if toml {
        toml::from_str(text).map_err(|e| file_error(path, toml_error(text, &e)))?
    } else {
        json_value(text, "").map_err(|e| file_error(path, e))?
    };
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(Failure::Message(format!(
            "{}: expected a table of keys (tp, cp, world_size, ...)",
            path.display()
        ))),
    }
}

/// The largest value of a key (sizes and ranks are `u32`).
const KEY_MAX: u32 = u32::MAX;

/// `tp = 100000000000000000000000 does not fit ...`: an integer too large
/// for any key, named as written.
fn too_large(key: &str, literal: &str) -> String {
    format!("{key} = {literal} does not fit a u32 (sizes and ranks are at most {KEY_MAX})")
}

/// The JSON value `text` (at `path` in the file, `""` for the whole): an
/// object whose keys are each given once, integers that fit 64 bits (the
/// others are named as written instead of rounded to a float).
fn json_value(text: &str, path: &str) -> Result<Value, String> {
    let raw: &RawValue = serde_json::from_str(text).map_err(|e| json_error(path, e))?;
    let text = raw.get();
    let at = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    match text.as_bytes().first() {
        Some(b'{') => {
            let Entries(entries) = serde_json::from_str(text).map_err(|e| json_error(path, e))?;
            let mut map = Map::new();
            for (key, value) in entries {
                let value = json_value(value.get(), &at(&key))?;
                map.insert(key, value);
            }
            Ok(Value::Object(map))
        }
        Some(b'[') => {
            let items: Vec<&RawValue> =
                serde_json::from_str(text).map_err(|e| json_error(path, e))?;
            items
                .iter()
                .enumerate()
                .map(|(i, item)| json_value(item.get(), &format!("{path}[{i}]")))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array)
        }
        _ if is_integer(text) => match (text.parse::<u64>(), text.parse::<i64>()) {
            (Ok(n), _) => Ok(n.into()),
            (_, Ok(n)) => Ok(n.into()),
            _ => Err(too_large(path, text)),
        },
        _ => serde_json::from_str(text).map_err(|e| json_error(path, e)),
    }
}

/// A JSON error, with where it is when not at the top.
fn json_error(path: &str, e: serde_json::Error) -> String {
    if path.is_empty() {
        e.to_string()
    } else {
        // The position would be within the value, not the file.
        let text = e.to_string();
        let position = format!(" at line {} column {}", e.line(), e.column());
        format!("{path}: {}", text.strip_suffix(&position).unwrap_or(&text))
    }
}

/// Whether `text` is a JSON integer: an optional minus and digits.
fn is_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A JSON object's entries in file order; a key given twice is an error.
struct Entries<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Entries<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Entries<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a table of keys")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<'de>, A::Error> {
                let mut entries: Vec<(String, &'de RawValue)> = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    if entries.iter().any(|(k, _)| *k == key) {
                        return Err(A::Error::custom(format!("duplicate key `{key}`")));
                    }
                    let value = map.next_value()?;
                    entries.push((key, value));
                }
                Ok(Entries(entries))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// A TOML error in words: a duplicate key and an integer too large are
/// named (TOML shows them only under the line it quotes).
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let spanned = e.span().and_then(|span| {
        let line_start = text.get(..span.start)?.rfind('\n').map_or(0, |i| i + 1);
        let line = text.get(..span.start)?.matches('\n').count() + 1;
        let item = text.get(span.clone())?.trim();
        Some((item, span.start, line_start, line))
    });
    let Some((item, span_start, line_start, line)) = spanned else {
        return e.to_string();
    };
    if e.message().contains("duplicate key") {
        return format!("duplicate key `{item}` at line {line}");
    }
    let literal: String = item.chars().filter(|c| *c != '_').collect();
    let literal = literal.strip_prefix('+').unwrap_or(&literal);
    if is_integer(literal) && e.message().contains("out of range") {
        // The key is what the line assigns to, when it is on that line
        // (with the item's index in a one-line array).
        let before = text.get(line_start..span_start).unwrap_or("");
        return match before.split_once('=') {
            Some((key, rest)) if !key.trim().is_empty() => {
                let key = key.trim();
                match rest.split_once('[') {
                    Some((_, items)) => {
                        too_large(&format!("{key}[{}]", items.matches(',').count()), literal)
                    }
                    None => too_large(key, literal),
                }
            }
            _ => format!(
                "the integer {literal} at line {line} does not fit a u32 (sizes and ranks are at most {KEY_MAX})"
            ),
        };
    }
    e.to_string()
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
