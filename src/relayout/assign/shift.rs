//! The resiliency package's rank assignments: `ShiftRanks` and
//! `FillGaps`, then the world trimmed to a valid grid.

use crate::cast::to_usize;
use crate::error::Result;
use crate::relayout::assign::{Assigned, Job, no, smaller};

/// Under `fill` (`FillGaps`) the survivors past the new world take the
/// failed ranks' places below it, lowest first; else (`ShiftRanks`) every
/// survivor moves down by the failed ranks below it. Then the world is
/// trimmed to the largest valid grid of at most the old world.
pub(crate) fn assign(job: &Job<'_>, fill: bool) -> Result<Assigned> {
    let old = job.layout;
    let total = job.world + job.spares;
    let alive = job.alive();
    let mut rank = vec![u32::MAX; to_usize(total)];
    if fill {
        let mut gaps = job.failed.iter().copied().filter(|&f| f < alive);
        for p in 0..total {
            if job.failed.binary_search(&p).is_ok() {
                continue;
            }
            let r = if p < alive { Some(p) } else { gaps.next() };
            if let (Some(r), Some(slot)) = (r, rank.get_mut(to_usize(p))) {
                *slot = r;
            }
        }
    } else {
        let mut below = 0u32;
        for p in 0..total {
            if job.failed.binary_search(&p).is_ok() {
                below += 1;
            } else if let Some(slot) = rank.get_mut(to_usize(p)) {
                *slot = p - below;
            }
        }
    }
    let dp = old.sizes().dp;
    let model = if old.has_encoder() {
        1
    } else {
        job.world / dp.max(1)
    };
    let max_world = alive.min(job.world);
    let new = smaller::largest(old.config(), model, dp, max_world, job.options).ok_or_else(|| {
        no(format!(
            "no grid of the layout's shape with dp between {} and {dp} fits {alive} surviving ranks{}",
            job.options.min_dp,
            if job.options.global_batch.is_some() { " and divides the global batch" } else { "" }
        ))
    })?;
    let world2 = new.world_size();
    let mut map = job.blank_map();
    // Processes counted as u32s: the old world and its spares fit one.
    for (p, &r) in (0u32..).zip(&rank) {
        if r < world2 {
            map.assign(p, r);
        }
    }
    let notes = vec![format!(
        "{} survivor(s) renumbered; the world is trimmed to {world2} (dp {} -> {}), {} survivor(s) idle",
        alive,
        dp,
        new.sizes().dp,
        alive - world2
    )];
    Ok(Assigned {
        layout: new,
        map,
        notes,
    })
}
