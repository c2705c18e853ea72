//! Real communicators through `MPI_Comm_split` (feature `mpi`), and the
//! [`mpi`](https://docs.rs/mpi/0.8) crate (rsmpi) this crate is built
//! against, re-exported: `rank_layout::mpi::initialize()`,
//! `rank_layout::mpi::traits::*`, `rank_layout::mpi::topology::SimpleCommunicator`
//! are rsmpi's, so a launcher needs no second, possibly mismatched, `mpi`
//! dependency.
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
//! let layout = Layout::new(&Config { tp: 2, pp: 2, world_size: Some(size), ..Config::default() })?;
//! let comms = layout.split_all(&world)?; // every kind, one MPI_Comm_split per (kind, round)
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
mod rank;

use std::borrow::Cow;

pub use ::mpi::*;
pub use comms::{Communicators, GroupComm, Peer};
pub use rank::{from_mpi_rank, to_mpi_rank};

use ::mpi::topology::{Color, Communicator, SimpleCommunicator};

use crate::error::{self, Result};
use crate::kind::Kind;
use crate::layout::Layout;
use crate::plan::Resolved;
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

impl Layout {
    /// Checks, identically on every process, that `comm` holds the layout
    /// and that colors and keys fit an MPI `int`; returns this process's
    /// layout rank (`None` outside the layout).
    fn check_comm<C: Communicator>(&self, comm: &C) -> Result<Option<u32>> {
        let needed = self.rank_end();
        if needed > i32::MAX as u64 {
            return Err(error::Error::Overflow {
                what: format!("ranks {}..{needed} as MPI ints", self.rank_offset()),
            });
        }
        let size = comm.size();
        if i64::from(size) < needed as i64 {
            return Err(error::Error::CommTooSmall {
                size: i64::from(size),
                needed,
                first: self.rank_offset(),
            });
        }
        let rank = from_mpi_rank(comm.rank())?;
        Ok((rank >= self.rank_offset() && u64::from(rank) < needed).then_some(rank))
    }

    /// The communicator of this process's group of `kind` (collective over
    /// `comm`): one `MPI_Comm_split` with the color and key of
    /// [`comm_split`](Self::comm_split). `None` where the process has no group.
    ///
    /// # Errors
    /// The same on every process, before any communication:
    /// [`Error::CommTooSmall`](crate::Error::CommTooSmall), [`Error::OverlappingKind`](crate::Error::OverlappingKind) (use
    /// [`split_rounds`](Self::split_rounds) or [`split_all`](Self::split_all)),
    /// [`Error::KindNotInLayout`](crate::Error::KindNotInLayout), [`Error::Overflow`](crate::Error::Overflow) for a layout beyond MPI's `int`.
    pub fn split<C: Communicator>(
        &self,
        comm: &C,
        kind: Kind,
    ) -> Result<Option<SimpleCommunicator>> {
        let rank = self.check_comm(comm)?;
        let rounds = self.comm_split_rounds(kind)?;
        if rounds > 1 {
            return Err(error::Error::OverlappingKind {
                kind,
                rounds,
                instead: "split_rounds or split_all",
            });
        }
        let split = match rank {
            Some(rank) => self.comm_split(rank, kind)?,
            None => None,
        };
        split_once(comm, split)
    }

    /// Every communicator of this process's groups of `kind`, built in
    /// [`comm_split_rounds`](Self::comm_split_rounds) collective splits of
    /// disjoint groups; works for every kind (one round for a partition).
    ///
    /// # Errors
    /// The same on every process, before any communication:
    /// [`Error::CommTooSmall`](crate::Error::CommTooSmall), [`Error::KindNotInLayout`](crate::Error::KindNotInLayout), [`Error::Overflow`](crate::Error::Overflow).
    pub fn split_rounds<C: Communicator>(&self, comm: &C, kind: Kind) -> Result<Vec<GroupComm>> {
        let mut built = self.split_kinds(comm, &[kind])?;
        Ok(built.take(kind))
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
    pub fn split_all<C: Communicator>(&self, comm: &C) -> Result<Communicators> {
        self.split_kinds(comm, self.kinds())
    }

    /// Like [`split_all`](Self::split_all), for the kinds given only (each
    /// once, in the order given). Every process must pass the same kinds.
    ///
    /// # Errors
    /// As [`split_all`](Self::split_all), and [`Error::KindNotInLayout`](crate::Error::KindNotInLayout).
    pub fn split_kinds<C: Communicator>(&self, comm: &C, kinds: &[Kind]) -> Result<Communicators> {
        let rank = self.check_comm(comm)?;
        let mut plans: Vec<(Kind, Cow<'_, Resolved>)> = Vec::with_capacity(kinds.len());
        for kind in kinds {
            if !plans.iter().any(|(k, _)| k == kind) {
                plans.push((*kind, self.plan(*kind)?));
            }
        }
        let view = rank.map(|r| self.view(r)).transpose()?;
        let mut out = Vec::with_capacity(plans.len());
        for (kind, plan) in &plans {
            let solo = plan.plan.runs().iter().all(|run| run.len == 1);
            let mut comms = Vec::new();
            for round in 0..plan.rounds() {
                let split = view.as_ref().and_then(|v| plan.locate(v, round));
                let built = if solo {
                    split.map(|_| SimpleCommunicator::self_comm())
                } else {
                    split_once(comm, split)?
                };
                if let (Some(s), Some(c)) = (split, built) {
                    comms.push(GroupComm {
                        index: s.color,
                        key: s.key,
                        round,
                        group: plan.plan.group(s.color),
                        comm: c,
                    });
                }
            }
            comms.sort_by_key(|c| c.index);
            out.push((*kind, comms));
        }
        Ok(Communicators::new(rank, out))
    }
}
