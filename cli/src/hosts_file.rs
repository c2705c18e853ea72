//! Reading `place --hosts FILE`: the plain table (the library's reader) or
//! a JSON list of hosts.

use std::path::Path;

use rank_layout::machine::{Host, Hosts};
use serde::Deserialize;

/// One host of a JSON table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonHost {
    #[serde(alias = "name")]
    host: String,
    #[serde(default)]
    domain: Option<String>,
    #[serde(default)]
    keys: Option<Vec<String>>,
    #[serde(default)]
    gpus: Option<u32>,
    #[serde(default = "healthy")]
    healthy: bool,
}

fn healthy() -> bool {
    true
}

/// The host table in `path`: JSON when its first character (after
/// blanks) is `[` or `{` (a list, or `{"hosts": [...]}`), else the plain
/// table.
///
/// # Errors
/// What is wrong, naming the file.
pub fn read(path: &Path) -> Result<Hosts, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--hosts {}: {e}", path.display()))?;
    parse(&text).map_err(|m| format!("--hosts {}: {m}", path.display()))
}

/// The host table of `text` (see [`read`]).
///
/// # Errors
/// What is wrong, in words (the library's error for a plain table).
pub fn parse(text: &str) -> Result<Hosts, String> {
    let trimmed = text.trim_start();
    if !(trimmed.starts_with('[') || trimmed.starts_with('{')) {
        return Hosts::parse_plain(text).map_err(|e| e.to_string());
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Table {
        List(Vec<JsonHost>),
        Wrapped { hosts: Vec<JsonHost> },
    }
    let table: Table = serde_json::from_str(text).map_err(|e| {
        format!(
            "not a host table ({e}): expected a list of {{\"host\", \"domain\" or \"keys\", \"gpus\", \"healthy\"}}"
        )
    })?;
    let rows = match table {
        Table::List(rows) | Table::Wrapped { hosts: rows } => rows,
    };
    let mut hosts = Vec::with_capacity(rows.len());
    for row in rows {
        let keys = match (row.keys, row.domain) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "host {:?}: give \"domain\" or \"keys\", not both",
                    row.host
                ));
            }
            (Some(keys), None) => keys,
            (None, Some(d)) if d == "-" || d == "unknown" || d.is_empty() => Vec::new(),
            (None, Some(d)) => d.split('/').map(str::to_string).collect(),
            (None, None) => Vec::new(),
        };
        hosts.push(Host {
            name: row.host,
            gpus: row.gpus,
            healthy: row.healthy,
            keys,
        });
    }
    Hosts::new(hosts).map_err(|e| e.to_string())
}
