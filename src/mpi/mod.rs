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
//! use rank_layout::mpi::prelude::*;
//! use rank_layout::*;
//!
//! let universe = rank_layout::mpi::initialize().expect("MPI initializes once");
//! let world = universe.world();
//! let size = rank_layout::mpi::from_mpi_rank(world.size())?;
//! let layout = Layout::new(&Config::new().tp(2).pp(2).world_size(Some(size)))?;
//! let mut comms = layout.communicators(&world)?; // every kind, one MPI_Comm_split per distinct member list
//! for next in comms.pipeline_next()? {
//!     next.comm.process_at_rank(next.rank).send(&[1.0f32][..]);
//! }
//! if let Some(tp) = comms.take_one(Kind::TP)? {
//!     let members: &Group = &tp.group; // the crate's Group: the prelude adds no other
//!     assert_eq!((tp.comm.size(), members.len()), (2, 2));
//! }
//! # Ok::<(), rank_layout::Error>(())
//! ```
//!
//! [`prelude`] holds rsmpi's traits without the name `Group` (MPI's trait
//! of that name stays in scope, unnamed), so `use rank_layout::*` beside
//! it names one `Group`, the crate's; `rank_layout::mpi::traits` is
//! rsmpi's module as it is.
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

/// rsmpi's traits (`rank_layout::mpi::traits`) for a glob import beside
/// `use rank_layout::*`: MPI's `Group` trait (of `MPI_Group` handles) is
/// in scope for its methods but not by name, so `Group` stays the crate's
/// group of ranks.
///
/// ```
/// use rank_layout::mpi::prelude::*;
/// use rank_layout::*;
/// fn members(g: &Group) -> usize { g.len() }
/// let layout = Layout::new(&Config::new().tp(2).world_size(Some(4)))?;
/// assert_eq!(members(&layout.groups(Kind::TP)?.nth(0).unwrap()), 2);
/// # Ok::<(), rank_layout::Error>(())
/// ```
pub mod prelude {
    pub use ::mpi::topology::Group as _;
    pub use ::mpi::traits::*;
    // Shadows the glob's `Group` (an explicit name wins over a glob's),
    // privately, so the prelude exports no `Group`: the point.
    #[allow(unused_imports, hidden_glob_reexports)]
    use crate::group::Group;
}
pub use ::mpi::environment::Universe;
pub use ::mpi::topology::{Communicator, SimpleCommunicator};
pub use ::mpi::{Rank, initialize, traits};
pub use comms::{Communicators, CommunicatorsIntoIter, GroupComm, Peer};
pub use mesh::MeshCommunicators;
pub use modules::{ModulesCommunicators, SplitComm};
pub use rank::{from_mpi_rank, to_mpi_rank};
pub use relayout::{Numbering, RelayoutCommunicators};
pub use reshard::{Exchanged, LocalTensor, RESHARD_TAG, reshard_buffers};

use crate::cast::to_usize;
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
    if end > u64::from(i32::MAX.unsigned_abs()) {
        return Err(error::Error::Overflow {
            what: format!("ranks {first}..{} as MPI ints", end.saturating_sub(1)),
        });
    }
    let size = comm.size();
    // A size is never negative; one that were would be too small.
    if u64::try_from(size).map_or(true, |s| s < end) {
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
    /// Kinds whose groups are the same member lists over the whole layout
    /// share one split: the later kinds' communicators are `MPI_Comm_dup`s
    /// of the first's, among the group's members only (decided from the
    /// layout, so alike on every process: each process lists the groups
    /// of every kind split once, time and memory O(ranks) per kind).
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
        let shared = shared_kinds(self, &chosen)?;
        let mut out: Vec<(Kind, Vec<GroupComm>)> = Vec::with_capacity(chosen.len());
        for ((kind, rounds, solo), like) in chosen.into_iter().zip(shared) {
            let mut comms = Vec::new();
            for round in 0..rounds {
                let split = match rank {
                    Some(r) => self.split_in_round(r, kind, round)?,
                    None => None,
                };
                // The same groups as an earlier kind: a process has one
                // of them here exactly when it had one there.
                let first = like
                    .and_then(|j| out.get(j))
                    .and_then(|(_, c): &(Kind, Vec<GroupComm>)| c.first());
                let built = if solo {
                    split.map(|_| SimpleCommunicator::self_comm())
                } else if like.is_some() {
                    first.map(|c| c.comm.duplicate())
                } else {
                    split_once(comm, split)?
                };
                if let (Some(s), Some(c)) = (split, built) {
                    let group = self.groups(kind)?.nth(to_usize(s.color));
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

/// For each kind of `chosen` (kind, split rounds, groups of one), the
/// earlier kind whose groups are the same member lists, in the same
/// order, over the whole layout (group numbers aside): its communicator
/// serves both. Only kinds split once and not of one member each. Time
/// O(ranks) per kind.
fn shared_kinds(layout: &Layout, chosen: &[(Kind, u32, bool)]) -> Result<Vec<Option<usize>>> {
    let mut seen: Vec<(usize, u64)> = Vec::new();
    let mut out = Vec::with_capacity(chosen.len());
    for (i, &(kind, rounds, solo)) in chosen.iter().enumerate() {
        if rounds != 1 || solo {
            out.push(None);
            continue;
        }
        let mine = partition(layout, kind)?;
        let hash = fnv_hash(&mine);
        let mut like = None;
        for &(j, h) in &seen {
            if h != hash {
                continue;
            }
            if let Some(&(other, _, _)) = chosen.get(j) {
                if partition(layout, other)? == mine {
                    like = Some(j);
                    break;
                }
            }
        }
        if like.is_none() {
            seen.push((i, hash));
        }
        out.push(like);
    }
    Ok(out)
}

/// Every group of `kind`, ordered by first member, each as its length and
/// its members: equal for two kinds exactly when their groups are.
fn partition(layout: &Layout, kind: Kind) -> Result<Vec<u32>> {
    let table = layout.groups(kind)?.table()?;
    let mut groups: Vec<&[u32]> = table.iter().collect();
    groups.sort_unstable_by_key(|g| g.first().copied());
    let mut out = Vec::with_capacity(table.members().len() + groups.len());
    for g in groups {
        // A group has at most as many members as the layout has ranks.
        out.push(u32::try_from(g.len()).unwrap_or(u32::MAX));
        out.extend_from_slice(g);
    }
    Ok(out)
}

/// FNV-1a of `values`.
fn fnv_hash(values: &[u32]) -> u64 {
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::default();
    for v in values {
        h.write_u32(*v);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::restriction)]
    use super::*;
    use crate::config::Config;

    /// tp 2, pp 2, dp 2, ep 2 (folded, 8 ranks): the 13 kinds of groups of
    /// more than one rank, each split once, hold 6 distinct member lists
    /// (tp = etp = tp-cp, dp = dp-cp = ep = ..., as Megatron-Core builds
    /// them), so 6 splits serve them.
    #[test]
    fn equal_kinds_share_a_split() {
        let layout = Layout::new(&Config::new().tp(2).pp(2).ep(2).world_size(Some(8))).unwrap();
        let chosen: Vec<(Kind, u32, bool)> = layout
            .kinds()
            .iter()
            .map(|&k| {
                let solo = layout.groups(k).unwrap().group_len() == Some(1);
                (k, layout.split_rounds(k).unwrap(), solo)
            })
            .filter(|&(_, rounds, solo)| rounds == 1 && !solo)
            .collect();
        let shared = shared_kinds(&layout, &chosen).unwrap();
        let split = shared.iter().filter(|s| s.is_none()).count();
        assert_eq!((chosen.len(), split), (13, 6));
        // Each kind shares with an earlier kind of the very same groups.
        for ((kind, _, _), like) in chosen.iter().zip(&shared) {
            if let Some(j) = like {
                let other = chosen[*j].0;
                let sets = |k: Kind| {
                    let mut v = layout.groups(k).unwrap().to_vecs();
                    v.sort();
                    v
                };
                assert_eq!(sets(*kind), sets(other), "{kind} with {other}");
            }
        }
    }
}
