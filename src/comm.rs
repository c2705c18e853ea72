//! Real communicators through `MPI_Comm_split` (feature `mpi`).
//!
//! Every process of a communicator calls the same split with the same
//! layout and kind (they are collective calls); a process's rank in that
//! communicator is its layout rank. Processes outside the layout, or in no
//! group of the kind, take part with MPI's undefined colour and get `None`.
//!
//! ```no_run
//! use mpi::traits::*;
//! use rank_layout::{Config, Kind, Layout};
//!
//! let universe = mpi::initialize().unwrap();
//! let world = universe.world();
//! let layout = Layout::new(&Config { tp: 2, world_size: Some(world.size() as u32), ..Config::default() })?;
//! if let Some(tp) = layout.split(&world, Kind::TP)? {
//!     assert_eq!(tp.size(), 2);
//! }
//! # Ok::<(), rank_layout::Error>(())
//! ```

use mpi::topology::{Color, Communicator, SimpleCommunicator};

use crate::{Error, Kind, Layout, Result};

/// A communicator of one group, as built by [`Layout::split_rounds`].
pub struct GroupComm {
    /// The group's index among the kind's groups.
    pub index: u32,
    /// This process's position in the group (its rank in `comm`).
    pub key: u32,
    /// The communicator.
    pub comm: SimpleCommunicator,
}

impl std::fmt::Debug for GroupComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupComm")
            .field("index", &self.index)
            .field("key", &self.key)
            .field("size", &self.comm.size())
            .finish()
    }
}

impl Layout {
    /// This process's rank in the layout, or `None` when `comm`'s rank is outside it.
    fn rank_in<C: Communicator>(&self, comm: &C) -> Option<u32> {
        let rank = u32::try_from(comm.rank()).ok()?;
        self.placement(rank).ok().map(|_| rank)
    }

    /// Checks, identically on every process, that colours and keys fit an MPI `int`.
    fn check_mpi_ints(&self) -> Result<()> {
        if self.world_size() > i32::MAX as u32
            || self.rank_offset() > i32::MAX as u32 - self.world_size()
        {
            return Err(Error::Overflow {
                what: format!(
                    "ranks {}..{} as MPI int colours",
                    self.rank_offset(),
                    u64::from(self.rank_offset()) + u64::from(self.world_size())
                ),
            });
        }
        Ok(())
    }

    fn split_once<C: Communicator>(
        &self,
        comm: &C,
        slot: Option<(u32, u32)>,
    ) -> Option<SimpleCommunicator> {
        // Colours and keys fit an int: checked by `check_mpi_ints`.
        let (color, key) = match slot {
            Some((index, key)) => (Color::with_value(index as i32), key as i32),
            None => (Color::undefined(), 0),
        };
        comm.split_by_color_with_key(color, key)
    }

    /// The communicator of this process's group of `kind` (collective over
    /// `comm`): one `MPI_Comm_split` with the colour and key of
    /// [`comm_split`](Self::comm_split). `None` where the process has no group.
    ///
    /// # Errors
    /// The same on every process, before any communication:
    /// [`Error::OverlappingKind`] (use [`split_rounds`](Self::split_rounds)),
    /// [`Error::KindNotInLayout`], [`Error::Overflow`] for a layout beyond MPI's `int`.
    pub fn split<C: Communicator>(
        &self,
        comm: &C,
        kind: Kind,
    ) -> Result<Option<SimpleCommunicator>> {
        self.check_mpi_ints()?;
        let rounds = self.comm_split_rounds(kind)?;
        if rounds > 1 {
            return Err(Error::OverlappingKind { kind, rounds });
        }
        let slot = match self.rank_in(comm) {
            Some(rank) => self.comm_split(rank, kind)?,
            None => None,
        };
        Ok(self.split_once(comm, slot))
    }

    /// Every communicator of this process's groups of `kind`, built in
    /// [`comm_split_rounds`](Self::comm_split_rounds) collective splits of
    /// disjoint groups; works for every kind (one round for a partition).
    ///
    /// # Errors
    /// The same on every process, before any communication:
    /// [`Error::KindNotInLayout`], [`Error::Overflow`].
    pub fn split_rounds<C: Communicator>(&self, comm: &C, kind: Kind) -> Result<Vec<GroupComm>> {
        self.check_mpi_ints()?;
        let rounds = self.comm_split_rounds(kind)?;
        let rank = self.rank_in(comm);
        let mut out = Vec::new();
        for round in 0..rounds {
            let slot = match rank {
                Some(rank) => self.comm_split_round(rank, kind, round)?,
                None => None,
            };
            if let (Some((index, key)), Some(comm)) = (slot, self.split_once(comm, slot)) {
                out.push(GroupComm { index, key, comm });
            }
        }
        Ok(out)
    }
}
