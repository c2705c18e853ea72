//! Dropping the data-parallel replicas that hold a failed rank.

use crate::error::Result;
use crate::layout::Layout;
use crate::relayout::assign::smaller::{batch_divides, with_dp};
use crate::relayout::assign::{Assigned, Job, no, replicas};

pub(crate) fn assign(job: &Job<'_>) -> Result<Assigned> {
    let old = job.layout;
    let dp = old.sizes().dp;
    let mut broken = vec![false; dp as usize];
    for &p in job.failed.iter().filter(|&&p| p < job.world) {
        let d = old.placement(p + job.offset)?.coord.dp;
        if let Some(b) = broken.get_mut(d as usize) {
            *b = true;
        }
    }
    let failed_replicas: Vec<u32> = (0..dp)
        .filter(|&d| broken.get(d as usize) == Some(&true))
        .collect();
    // Drop the replicas with a failed rank; when the grid left is not
    // valid (the expert grid's edp must stay whole), drop the aligned
    // blocks of b replicas that hold them, the smallest b that gives a
    // valid grid: a block is then a whole expert data-parallel lane, and
    // the expert groups of the other lanes stay.
    let min = job.options.min_dp.max(1);
    let mut choice = None;
    for b in (1..=dp).filter(|b| dp % b == 0) {
        let dropped: Vec<u32> = (0..dp)
            .filter(|&d| {
                let first = d / b * b;
                (first..first + b).any(|x| broken.get(x as usize) == Some(&true))
            })
            .collect();
        let dp2 = dp - dropped.len() as u32;
        if dp2 < min {
            break;
        }
        if let Some(new) = with_dp(old.config(), dp2) {
            choice = Some((new, dropped, b));
            break;
        }
    }
    let Some((new, dropped, block)) = choice else {
        let dp2 = dp - failed_replicas.len() as u32;
        if dp2 == 0 {
            return Err(no(format!(
                "every one of the {dp} data-parallel replicas holds a failed rank"
            )));
        }
        let e = Layout::new(&old.config().clone().dp(Some(dp2)).world_size(None))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        return Err(no(format!(
            "dropping replicas {} leaves dp {dp2}{}",
            list(&failed_replicas),
            if dp2 < min {
                format!(", below the minimum {min}")
            } else {
                format!(
                    ", not a valid grid, nor does dropping aligned blocks of them down to dp {min}: {e}"
                )
            }
        )));
    };
    let dp2 = dp - dropped.len() as u32;
    let mut notes = vec![format!(
        "replicas {} dropped: dp {dp} -> {dp2}",
        list(&dropped)
    )];
    if block > 1 {
        notes.push(format!(
            "dp {} is not a valid grid: the aligned blocks of {block} replicas holding a failed rank are dropped whole (their intact replicas wait)",
            dp - failed_replicas.len() as u32
        ));
    }
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
    replicas::fill(job, &new, &mut map, &dropped)?;
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
