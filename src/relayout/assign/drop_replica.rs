//! Dropping the data-parallel replicas that hold a failed rank, whole
//! expert data-parallel lanes at a time.

use crate::cast::to_usize;
use crate::error::Result;
use crate::layout::Layout;
use crate::relayout::assign::lanes::Lanes;
use crate::relayout::assign::smaller::{batch_divides, with_dp};
use crate::relayout::assign::{Assigned, Job, no, replicas};
use crate::relayout::rank_list::format_rank_list;

/// The replicas dropped and the new layout.
struct Choice {
    new: Layout,
    dropped: Vec<u32>,
}

pub(crate) fn assign(job: &Job<'_>) -> Result<Assigned> {
    let old = job.layout;
    let dp = old.sizes().dp;
    let mut broken = vec![false; to_usize(dp)];
    for &p in job.failed.iter().filter(|&&p| p < job.world) {
        let d = old.placement(p + job.offset)?.coord.dp;
        if let Some(b) = broken.get_mut(to_usize(d)) {
            *b = true;
        }
    }
    let failed_replicas: Vec<u32> = (0..dp)
        .filter(|&d| broken.get(to_usize(d)) == Some(&true))
        .collect();
    let min = job.options.min_dp.max(1);
    let lanes = Lanes::of(old)?;
    let mut notes = Vec::new();
    // Whole lanes: the lanes holding a failed rank, or, when the grid
    // left is not valid, the aligned blocks of c lanes holding one, for
    // the smallest c that gives a valid grid. No expert group of the
    // lanes left is cut, so no communicator is made.
    let by_lanes = first_valid(old, dp, min, divisors(lanes.len()), |c| {
        lanes.blocks_holding(c, &broken)
    });
    let choice = match by_lanes {
        Ok((choice, c)) => {
            let width = lanes.widest();
            if width > 1 {
                notes.push(format!(
                    "an expert data-parallel lane is {width} replicas (an expert group spans them): the lanes holding a failed rank are dropped whole, their intact replicas wait, and every expert group of the other lanes is kept"
                ));
            }
            if c > 1 {
                notes.push(format!(
                    "dp {} is not a valid grid: the aligned blocks of {c} {} holding a failed rank are dropped whole (their intact replicas wait)",
                    dp - count(&lanes.blocks_holding(1, &broken)),
                    if width > 1 { "lanes" } else { "replicas" }
                ));
            }
            choice
        }
        Err(why) => {
            // No whole lanes fit: aligned blocks of b replicas, the
            // smallest b dividing dp that gives a valid grid.
            let by_blocks = first_valid(old, dp, min, divisors(to_usize(dp)), |b| {
                aligned_blocks(dp, b, &broken)
            });
            let Ok((choice, b)) = by_blocks else {
                return Err(refusal(old, dp, min, &failed_replicas));
            };
            if !lanes.whole(&choice.dropped) {
                notes.push(format!(
                    "dropping whole expert data-parallel lanes ({} replicas each) {why}: the aligned blocks of {b} replicas holding a failed rank are dropped instead; they cut lanes, so the expert groups of the replicas left in a cut lane are made anew",
                    lanes.widest()
                ));
            } else if b > 1 {
                notes.push(format!(
                    "dp {} is not a valid grid: the aligned blocks of {b} replicas holding a failed rank are dropped whole (their intact replicas wait)",
                    dp - count(&failed_replicas)
                ));
            }
            choice
        }
    };
    let Choice { new, dropped } = choice;
    let dp2 = new.sizes().dp;
    notes.insert(
        0,
        format!(
            "replicas {} dropped: dp {dp} -> {dp2}",
            format_rank_list(&dropped)
        ),
    );
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

/// The first of `sizes` (ascending) whose dropped replicas, `drop(size)`,
/// leave a valid grid of at least `min` replicas: the choice and the
/// size; else why the first one failed (`leaves dp N, below the minimum
/// M` or `leaves dp N, not a valid grid: ...`).
fn first_valid(
    old: &Layout,
    dp: u32,
    min: u32,
    sizes: impl IntoIterator<Item = usize>,
    drop: impl Fn(usize) -> Vec<u32>,
) -> std::result::Result<(Choice, usize), String> {
    let mut why = None;
    for size in sizes {
        let dropped = drop(size);
        let dp2 = dp.saturating_sub(count(&dropped));
        if dp2 < min {
            why.get_or_insert_with(|| format!("leaves dp {dp2}, below the minimum {min}"));
            // A larger size need not drop more: blocks of 3 of 6 lanes
            // hold lanes 1 and 2 in one block, blocks of 2 in two.
            continue;
        }
        match with_dp(old.config(), dp2) {
            Some(new) => return Ok((Choice { new, dropped }, size)),
            None => {
                why.get_or_insert_with(|| format!("leaves dp {dp2}, not a valid grid"));
            }
        }
    }
    Err(why.unwrap_or_else(|| "leaves no valid grid".to_string()))
}

/// The replicas of the aligned blocks of `b` replicas that hold a broken
/// one, ascending.
fn aligned_blocks(dp: u32, b: usize, broken: &[bool]) -> Vec<u32> {
    let b = u32::try_from(b.max(1)).unwrap_or(u32::MAX);
    (0..dp)
        .filter(|&d| {
            let first = d / b * b;
            (first..first.saturating_add(b)).any(|x| broken.get(to_usize(x)) == Some(&true))
        })
        .collect()
}

/// The divisors of `n`, ascending.
fn divisors(n: usize) -> impl Iterator<Item = usize> {
    (1..=n).filter(move |b| n % b == 0)
}

/// How many replicas a list holds: at most dp, a u32.
fn count(replicas: &[u32]) -> u32 {
    u32::try_from(replicas.len()).unwrap_or(u32::MAX)
}

/// The error when no drop leaves a valid grid.
fn refusal(old: &Layout, dp: u32, min: u32, failed_replicas: &[u32]) -> crate::error::Error {
    let dp2 = dp - count(failed_replicas);
    if dp2 == 0 {
        return no(format!(
            "every one of the {dp} data-parallel replicas holds a failed rank"
        ));
    }
    let e = Layout::new(&old.config().clone().dp(Some(dp2)).world_size(None))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    no(format!(
        "dropping replicas {} leaves dp {dp2}{}",
        format_rank_list(failed_replicas),
        if dp2 < min {
            format!(", below the minimum {min}")
        } else {
            format!(
                ", not a valid grid, nor does dropping aligned blocks of them down to dp {min}: {e}"
            )
        }
    ))
}
