//! Each policy's rank map and new layout.

mod drop_replica;
mod lanes;
mod next_grid;
mod replicas;
mod shift;
mod smaller;
mod spare;

use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::relayout::failure::Failure;
use crate::relayout::options::RelayoutOptions;
use crate::relayout::policy::Policy;
use crate::relayout::rank_map::RankMap;

/// The old job as a policy sees it: ranks counted from 0 (the layout's
/// rank minus its offset), then the spares.
pub(crate) struct Job<'a> {
    pub layout: &'a Layout,
    pub world: u32,
    pub offset: u32,
    /// Failed processes, sorted.
    pub failed: Vec<u32>,
    /// Spare processes (after `world`).
    pub spares: u32,
    pub failure: &'a Failure,
    pub options: &'a RelayoutOptions,
}

impl<'a> Job<'a> {
    pub fn new(
        layout: &'a Layout,
        failure: &'a Failure,
        options: &'a RelayoutOptions,
    ) -> Result<Job<'a>> {
        failure.check(layout)?;
        let world = layout.world_size();
        let offset = layout.rank_offset();
        let g = failure.gpus_per_node();
        let spares = failure
            .spares()
            .checked_mul(g)
            .filter(|s| s.checked_add(world).is_some())
            .ok_or_else(|| {
                no(format!(
                    "{} spare nodes of {g} GPUs after {world} ranks pass 2^32 ranks",
                    failure.spares()
                ))
            })?;
        let failed = failure.failed().iter().map(|r| r - offset).collect();
        Ok(Job {
            layout,
            world,
            offset,
            failed,
            spares,
            failure,
            options,
        })
    }

    /// A map of every process, the failed ones marked, the rest idle.
    pub fn blank_map(&self) -> RankMap {
        let mut map = RankMap::idle(self.world, self.spares);
        map.fail(&self.failed);
        map
    }

    /// Processes alive (the old job's survivors and the spares).
    pub fn alive(&self) -> u32 {
        // The failed processes are distinct processes of the job or its
        // spares (`Failure::check`): fewer than `world + spares`, a u32.
        let failed = u32::try_from(self.failed.len()).unwrap_or(u32::MAX);
        (self.world + self.spares).saturating_sub(failed)
    }
}

/// A policy's answer: the new layout, the map and what it noticed.
pub(crate) struct Assigned {
    pub layout: Layout,
    pub map: RankMap,
    pub notes: Vec<String>,
}

/// The new layout and rank map under `policy`.
pub(crate) fn assign(job: &Job<'_>, policy: Policy) -> Result<Assigned> {
    let assigned = match policy {
        Policy::DropReplica => drop_replica::assign(job)?,
        Policy::Spare => spare::assign(job)?,
        Policy::NextGrid => next_grid::assign(job)?,
        Policy::ShiftRanks => shift::assign(job, false)?,
        Policy::FillGaps => shift::assign(job, true)?,
    };
    Ok(assigned)
}

/// [`Error::NoRelayout`] with `problem`.
pub(crate) fn no(problem: String) -> Error {
    Error::NoRelayout { problem }
}
