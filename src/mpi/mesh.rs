//! A mesh's communicators: one `MPI_Comm_split` per dim set.

use crate::cast::to_usize;
use std::fmt;

use ::mpi::topology::{Communicator, SimpleCommunicator};

use crate::error::{Error, Result};
use crate::mesh::Mesh;
use crate::mpi::comms::GroupComm;
use crate::mpi::{check_comm, split_once};

/// A process's communicators of chosen dim sets of a [`Mesh`], built by
/// [`Mesh::communicators`]: at most one per dim set (the dim sets of a mesh
/// partition its ranks), none for a process outside the mesh.
pub struct MeshCommunicators {
    rank: Option<u32>,
    sets: Vec<(String, Option<GroupComm>)>,
}

impl fmt::Debug for MeshCommunicators {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeshCommunicators")
            .field("rank", &self.rank)
            .field("sets", &self.sets)
            .finish()
    }
}

impl MeshCommunicators {
    /// This process's rank in the mesh's communicator, or `None` outside the mesh.
    pub fn rank(&self) -> Option<u32> {
        self.rank
    }

    /// The dim sets built, as given, in order.
    pub fn dim_sets(&self) -> impl Iterator<Item = &str> + '_ {
        self.sets.iter().map(|(s, _)| s.as_str())
    }

    /// This process's communicator of the dim set `spec` (as given to
    /// [`Mesh::communicators`]); `None` outside the mesh.
    ///
    /// # Errors
    /// [`Error::UnknownName`] for a dim set that was not built.
    pub fn get(&self, spec: &str) -> Result<Option<&GroupComm>> {
        self.sets
            .iter()
            .find(|(s, _)| s == spec)
            .map(|(_, c)| c.as_ref())
            .ok_or_else(|| Error::UnknownName {
                what: "dim set",
                name: spec.to_owned(),
                place: "the communicators built".into(),
                known: self
                    .sets
                    .iter()
                    .map(|(s, _)| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

impl Mesh {
    /// This process's communicator of every dim set of `specs` (collective
    /// over `comm`): one `MPI_Comm_split` each, with the color and key of
    /// [`Mesh::split`], in the order given; every process passes the same
    /// specs. Processes outside the mesh take part with the undefined color.
    ///
    /// # Errors
    /// The same on every process, before any communication: the errors of
    /// [`Mesh::select`], [`Error::CommTooSmall`] when `comm` has fewer
    /// processes than `rank_offset + world_size`, [`Error::Overflow`] past
    /// MPI's `int`.
    pub fn communicators<C: Communicator>(
        &self,
        comm: &C,
        specs: &[&str],
    ) -> Result<MeshCommunicators> {
        let rank = check_comm(comm, self.rank_offset(), self.rank_end())?;
        let selections = specs
            .iter()
            .map(|s| self.select(s))
            .collect::<Result<Vec<_>>>()?;
        let mut sets = Vec::with_capacity(specs.len());
        for (spec, selection) in specs.iter().zip(selections) {
            let split = rank
                .map(|r| self.split_selected(r, selection))
                .transpose()?;
            let built: Option<SimpleCommunicator> = split_once(comm, split)?;
            let made = match (split, built) {
                (Some(s), Some(c)) => {
                    let group = self.groups_selected(selection)?.nth(to_usize(s.color));
                    group.map(|group| GroupComm {
                        color: s.color,
                        key: s.key,
                        round: 0,
                        group,
                        comm: c,
                    })
                }
                _ => None,
            };
            sets.push(((*spec).to_owned(), made));
        }
        Ok(MeshCommunicators { rank, sets })
    }
}
