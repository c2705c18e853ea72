//! What a reshard plan costs.

use fnv::FnvHashMap;

use crate::reshard::locality::Locality;
use crate::reshard::transfer::Transfer;

/// What a plan (or one process's part of it) costs.
///
/// Bytes over the network are those of transfers between two processes;
/// a local copy is counted apart. A transfer crosses a node when its
/// processes are on two nodes (or a node is unknown), a domain when they
/// share neither a node nor a known domain (without domains, a node is its
/// own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct Cost {
    /// Bytes sent over the network.
    pub bytes: u64,
    /// Bytes copied within a process.
    pub local_bytes: u64,
    /// Bytes between two nodes.
    pub cross_node_bytes: u64,
    /// Bytes between two NVLink domains.
    pub cross_domain_bytes: u64,
    /// The most bytes one process sends over the network.
    pub max_send_bytes: u64,
    /// The most bytes one process receives over the network.
    pub max_recv_bytes: u64,
    /// Transfers over the network (each one message).
    pub messages: u64,
    /// Local copies.
    pub local_copies: u64,
}

/// Adds transfers up into a [`Cost`], one at a time (for a plan streamed
/// rather than collected).
///
/// ```
/// use rank_layout::reshard::{CostTally, Locality, Model, Reshard, Side, Tensor};
/// use rank_layout::{Config, Layout};
/// let model = Model::new(1, 0, vec![Tensor::new("w", [4, 4]).tp(0)])?;
/// let from = Side::new(Layout::new(&Config::new().tp(2).world_size(2))?);
/// let to = Side::new(Layout::new(&Config::new().world_size(1).rank_offset(2))?);
/// let plan = Reshard::new(model, from, to, Locality::default())?;
/// let mut tally = CostTally::new();
/// for t in plan.transfers() {
///     tally.add(&t?, plan.locality());
/// }
/// assert_eq!(tally.finish(), plan.cost()?);
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Default, Clone)]
pub struct CostTally {
    cost: Cost,
    sent: FnvHashMap<u32, u64>,
    received: FnvHashMap<u32, u64>,
}

impl CostTally {
    /// Nothing counted yet.
    pub fn new() -> CostTally {
        CostTally::default()
    }

    /// Counts `t`, its processes placed by `locality`.
    pub fn add(&mut self, t: &Transfer, locality: &Locality) {
        let c = &mut self.cost;
        if t.is_local() {
            c.local_bytes = c.local_bytes.saturating_add(t.bytes);
            c.local_copies += 1;
            return;
        }
        c.bytes = c.bytes.saturating_add(t.bytes);
        c.messages += 1;
        if !locality.same_node(t.src, t.dst) {
            c.cross_node_bytes = c.cross_node_bytes.saturating_add(t.bytes);
        }
        if !locality.same_domain(t.src, t.dst) {
            c.cross_domain_bytes = c.cross_domain_bytes.saturating_add(t.bytes);
        }
        let s = self.sent.entry(t.src).or_insert(0);
        *s = s.saturating_add(t.bytes);
        let r = self.received.entry(t.dst).or_insert(0);
        *r = r.saturating_add(t.bytes);
    }

    /// The cost of every transfer counted.
    pub fn finish(mut self) -> Cost {
        self.cost.max_send_bytes = self.sent.values().copied().max().unwrap_or(0);
        self.cost.max_recv_bytes = self.received.values().copied().max().unwrap_or(0);
        self.cost
    }
}
