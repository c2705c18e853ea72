//! The formats a host table is read from, by name.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::machine::hosts::Hosts;
use crate::machine::hosts_reader::HostsReader;
use crate::machine::names::by_name;

/// The format of a host table's text (the command line's
/// `--hosts-format`, Python's `hosts_format=`). New formats may be added:
/// a `match` on it needs a `_` arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum HostsFormat {
    /// JSON when the text starts with `[` or `{`, else plain.
    #[default]
    Auto,
    /// `host domain [gpus] [state]` lines ([`Hosts::parse_plain`]).
    Plain,
    /// A JSON list of hosts (`Hosts::parse_json`; feature `serde`).
    Json,
    /// `nvidia-smi -q` of the hosts ([`Hosts::parse_nvidia_smi`]).
    NvidiaSmi,
    /// Slurm's `topology.conf` ([`Hosts::parse_topology_conf`]).
    TopologyConf,
    /// Slurm's `topology.yaml` ([`Hosts::parse_topology_yaml`]).
    TopologyYaml,
    /// `scontrol show topology` ([`Hosts::parse_scontrol_topology`]).
    Scontrol,
    /// `SLURM_TOPOLOGY_ADDR=` lines ([`Hosts::parse_slurm_topology_addr`]).
    SlurmTopologyAddr,
    /// `kubectl get nodes -o json` (`Hosts::parse_kubectl_nodes`; feature
    /// `serde`).
    Kubectl,
}

impl HostsFormat {
    /// Every format, in the order of their names.
    pub const ALL: [HostsFormat; 9] = [
        HostsFormat::Auto,
        HostsFormat::Plain,
        HostsFormat::Json,
        HostsFormat::NvidiaSmi,
        HostsFormat::TopologyConf,
        HostsFormat::TopologyYaml,
        HostsFormat::Scontrol,
        HostsFormat::SlurmTopologyAddr,
        HostsFormat::Kubectl,
    ];

    /// Its name (`auto`, `plain`, `json`, `nvidia-smi`, `topology-conf`,
    /// `topology-yaml`, `scontrol`, `slurm-topology-addr`, `kubectl`).
    pub fn name(self) -> &'static str {
        match self {
            HostsFormat::Auto => "auto",
            HostsFormat::Plain => "plain",
            HostsFormat::Json => "json",
            HostsFormat::NvidiaSmi => "nvidia-smi",
            HostsFormat::TopologyConf => "topology-conf",
            HostsFormat::TopologyYaml => "topology-yaml",
            HostsFormat::Scontrol => "scontrol",
            HostsFormat::SlurmTopologyAddr => "slurm-topology-addr",
            HostsFormat::Kubectl => "kubectl",
        }
    }

    /// What it reads, in one line (for help texts).
    pub fn about(self) -> &'static str {
        match self {
            HostsFormat::Auto => "JSON when the text starts with `[` or `{`, else plain",
            HostsFormat::Plain => "`host domain [gpus] [state]` lines",
            HostsFormat::Json => {
                "a JSON list of hosts: {\"host\", \"domain\" or \"keys\", \"gpus\", \"healthy\"}"
            }
            HostsFormat::NvidiaSmi => {
                "`nvidia-smi -q` of the hosts: `==> HOST <==` sections, pdsh's `HOST: line` lines, one host's output named by its file, or a directory of one file per host; the Fabric block's ClusterUUID.CliqueId is the domain"
            }
            HostsFormat::TopologyConf => "Slurm's topology.conf",
            HostsFormat::TopologyYaml => {
                "Slurm's topology.yaml, its block or tree topology (a topology by name)"
            }
            HostsFormat::Scontrol => "`scontrol show topology`",
            HostsFormat::SlurmTopologyAddr => {
                "`SLURM_TOPOLOGY_ADDR=` lines of the tasks, the host names from them"
            }
            HostsFormat::Kubectl => {
                "`kubectl get nodes -o json`, the domain in a node label (the clique label)"
            }
        }
    }

    /// The format named `name`.
    pub fn from_name(name: &str) -> Option<HostsFormat> {
        HostsFormat::ALL.into_iter().find(|f| f.name() == name)
    }
}

impl fmt::Display for HostsFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for HostsFormat {
    type Err = Error;

    /// The format named `s` (see [`HostsFormat::name`]).
    ///
    /// ```
    /// use rank_layout::machine::HostsFormat;
    /// assert_eq!("nvidia-smi".parse::<HostsFormat>()?, HostsFormat::NvidiaSmi);
    /// assert!("yaml".parse::<HostsFormat>().unwrap_err().to_string().contains("topology-yaml"));
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    fn from_str(s: &str) -> Result<HostsFormat> {
        by_name("host table format", &HostsFormat::ALL, HostsFormat::name, s)
    }
}

impl Hosts {
    /// The host table of `text` in `format`, with each format's defaults
    /// (the clique label `DEFAULT_CLIQUE_LABEL`, `nvidia.com/gpu.clique`,
    /// the cluster's default topology of a `topology.yaml`): what the
    /// command line's `--hosts FILE --hosts-format FORMAT` reads. For the
    /// options and `--nodelist`, [`HostsReader`].
    ///
    /// ```
    /// use rank_layout::machine::{Hosts, HostsFormat};
    /// let hosts = Hosts::parse("BlockName=b1 Nodes=gb[01-02]\n", HostsFormat::TopologyConf)?;
    /// assert_eq!(hosts.get(1).unwrap().domain(), Some("b1"));
    /// assert_eq!(Hosts::parse("gb01 b1 4\n", HostsFormat::Auto)?.get(0).unwrap().gpus, Some(4));
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// The format's reader's; a JSON format without the feature `serde`.
    pub fn parse(text: &str, format: HostsFormat) -> Result<Hosts> {
        HostsReader::new(format).read(text).map(|read| read.hosts)
    }
}
