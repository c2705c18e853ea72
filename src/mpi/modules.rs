//! Communicators of multi-module layouts: every module's dim sets and every
//! bridge's kinds, one `MPI_Comm_split` per dim set and round and per edge
//! and kind.

use std::fmt;

use ::mpi::topology::{Communicator, SimpleCommunicator};

use crate::error::Result;
use crate::modules::{BridgeKind, Modules};
use crate::mpi::{check_comm, split_once};
use crate::split::Split;

/// One communicator and this process's place in it.
pub struct SplitComm {
    /// The group's color and this process's key (its rank in `comm`).
    pub split: Split,
    /// The communicator.
    pub comm: SimpleCommunicator,
}

impl fmt::Debug for SplitComm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SplitComm")
            .field("split", &self.split)
            .field("size", &self.comm.size())
            .finish()
    }
}

/// A process's communicators of a [`Modules`], built by
/// [`Modules::communicators`].
#[derive(Debug)]
pub struct ModulesCommunicators {
    rank: Option<u32>,
    /// (module, dim set, communicator).
    modules: Vec<(String, String, Option<SplitComm>)>,
    /// (source, destination, kind, communicator).
    bridges: Vec<(String, String, BridgeKind, Option<SplitComm>)>,
}

impl ModulesCommunicators {
    /// This process's rank, or `None` outside the modules.
    pub fn rank(&self) -> Option<u32> {
        self.rank
    }

    /// This process's communicator of dim set `dims` in module `module`
    /// (`None`: not a rank of the module, or the dim set was not built).
    pub fn module(&self, module: &str, dims: &str) -> Option<&SplitComm> {
        self.modules
            .iter()
            .find(|(m, d, _)| m == module && d == dims)
            .and_then(|(_, _, c)| c.as_ref())
    }

    /// This process's communicator of `kind` on the edge `src -> dst`
    /// (`None`: not a member).
    pub fn bridge(&self, src: &str, dst: &str, kind: BridgeKind) -> Option<&SplitComm> {
        self.bridges
            .iter()
            .find(|(s, d, k, _)| s == src && d == dst && *k == kind)
            .and_then(|(_, _, _, c)| c.as_ref())
    }
}

impl Modules {
    /// This process's communicators (collective over `comm`): of each dim
    /// set of `dim_sets` in every module, one split per round of
    /// [`rounds`](Modules::rounds) (one in all for separate spans, one per
    /// module when colocated), and of every kind every edge builds, one
    /// split each, with the colors and keys of [`split`](Modules::split)
    /// and [`bridge_split`](Modules::bridge_split). Every process passes
    /// the same dim sets; processes outside the modules take part with the
    /// undefined color.
    ///
    /// # Errors
    /// The same on every process, before any communication: the errors of
    /// [`Modules::split`], [`Error::CommTooSmall`], [`Error::Overflow`]
    /// past MPI's `int`.
    ///
    /// [`Error::CommTooSmall`]: crate::Error::CommTooSmall
    /// [`Error::Overflow`]: crate::Error::Overflow
    pub fn communicators<C: Communicator>(
        &self,
        comm: &C,
        dim_sets: &[&str],
    ) -> Result<ModulesCommunicators> {
        let rank = check_comm(comm, self.rank_offset(), self.rank_end())?;
        let names: Vec<String> = self.names().map(str::to_owned).collect();
        // Every split first, so that an error comes before any split.
        let mut module_splits: Vec<(String, String, Option<Split>)> = Vec::new();
        for dims in dim_sets {
            // The same check on every process, wherever it is.
            self.split(self.rank_offset(), dims, 0)?;
            for round in 0..self.rounds() {
                let split = rank
                    .map(|r| self.split(r, dims, round))
                    .transpose()?
                    .flatten();
                let module = if self.is_colocated() {
                    names.get(round).cloned()
                } else {
                    rank.and_then(|r| self.module_of(r).ok().map(str::to_owned))
                };
                module_splits.push((module.unwrap_or_default(), (*dims).to_owned(), split));
            }
        }
        let mut bridge_splits = Vec::new();
        let edges: Vec<(String, String)> = self
            .edges()
            .map(|(s, d)| (s.to_owned(), d.to_owned()))
            .collect();
        for (s, d) in &edges {
            for kind in self.bridge_kinds(s, d)? {
                let split = rank
                    .map(|r| self.bridge_split(r, s, d, kind))
                    .transpose()?
                    .flatten();
                bridge_splits.push((s.clone(), d.clone(), kind, split));
            }
        }
        let built = |split: Option<Split>| -> Result<Option<SplitComm>> {
            let c = split_once(comm, split)?;
            Ok(split.zip(c).map(|(split, comm)| SplitComm { split, comm }))
        };
        let mut modules = Vec::with_capacity(module_splits.len());
        for (m, d, split) in module_splits {
            modules.push((m, d, built(split)?));
        }
        let mut bridges = Vec::with_capacity(bridge_splits.len());
        for (s, d, k, split) in bridge_splits {
            bridges.push((s, d, k, built(split)?));
        }
        Ok(ModulesCommunicators {
            rank,
            modules,
            bridges,
        })
    }
}
