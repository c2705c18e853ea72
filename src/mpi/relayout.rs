//! A re-layout's communicators: the split plan of the surviving
//! processes.

use crate::cast::to_usize;
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

/// How a communicator given to [`Relayout::communicators`] numbers the
/// plan's processes (a process: an old rank less the old layout's
/// `rank_offset`, or a spare's number after the old world).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Numbering {
    /// The survivors' communicator: rank `i` is the plan's `i`-th process
    /// that is not failed, in process order (the old job's, then the
    /// spares'), as ULFM's `MPIX_Comm_shrink` of the old world leaves
    /// them or a relaunch of the survivors in that order makes them.
    Survivors,
    /// As the old layout's communicators: rank `rank_offset + p` is
    /// process `p`, the spares after the old world. The old world itself
    /// where the processes counted failed still run (a drill, or
    /// processes taken out of the job for a bad GPU); they take part with
    /// the undefined color and get none.
    OldLayout,
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
    /// `comm` holds the plan's processes as `numbering` says: the
    /// survivors' communicator ([`Numbering::Survivors`]), or one numbered
    /// as the old layout's communicators were, such as the old world
    /// where the processes counted failed still run
    /// ([`Numbering::OldLayout`]). Either may be larger than the plan's
    /// processes: the ranks past them take part with the undefined color
    /// and get none, as [`Layout::communicators`](crate::layout::Layout::communicators)
    /// treats the ranks past a layout. The numbering is the caller's
    /// word, never guessed from the size: a survivors' communicator with
    /// extra processes and an old world can have the same size.
    ///
    /// How to get the survivors' communicator after a real failure: a
    /// dead process cannot take part in `MPI_Comm_split`, so no split of
    /// the old world makes it. With ULFM (Open MPI 5 configured
    /// `--with-ft=ulfm` and run as `mpirun --with-ft ulfm`, or MPICH),
    /// `MPIX_Comm_shrink` of the old world gives it, the survivors in
    /// their old order. Without ULFM (Open MPI 4, which the tests run,
    /// ends the job when a process dies), relaunch the surviving
    /// processes (and the spares) in process order: the new
    /// `MPI_COMM_WORLD` is the survivors' communicator, and each process
    /// computes the same plan from the old layout and the failed ranks.
    ///
    /// ```no_run
    /// use rank_layout::mpi::prelude::*;
    /// use rank_layout::mpi::Numbering;
    /// use rank_layout::relayout::{relayout, Failure, Policy, RelayoutOptions};
    /// use rank_layout::*;
    ///
    /// let universe = rank_layout::mpi::initialize().expect("MPI initializes once");
    /// // Relaunched: the survivors of the old job of 8, in process order.
    /// let survivors = universe.world();
    /// let old = Layout::new(&Config::new().tp(2).pp(2).world_size(Some(8)))?;
    /// let plan = relayout(&old, &Failure::new(2, [3]), Policy::DropReplica, &RelayoutOptions::default())?;
    /// let comms = plan.communicators(&survivors, Numbering::Survivors)?;
    /// if let Some(p) = comms.process {
    ///     // Split anew: the new and shrunk groups (and MPI_COMM_SELF alone);
    ///     // a kept group keeps its old communicator (plan.fate_of says which).
    ///     for (kind, built) in &comms.sets {
    ///         println!("process {p}: {kind}: {} communicators", built.len());
    ///     }
    /// }
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// The same on every process, before any communication:
    /// [`Error::NoRelayout`] when `comm` has fewer processes than the
    /// plan's survivors ([`Numbering::Survivors`]) or than the old
    /// layout's `rank_offset` plus every process of the plan
    /// ([`Numbering::OldLayout`]); [`Error::Overflow`] when the new
    /// layout's ranks or the plan's processes pass MPI's `int`.
    pub fn communicators<C: Communicator>(
        &self,
        comm: &C,
        numbering: Numbering,
    ) -> Result<RelayoutCommunicators> {
        let process = self.process_of(comm, numbering)?;
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
    /// numbered as `numbering` says; `None` for a process counted failed
    /// or a rank past the plan's processes.
    fn process_of<C: Communicator>(&self, comm: &C, numbering: Numbering) -> Result<Option<u32>> {
        let map = self.rank_map();
        let off = self.old_layout().rank_offset();
        let every = u64::from(off) + u64::from(map.len());
        if every > u64::from(i32::MAX.unsigned_abs()) {
            return Err(Error::Overflow {
                what: format!("the plan's processes {off}..{every} as MPI ranks"),
            });
        }
        let size = u64::try_from(comm.size()).unwrap_or(0);
        let me = from_mpi_rank(comm.rank())?;
        let alive = |p: &u32| map.fate(*p) != Some(Fate::Failed);
        match numbering {
            Numbering::Survivors => {
                let survivors: Vec<u32> = (0..map.len()).filter(alive).collect();
                if size < u64::from(count(&survivors)) {
                    return Err(Error::NoRelayout {
                        problem: format!(
                            "the survivors' communicator has {size} processes and the plan {} survivors (its processes not failed: the old job's, then the spares')",
                            survivors.len()
                        ),
                    });
                }
                Ok(survivors.get(to_usize(me)).copied())
            }
            Numbering::OldLayout => {
                if size < every {
                    return Err(Error::NoRelayout {
                        problem: format!(
                            "a communicator numbered as the old layout has {size} processes and the plan needs {every} (rank_offset {off} + {} processes: the old job's, then the spares')",
                            map.len()
                        ),
                    });
                }
                Ok(me.checked_sub(off).filter(|p| *p < map.len() && alive(p)))
            }
        }
    }
}

/// How many processes a list holds: fewer than the plan's, a u32.
fn count(processes: &[u32]) -> u32 {
    u32::try_from(processes.len()).unwrap_or(u32::MAX)
}

/// The split of a group that needs one: new, or shrunk (split anew), of
/// more than one member.
fn to_split(f: &GroupFate) -> Option<Split> {
    let needs = matches!(f.change, Change::New | Change::Shrunk(_)) && f.membership.group.len() > 1;
    needs.then(|| f.membership.split())
}
