//! Reading a host table as the edges are told to: its format, what some
//! formats take, and the job's nodelist.

use crate::error::{Error, Result};
use crate::machine::hosts::Hosts;
use crate::machine::hosts_format::HostsFormat;
use crate::machine::read;

/// How to read a host table: its [`HostsFormat`], the clique label of
/// `kubectl` nodes, the topology of a `topology.yaml`, the host of one
/// `nvidia-smi -q` output that names none, and the job's nodelist (a table
/// of the whole cluster keeps the job's hosts). What the command line's
/// `--hosts-format`, `--clique-label`, `--topology` and `--nodelist` say,
/// and Python's `hosts_format=`, `clique_label=`, `topology=`,
/// `nodelist=`.
///
/// ```
/// use rank_layout::machine::{HostsFormat, HostsReader};
/// let conf = "BlockName=b1 Nodes=gb[01-18]\nBlockName=b2 Nodes=gb[19-36]\n";
/// let read = HostsReader::new(HostsFormat::TopologyConf).nodelist("gb[17-20],gpu7").read(conf)?;
/// assert_eq!(read.hosts.len(), 5);
/// assert_eq!(read.hosts.get(4).unwrap().domain(), None); // gpu7
/// assert!(read.notes[0].contains("gpu7"));
/// assert!(HostsReader::new(HostsFormat::TopologyConf).nodelist("gpu[1-2]").read(conf).is_err());
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct HostsReader {
    format: HostsFormat,
    clique_label: Option<String>,
    topology: Option<String>,
    host_name: Option<String>,
    nodelist: Option<String>,
}

/// A host table as read, with what the reading noticed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostsRead {
    /// The hosts (of the nodelist, when one was given).
    pub hosts: Hosts,
    /// In words: the nodelist's hosts the table lacks, a switch or block
    /// that lists no node.
    pub notes: Vec<String>,
}

impl HostsReader {
    /// A reader of `format`, with its defaults.
    pub fn new(format: HostsFormat) -> HostsReader {
        HostsReader {
            format,
            ..HostsReader::default()
        }
    }

    /// With the node label of the domain (`kubectl`; default
    /// `DEFAULT_CLIQUE_LABEL`, `nvidia.com/gpu.clique`).
    #[must_use]
    pub fn clique_label(mut self, label: impl Into<String>) -> HostsReader {
        self.clique_label = Some(label.into());
        self
    }

    /// With the topology to read (`topology-yaml`; default: the cluster
    /// default, else the first).
    #[must_use]
    pub fn topology(mut self, name: impl Into<String>) -> HostsReader {
        self.topology = Some(name.into());
        self
    }

    /// With the file the text was read from: an `nvidia-smi -q` text that
    /// is one host's output, without a `==> HOST <==` line or pdsh's
    /// `HOST: ` prefixes, is the output of the file's host, named as
    /// [`Hosts::from_nvidia_smi_files`] names it (`smi/gb01.txt` is
    /// `gb01`). Other formats name their hosts and ignore it.
    ///
    /// ```
    /// use rank_layout::machine::{HostsFormat, HostsReader};
    /// let read = HostsReader::new(HostsFormat::NvidiaSmi).file_name("smi/gb07.txt").read("GPU 00000008:01:00.0\n")?;
    /// assert_eq!(read.hosts.get(0).unwrap().name, "gb07");
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    #[must_use]
    pub fn file_name(mut self, path: &str) -> HostsReader {
        self.host_name = Some(read::nvidia_smi_host_of(path).to_string());
        self
    }

    /// With the job's hosts, a Slurm hostlist (`SLURM_JOB_NODELIST`): the
    /// table is restricted to them ([`Hosts::restrict_to`]); those it
    /// lacks join with an unknown domain, and a note names them.
    #[must_use]
    pub fn nodelist(mut self, nodelist: impl Into<String>) -> HostsReader {
        self.nodelist = Some(nodelist.into());
        self
    }

    /// The format.
    pub fn format(&self) -> HostsFormat {
        self.format
    }

    /// The host table of `text`.
    ///
    /// # Errors
    /// [`Error::BadSpec`] for a clique label without the `kubectl` format or
    /// a topology without `topology-yaml`; the format's reader's errors
    /// (each [`Error::BadHostTable`] naming the line and the value); a
    /// JSON format without the feature `serde`; the nodelist's, as
    /// [`Hosts::restrict_to`].
    pub fn read(&self, text: &str) -> Result<HostsRead> {
        self.check_options()?;
        let format = match self.format {
            HostsFormat::Auto if looks_like_json(text) => HostsFormat::Json,
            HostsFormat::Auto => HostsFormat::Plain,
            other => other,
        };
        let (hosts, notes) = match format {
            HostsFormat::Json => (json(text)?, Vec::new()),
            HostsFormat::NvidiaSmi => (
                read::nvidia_smi_named(text, self.host_name.as_deref())?,
                Vec::new(),
            ),
            HostsFormat::TopologyConf => read::topology_conf_with_notes(text)?,
            HostsFormat::TopologyYaml => {
                read::topology_yaml_with_notes(text, self.topology.as_deref())?
            }
            HostsFormat::Scontrol => read::scontrol_with_notes(text)?,
            HostsFormat::SlurmTopologyAddr => (Hosts::parse_slurm_topology_addr(text)?, Vec::new()),
            HostsFormat::Kubectl => (self.kubectl(text)?, Vec::new()),
            _ => (Hosts::parse_plain(text)?, Vec::new()),
        };
        self.restricted(hosts, notes)
    }

    /// The host table of `nvidia-smi -q` files, each named after its host
    /// ([`Hosts::from_nvidia_smi_files`]: a directory of one file per
    /// host), restricted to the nodelist.
    ///
    /// # Errors
    /// [`Error::BadSpec`] when the format is not `nvidia-smi`, or for an
    /// option of another format; the reader's and the nodelist's errors.
    pub fn read_nvidia_smi_files(&self, files: &[(&str, &str)]) -> Result<HostsRead> {
        self.check_options()?;
        if self.format != HostsFormat::NvidiaSmi {
            return Err(Error::BadSpec {
                what: "host table format",
                text: self.format.name().to_string(),
                problem: "files of one host each are nvidia-smi outputs: read them as nvidia-smi"
                    .to_string(),
            });
        }
        let hosts = Hosts::from_nvidia_smi_files(files)?;
        self.restricted(hosts, Vec::new())
    }

    /// Options given for a format that does not take them are errors.
    fn check_options(&self) -> Result<()> {
        let only = |what: &'static str, value: &Option<String>, format: HostsFormat| match value {
            Some(v) if self.format != format => Err(Error::BadSpec {
                what,
                text: v.chars().take(200).collect(),
                problem: format!(
                    "applies to the {format} format only, and the format is {}",
                    self.format
                ),
            }),
            _ => Ok(()),
        };
        only("clique label", &self.clique_label, HostsFormat::Kubectl)?;
        only("topology", &self.topology, HostsFormat::TopologyYaml)
    }

    /// `hosts` restricted to the nodelist, with its note.
    fn restricted(&self, hosts: Hosts, mut notes: Vec<String>) -> Result<HostsRead> {
        let hosts = match &self.nodelist {
            Some(list) => {
                let (hosts, note) = hosts.restrict(list)?;
                notes.extend(note);
                hosts
            }
            None => hosts,
        };
        Ok(HostsRead { hosts, notes })
    }

    #[cfg(feature = "serde")]
    fn kubectl(&self, text: &str) -> Result<Hosts> {
        let label = self
            .clique_label
            .as_deref()
            .unwrap_or(crate::machine::DEFAULT_CLIQUE_LABEL);
        Hosts::parse_kubectl_nodes(text, label)
    }

    #[cfg(not(feature = "serde"))]
    fn kubectl(&self, _: &str) -> Result<Hosts> {
        Err(needs_serde(HostsFormat::Kubectl))
    }
}

/// Whether `text` starts (after blanks) like a JSON value of a table.
fn looks_like_json(text: &str) -> bool {
    matches!(text.trim_start().chars().next(), Some('[' | '{'))
}

#[cfg(feature = "serde")]
fn json(text: &str) -> Result<Hosts> {
    Hosts::parse_json(text)
}

#[cfg(not(feature = "serde"))]
fn json(_: &str) -> Result<Hosts> {
    Err(needs_serde(HostsFormat::Json))
}

#[cfg(not(feature = "serde"))]
fn needs_serde(format: HostsFormat) -> Error {
    Error::BadSpec {
        what: "host table format",
        text: format.name().to_string(),
        problem: "reading JSON needs the library's feature `serde`".to_string(),
    }
}
