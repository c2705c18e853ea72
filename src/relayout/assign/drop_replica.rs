//! Dropping the data-parallel replicas that hold a failed rank.

use crate::error::Result;
use crate::layout::Layout;
use crate::relayout::assign::smaller::{batch_divides, with_dp};
use crate::relayout::assign::{Assigned, Job, no, replicas};
use crate::relayout::policy::Policy;

pub(crate) fn assign(job: &Job<'_>) -> Result<Assigned> {
    job.no_encoder(Policy::DropReplica)?;
    let old = job.layout;
    let dp = old.sizes().dp;
    let mut broken = vec![false; dp as usize];
    for &p in job.failed.iter().filter(|&&p| p < job.world) {
        let d = old.placement(p + job.offset)?.coord.dp;
        if let Some(b) = broken.get_mut(d as usize) {
            *b = true;
        }
    }
    let dropped: Vec<u32> = (0..dp)
        .filter(|&d| broken.get(d as usize) == Some(&true))
        .collect();
    let dp2 = dp - dropped.len() as u32;
    if dp2 == 0 {
        return Err(no(format!(
            "every one of the {dp} data-parallel replicas holds a failed rank"
        )));
    }
    if dp2 < job.options.min_dp {
        return Err(no(format!(
            "dropping replicas {dropped:?} leaves dp {dp2}, below the minimum {}",
            job.options.min_dp
        )));
    }
    // The grid may need fewer replicas still (the expert grid's edp must
    // stay whole): the last intact replicas then wait too.
    let Some((new, dp3)) = (job.options.min_dp.max(1)..=dp2)
        .rev()
        .find_map(|d| with_dp(old.config(), d).map(|l| (l, d)))
    else {
        let e = Layout::new(&old.config().clone().dp(Some(dp2)).world_size(None))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        return Err(no(format!(
            "dp {dp2} (replicas {} dropped) is not a valid grid, nor any smaller dp down to {}: {e}",
            list(&dropped),
            job.options.min_dp
        )));
    };
    let mut notes = vec![format!(
        "replicas {} dropped: dp {dp} -> {dp3}",
        list(&dropped)
    )];
    if dp3 < dp2 {
        notes.push(format!(
            "dp {dp2} is not a valid grid: {} more intact replica(s) wait, for dp {dp3}",
            dp2 - dp3
        ));
    }
    let dp2 = dp3;
    if let Some((global, micro)) = job.options.global_batch {
        if batch_divides(job.options, dp2) && batch_divides(job.options, dp) {
            notes.push(format!(
                "global batch {global} kept: gradient accumulation {} -> {} micro-batches of {micro}",
                global / (micro * dp),
                global / (micro * dp2)
            ));
        } else {
            notes.push(format!(
                "global batch {global} is not a multiple of micro-batch {micro} x dp {dp2}: gradient accumulation cannot keep it"
            ));
        }
    }
    let mut map = job.blank_map();
    replicas::fill(job, &new, &mut map)?;
    Ok(Assigned {
        layout: new,
        map,
        notes,
    })
}

fn list(ranks: &[u32]) -> String {
    ranks
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
