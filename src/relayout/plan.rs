//! The re-layout plan: the new layout, the rank map, every kind's changes
//! and what they cost.

use std::hash::Hasher;

use crate::error::Result;
use crate::kind::Kind;
use crate::layout::Layout;
use crate::relayout::changes::KindChanges;
use crate::relayout::policy::Policy;
use crate::relayout::rank_map::{Fate, RankMap};
use crate::split::Split;

/// What a re-layout costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct Cost {
    /// Communicators to create: the `new` groups of every kind classified.
    pub new_communicators: u64,
    /// Communicators to shrink.
    pub shrinks: u64,
    /// Communicators kept as they are.
    pub kept: u64,
    /// Ranks of the new layout whose process must receive model state: a
    /// spare, or a survivor whose weight shard changes (another tensor,
    /// pipeline, expert or weight-shard coordinate, or another model
    /// shape). Optimizer state sharded over data-parallel ranks is
    /// re-sharded whenever `dp` changes, which this does not count.
    pub moved: u32,
    /// Data-parallel replicas lost (`dp` before minus after).
    pub lost_dp: u32,
    /// Alive processes without a rank in the new layout (standby).
    pub idle: u32,
}

/// A re-layout after a failure: the new layout, the old -> new rank map,
/// and, for every kind classified, which groups are kept, shrunk, new or
/// gone. Every process computes the same plan from the same inputs, with
/// no communication; [`Relayout::hash`] lets ranks compare them cheaply.
#[derive(Debug, Clone)]
pub struct Relayout {
    pub(crate) policy: Policy,
    pub(crate) old: Layout,
    pub(crate) layout: Layout,
    pub(crate) map: RankMap,
    pub(crate) kinds: Vec<KindChanges>,
    pub(crate) notes: Vec<String>,
    pub(crate) cost: Cost,
    pub(crate) hash: u64,
}

impl Relayout {
    /// The policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The layout before the failure.
    pub fn old_layout(&self) -> &Layout {
        &self.old
    }

    /// The new layout (same rank offset as the old).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The old -> new rank map (processes counted from the old layout's
    /// offset; spares after the old world).
    pub fn rank_map(&self) -> &RankMap {
        &self.map
    }

    /// Every kind classified, in the order asked.
    pub fn kinds(&self) -> &[KindChanges] {
        &self.kinds
    }

    /// One kind's changes, when it was classified.
    pub fn changes(&self, kind: Kind) -> Option<&KindChanges> {
        self.kinds.iter().find(|c| c.kind == kind)
    }

    /// What the policy noticed, in words.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// What the plan costs.
    pub fn cost(&self) -> Cost {
        self.cost
    }

    /// The plan's content hash: FNV-1a (64 bits) of the policy, both
    /// layouts' configurations, the rank map and the kinds classified.
    /// Two processes with the same hash hold the same plan.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// The split that process `p` (old rank minus offset, or a spare)
    /// makes of the surviving processes for `kind`: the new layout's
    /// color and key when its group is new; `None` when its group is
    /// kept or shrunk, or it has no new rank.
    ///
    /// # Errors
    /// The new layout's error for a kind it does not have.
    pub fn split(&self, p: u32, kind: Kind) -> Result<Option<Split>> {
        let Some(n) = self.map.new_rank(p) else {
            return Ok(None);
        };
        let Some(changes) = self.changes(kind) else {
            return Ok(None);
        };
        let split = self.layout.split(n + self.layout.rank_offset(), kind)?;
        Ok(split.filter(|s| changes.is_new(s.color)))
    }

    pub(crate) fn seal_hash(&mut self) {
        let mut h = fnv::FnvHasher::default();
        h.write(self.policy.name().as_bytes());
        for l in [&self.old, &self.layout] {
            h.write(l.config().to_string().as_bytes());
            h.write(&l.world_size().to_le_bytes());
        }
        for &f in self.map.raw() {
            h.write(&f.to_le_bytes());
        }
        for c in &self.kinds {
            h.write(c.kind.to_string().as_bytes());
        }
        self.hash = h.finish();
    }

    pub(crate) fn count_cost(&mut self) -> Result<()> {
        let mut cost = Cost {
            lost_dp: self.old.sizes().dp.saturating_sub(self.layout.sizes().dp),
            ..Cost::default()
        };
        for c in &self.kinds {
            cost.new_communicators += c.new.len() as u64;
            cost.shrinks += c.shrunk.len() as u64;
            cost.kept += u64::from(c.kept);
        }
        let (a, b) = (self.old.sizes(), self.layout.sizes());
        let same_model = (a.tp, a.pp, a.ep, a.etp, a.gtp_remat, a.egtp_remat)
            == (b.tp, b.pp, b.ep, b.etp, b.gtp_remat, b.egtp_remat)
            && self.old.has_encoder() == self.layout.has_encoder();
        let (off, off2) = (self.old.rank_offset(), self.layout.rank_offset());
        for p in 0..self.map.len() {
            match self.map.fate(p) {
                Some(Fate::Idle) => cost.idle += 1,
                Some(Fate::Rank(n)) => {
                    let moved = if self.map.is_spare(p) || !same_model {
                        true
                    } else if p == n && self.old.world_size() == self.layout.world_size() {
                        false
                    } else {
                        let (x, y) = (
                            self.old.placement(p + off)?,
                            self.layout.placement(n + off2)?,
                        );
                        (
                            x.part,
                            x.coord.tp,
                            x.coord.pp,
                            x.gtp_remat,
                            x.expert.etp,
                            x.expert.ep,
                        ) != (
                            y.part,
                            y.coord.tp,
                            y.coord.pp,
                            y.gtp_remat,
                            y.expert.etp,
                            y.expert.ep,
                        )
                    };
                    cost.moved += u32::from(moved);
                }
                _ => {}
            }
        }
        self.cost = cost;
        Ok(())
    }
}
