//! One process's group of one kind after a re-layout: kept, shrunk, new
//! or alone, with its members ([`Relayout::fate_of`]).

use crate::cast::to_usize;
use crate::error::{Error, Result};
use crate::kind::Kind;
use crate::layout::{Layout, Membership};
use crate::relayout::changes::{KindChanges, Shrink};
use crate::relayout::plan::Relayout;

/// What a process does with the communicator of one of its groups.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Change {
    /// The old group number `old_color`'s communicator stays as it is:
    /// the same members in the same order.
    Kept {
        /// The old group's number (its color in the old layout).
        old_color: u32,
    },
    /// The old group's communicator shrinks to the new group: the
    /// [`Shrink`]'s `exclude` positions leave, the others keep their
    /// order (`ncclCommShrink`, `torch.distributed.shrink_group`; MPI
    /// without ULFM splits it anew).
    Shrunk(Shrink),
    /// A communicator of its own: every member splits the survivors with
    /// the membership's color and key.
    New,
    /// The process is its group's only member: no communicator to make
    /// (`MPI_COMM_SELF` is one).
    Alone,
}

impl Change {
    /// `kept`, `shrunk`, `new` or `alone`.
    pub fn name(&self) -> &'static str {
        match self {
            Change::Kept { .. } => "kept",
            Change::Shrunk(_) => "shrunk",
            Change::New => "new",
            Change::Alone => "alone",
        }
    }
}

/// One group of one process after a re-layout: what to do with its
/// communicator, and the group in the new layout (its color, the
/// process's key, the members as new ranks). Made by
/// [`Relayout::fate_of`] and [`Relayout::fates_of`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupFate {
    /// Kept, shrunk, new or alone.
    pub change: Change,
    /// The group in the new layout: its number (the split's color), the
    /// process's position (the key, its rank in the communicator) and
    /// the members, as ranks of the new layout.
    pub membership: Membership,
    /// The new layout's split round of the group (0 unless the kind's
    /// groups overlap, an encoder's fan-out `pp` or `embd`).
    pub round: u32,
}

impl Relayout {
    /// What becomes of process `process`'s group of `kind`, for a kind
    /// whose groups do not overlap: `None` when the process has no new
    /// rank (its [`Fate`](crate::relayout::Fate) in the rank map says
    /// why: idle or failed) or no group of the kind in the new layout
    /// (`embd` off the pipeline ends).
    ///
    /// One answer for one process: no need to combine the rank map, the
    /// new layout's split and the kind's changes.
    ///
    /// ```
    /// use rank_layout::relayout::{relayout, Change, Failure, Policy, RelayoutOptions};
    /// use rank_layout::{Config, Kind, Layout};
    /// // tp 2, pp 2, dp 4 (tp fastest, then dp): rank 3 fails, replica 1 is dropped.
    /// let layout = Layout::new(&Config::new().tp(2).pp(2).dp(4))?;
    /// let plan = relayout(&layout, &Failure::new(2, [3]), Policy::DropReplica, &RelayoutOptions::default())?;
    /// // Process 4 (replica 2) becomes rank 2: its tp group [4, 5] is kept as [2, 3].
    /// let tp = plan.fate_of(4, Kind::TP)?.unwrap();
    /// assert_eq!(tp.change, Change::Kept { old_color: 2 });
    /// assert_eq!((tp.membership.color, tp.membership.key, tp.membership.group.to_vec()), (1, 0, vec![2, 3]));
    /// // Its dp group [0, 2, 4, 6] shrinks to [0, 2, 4] without position 1.
    /// let dp = plan.fate_of(4, Kind::DP)?.unwrap();
    /// assert_eq!((dp.change.name(), dp.membership.group.to_vec()), ("shrunk", vec![0, 2, 4]));
    /// // Process 2, alive in the dropped replica, waits; process 99 is none of the plan's.
    /// assert_eq!(plan.fate_of(2, Kind::TP)?, None);
    /// assert!(plan.fate_of(99, Kind::TP).is_err());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`fates_of`](Self::fates_of), and [`Error::OverlappingKind`]
    /// when the process is in several groups of the kind.
    pub fn fate_of(&self, process: u32, kind: Kind) -> Result<Option<GroupFate>> {
        let mut fates = self.fates_of(process, kind)?;
        match fates.len() {
            0 | 1 => Ok(fates.pop()),
            n => Err(Error::OverlappingKind {
                kind,
                rounds: u32::try_from(n).unwrap_or(u32::MAX),
                instead: "Relayout::fates_of",
            }),
        }
    }

    /// What becomes of each of process `process`'s groups of `kind`, by
    /// split round of the new layout: none when it has no new rank or no
    /// group of the kind, one, or (where the kind's groups overlap) one
    /// per group. Time O(the groups' sizes).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a process that is not the plan's
    /// (at or past [`RankMap::len`](crate::relayout::RankMap::len)) or a
    /// kind the plan did not classify ([`RelayoutOptions::kinds`](crate::relayout::RelayoutOptions::kinds)).
    pub fn fates_of(&self, process: u32, kind: Kind) -> Result<Vec<GroupFate>> {
        let changes = self.classified(process, kind)?;
        let Some(n) = self.map.new_rank(process) else {
            return Ok(Vec::new());
        };
        let new = &self.layout;
        let rank = n + new.rank_offset();
        let mut out = Vec::new();
        for round in 0..new.split_rounds(kind)? {
            let Some(split) = new.split_in_round(rank, kind, round)? else {
                continue;
            };
            let Some(group) = new.groups(kind)?.nth(to_usize(split.color)) else {
                continue;
            };
            let membership = Membership {
                color: split.color,
                key: split.key,
                group,
            };
            let change = self.change(changes, process, &membership)?;
            out.push(GroupFate {
                change,
                membership,
                round,
            });
        }
        out.sort_by_key(|f| f.membership.color);
        Ok(out)
    }

    /// The changes of `kind`, after checking that `process` is the plan's.
    pub(crate) fn classified(&self, process: u32, kind: Kind) -> Result<&KindChanges> {
        if process >= self.map.len() {
            return Err(Error::InvalidArgument {
                name: "process".to_string(),
                value: format!("{process} (the plan has {})", self.map.len()),
                expected: "a process of the plan: an old rank less the layout's rank_offset, or a spare's after the old world",
            });
        }
        self.changes(kind).ok_or_else(|| Error::InvalidArgument {
            name: "kind".to_string(),
            value: kind.to_string(),
            expected: "a kind the plan classified (RelayoutOptions::kinds)",
        })
    }

    /// How `membership` (a new group of `process`) comes about.
    fn change(
        &self,
        changes: &KindChanges,
        process: u32,
        membership: &Membership,
    ) -> Result<Change> {
        let color = membership.color;
        if changes.is_new(color) {
            return Ok(Change::New);
        }
        if changes.is_alone(color) {
            return Ok(Change::Alone);
        }
        if let Some(shrink) = changes.shrink_of(color) {
            return Ok(Change::Shrunk(shrink.clone()));
        }
        // Kept: the old group of the process with the same members.
        let old = &self.old;
        let off2 = self.layout.rank_offset();
        let members: Vec<Option<u32>> = membership
            .group
            .iter()
            .map(|n| self.map.process(n - off2))
            .collect();
        // A spare (past the old world) had no old group.
        let olds = if process < self.map.old_world() {
            old.memberships(process + old.rank_offset(), changes.kind)?
        } else {
            Vec::new()
        };
        let kept = olds.into_iter().find(|m| same_members(old, m, &members));
        kept.map(|m| Change::Kept { old_color: m.color })
            .ok_or_else(|| Error::NoRelayout {
                problem: format!(
                    "{} group {color} of the new layout is neither new, alone, shrunk nor an old group of process {process}",
                    changes.kind
                ),
            })
    }
}

/// Whether old group `m`'s members, as processes, are `members`.
fn same_members(old: &Layout, m: &Membership, members: &[Option<u32>]) -> bool {
    let off = old.rank_offset();
    m.group.len() == members.len()
        && m.group
            .iter()
            .zip(members)
            .all(|(r, &p)| Some(r - off) == p)
}
