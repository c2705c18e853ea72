//! The bridge plan of one edge between two module grids: leaders, their
//! pairing by contiguous blocks of data lanes, boundary broadcast groups,
//! cp gather and reduce groups and the bridge group (`BRIDGES.md` rules
//! R1-R5 and E1), and for colocated modules the gather plan (C1-C3, E6).

use crate::cast::to_usize;
use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::modules::colocated::{ColocatedEdge, ColocatedPlan};
use crate::modules::group_list::{GroupList, can_hold};
use crate::modules::lanes::LaneGrid;
use crate::modules::pairing::{Direction, dst_leader, src_leader};

/// The communicators of a bridge, one `MPI_Comm_split` (or one
/// `new_group` round) each: which groups a rank's [`Split`](crate::Split)
/// on an edge refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum BridgeKind {
    /// The bridge group: every source and destination leader (R5).
    Bridge,
    /// The source's boundary broadcast groups: one per lane at its last
    /// stage, every tp and cp (R3).
    SrcBroadcast,
    /// The destination's boundary broadcast groups: one per lane at its
    /// first stage (R3).
    DstBroadcast,
    /// The destination's cp reduce groups: one per lane at its first stage
    /// and tp 0, every cp (R4, destination cp > 1).
    DstCpReduce,
    /// The source's cp gather groups: one per lane at its last stage and
    /// its last tp, every cp (E1, source cp > 1).
    SrcCpGather,
    /// Colocated: the all-gather groups of the side with more lanes (C2).
    Gather,
    /// Colocated: every source cp group, gathered before the bridge (E6).
    ColocatedCpGather,
    /// Colocated: every destination cp group, summed backwards (E6).
    ColocatedCpReduce,
}

impl BridgeKind {
    /// Every kind, in order.
    pub const ALL: [BridgeKind; 8] = [
        BridgeKind::Bridge,
        BridgeKind::SrcBroadcast,
        BridgeKind::DstBroadcast,
        BridgeKind::DstCpReduce,
        BridgeKind::SrcCpGather,
        BridgeKind::Gather,
        BridgeKind::ColocatedCpGather,
        BridgeKind::ColocatedCpReduce,
    ];

    /// The kind's name: `bridge`, `src_broadcast`, `dst_broadcast`,
    /// `dst_cp_reduce`, `src_cp_gather`, `gather`, `colocated_cp_gather`,
    /// `colocated_cp_reduce`.
    pub const fn name(self) -> &'static str {
        match self {
            BridgeKind::Bridge => "bridge",
            BridgeKind::SrcBroadcast => "src_broadcast",
            BridgeKind::DstBroadcast => "dst_broadcast",
            BridgeKind::DstCpReduce => "dst_cp_reduce",
            BridgeKind::SrcCpGather => "src_cp_gather",
            BridgeKind::Gather => "gather",
            BridgeKind::ColocatedCpGather => "colocated_cp_gather",
            BridgeKind::ColocatedCpReduce => "colocated_cp_reduce",
        }
    }
}

impl fmt::Display for BridgeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BridgeKind {
    type Err = Error;

    /// A kind by its name ([`BridgeKind::name`]).
    fn from_str(s: &str) -> Result<BridgeKind> {
        BridgeKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| Error::UnknownName {
                what: "bridge kind",
                name: s.to_owned(),
                place: "the bridge kinds".into(),
                known: BridgeKind::ALL.map(BridgeKind::name).join(", "),
            })
    }
}

/// The whole plan of one edge, ranks global.
///
/// Built by [`Modules::bridge`](crate::Modules::bridge); the rules are in
/// [`semantics`](crate::semantics) (section 9). Separate spans have the
/// leader plan; colocated modules have it too (it is the plan of
/// [`ColocatedMode::P2p`](crate::modules::ColocatedMode::P2p)) and the gather plan
/// in [`colocated`](Bridge::colocated).
///
/// ```
/// use rank_layout::{Mesh, Modules, modules::{Direction, Spans}};
/// // vision: tp 2 x dp 4 (ranks 0-7); llm: tp 4 x dp 2 (ranks 8-15).
/// let modules = Modules::new(
///     [
///         ("vision", Mesh::new([("tp", 2), ("dp", 4)])?),
///         ("llm", Mesh::new([("tp", 4), ("dp", 2)])?),
///     ],
///     Spans::Consecutive,
/// )?
/// .edge("vision", "llm")?;
/// let plan = modules.bridge("vision", "llm")?;
/// assert_eq!(plan.src_leaders, vec![1, 3, 5, 7]); // the last tp rank of each lane
/// assert_eq!(plan.dst_leaders, vec![8, 12]);
/// assert_eq!((plan.direction, plan.scale), (Direction::FanIn, 2));
/// assert_eq!(plan.pairs, vec![(1, 8), (3, 8), (5, 12), (7, 12)]);
/// assert_eq!(plan.bridge_group, vec![1, 3, 5, 7, 8, 12]);
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Bridge {
    /// The source module's name.
    pub src: String,
    /// The destination module's name.
    pub dst: String,
    /// Which side has more lanes.
    pub direction: Direction,
    /// The ratio of the lane counts (1 when equal).
    pub scale: u32,
    /// One leader per source lane, in lane order: every model coordinate at
    /// its last value (R1).
    pub src_leaders: Vec<u32>,
    /// One leader per destination lane, in lane order: every model
    /// coordinate 0 (R1).
    pub dst_leaders: Vec<u32>,
    /// `(source leader, destination leader)` of every paired lane, by
    /// source lane, then destination lane (R2).
    pub pairs: Vec<(u32, u32)>,
    /// Per source lane, its ranks at the last stage, ascending (R3).
    pub src_broadcast: GroupList,
    /// Per destination lane, its ranks at the first stage, ascending (R3).
    pub dst_broadcast: GroupList,
    /// Destination cp > 1: per lane, its first-stage tp-0 ranks, in cp
    /// order (R4).
    pub dst_cp_reduce: Option<GroupList>,
    /// Source cp > 1: per lane, its last-stage last-tp ranks, in cp order
    /// (E1).
    pub src_cp_gather: Option<GroupList>,
    /// Every leader, sorted, each once (R5).
    pub bridge_group: Vec<u32>,
    /// Colocated modules: the gather plan, or why there is none.
    pub colocated: Option<ColocatedPlan>,
}

impl Bridge {
    /// The groups of `kind` in this plan, in color order (the bridge group
    /// is one group); `None` for a kind the plan does not have.
    ///
    /// ```
    /// use rank_layout::{Mesh, Modules, modules::{BridgeKind, Spans}};
    /// let modules = Modules::new(
    ///     [("enc", Mesh::new([("tp", 2), ("dp", 2)])?), ("llm", Mesh::new([("tp", 4)])?)],
    ///     Spans::Consecutive,
    /// )?
    /// .edge("enc", "llm")?;
    /// let plan = modules.bridge("enc", "llm")?;
    /// assert_eq!(plan.groups(BridgeKind::Bridge).unwrap().to_vecs(), vec![vec![1, 3, 4]]);
    /// assert!(plan.groups(BridgeKind::Gather).is_none());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn groups(&self, kind: BridgeKind) -> Option<GroupList> {
        let c = self.colocated.as_ref();
        match kind {
            BridgeKind::Bridge => Some(GroupList::new(
                self.bridge_group.clone(),
                self.bridge_group.len(),
            )),
            BridgeKind::SrcBroadcast => Some(self.src_broadcast.clone()),
            BridgeKind::DstBroadcast => Some(self.dst_broadcast.clone()),
            BridgeKind::DstCpReduce => self.dst_cp_reduce.clone(),
            BridgeKind::SrcCpGather => self.src_cp_gather.clone(),
            BridgeKind::Gather => c
                .filter(|c| !c.gather_groups.is_empty())
                .map(|c| c.gather_groups.clone()),
            BridgeKind::ColocatedCpGather => c.and_then(|c| c.src_cp_gather.clone()),
            BridgeKind::ColocatedCpReduce => c.and_then(|c| c.dst_cp_reduce.clone()),
        }
    }
}

/// An edge in brief, in O(1): which side has more lanes, by how much, and
/// for colocated modules the plan's mode and why.
///
/// Created by [`Modules::edge_info`](crate::Modules::edge_info).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct EdgeInfo {
    /// The source module's name.
    pub src: String,
    /// The destination module's name.
    pub dst: String,
    /// Which side has more lanes.
    pub direction: Direction,
    /// The ratio of the lane counts (1 when equal).
    pub scale: u32,
    /// Colocated modules: gathers or the leader plan (`None` for separate
    /// spans, which always take the leader plan).
    pub mode: Option<crate::modules::ColocatedMode>,
    /// Why a colocated edge takes the leader plan.
    pub reason: Option<String>,
}

/// One edge prepared for per-rank answers: both grids and the pairing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Edge {
    pub src: usize,
    pub dst: usize,
    pub direction: Direction,
    pub scale: u32,
    /// Colocated modules: the gather plan's decision.
    pub colocated: Option<ColocatedEdge>,
}

impl Edge {
    /// The edge `src -> dst` between `a` and `b`.
    ///
    /// # Errors
    /// [`Error::LanesNotPaired`] when neither lane count divides the other.
    pub fn new(
        (src, a, src_name): (usize, &LaneGrid, &str),
        (dst, b, dst_name): (usize, &LaneGrid, &str),
        colocated: bool,
    ) -> Result<Edge> {
        let (ns, nd) = (a.lanes(), b.lanes());
        let (direction, scale) = if ns == nd {
            (Direction::Equal, 1)
        } else if ns % nd == 0 {
            (Direction::FanIn, ns / nd)
        } else if nd % ns == 0 {
            (Direction::FanOut, nd / ns)
        } else {
            return Err(Error::LanesNotPaired {
                src: src_name.to_owned(),
                dst: dst_name.to_owned(),
                src_lanes: ns,
                dst_lanes: nd,
            });
        };
        let colocated = colocated
            .then(|| ColocatedEdge::new(a, b, direction, scale))
            .transpose()?;
        Ok(Edge {
            src,
            dst,
            direction,
            scale,
            colocated,
        })
    }

    /// The destination lanes of source lane `l`: first and count.
    pub fn dst_lanes_of(&self, l: u32) -> (u32, u32) {
        match self.direction {
            Direction::FanIn => (l / self.scale, 1),
            Direction::FanOut => (l * self.scale, self.scale),
            Direction::Equal => (l, 1),
        }
    }

    /// The source lanes of destination lane `j`: first and count.
    pub fn src_lanes_of(&self, j: u32) -> (u32, u32) {
        match self.direction {
            Direction::FanIn => (j * self.scale, self.scale),
            Direction::FanOut => (j / self.scale, 1),
            Direction::Equal => (j, 1),
        }
    }

    /// The kinds of communicators this edge needs.
    pub fn kinds(&self, a: &LaneGrid, b: &LaneGrid) -> Vec<BridgeKind> {
        let mut kinds = Vec::new();
        match &self.colocated {
            Some(c) if c.collective() => {
                if self.direction != Direction::Equal {
                    kinds.push(BridgeKind::Gather);
                }
                if a.cp.size > 1 {
                    kinds.push(BridgeKind::ColocatedCpGather);
                }
                if b.cp.size > 1 {
                    kinds.push(BridgeKind::ColocatedCpReduce);
                }
            }
            _ => {
                kinds.extend([
                    BridgeKind::Bridge,
                    BridgeKind::SrcBroadcast,
                    BridgeKind::DstBroadcast,
                ]);
                if b.cp.size > 1 {
                    kinds.push(BridgeKind::DstCpReduce);
                }
                if a.cp.size > 1 {
                    kinds.push(BridgeKind::SrcCpGather);
                }
            }
        }
        kinds
    }

    /// The number of ranks the whole plan lists (every list, an upper
    /// bound for a colocated one).
    fn plan_members(&self, a: &LaneGrid, b: &LaneGrid) -> u64 {
        let (ns, nd) = (u64::from(a.lanes()), u64::from(b.lanes()));
        let stage = |g: &LaneGrid| u64::from(g.lanes()) * u64::from(g.positions());
        let cp = |g: &LaneGrid| u64::from(g.lanes()) * u64::from(g.cp.size);
        let colocated = if self.colocated.is_some() {
            4 * u64::from(a.world)
        } else {
            0
        };
        4 * (ns + nd) + stage(a) + stage(b) + cp(a) + cp(b) + colocated
    }

    /// The whole plan.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when its lists cannot be allocated.
    pub fn plan(&self, a: &LaneGrid, b: &LaneGrid, names: (&str, &str)) -> Result<Bridge> {
        can_hold(self.plan_members(a, b))?;
        let src_leaders: Vec<u32> = (0..a.lanes()).map(|l| src_leader(a, l)).collect();
        let dst_leaders: Vec<u32> = (0..b.lanes()).map(|j| dst_leader(b, j)).collect();
        let mut pairs = Vec::with_capacity(src_leaders.len().max(dst_leaders.len()));
        for (l, &s) in (0u32..).zip(&src_leaders) {
            let (first, count) = self.dst_lanes_of(l);
            for j in first..first + count {
                if let Some(&d) = dst_leaders.get(to_usize(j)) {
                    pairs.push((s, d));
                }
            }
        }
        let broadcast = |g: &LaneGrid, pp: u32| {
            let mut out = Vec::with_capacity(to_usize(g.lanes()) * to_usize(g.positions()));
            for lane in 0..g.lanes() {
                g.stage_ranks(lane, pp, &mut out);
            }
            GroupList::new(out, to_usize(g.positions()))
        };
        let cp_groups = |g: &LaneGrid, tp: u32, pp: u32| {
            (g.cp.size > 1).then(|| {
                let mut out = Vec::with_capacity(to_usize(g.lanes()) * to_usize(g.cp.size));
                for lane in 0..g.lanes() {
                    out.extend((0..g.cp.size).map(|c| g.rank(lane, tp, c, pp)));
                }
                GroupList::new(out, to_usize(g.cp.size))
            })
        };
        let mut bridge_group: Vec<u32> = src_leaders.iter().chain(&dst_leaders).copied().collect();
        bridge_group.sort_unstable();
        bridge_group.dedup();
        Ok(Bridge {
            src: names.0.to_owned(),
            dst: names.1.to_owned(),
            direction: self.direction,
            scale: self.scale,
            src_broadcast: broadcast(a, a.pp.last()),
            dst_broadcast: broadcast(b, 0),
            dst_cp_reduce: cp_groups(b, 0, 0),
            src_cp_gather: cp_groups(a, a.tp.last(), a.pp.last()),
            colocated: self
                .colocated
                .as_ref()
                .map(|c| c.plan(a, b, self.direction, self.scale)),
            src_leaders,
            dst_leaders,
            pairs,
            bridge_group,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_past_the_address_space_is_an_error() {
        assert!(matches!(
            can_hold(u64::MAX),
            Err(Error::OutOfMemory {
                members: u64::MAX,
                ..
            })
        ));
        assert!(can_hold(1024).is_ok());
    }
}
