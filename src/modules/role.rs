//! One rank's part in a bridge, in O(dims): leader or not, its peers, its
//! slot, its color and key in each of the bridge's communicators.

use crate::modules::bridge::{BridgeKind, Edge};
use crate::modules::lanes::LaneGrid;
use crate::modules::pairing::{Direction, all_leaders, dst_leader, src_leader};
use crate::split::Split;

/// A rank's role on one edge, from [`Modules::role`](crate::Modules::role).
///
/// ```
/// use rank_layout::{Mesh, Modules, Split, modules::{BridgeKind, Spans}};
/// let modules = Modules::new(
///     [("enc", Mesh::new([("tp", 2), ("dp", 2)])?), ("llm", Mesh::new([("tp", 4)])?)],
///     Spans::Consecutive,
/// )?
/// .edge("enc", "llm")?;
/// let role = modules.role(3, "enc", "llm")?; // enc's lane 1, tp 1: a leader
/// assert!(role.src_leader);
/// assert_eq!(role.sends_to, vec![4]);
/// assert_eq!(role.split(BridgeKind::SrcBroadcast), Some(Split { color: 1, key: 1 }));
/// assert_eq!(modules.role(4, "enc", "llm")?.receives_from, vec![1, 3]);
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct BridgeRole {
    /// The edge's source module.
    pub src: String,
    /// The edge's destination module.
    pub dst: String,
    /// The rank leads a source lane (leader plan only).
    pub src_leader: bool,
    /// The rank leads a destination lane (leader plan only).
    pub dst_leader: bool,
    /// The destination leaders it sends to (leader plan only).
    pub sends_to: Vec<u32>,
    /// The source leaders it receives from (leader plan only).
    pub receives_from: Vec<u32>,
    /// Colocated gather plan: the rank's slot (which `1/scale` of the batch).
    pub slot: Option<u32>,
    /// Its color and key in each communicator kind the edge builds (`None`:
    /// not a member), in [`BridgeKind`] order.
    pub splits: Vec<(BridgeKind, Option<Split>)>,
}

impl BridgeRole {
    /// The split of `kind`, `None` when the rank is not in its groups or
    /// the edge does not build it.
    pub fn split(&self, kind: BridgeKind) -> Option<Split> {
        self.splits
            .iter()
            .find(|(k, _)| *k == kind)
            .and_then(|(_, s)| *s)
    }
}

/// The role of `rank` on `edge` from grid `a` to grid `b`.
pub(crate) fn role(
    edge: &Edge,
    a: &LaneGrid,
    b: &LaneGrid,
    rank: u32,
    (src, dst): (&str, &str),
) -> BridgeRole {
    let leader_plan = edge.colocated.as_ref().is_none_or(|c| !c.collective());
    let mut role = BridgeRole {
        src: src.to_owned(),
        dst: dst.to_owned(),
        src_leader: false,
        dst_leader: false,
        sends_to: Vec::new(),
        receives_from: Vec::new(),
        slot: None,
        splits: edge
            .kinds(a, b)
            .into_iter()
            .map(|k| (k, split(edge, a, b, rank, k)))
            .collect(),
    };
    if leader_plan {
        if let Some(l) = a
            .coord(rank)
            .map(|c| c.lane)
            .filter(|&l| src_leader(a, l) == rank)
        {
            role.src_leader = true;
            let (first, count) = edge.dst_lanes_of(l);
            role.sends_to = (first..first + count).map(|j| dst_leader(b, j)).collect();
        }
        if let Some(j) = b
            .coord(rank)
            .map(|c| c.lane)
            .filter(|&j| dst_leader(b, j) == rank)
        {
            role.dst_leader = true;
            let (first, count) = edge.src_lanes_of(j);
            role.receives_from = (first..first + count).map(|l| src_leader(a, l)).collect();
        }
    } else {
        role.slot = match edge.direction {
            Direction::FanIn => a.coord(rank).map(|c| c.lane % edge.scale),
            Direction::FanOut => b.coord(rank).map(|c| c.lane % edge.scale),
            Direction::Equal => Some(0),
        };
    }
    role
}

/// `rank`'s split in the `kind` groups of `edge` (a kind the edge builds).
pub(crate) fn split(
    edge: &Edge,
    a: &LaneGrid,
    b: &LaneGrid,
    rank: u32,
    kind: BridgeKind,
) -> Option<Split> {
    let s = |color: u32, key: u32| Some(Split { color, key });
    match kind {
        BridgeKind::Bridge => {
            let is_src = a.coord(rank).filter(|c| src_leader(a, c.lane) == rank);
            let is_dst = b.coord(rank).filter(|c| dst_leader(b, c.lane) == rank);
            if is_src.is_none() && is_dst.is_none() {
                return None;
            }
            if let Some(c) = &edge.colocated {
                let key = c.leaders.binary_search(&rank).ok()?;
                return s(0, u32::try_from(key).ok()?);
            }
            // Separate spans: one side's leaders, ascending in lane order,
            // then the other's.
            let (src_first, ns, nd) = (a.offset < b.offset, a.lanes(), b.lanes());
            match (is_src, is_dst) {
                (Some(c), _) => s(0, if src_first { c.lane } else { nd + c.lane }),
                (_, Some(c)) => s(0, if src_first { ns + c.lane } else { c.lane }),
                _ => None,
            }
        }
        BridgeKind::SrcBroadcast => a
            .coord(rank)
            .filter(|c| c.pp == a.pp.last())
            .and_then(|c| s(c.lane, a.ascending_position(c.tp, c.cp))),
        BridgeKind::DstBroadcast => b
            .coord(rank)
            .filter(|c| c.pp == 0)
            .and_then(|c| s(c.lane, b.ascending_position(c.tp, c.cp))),
        BridgeKind::DstCpReduce => b
            .coord(rank)
            .filter(|c| c.pp == 0 && c.tp == 0)
            .and_then(|c| s(c.lane, c.cp)),
        BridgeKind::SrcCpGather => a
            .coord(rank)
            .filter(|c| c.pp == a.pp.last() && c.tp == a.tp.last())
            .and_then(|c| s(c.lane, c.cp)),
        BridgeKind::Gather => {
            let (g, c) = match edge.direction {
                Direction::FanIn => (a, a.coord(rank)?),
                Direction::FanOut => (b, b.coord(rank)?),
                Direction::Equal => return None,
            };
            s(
                (c.lane / edge.scale) * g.positions() + c.tp + g.tp.size * c.cp,
                c.lane % edge.scale,
            )
        }
        BridgeKind::ColocatedCpGather => a
            .coord(rank)
            .and_then(|c| s(c.lane * a.tp.size + c.tp, c.cp)),
        BridgeKind::ColocatedCpReduce => b
            .coord(rank)
            .and_then(|c| s(c.lane * b.tp.size + c.tp, c.cp)),
    }
}

/// The members of group `color` of `kind` on `edge`, in key order: the
/// group a rank's split names, in O(group) (the bridge group: O(lanes)).
pub(crate) fn members(
    edge: &Edge,
    a: &LaneGrid,
    b: &LaneGrid,
    kind: BridgeKind,
    color: u32,
) -> Vec<u32> {
    let mut out = Vec::new();
    match kind {
        BridgeKind::Bridge => {
            out = match &edge.colocated {
                Some(c) if !c.collective() => c.leaders.clone(),
                _ => all_leaders(a, b),
            };
        }
        BridgeKind::SrcBroadcast => a.stage_ranks(color, a.pp.last(), &mut out),
        BridgeKind::DstBroadcast => b.stage_ranks(color, 0, &mut out),
        BridgeKind::DstCpReduce => out.extend((0..b.cp.size).map(|c| b.rank(color, 0, c, 0))),
        BridgeKind::SrcCpGather => {
            out.extend((0..a.cp.size).map(|c| a.rank(color, a.tp.last(), c, a.pp.last())));
        }
        BridgeKind::Gather => {
            let g = if edge.direction == Direction::FanIn {
                a
            } else {
                b
            };
            let (block, p) = (color / g.positions(), color % g.positions());
            let (tp, cp) = (p % g.tp.size, p / g.tp.size);
            let k = edge.scale;
            out.extend((block * k..block * k + k).map(|l| g.rank(l, tp, cp, 0)));
        }
        BridgeKind::ColocatedCpGather => {
            let (lane, tp) = (color / a.tp.size, color % a.tp.size);
            out.extend((0..a.cp.size).map(|c| a.rank(lane, tp, c, 0)));
        }
        BridgeKind::ColocatedCpReduce => {
            let (lane, tp) = (color / b.tp.size, color % b.tp.size);
            out.extend((0..b.cp.size).map(|c| b.rank(lane, tp, c, 0)));
        }
    }
    out
}
