//! Reading `place --hosts FILE`: the plain table (the library's reader), a
//! JSON list of hosts, or one of the formats the library reads
//! (`nvidia-smi -q`, Slurm's topology files and output, `kubectl get nodes
//! -o json`), chosen by [`Format`].

use std::path::Path;

use rank_layout::machine::{DEFAULT_CLIQUE_LABEL, Host, Hosts};
use serde::Deserialize;

/// The format of a host table file (`--hosts-format`; the variants' docs
/// are its help). The formats past `json` are read by the library's
/// [`Hosts`] readers (`Hosts::parse_nvidia_smi`, `parse_topology_conf`,
/// `parse_topology_yaml`, `parse_scontrol_topology`,
/// `parse_slurm_topology_addr`, `parse_kubectl_nodes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// JSON when the text starts with `[` or `{`, else plain.
    #[default]
    Auto,
    /// `host domain [gpus] [state]` lines.
    Plain,
    /// A JSON list of hosts: {"host", "domain" or "keys", "gpus", "healthy"}.
    Json,
    /// `nvidia-smi -q` per host: a directory of one file per host (named
    /// after it), or one file of `==> HOST <==` sections; the Fabric
    /// block's ClusterUUID.CliqueId is the domain.
    NvidiaSmi,
    /// Slurm's `topology.conf`.
    TopologyConf,
    /// Slurm's `topology.yaml`, its block or tree topology (--topology).
    TopologyYaml,
    /// `scontrol show topology`.
    Scontrol,
    /// `SLURM_TOPOLOGY_ADDR=` lines of the tasks, the host names from them.
    SlurmTopologyAddr,
    /// `kubectl get nodes -o json`, the domain in a node label
    /// (--clique-label).
    Kubectl,
}

/// How to read a host table: its format and what some formats take.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The format.
    pub format: Format,
    /// `kubectl`: the node label of the domain (default
    /// [`DEFAULT_CLIQUE_LABEL`]).
    pub clique_label: Option<String>,
    /// `topology-yaml`: the topology to read (default: the cluster
    /// default, else the first).
    pub topology: Option<String>,
    /// Keep only these hosts (a Slurm hostlist, e.g. the job's
    /// `SLURM_JOB_NODELIST`): [`Hosts::restrict_to`].
    pub nodelist: Option<String>,
}

/// The host table at `path` read as `options` say, restricted to
/// `options.nodelist` when given.
///
/// # Errors
/// What is wrong, naming the file: it does not read, a flag given for a
/// format that does not take it, the reader's error.
pub fn read_with(path: &Path, options: &Options) -> Result<Hosts, String> {
    let name = |m: String| format!("--hosts {}: {m}", path.display());
    if options.clique_label.is_some() && options.format != Format::Kubectl {
        return Err("--clique-label applies to --hosts-format kubectl".to_string());
    }
    if options.topology.is_some() && options.format != Format::TopologyYaml {
        return Err("--topology applies to --hosts-format topology-yaml".to_string());
    }
    let hosts = if options.format == Format::NvidiaSmi && path.is_dir() {
        read_nvidia_smi_dir(path).map_err(name)?
    } else {
        let text = std::fs::read_to_string(path).map_err(|e| name(e.to_string()))?;
        parse_with(&text, options).map_err(name)?
    };
    match &options.nodelist {
        Some(list) => hosts
            .restrict_to(list)
            .map_err(|e| format!("--nodelist {list}: {e}")),
        None => Ok(hosts),
    }
}

/// The host table of `text` in `options.format` (not restricted to the
/// nodelist; a directory of `nvidia-smi` outputs is [`read_with`]'s).
///
/// # Errors
/// The reader's error, in words.
pub fn parse_with(text: &str, options: &Options) -> Result<Hosts, String> {
    let hosts = match options.format {
        Format::Auto => return parse(text),
        Format::Plain => Hosts::parse_plain(text),
        Format::Json => return parse_json(text),
        Format::NvidiaSmi => Hosts::parse_nvidia_smi(text),
        Format::TopologyConf => Hosts::parse_topology_conf(text),
        Format::TopologyYaml => Hosts::parse_topology_yaml(text, options.topology.as_deref()),
        Format::Scontrol => Hosts::parse_scontrol_topology(text),
        Format::SlurmTopologyAddr => Hosts::parse_slurm_topology_addr(text),
        Format::Kubectl => Hosts::parse_kubectl_nodes(
            text,
            options
                .clique_label
                .as_deref()
                .unwrap_or(DEFAULT_CLIQUE_LABEL),
        ),
    };
    hosts.map_err(|e| e.to_string())
}

/// A directory of `nvidia-smi -q` outputs, one file per host, the host
/// named by the file without a `.txt`, `.log` or `.out` ending (files whose
/// names start with `.` are skipped).
fn read_nvidia_smi_dir(dir: &Path) -> Result<Hosts, String> {
    let mut files = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| e.to_string())?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        let Some(file) = path.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        if file.starts_with('.') || !path.is_file() {
            continue;
        }
        let host = [".txt", ".log", ".out"]
            .iter()
            .find_map(|ext| file.strip_suffix(ext))
            .unwrap_or(file)
            .to_string();
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        files.push((host, text));
    }
    let pairs: Vec<(&str, &str)> = files
        .iter()
        .map(|(h, t)| (h.as_str(), t.as_str()))
        .collect();
    Hosts::from_nvidia_smi(&pairs).map_err(|e| e.to_string())
}

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
    parse_json(text)
}

/// The JSON host table of `text` (see [`parse`]).
fn parse_json(text: &str) -> Result<Hosts, String> {
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
        hosts.push(
            Host::new(row.host, None)
                .gpus(row.gpus)
                .healthy(row.healthy)
                .keys(keys),
        );
    }
    Hosts::new(hosts).map_err(|e| e.to_string())
}
