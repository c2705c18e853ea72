//! Real communicators through `MPI_Comm_split` (feature `mpi`), and the
//! [`mpi`](https://docs.rs/mpi/0.8) crate (rsmpi) this crate is built
//! against, re-exported: `rank_layout::mpi::initialize()`,
//! `rank_layout::mpi::traits::*`, [`SimpleCommunicator`], [`Communicator`],
//! [`Rank`] and [`Universe`] are rsmpi's (named re-exports of the types
//! this API uses), so a launcher needs no second, possibly mismatched,
//! `mpi` dependency.
//!
//! Every split is collective over the communicator: every process calls
//! the same function with the same layout and kinds. A process's rank in
//! the communicator is its layout rank. Before any collective call each
//! function checks the communicator against the layout (its size must
//! cover `rank_offset + world_size`, ranks must fit MPI's `int`); a
//! mismatch is the same error on every process, so no process is left
//! waiting in a collective the others never enter. Processes outside the
//! layout take part with MPI's undefined color and get no communicators.
//!
//! ```no_run
//! use rank_layout::mpi::traits::*;
//! use rank_layout::{Config, Kind, Layout};
//!
//! let universe = rank_layout::mpi::initialize().expect("MPI initializes once");
//! let world = universe.world();
//! let size = rank_layout::mpi::from_mpi_rank(world.size())?;
//! let layout = Layout::new(&Config::new().tp(2).pp(2).world_size(Some(size)))?;
//! let comms = layout.communicators(&world)?; // every kind, one MPI_Comm_split per (kind, round)
//! if let Some(tp) = comms.one(Kind::TP)? {
//!     assert_eq!(tp.comm.size(), 2);
//! }
//! for next in comms.pipeline_next()? {
//!     next.comm.process_at_rank(next.rank).send(&[1.0f32][..]);
//! }
//! # Ok::<(), rank_layout::Error>(())
//! ```
//!
//! See `examples/mpi_launcher.rs` for a launcher that builds and checks
//! every communicator, and [`Communicators`] for what each process gets.

mod comms;
mod mesh;
mod modules;
mod rank;
mod relayout;
mod reshard;

/// The rsmpi crate this module is built against, whole, for what a
/// launcher needs beyond the types above (collectives, environment).
pub use ::mpi as rsmpi;
pub use ::mpi::environment::Universe;
pub use ::mpi::topology::{Communicator, SimpleCommunicator};
pub use ::mpi::{Rank, initialize, traits};
pub use comms::{Communicators, GroupComm, Peer};
pub use mesh::MeshCommunicators;
pub use modules::{ModulesCommunicators, SplitComm};
pub use rank::{from_mpi_rank, to_mpi_rank};
pub use relayout::RelayoutCommunicators;
pub use reshard::{Exchanged, LocalTensor, RESHARD_TAG, reshard_buffers};

use ::mpi::topology::Color;

use crate::error::{self, Result};
use crate::kind::Kind;
use crate::layout::Layout;
use crate::split::Split;

/// `MPI_Comm_split` of `comm` with `split` (the undefined color for `None`);
/// the new communicator when this process is in a group.
fn split_once<C: Communicator>(
    comm: &C,
    split: Option<Split>,
) -> Result<Option<SimpleCommunicator>> {
    let (color, key) = match split {
        Some(s) => (
            Color::with_value(to_mpi_rank(s.color)?),
            to_mpi_rank(s.key)?,
        ),
        None => (Color::undefined(), 0),
    };
    Ok(comm.split_by_color_with_key(color, key))
}

/// Checks, identically on every process, that `comm` holds the ranks
/// `first..end` (end excluded) and that they fit an MPI `int`; returns this
/// process's rank when it is one of them.
pub(crate) fn check_comm<C: Communicator>(comm: &C, first: u32, end: u64) -> Result<Option<u32>> {
    if end > i32::MAX as u64 {
        return Err(error::Error::Overflow {
            what: format!("ranks {first}..{} as MPI ints", end.saturating_sub(1)),
        });
    }
    let size = comm.size();
    if i64::from(size) < end as i64 {
        return Err(error::Error::CommTooSmall {
            size: i64::from(size),
            needed: end,
            first,
            last: end.saturating_sub(1),
        });
    }
    let rank = from_mpi_rank(comm.rank())?;
    Ok((rank >= first && u64::from(rank) < end).then_some(rank))
}

impl Layout {
    /// The communicator of this process's group of `kind` (collective over
    /// `comm`): one `MPI_Comm_split` with the color and key of
    /// [`split`](Self::split). `None` where the process has no group.
    ///
    /// # Errors
    /// The same on every process, before any communication:
    /// [`Error::CommTooSmall`](crate::Error::CommTooSmall), [`Error::OverlappingKind`](crate::Error::OverlappingKind) (use
    /// [`communicators_of`](Self::communicators_of)),
    /// [`Error::KindNotInLayout`](crate::Error::KindNotInLayout), [`Error::Overflow`](crate::Error::Overflow) for a layout beyond MPI's `int`.
    pub fn communicator<C: Communicator>(
        &self,
        comm: &C,
        kind: Kind,
    ) -> Result<Option<SimpleCommunicator>> {
        let rank = check_comm(comm, self.rank_offset(), self.rank_end())?;
        let rounds = self.split_rounds(kind)?;
        if rounds > 1 {
            return Err(error::Error::OverlappingKind {
                kind,
                rounds,
                instead: "communicators_of",
            });
        }
        let split = match rank {
            Some(rank) => self.split(rank, kind)?,
            None => None,
        };
        split_once(comm, split)
    }

    /// Every communicator of this process, for every kind of the layout:
    /// one `MPI_Comm_split` per kind and split round (none for a kind whose
    /// groups all have one member), all processes in the same order.
    /// Collective over `comm`.
    ///
    /// # Errors
    /// The same on every process, before any communication:
    /// [`Error::CommTooSmall`](crate::Error::CommTooSmall) when `comm` has fewer processes than
    /// `rank_offset + world_size`; [`Error::Overflow`](crate::Error::Overflow) for a layout beyond
    /// MPI's `int`.
    pub fn communicators<C: Communicator>(&self, comm: &C) -> Result<Communicators> {
        self.communicators_of(comm, self.kinds())
    }

    /// Like [`communicators`](Self::communicators), for the kinds given only (each
    /// once, in the order given). Every process must pass the same kinds.
    ///
    /// # Errors
    /// As [`communicators`](Self::communicators), and [`Error::KindNotInLayout`](crate::Error::KindNotInLayout).
    pub fn communicators_of<C: Communicator>(
        &self,
        comm: &C,
        kinds: &[Kind],
    ) -> Result<Communicators> {
        let rank = check_comm(comm, self.rank_offset(), self.rank_end())?;
        let mut chosen: Vec<(Kind, u32, bool)> = Vec::with_capacity(kinds.len());
        for kind in kinds {
            if !chosen.iter().any(|(k, _, _)| k == kind) {
                let groups = self.groups(*kind)?;
                let solo = groups.group_len() == Some(1);
                chosen.push((*kind, self.split_rounds(*kind)?, solo));
            }
        }
        let mut out = Vec::with_capacity(chosen.len());
        for (kind, rounds, solo) in chosen {
            let mut comms = Vec::new();
            for round in 0..rounds {
                let split = match rank {
                    Some(r) => self.split_in_round(r, kind, round)?,
                    None => None,
                };
                let built = if solo {
                    split.map(|_| SimpleCommunicator::self_comm())
                } else {
                    split_once(comm, split)?
                };
                if let (Some(s), Some(c)) = (split, built) {
                    let group = self.groups(kind)?.nth(s.color as usize);
                    if let Some(group) = group {
                        comms.push(GroupComm {
                            color: s.color,
                            key: s.key,
                            round,
                            group,
                            comm: c,
                        });
                    }
                }
            }
            comms.sort_by_key(|c| c.color);
            out.push((kind, comms));
        }
        Ok(Communicators::new(rank, out))
    }
}
