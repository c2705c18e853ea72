//! `scontrol show topology`: Slurm's topology as its controller prints it.

use crate::error::Result;
use crate::machine::Hosts;
use crate::machine::read::slurm::{Dialect, read_lines};

impl Hosts {
    /// Reads the output of `scontrol show topology`: a line per unit, either
    /// switches (`SwitchName=s1 Level=0 LinkSpeed=1 Nodes=tux[0-3]`,
    /// `SwitchName=s3 Level=1 LinkSpeed=1 Nodes=tux[0-7] Switches=s[1-2]`:
    /// an upper switch lists every node below it, and a node's keys are the
    /// switches from the root down to the deepest that lists it) or blocks
    /// (`BlockName=b1 BlockIndex=0 Nodes=gb[01-18] BlockSize=18`, each a
    /// domain; the `AggregatedBlock=` lines of the higher block levels are
    /// the outer keys, largest first, each named by its first and last
    /// block, `b1..b2`, as [`Hosts::parse_topology_conf`] names them). Every
    /// host is healthy, its GPUs not given.
    ///
    /// ```
    /// use rank_layout::machine::Hosts;
    /// let out = "BlockName=b1 BlockIndex=0 Nodes=gb[01-02] BlockSize=2\n\
    ///            BlockName=b2 BlockIndex=1 Nodes=gb[03-04] BlockSize=2\n\
    ///            AggregatedBlock=b1,b2 BlockIndex=2 Nodes=gb[01-04] BlockSize=4\n";
    /// let hosts = Hosts::parse_scontrol_topology(out)?;
    /// assert_eq!(hosts.get(2).unwrap().keys, ["b1..b2", "b2"]);
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::BadHostTable`](crate::Error::BadHostTable) naming the line
    /// and the bad value, as [`Hosts::parse_topology_conf`]; an aggregated
    /// block's node in no block; a `BlockSize=`, `BlockIndex=`, `Level=`
    /// or `LinkSpeed=` that is not a number (`BlockSize=four`).
    pub fn parse_scontrol_topology(text: &str) -> Result<Hosts> {
        read_lines(text, Dialect::Scontrol)?.hosts("scontrol show topology")
    }
}

/// [`Hosts::parse_scontrol_topology`], with a note for each switch or
/// block that lists no node.
pub(crate) fn with_notes(text: &str) -> Result<(Hosts, Vec<String>)> {
    read_lines(text, Dialect::Scontrol)?.hosts_and_notes("scontrol show topology")
}
