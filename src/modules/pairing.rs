//! How an edge pairs two module grids' data lanes: which side has more
//! lanes ([`Direction`]), and each lane's leader, the rank that speaks for
//! it (`BRIDGES.md` R1). The bridge plan, the colocated gather plan and a
//! rank's role all read them.

use std::fmt;

use crate::modules::lanes::LaneGrid;

/// Which side of a bridge has more data lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Direction {
    /// The source has `scale` times the destination's lanes: each
    /// destination leader receives from `scale` source leaders.
    FanIn,
    /// The destination has `scale` times the source's lanes: each source
    /// leader sends to `scale` destination leaders.
    FanOut,
    /// As many lanes on both sides.
    Equal,
}

impl Direction {
    /// `fan_in`, `fan_out` or `equal` (Megatron-Core's names).
    pub const fn name(self) -> &'static str {
        match self {
            Direction::FanIn => "fan_in",
            Direction::FanOut => "fan_out",
            Direction::Equal => "equal",
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The source leader of lane `l`: every model coordinate at its last value.
pub(crate) fn src_leader(g: &LaneGrid, l: u32) -> u32 {
    g.rank(l, g.tp.last(), g.cp.last(), g.pp.last())
}

/// The destination leader of lane `j`: every model coordinate 0.
pub(crate) fn dst_leader(g: &LaneGrid, j: u32) -> u32 {
    g.rank(j, 0, 0, 0)
}

/// Every lane leader of both sides of an edge (`a` the source, `b` the
/// destination), ascending and each once: the bridge group of a
/// colocated edge that takes the leader plan.
pub(crate) fn all_leaders(a: &LaneGrid, b: &LaneGrid) -> Vec<u32> {
    let mut l: Vec<u32> = (0..a.lanes())
        .map(|i| src_leader(a, i))
        .chain((0..b.lanes()).map(|j| dst_leader(b, j)))
        .collect();
    l.sort_unstable();
    l.dedup();
    l
}
