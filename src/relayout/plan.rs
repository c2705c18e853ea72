//! The re-layout plan: the new layout, the rank map, every kind's changes
//! and what they cost.

use crate::cast::to_usize;
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
    /// Communicators to create: the `new` groups of every kind classified
    /// (a group of one process needs none: see
    /// [`KindChanges::alone`]).
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
    /// kept, shrunk or the process alone, or it has no new rank.
    /// [`fate_of`](Self::fate_of) says which, with the members.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a
    /// process that is not the plan's or a kind it did not classify; the
    /// new layout's error for a kind whose groups overlap (an encoder's
    /// fan-out `pp`, `embd`, ...: use [`split_in_round`](Self::split_in_round)).
    pub fn split(&self, p: u32, kind: Kind) -> Result<Option<Split>> {
        self.new_split(p, kind, |layout, rank| layout.split(rank, kind))
    }

    /// Like [`split`](Self::split), in split round `round` of `kind`
    /// (`0..layout().split_rounds(kind)`, as
    /// [`Layout::split_in_round`]): for a kind whose groups overlap, a
    /// process makes one split per round.
    ///
    /// # Errors
    /// As [`split`](Self::split); the new layout's error for a round out
    /// of range.
    pub fn split_in_round(&self, p: u32, kind: Kind, round: u32) -> Result<Option<Split>> {
        self.new_split(p, kind, |layout, rank| {
            layout.split_in_round(rank, kind, round)
        })
    }

    /// Process `p`'s split of the new layout by `split`, kept only when
    /// the group is new.
    fn new_split(
        &self,
        p: u32,
        kind: Kind,
        split: impl Fn(&Layout, u32) -> Result<Option<Split>>,
    ) -> Result<Option<Split>> {
        let changes = self.classified(p, kind)?;
        let Some(n) = self.map.new_rank(p) else {
            return Ok(None);
        };
        let s = split(&self.layout, n + self.layout.rank_offset())?;
        Ok(s.filter(|s| changes.is_new(s.color)))
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

    /// By process: whether its weight shard changes, for two layouts of
    /// one model shape: its position in its tensor, pipeline, expert,
    /// expert-tensor or weight-shard group, or its grid (encoder or
    /// decoder), differs. Read from the kinds' group tables, O(ranks) per
    /// kind.
    fn moved_shards(&self) -> Result<Vec<bool>> {
        const NONE: u32 = u32::MAX;
        let (old, new) = (&self.old, &self.layout);
        let (off, off2) = (old.rank_offset(), new.rank_offset());
        let mut moved = vec![false; to_usize(self.map.len())];
        let (enc, enc2) = (old.encoder_world_size(), new.encoder_world_size());
        for n in 0..new.world_size() {
            if let Some(p) = self.map.process(n) {
                if (p < enc) != (n < enc2) {
                    if let Some(m) = moved.get_mut(to_usize(p)) {
                        *m = true;
                    }
                }
            }
        }
        let mut key = vec![NONE; to_usize(self.map.old_world())];
        for kind in [Kind::TP, Kind::PP, Kind::EP, Kind::ETP, Kind::GTP_REMAT] {
            if !old.kinds().contains(&kind) || !new.kinds().contains(&kind) {
                continue;
            }
            key.fill(NONE);
            // Positions counted as u32s (`0u32..`): a group has at most as
            // many members as the layout has ranks.
            for group in &old.groups(kind)?.table()? {
                for (k, &r) in (0u32..).zip(group) {
                    if let Some(slot) = key.get_mut(to_usize(r - off)) {
                        if *slot == NONE {
                            *slot = k;
                        }
                    }
                }
            }
            for group in &new.groups(kind)?.table()? {
                for (k, &n) in (0u32..).zip(group) {
                    let Some(p) = self.map.process(n - off2) else {
                        continue;
                    };
                    if key.get(to_usize(p)).is_some_and(|&old_k| old_k != k) {
                        if let Some(m) = moved.get_mut(to_usize(p)) {
                            *m = true;
                        }
                    }
                }
            }
        }
        Ok(moved)
    }

    pub(crate) fn count_cost(&mut self) -> Result<()> {
        let mut cost = Cost {
            lost_dp: self.old.sizes().dp.saturating_sub(self.layout.sizes().dp),
            ..Cost::default()
        };
        let count = |len: usize| u64::try_from(len).unwrap_or(u64::MAX);
        for c in &self.kinds {
            cost.new_communicators += count(c.new.len());
            cost.shrinks += count(c.shrunk.len());
            cost.kept += u64::from(c.kept);
        }
        let (a, b) = (self.old.sizes(), self.layout.sizes());
        let same_model = (a.tp, a.pp, a.ep, a.etp, a.gtp_remat, a.egtp_remat)
            == (b.tp, b.pp, b.ep, b.etp, b.gtp_remat, b.egtp_remat)
            && self.old.has_encoder() == self.layout.has_encoder();
        let moved = if same_model {
            self.moved_shards()?
        } else {
            Vec::new()
        };
        for p in 0..self.map.len() {
            match self.map.fate(p) {
                Some(Fate::Idle) => cost.idle += 1,
                Some(Fate::Rank(_)) => {
                    let m = !same_model
                        || self.map.is_spare(p)
                        || moved.get(to_usize(p)).copied().unwrap_or(true);
                    cost.moved += u32::from(m);
                }
                _ => {}
            }
        }
        self.cost = cost;
        Ok(())
    }
}
