//! A process's communicators, built by [`Layout::communicators`].

use crate::cast::to_usize;
use std::fmt;

use ::mpi::Rank;
use ::mpi::topology::{Communicator, SimpleCommunicator};

use crate::error::{Error, Result};
use crate::group::Group;
use crate::kind::Kind;
use crate::mpi::rank::to_mpi_rank;

#[cfg(doc)]
use crate::layout::Layout;

/// The communicator of one group this process is in.
///
/// Its rank in `comm` is `key`, its position in the group (`MPI_Comm_split`
/// orders by key); `color` is the group's number among the kind's groups
/// (the split's color).
#[non_exhaustive]
pub struct GroupComm {
    /// The group's number among the kind's groups (the color).
    pub color: u32,
    /// This process's position in the group (the key, and its rank in `comm`).
    pub key: u32,
    /// The split round the communicator was built in (0 unless the kind's
    /// groups overlap).
    pub round: u32,
    /// The group's members, as ranks of the communicator that was split.
    pub group: Group,
    /// The communicator.
    pub comm: SimpleCommunicator,
}

impl GroupComm {
    /// The group's members, as ranks of the communicator that was split.
    pub fn world_ranks(&self) -> Vec<u32> {
        self.group.to_vec()
    }

    /// The process at position `i` of the group, as a peer in this
    /// communicator; `None` past the end.
    pub fn peer(&self, i: usize) -> Option<Peer<'_>> {
        let world_rank = self.group.get(i)?;
        let rank = to_mpi_rank(u32::try_from(i).ok()?).ok()?;
        Some(Peer {
            comm: &self.comm,
            rank,
            world_rank,
        })
    }
}

impl fmt::Debug for GroupComm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupComm")
            .field("color", &self.color)
            .field("key", &self.key)
            .field("round", &self.round)
            .field("group", &self.group)
            .field("size", &self.comm.size())
            .finish()
    }
}

/// Another process to talk to: a communicator and its rank there.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct Peer<'a> {
    /// The communicator to send or receive on.
    pub comm: &'a SimpleCommunicator,
    /// The peer's rank in `comm`.
    pub rank: Rank,
    /// The peer's rank in the communicator that was split.
    pub world_rank: u32,
}

impl fmt::Debug for Peer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Peer")
            .field("rank", &self.rank)
            .field("world_rank", &self.world_rank)
            .finish_non_exhaustive()
    }
}

/// Every communicator of one process, by kind, built by
/// [`Layout::communicators`] or [`Layout::communicators_of`].
///
/// A process outside the layout (its rank below `rank_offset` or at or past
/// `rank_offset + world_size`) took part in every split with MPI's
/// undefined color: its [`rank`](Communicators::rank) is `None` and it has
/// no communicators. A process in no group of a kind (`embd`, `pos-embd`
/// off the pipeline ends) has none of that kind; a process in several
/// (encoder + decoder fan-out or fan-in) has one per group, each built in
/// its own split round.
///
/// A kind whose groups all have one member is not split at all: each
/// member gets `MPI_COMM_SELF` (a communicator of one process). Kinds
/// whose groups are the same member lists over the whole layout (`tp`
/// and `etp` when `etp = tp`, `dp` and `dp-cp` when `cp = 1`, ...) share
/// one split: the first kind's communicator is split from the parent,
/// the others' are `MPI_Comm_dup`s of it, a call among the group's
/// members only.
///
/// Borrow a kind's communicators ([`get`](Self::get),
/// [`one`](Self::one)) or own them: [`take`](Self::take),
/// [`take_one`](Self::take_one), or every one by kind through
/// `into_iter`.
pub struct Communicators {
    rank: Option<u32>,
    kinds: Vec<(Kind, Vec<GroupComm>)>,
}

impl fmt::Debug for Communicators {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Communicators")
            .field("rank", &self.rank)
            .field("kinds", &self.kinds)
            .finish()
    }
}

impl Communicators {
    pub(crate) fn new(rank: Option<u32>, kinds: Vec<(Kind, Vec<GroupComm>)>) -> Communicators {
        Communicators { rank, kinds }
    }

    /// This process's rank in the layout, or `None` when it is outside it.
    pub fn rank(&self) -> Option<u32> {
        self.rank
    }

    /// The kinds built, in the order they were split.
    pub fn kinds(&self) -> impl Iterator<Item = Kind> + '_ {
        self.kinds.iter().map(|(k, _)| *k)
    }

    /// Every communicator, by kind.
    pub fn iter(&self) -> impl Iterator<Item = (Kind, &GroupComm)> + '_ {
        self.kinds
            .iter()
            .flat_map(|(k, comms)| comms.iter().map(move |c| (*k, c)))
    }

    /// This process's communicators of `kind`, by ascending color:
    /// none, one, or (where groups overlap) several.
    ///
    /// # Errors
    /// [`Error::KindNotBuilt`] when `kind` was not split.
    pub fn get(&self, kind: Kind) -> Result<&[GroupComm]> {
        self.kinds
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, comms)| comms.as_slice())
            .ok_or(Error::KindNotBuilt { kind })
    }

    /// This process's one communicator of `kind`, for a kind whose groups
    /// do not overlap; `None` when it is in no group.
    ///
    /// # Errors
    /// [`Error::KindNotBuilt`]; [`Error::OverlappingKind`] when the process
    /// is in several groups of the kind (use [`get`](Self::get)).
    pub fn one(&self, kind: Kind) -> Result<Option<&GroupComm>> {
        match self.get(kind)? {
            [] => Ok(None),
            [one] => Ok(Some(one)),
            many => Err(Error::OverlappingKind {
                kind,
                rounds: u32::try_from(many.len()).unwrap_or(u32::MAX),
                instead: "Communicators::get",
            }),
        }
    }

    /// Takes this process's communicators of `kind` out (by ascending
    /// color), to own them; the kind then answers as one not built.
    ///
    /// # Errors
    /// [`Error::KindNotBuilt`] when `kind` was not split (or was taken).
    pub fn take(&mut self, kind: Kind) -> Result<Vec<GroupComm>> {
        let i = self
            .kinds
            .iter()
            .position(|(k, _)| *k == kind)
            .ok_or(Error::KindNotBuilt { kind })?;
        Ok(self.kinds.remove(i).1)
    }

    /// Takes this process's one communicator of `kind` out, for a kind
    /// whose groups do not overlap; `None` when it is in no group.
    ///
    /// # Errors
    /// [`Error::KindNotBuilt`]; [`Error::OverlappingKind`] when the process
    /// is in several groups of the kind (use [`take`](Self::take)): then
    /// nothing is taken.
    pub fn take_one(&mut self, kind: Kind) -> Result<Option<GroupComm>> {
        self.one(kind)?;
        Ok(self.take(kind)?.pop())
    }

    fn neighbours(&self, forward: bool) -> Result<Vec<Peer<'_>>> {
        let mut out = Vec::new();
        for g in self.get(Kind::PP)? {
            let key = to_usize(g.key);
            let other = if forward {
                key.checked_add(1)
            } else {
                key.checked_sub(1)
            };
            if let Some(peer) = other.and_then(|i| g.peer(i)) {
                // Overlapping pipelines share the stages past the boundary:
                // each neighbour once, on the first pipeline that has it.
                if !out
                    .iter()
                    .any(|p: &Peer<'_>| p.world_rank == peer.world_rank)
                {
                    out.push(peer);
                }
            }
        }
        Ok(out)
    }

    /// The next pipeline stage(s): the communicator of a pipeline holding
    /// this process and the next stage's rank in it. One peer inside a
    /// pipeline, one per decoder rank fed at the encoder/decoder boundary
    /// (fan-out), none at the last stage. Where pipelines overlap past the
    /// boundary, each neighbour is listed once, on the first (lowest color)
    /// pipeline holding both; the ranks are those of
    /// [`Layout::pipeline_next`].
    ///
    /// # Errors
    /// [`Error::KindNotBuilt`] when `pp` was not split.
    pub fn pipeline_next(&self) -> Result<Vec<Peer<'_>>> {
        self.neighbours(true)
    }

    /// The previous pipeline stage(s), as [`pipeline_next`](Self::pipeline_next)
    /// (several at the boundary when encoder ranks fan in).
    ///
    /// # Errors
    /// [`Error::KindNotBuilt`] when `pp` was not split.
    pub fn pipeline_prev(&self) -> Result<Vec<Peer<'_>>> {
        self.neighbours(false)
    }
}

impl IntoIterator for Communicators {
    type Item = (Kind, GroupComm);
    type IntoIter = CommunicatorsIntoIter;

    /// Every communicator, owned, by kind in the order they were split.
    fn into_iter(self) -> CommunicatorsIntoIter {
        CommunicatorsIntoIter {
            kinds: self.kinds.into_iter(),
            current: None,
        }
    }
}

/// Every communicator of a [`Communicators`], owned, with its kind:
/// created by its `into_iter`.
#[must_use = "iterators are lazy and do nothing unless consumed"]
pub struct CommunicatorsIntoIter {
    kinds: std::vec::IntoIter<(Kind, Vec<GroupComm>)>,
    current: Option<(Kind, std::vec::IntoIter<GroupComm>)>,
}

impl fmt::Debug for CommunicatorsIntoIter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommunicatorsIntoIter")
            .field("left", &self.len())
            .finish()
    }
}

impl Iterator for CommunicatorsIntoIter {
    type Item = (Kind, GroupComm);

    fn next(&mut self) -> Option<(Kind, GroupComm)> {
        loop {
            if let Some((kind, comms)) = &mut self.current {
                if let Some(c) = comms.next() {
                    return Some((*kind, c));
                }
            }
            let (kind, comms) = self.kinds.next()?;
            self.current = Some((kind, comms.into_iter()));
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let now = self.current.as_ref().map_or(0, |(_, c)| c.len());
        let later: usize = self.kinds.as_slice().iter().map(|(_, c)| c.len()).sum();
        (now + later, Some(now + later))
    }
}

impl ExactSizeIterator for CommunicatorsIntoIter {}

impl std::iter::FusedIterator for CommunicatorsIntoIter {}
