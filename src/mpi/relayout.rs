//! A re-layout's communicators: the split plan of the surviving
//! communicator.

use std::fmt;

use ::mpi::topology::Communicator;

use crate::error::{Error, Result};
use crate::kind::Kind;
use crate::mpi::comms::GroupComm;
use crate::mpi::split_once;
use crate::relayout::{Fate, Relayout};
use crate::split::Split;

/// The communicators a process builds after a re-layout, by kind: the
/// groups it is in that are new or shrunk (none when its group is kept:
/// the old communicator stays, or when it has no new rank). A kind whose
/// groups overlap (an encoder's fan-out `pp`) may give several, one per
/// split round, in color order.
pub struct RelayoutCommunicators {
    /// This process's new rank, if it has one.
    pub rank: Option<u32>,
    /// By kind, in the plan's order: the communicators built.
    pub sets: Vec<(Kind, Vec<GroupComm>)>,
}

impl fmt::Debug for RelayoutCommunicators {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RelayoutCommunicators")
            .field("rank", &self.rank)
            .field(
                "sets",
                &self
                    .sets
                    .iter()
                    .map(|(k, c)| (*k, c.len()))
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Relayout {
    /// The split plan of the surviving communicator, run: one
    /// `MPI_Comm_split` of `survivors` per kind of the plan and split round
    /// of the new layout (one round but for an encoder's overlapping
    /// kinds), in the plan's order, where a process whose group is new
    /// **or shrunk** passes the
    /// new layout's color and key, and every other process (kept group,
    /// idle) MPI's undefined color. MPI without the fault-tolerance
    /// extension (ULFM's `MPI_Comm_shrink`) cannot shrink an old
    /// communicator that lost a member, so a shrunk group is split anew
    /// here; with NCCL or `torch.distributed`, shrink it instead.
    ///
    /// `survivors` holds every process that is not failed, in process order
    /// (after ULFM's `MPI_Comm_shrink` of the old world, or a split of it);
    /// `process` is the caller's process (its old rank minus the layout's
    /// offset, or a spare's number after the old world). Collective over
    /// `survivors`: every survivor calls it with the same plan. A
    /// communicator's `group` lists the new layout's ranks.
    ///
    /// # Errors
    /// The same on every process, before any communication:
    /// [`Error::NoRelayout`] when `survivors` does not hold exactly the
    /// plan's surviving processes, or `process` is failed or not one of
    /// the plan's; [`Error::Overflow`] when the new layout's ranks pass
    /// MPI's `int`.
    pub fn communicators<C: Communicator>(
        &self,
        survivors: &C,
        process: u32,
    ) -> Result<RelayoutCommunicators> {
        let map = self.rank_map();
        let alive = (0..map.len())
            .filter(|&p| map.fate(p) != Some(Fate::Failed))
            .count();
        if usize::try_from(survivors.size()).ok() != Some(alive) {
            return Err(Error::NoRelayout {
                problem: format!(
                    "the surviving communicator has {} processes and the plan {alive} survivors",
                    survivors.size()
                ),
            });
        }
        match map.fate(process) {
            None | Some(Fate::Failed) => {
                return Err(Error::NoRelayout {
                    problem: format!("process {process} is failed or not one of the plan's"),
                });
            }
            Some(_) => {}
        }
        let rank = map.new_rank(process);
        let new = self.layout();
        let off = new.rank_offset();
        // Alike on every survivor, before any split: the new ranks fit
        // MPI's int, and each kind's split rounds.
        if new.rank_end() > i32::MAX as u64 {
            return Err(Error::Overflow {
                what: format!(
                    "ranks {off}..{} as MPI ints",
                    new.rank_end().saturating_sub(1)
                ),
            });
        }
        let rounds = self
            .kinds()
            .iter()
            .map(|c| new.split_rounds(c.kind))
            .collect::<Result<Vec<u32>>>()?;
        let mut sets = Vec::with_capacity(self.kinds().len());
        for (changes, rounds) in self.kinds().iter().zip(rounds) {
            let kind = changes.kind;
            let mut built = Vec::new();
            for round in 0..rounds {
                let split: Option<Split> = match rank {
                    Some(n) => new.split_in_round(n + off, kind, round)?.filter(|s| {
                        changes.is_new(s.color)
                            || changes.shrunk.iter().any(|x| x.new_color == s.color)
                    }),
                    None => None,
                };
                if let (Some(s), Some(comm)) = (split, split_once(survivors, split)?) {
                    if let Some(group) = new.groups(kind)?.nth(s.color as usize) {
                        built.push(GroupComm {
                            color: s.color,
                            key: s.key,
                            round,
                            group,
                            comm,
                        });
                    }
                }
            }
            built.sort_by_key(|c| c.color);
            sets.push((kind, built));
        }
        Ok(RelayoutCommunicators { rank, sets })
    }
}
