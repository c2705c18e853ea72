//! The policies of a re-layout after a failure.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// How the job goes on after ranks fail. Each policy's guarantees are in
/// [`semantics`](crate::semantics), section "Re-layout".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Policy {
    /// Drop the data-parallel replicas that hold a failed rank: every
    /// tensor, context and pipeline group of the other replicas is kept
    /// as it is, and each data-parallel group shrinks (no communicator is
    /// created for the dense kinds).
    DropReplica,
    /// Whole spare nodes take the failed nodes' places (a spare of the
    /// same domain first, when the domains are known): the layout stays,
    /// and only the groups of the replaced nodes are created anew.
    Spare,
    /// The next valid smaller grid that the survivors (and spares) fill:
    /// fewer data-parallel replicas first (intact replicas keep their
    /// place; broken ones are refilled by survivors at the same position
    /// where they exist), then smaller other axes.
    NextGrid,
    /// `nvidia_resiliency_ext.inprocess.rank_assignment.ShiftRanks`: every
    /// survivor moves down past the failed ranks below it; then the world
    /// is trimmed to a valid grid (`ActiveWorldSizeDivisibleBy`).
    ShiftRanks,
    /// `nvidia_resiliency_ext.inprocess.rank_assignment.FillGaps`: the
    /// survivors past the new world size fill the failed ranks' places,
    /// lowest place first; then the world is trimmed to a valid grid.
    FillGaps,
}

impl Policy {
    /// Every policy, in the order reports compare them.
    pub const ALL: [Policy; 5] = [
        Policy::DropReplica,
        Policy::Spare,
        Policy::NextGrid,
        Policy::ShiftRanks,
        Policy::FillGaps,
    ];

    /// The policy's name on the command line: `drop-replica`, `spare`,
    /// `next-grid`, `shift-ranks`, `fill-gaps`.
    pub const fn name(self) -> &'static str {
        match self {
            Policy::DropReplica => "drop-replica",
            Policy::Spare => "spare",
            Policy::NextGrid => "next-grid",
            Policy::ShiftRanks => "shift-ranks",
            Policy::FillGaps => "fill-gaps",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = Error;

    /// A policy by its [`name`](Policy::name).
    ///
    /// ```
    /// use rank_layout::relayout::Policy;
    /// assert_eq!("fill-gaps".parse::<Policy>()?, Policy::FillGaps);
    /// assert!("fillgaps".parse::<Policy>().is_err());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    fn from_str(s: &str) -> Result<Policy> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| Error::NoRelayout {
                problem: format!(
                    "unknown policy {s:?}; the policies are drop-replica, spare, next-grid, shift-ranks and fill-gaps"
                ),
            })
    }
}
