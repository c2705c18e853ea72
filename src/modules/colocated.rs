//! The bridge of two modules on the same ranks: a gather plan when every
//! rank's lanes line up (rules C1-C3 and E6), else the leader plan.

use crate::cast::to_usize;
use std::fmt;

use crate::modules::alignment;
use crate::modules::group_list::{GroupList, can_hold};
use crate::modules::lanes::LaneGrid;
use crate::modules::pairing::{Direction, all_leaders};

/// How colocated modules move activations across their bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ColocatedMode {
    /// Every rank's lanes line up (C1): all-gathers on the side with more
    /// lanes, each rank keeping its slot.
    Collective,
    /// They do not: the leader plan of separate spans over the same ranks,
    /// a pair whose two leaders are one rank a local copy.
    P2p,
}

impl ColocatedMode {
    /// `collective` or `p2p`.
    pub const fn name(self) -> &'static str {
        match self {
            ColocatedMode::Collective => "collective",
            ColocatedMode::P2p => "p2p",
        }
    }
}

impl fmt::Display for ColocatedMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The colocated part of a [`Bridge`](crate::modules::Bridge).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ColocatedPlan {
    /// Gathers, or the leader plan.
    pub mode: ColocatedMode,
    /// Why the mode is [`P2p`](ColocatedMode::P2p) (`None` for collective).
    pub reason: Option<String>,
    /// Fan-in: per destination lane and source (tp, cp) position (tp
    /// fastest), the ranks of its `scale` source lanes at that position;
    /// fan-out: the same with the sides swapped (C2). Empty when equal or
    /// p2p.
    pub gather_groups: GroupList,
    /// Each rank's slot, in rank order: which `1/scale` of the batch is its
    /// own (fan-in: source lane mod scale; fan-out: destination lane mod
    /// scale; 0 when equal). Empty for p2p (C3).
    pub slots: Vec<u32>,
    /// Source cp > 1: every source cp group, by lane then tp, gathered
    /// before the bridge (E6).
    pub src_cp_gather: Option<GroupList>,
    /// Destination cp > 1: every destination cp group, by lane then tp,
    /// summed in the backward pass (E6).
    pub dst_cp_reduce: Option<GroupList>,
}

/// The decision for one colocated edge, made once.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ColocatedEdge {
    /// Why there is no gather plan, if there is none.
    pub reason: Option<String>,
    /// P2p: the bridge group (every leader, sorted), for the ranks' keys.
    pub leaders: Vec<u32>,
}

impl ColocatedEdge {
    /// Decides between the gather plan and the leader plan: C1 from
    /// strides in O(dims) when the grids' digit boundaries form a chain
    /// (`alignment`), else by every rank, stopping at the first that fails.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`](crate::Error::OutOfMemory) when the leader
    /// plan's sorted leaders cannot be allocated.
    pub fn new(
        a: &LaneGrid,
        b: &LaneGrid,
        direction: Direction,
        scale: u32,
    ) -> crate::error::Result<ColocatedEdge> {
        let reason = if a.pp.size > 1 || b.pp.size > 1 {
            Some(format!(
                "pp is {} on the source and {} on the destination: the gather plan needs pp = 1 on both",
                a.pp.size, b.pp.size
            ))
        } else {
            let (wide, narrow) = match direction {
                Direction::FanOut => (b, a),
                _ => (a, b),
            };
            // From strides when it can be decided so; else every rank.
            let first_bad = match alignment::lanes_line_up(wide, narrow, scale) {
                Some(bad) => bad,
                None => a.ranks().find(|&r| !lined_up(a, b, direction, scale, r)),
            };
            first_bad.and_then(|r| {
                let (ls, ld) = (a.coord(r)?.lane, b.coord(r)?.lane);
                let (side, got, want) = match direction {
                    Direction::FanIn => ("destination", ld, format!("{ls} div {scale} = {}", ls / scale)),
                    Direction::FanOut => ("source", ls, format!("{ld} div {scale} = {}", ld / scale)),
                    Direction::Equal => ("destination", ld, ls.to_string()),
                };
                Some(format!(
                    "rank {r} is on source lane {ls} and destination lane {ld}: its {side} lane is {got}, not {want} (the two grids' data lanes do not line up)"
                ))
            })
        };
        let leaders = if reason.is_some() {
            can_hold(u64::from(a.lanes()) + u64::from(b.lanes()))?;
            all_leaders(a, b)
        } else {
            Vec::new()
        };
        Ok(ColocatedEdge { reason, leaders })
    }

    /// Whether the gather plan holds.
    pub fn collective(&self) -> bool {
        self.reason.is_none()
    }

    /// The public plan.
    pub fn plan(
        &self,
        a: &LaneGrid,
        b: &LaneGrid,
        direction: Direction,
        scale: u32,
    ) -> ColocatedPlan {
        if let Some(reason) = &self.reason {
            return ColocatedPlan {
                mode: ColocatedMode::P2p,
                reason: Some(reason.clone()),
                gather_groups: GroupList::default(),
                slots: Vec::new(),
                src_cp_gather: None,
                dst_cp_reduce: None,
            };
        }
        let k = scale;
        let gather = |iter: &LaneGrid, sib: &LaneGrid| {
            let mut out = Vec::with_capacity(to_usize(sib.lanes()) * to_usize(sib.positions()));
            for i in 0..iter.lanes() {
                for cp in 0..sib.cp.size {
                    for tp in 0..sib.tp.size {
                        out.extend((i * k..(i + 1) * k).map(|l| sib.rank(l, tp, cp, 0)));
                    }
                }
            }
            GroupList::new(out, to_usize(k))
        };
        let gather_groups = match direction {
            Direction::FanIn => gather(b, a),
            Direction::FanOut => gather(a, b),
            Direction::Equal => GroupList::default(),
        };
        let slots = a
            .ranks()
            .map(|r| match direction {
                Direction::FanIn => a.coord(r).map_or(0, |c| c.lane % k),
                Direction::FanOut => b.coord(r).map_or(0, |c| c.lane % k),
                Direction::Equal => 0,
            })
            .collect();
        let cp_groups = |g: &LaneGrid| {
            (g.cp.size > 1).then(|| {
                let mut out = Vec::with_capacity(to_usize(g.world));
                for lane in 0..g.lanes() {
                    for tp in 0..g.tp.size {
                        out.extend((0..g.cp.size).map(|c| g.rank(lane, tp, c, 0)));
                    }
                }
                GroupList::new(out, to_usize(g.cp.size))
            })
        };
        ColocatedPlan {
            mode: ColocatedMode::Collective,
            reason: None,
            gather_groups,
            slots,
            src_cp_gather: cp_groups(a),
            dst_cp_reduce: cp_groups(b),
        }
    }
}

/// Whether `rank`'s lanes line up (rule C1).
fn lined_up(a: &LaneGrid, b: &LaneGrid, direction: Direction, scale: u32, rank: u32) -> bool {
    match (a.coord(rank), b.coord(rank)) {
        (Some(s), Some(d)) => match direction {
            Direction::FanIn => d.lane == s.lane / scale,
            Direction::FanOut => s.lane == d.lane / scale,
            Direction::Equal => s.lane == d.lane,
        },
        _ => false,
    }
}
