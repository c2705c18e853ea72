//! One transfer of a reshard plan, and what a rank holds.

use std::fmt;

use crate::reshard::region::{Point, Region};

/// Where a transfer's source sits from its destination: the tier of the
/// rule that chose it (semantics section 12), nearest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Tier {
    /// The destination holds the piece itself: a local copy.
    Local,
    /// A holder on the destination's node.
    Node,
    /// A holder in the destination's NVLink domain (no holder on its node).
    Domain,
    /// Any holder (none in the destination's domain).
    Any,
}

impl Tier {
    /// `local`, `node`, `domain` or `any`.
    pub const fn name(self) -> &'static str {
        match self {
            Tier::Local => "local",
            Tier::Node => "node",
            Tier::Domain => "domain",
            Tier::Any => "any",
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One piece of one tensor going from one process to another (or copied
/// within one, `src == dst`): the same value on both sides, with the
/// same `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Transfer {
    /// Shared by the send and its receive, unique in the plan:
    /// `(first element of the region in the model's tensors laid end to
    /// end, row-major) * processes + dst`, where `processes` is one past the
    /// largest process of either side.
    pub id: u64,
    /// The tensor's index in the model.
    pub tensor: u32,
    /// The sending process.
    pub src: u32,
    /// The receiving process.
    pub dst: u32,
    /// The piece, in the tensor's global coordinates.
    pub region: Region,
    /// Where the piece starts in the source's local shard.
    pub src_offset: Point,
    /// Where the piece starts in the destination's local shard.
    pub dst_offset: Point,
    /// Its bytes.
    pub bytes: u64,
    /// The tier of the rule that chose the source.
    pub tier: Tier,
}

impl Transfer {
    /// Whether it is a copy within one process (no network).
    pub fn is_local(&self) -> bool {
        self.src == self.dst
    }
}

/// One process's part of one tensor on one side: its local shape and the
/// boxes of the global tensor it holds, each with where it starts locally.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Shard {
    /// The local tensor's shape.
    pub local_shape: Point,
    /// Every box held, with its local offset, in local order.
    pub boxes: Vec<(Region, Point)>,
}

/// One process's transfers, each list in `id` order.
///
/// Created by [`Reshard::plan_of`](crate::reshard::Reshard::plan_of).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RankPlan {
    /// The process.
    pub process: u32,
    /// What it sends to other processes.
    pub sends: Vec<Transfer>,
    /// What it receives from other processes.
    pub recvs: Vec<Transfer>,
    /// What it copies locally (`src == dst`).
    pub copies: Vec<Transfer>,
}

impl RankPlan {
    /// Every transfer, sends, receives and copies, in `id` order (a copy
    /// once).
    pub fn all(&self) -> Vec<Transfer> {
        let mut all: Vec<Transfer> = self
            .sends
            .iter()
            .chain(&self.recvs)
            .chain(&self.copies)
            .copied()
            .collect();
        all.sort_unstable_by_key(|t| (t.id, t.src));
        all
    }
}
