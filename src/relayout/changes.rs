//! One kind's groups before and after: kept, shrunk, new or gone.

use crate::cast::to_usize;
use std::collections::HashMap;

use crate::error::Result;
use crate::kind::Kind;
use crate::layout::Layout;
use crate::plan::table::GroupTable;
use crate::relayout::rank_map::RankMap;

/// A group of the new layout made by shrinking an old one: the old
/// group's communicator without the members `exclude` (their positions
/// in the old group, ascending). The members left keep their order, as
/// `ncclCommShrink` and `torch.distributed.shrink_group` give them, and
/// that order is the new group's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Shrink {
    /// The old group's number (its comm-split color in the old layout).
    pub old_color: u32,
    /// The new group's number (its color in the new layout).
    pub new_color: u32,
    /// The positions, in the old group, of the members left out: failed,
    /// or alive and out of the new layout.
    pub exclude: Vec<u32>,
}

/// How one kind's groups fare. Only the groups that change are listed,
/// so a plan is as large as the change, not as the job.
///
/// Every group of the new layout is counted once: kept, shrunk, new or
/// alone ([`groups`](Self::groups) is their sum).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct KindChanges {
    /// The kind.
    pub kind: Kind,
    /// Groups of the new layout that are an old group, with the same
    /// members in the same order: their communicator stays.
    pub kept: u32,
    /// Groups of the new layout that an old group's communicator shrinks
    /// to.
    pub shrunk: Vec<Shrink>,
    /// The new layout's groups that need a communicator of their own, by
    /// number (ascending): every member splits with color = the number
    /// and key = its position.
    pub new: Vec<u32>,
    /// The new layout's groups of one member that are no old group, by
    /// number (ascending): a process alone needs no communicator (MPI's
    /// `MPI_COMM_SELF`; in `torch.distributed`, a group of itself, made
    /// by itself alone), so they are neither new nor counted in
    /// [`Cost::new_communicators`](crate::relayout::Cost::new_communicators).
    pub alone: Vec<u32>,
    /// The old groups whose communicator has no use any more (ascending).
    pub gone: Vec<u32>,
}

impl KindChanges {
    /// The new layout's groups of the kind: kept, shrunk, new and alone.
    pub fn groups(&self) -> u32 {
        // Each list holds distinct group numbers of the new layout, which
        // are u32s: their lengths fit, and so does their sum (every group
        // is counted once).
        [self.shrunk.len(), self.new.len(), self.alone.len()]
            .into_iter()
            .fold(self.kept, |n, len| {
                n.saturating_add(u32::try_from(len).unwrap_or(u32::MAX))
            })
    }

    /// Whether new group `color` needs a communicator of its own.
    pub fn is_new(&self, color: u32) -> bool {
        self.new.binary_search(&color).is_ok()
    }

    /// Whether new group `color` is one process alone (no communicator
    /// to make).
    pub fn is_alone(&self, color: u32) -> bool {
        self.alone.binary_search(&color).is_ok()
    }

    /// The shrink that makes new group `color`, when it is shrunk.
    pub fn shrink_of(&self, color: u32) -> Option<&Shrink> {
        // `shrunk` is in new-group order (the classification walks the
        // new groups in order).
        self.shrunk
            .binary_search_by_key(&color, |s| s.new_color)
            .ok()
            .and_then(|i| self.shrunk.get(i))
    }
}

const NONE: u32 = u32::MAX;

/// Classifies `kind`'s groups of `new` against those of `old`, the
/// processes mapped by `map`. Time O(ranks); memory O(ranks) while it
/// runs, O(changed groups) after.
pub(crate) fn classify(
    old: &Layout,
    new: &Layout,
    map: &RankMap,
    kind: Kind,
) -> Result<KindChanges> {
    let off = old.rank_offset();
    let off2 = new.rank_offset();
    let before = old.groups(kind)?.table()?;
    let after = new.groups(kind)?.table()?;
    // Each old process's group and position; a kind whose groups overlap
    // (a rank in two) is matched by members only.
    let mut color_of = vec![NONE; to_usize(map.old_world())];
    let mut key_of = vec![NONE; to_usize(map.old_world())];
    let mut overlapping = false;
    // Group numbers and positions are counted as u32s by zipping with
    // `0u32..`: a kind has at most as many groups, and a group as many
    // members, as the layout has ranks, which fit a u32.
    for (c, group) in (0u32..).zip(before.iter()) {
        for (k, &r) in (0u32..).zip(group.iter()) {
            let p = to_usize(r - off);
            match (color_of.get_mut(p), key_of.get_mut(p)) {
                (Some(cs), Some(ks)) if *cs == NONE => {
                    *cs = c;
                    *ks = k;
                }
                _ => overlapping = true,
            }
        }
    }
    let by_members: HashMap<Vec<u32>, u32> = if overlapping {
        (0u32..)
            .zip(before.iter())
            .map(|(c, g)| (g.iter().map(|r| r - off).collect(), c))
            .collect()
    } else {
        HashMap::new()
    };
    let mut used = vec![false; before.len()];
    let mut changes = KindChanges {
        kind,
        kept: 0,
        shrunk: Vec::new(),
        new: Vec::new(),
        alone: Vec::new(),
        gone: Vec::new(),
    };
    let mut members = Vec::new();
    for (c2, group) in (0u32..).zip(after.iter()) {
        members.clear();
        members.extend(group.iter().map(|&n| map.process(n - off2).unwrap_or(NONE)));
        let found = if overlapping {
            by_members.get(&members).map(|&c| (c, None))
        } else {
            match_old(&members, &before, off, &color_of, &key_of, map)
        };
        match found {
            Some((c, exclude)) => {
                if let Some(u) = used.get_mut(to_usize(c)) {
                    *u = true;
                }
                match exclude {
                    None => changes.kept += 1,
                    Some(exclude) => changes.shrunk.push(Shrink {
                        old_color: c,
                        new_color: c2,
                        exclude,
                    }),
                }
            }
            None if members.len() == 1 => changes.alone.push(c2),
            None => changes.new.push(c2),
        }
    }
    changes.gone = (0u32..)
        .zip(&used)
        .filter(|&(_, &u)| !u)
        .map(|(c, _)| c)
        .collect();
    Ok(changes)
}

/// The old group that `members` (processes, in the new group's order)
/// keeps (`None` exclusions) or shrinks to (the positions left out).
fn match_old(
    members: &[u32],
    before: &GroupTable,
    off: u32,
    color_of: &[u32],
    key_of: &[u32],
    map: &RankMap,
) -> Option<(u32, Option<Vec<u32>>)> {
    let &first = members.first()?;
    let c = *color_of.get(to_usize(first))?;
    let old = before.get(to_usize(c))?;
    let mut last = None;
    for &p in members {
        if color_of.get(to_usize(p)) != Some(&c) {
            return None;
        }
        let k = *key_of.get(to_usize(p))?;
        if last.is_some_and(|l| k <= l) {
            return None;
        }
        last = Some(k);
    }
    if members.len() == old.len() {
        return Some((c, None));
    }
    // A shrink leaves out exactly the old members that leave the job
    // (failed, or alive without a new rank).
    let leaving: Vec<u32> = (0u32..)
        .zip(old.iter())
        .filter(|&(_, &r)| map.new_rank(r - off).is_none())
        .map(|(k, _)| k)
        .collect();
    (members.len() + leaving.len() == old.len()).then_some((c, Some(leaving)))
}
