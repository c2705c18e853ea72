//! A re-layout's communicators: the split plan of the surviving
//! processes.

use std::fmt;

use ::mpi::topology::{Communicator, SimpleCommunicator};

use crate::error::{Error, Result};
use crate::kind::Kind;
use crate::mpi::comms::GroupComm;
use crate::mpi::rank::from_mpi_rank;
use crate::mpi::split_once;
use crate::relayout::{Change, Fate, GroupFate, Relayout};
use crate::split::Split;

/// The communicators a process builds after a re-layout, by kind: one
/// for each of its groups that is new or shrunk (split anew), or that it
/// is alone in (`MPI_COMM_SELF`); none where its group is kept (the old
/// communicator stays: [`Relayout::fate_of`] names it) or it has no new
/// rank. A kind whose groups overlap (an encoder's fan-out `pp`) may give
/// several, one per split round, in color order.
#[non_exhaustive]
pub struct RelayoutCommunicators {
    /// The caller's process in the plan (its old rank less the layout's
    /// offset, or a spare's number after the old world); `None` for a
    /// process the plan counts failed, or that is not the plan's.
    pub process: Option<u32>,
    /// This process's new rank, if it has one.
    pub rank: Option<u32>,
    /// By kind, in the plan's order: the communicators built.
    pub sets: Vec<(Kind, Vec<GroupComm>)>,
}

impl fmt::Debug for RelayoutCommunicators {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RelayoutCommunicators")
            .field("process", &self.process)
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

impl RelayoutCommunicators {
    /// This process's communicators of `kind` (empty: none built), or
    /// `None` for a kind the plan did not classify.
    pub fn get(&self, kind: Kind) -> Option<&[GroupComm]> {
        self.sets
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, c)| c.as_slice())
    }
}

impl Relayout {
    /// The split plan of the surviving processes, run (collective over
    /// `comm`): for every kind of the plan and split round of the new
    /// layout, in the plan's order, one `MPI_Comm_split` where the plan
    /// has new or shrunk groups of the kind (none where every group is
    /// kept or alone). A process whose group is new **or shrunk** passes
    /// the new layout's color and key, every other process (kept group,
    /// alone, idle, failed, not the plan's) MPI's undefined color; a
    /// process alone in its group gets `MPI_COMM_SELF`, with no split.
    /// MPI without the fault-tolerance extension (ULFM) cannot shrink an
    /// old communicator that lost a member, so a shrunk group is split
    /// anew here; with NCCL or `torch.distributed`, shrink it instead
    /// ([`fate_of`](Self::fate_of) gives the positions to exclude). A
    /// communicator's `group` lists the new layout's ranks.
    ///
    /// `comm` is either
    /// - **the survivors' communicator**: exactly the plan's processes
    ///   that are not failed, in process order (rank `i` is the `i`-th
    ///   survivor, the old job's ranks first, then the spares); or
    /// - **a communicator of every process of the plan**, at least the
    ///   old layout's `rank_offset` plus [`RankMap::len`](crate::relayout::RankMap::len)
    ///   processes, numbered as the old layout's communicators were
    ///   (rank `rank_offset + p` is process `p`, the spares after the old
    ///   world): the old world itself where the processes counted failed
    ///   are still running (a drill, or processes taken out of the job
    ///   for a bad GPU). The processes counted failed, and the ranks past
    ///   the plan's, take part with the undefined color and get none.
    ///
    /// How to get the survivors' communicator after a real failure: a
    /// dead process cannot take part in `MPI_Comm_split`, so no split of
    /// the old world makes it. With ULFM (Open MPI 5 built with
    /// `--with-ft=ulfm`, MPICH), `MPIX_Comm_shrink` of the old world
    /// gives it, survivors in their old order. Without ULFM (Open MPI 4,
    /// which the tests run, ends the job when a process dies), relaunch
    /// the surviving processes (and the spares) in process order: the new
    /// `MPI_COMM_WORLD` is the survivors' communicator, and each process
    /// computes the same plan from the old layout and the failed ranks.
    ///
    /// # Errors
    /// The same on every process, before any communication:
    /// [`Error::NoRelayout`] when `comm`'s size is neither the plan's
    /// survivors nor at least every process of the plan;
    /// [`Error::Overflow`] when the new layout's ranks or the plan's
    /// processes pass MPI's `int`.
    pub fn communicators<C: Communicator>(&self, comm: &C) -> Result<RelayoutCommunicators> {
        let process = self.process_of(comm)?;
        let rank = process.and_then(|p| self.rank_map().new_rank(p));
        let new = self.layout();
        // Alike on every process, before any split: the new ranks fit
        // MPI's int, and each kind's split rounds.
        if new.rank_end() > u64::from(i32::MAX.unsigned_abs()) {
            return Err(Error::Overflow {
                what: format!(
                    "ranks {}..{} as MPI ints",
                    new.rank_offset(),
                    new.rank_end().saturating_sub(1)
                ),
            });
        }
        let mut plans = Vec::with_capacity(self.kinds().len());
        for changes in self.kinds() {
            let kind = changes.kind;
            let rounds = new.split_rounds(kind)?;
            let fates = match process {
                Some(p) => self.fates_of(p, kind)?,
                None => Vec::new(),
            };
            // Decided from the plan alone: the same on every process.
            let splits = !changes.new.is_empty() || !changes.shrunk.is_empty();
            plans.push((kind, rounds, splits, fates));
        }
        let mut sets = Vec::with_capacity(plans.len());
        for (kind, rounds, splits, fates) in plans {
            let mut built = Vec::new();
            for round in 0..rounds {
                let mine = fates.iter().find(|f| f.round == round);
                let split = mine.and_then(to_split);
                let comm = if splits {
                    split_once(comm, split)?
                } else {
                    None
                };
                // Alone, or shrunk to itself: no peer to split with.
                let alone = mine.filter(|f| {
                    f.membership.group.len() == 1 && !matches!(f.change, Change::Kept { .. })
                });
                let comm = comm.or_else(|| alone.map(|_| SimpleCommunicator::self_comm()));
                if let (Some(f), Some(comm)) = (mine, comm) {
                    built.push(GroupComm {
                        color: f.membership.color,
                        key: f.membership.key,
                        round,
                        group: f.membership.group.clone(),
                        comm,
                    });
                }
            }
            built.sort_by_key(|c| c.color);
            sets.push((kind, built));
        }
        Ok(RelayoutCommunicators {
            process,
            rank,
            sets,
        })
    }

    /// The process of the caller in the plan, from its rank in `comm`
    /// (the survivors', or every process's numbered as the old layout).
    fn process_of<C: Communicator>(&self, comm: &C) -> Result<Option<u32>> {
        let map = self.rank_map();
        let survivors: Vec<u32> = (0..map.len())
            .filter(|&p| map.fate(p) != Some(Fate::Failed))
            .collect();
        let off = self.old_layout().rank_offset();
        let every = u64::from(off) + u64::from(map.len());
        if every > u64::from(i32::MAX.unsigned_abs()) {
            return Err(Error::Overflow {
                what: format!("the plan's processes {off}..{every} as MPI ranks"),
            });
        }
        let size = u64::try_from(comm.size()).unwrap_or(0);
        let me = from_mpi_rank(comm.rank())?;
        if usize::try_from(size).ok() == Some(survivors.len()) {
            return Ok(survivors.get(me as usize).copied());
        }
        if size >= every {
            let p = me
                .checked_sub(off)
                .filter(|&p| p < map.len() && map.fate(p) != Some(Fate::Failed));
            return Ok(p);
        }
        Err(Error::NoRelayout {
            problem: format!(
                "the communicator has {size} processes: give the plan's {} survivors alone, in process order, or a communicator of at least its {every} processes (rank_offset {off} + {} processes: the old job's, then the spares')",
                survivors.len(),
                map.len()
            ),
        })
    }
}

/// The split of a group that needs one: new, or shrunk (split anew), of
/// more than one member.
fn to_split(f: &GroupFate) -> Option<Split> {
    let needs = matches!(f.change, Change::New | Change::Shrunk(_)) && f.membership.group.len() > 1;
    needs.then(|| f.membership.split())
}
