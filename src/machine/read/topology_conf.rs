//! Slurm's `topology.conf` (topology.conf(5)).

use crate::error::Result;
use crate::machine::Hosts;
use crate::machine::read::slurm::{Dialect, read_lines};

impl Hosts {
    /// Reads Slurm's `topology.conf`: either blocks (topology/block:
    /// `BlockName=b1 Nodes=gb[01-18]`, each block a domain; `BlockSizes=`
    /// the higher-level blocks, as Slurm forms them, the outer keys) or a
    /// switch tree (topology/tree: `SwitchName=s0
    /// Nodes=...`, `SwitchName=s3 Switches=s[0-2]`), each node's keys the
    /// switches from the root down to its leaf switch. Parameter names are
    /// case-insensitive, `#` starts a comment, node and switch lists are
    /// hostlist expressions. Every host is healthy, its GPUs not given; the
    /// file lists the whole cluster: [`Hosts::restrict_to`] keeps the job's
    /// hosts.
    ///
    /// ```
    /// use rank_layout::machine::Hosts;
    /// let tree = "SwitchName=s0 Nodes=dev[0-5]\nSwitchName=s1 Nodes=dev[6-11]\nSwitchName=s3 Switches=s[0-1]\n";
    /// let hosts = Hosts::parse_topology_conf(tree)?;
    /// assert_eq!(hosts.len(), 12);
    /// assert_eq!(hosts.get(7).unwrap().keys, ["s3", "s1"]);
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::BadHostTable`](crate::Error::BadHostTable) naming the line
    /// and the bad value: a line that is not `Key=value` pairs, an unknown
    /// parameter, a bad hostlist, a block size that is not the first's
    /// times a power of two, a switch or block defined twice, a child
    /// switch not defined or with two parents, a cycle, a node in two
    /// blocks or two leaf switches, blocks and switches mixed, a ring
    /// topology, a numeric parameter that is not a number, nothing listed
    /// or no node at all. A switch or block that lists no node is taken,
    /// as Slurm takes it (it holds no host).
    pub fn parse_topology_conf(text: &str) -> Result<Hosts> {
        read_lines(text, Dialect::Conf)?.hosts("topology.conf")
    }
}

/// [`Hosts::parse_topology_conf`], with a note for each switch or block
/// that lists no node.
pub(crate) fn with_notes(text: &str) -> Result<(Hosts, Vec<String>)> {
    read_lines(text, Dialect::Conf)?.hosts_and_notes("topology.conf")
}
