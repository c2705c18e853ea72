//! Filling a grid with fewer data-parallel replicas: intact replicas keep
//! their place, broken ones are refilled position by position.

use std::collections::{BTreeMap, VecDeque};

use crate::coord::{Coord, Part};
use crate::error::Result;
use crate::layout::Layout;
use crate::relayout::assign::{Job, no};
use crate::relayout::rank_map::RankMap;

/// Gives the ranks of `new` (the old layout's shape with `dp2` <= `dp`
/// replicas) to the processes of `map`, the replicas `dropped` counted as
/// broken with those holding a failed rank:
///
/// 1. when the intact replicas (no failed rank) are at least `dp2`, the
///    first `dp2` of them become replicas `0, 1, ...` in order, every rank
///    at its coordinates; else every intact replica below `dp2` keeps its
///    number and those above take the broken replicas' numbers below
///    `dp2`, lowest first;
/// 2. each replica still empty is filled position by position (a position
///    is a rank's coordinates but `dp`) from the survivors of the broken
///    replicas at that position, lowest replica first;
/// 3. the places still empty take the processes left (survivors of other
///    positions, unused replicas, then the spares), in process order.
///
/// Returns how many places step 3 filled.
///
/// # Errors
/// [`Error::NoRelayout`](crate::Error::NoRelayout) when the processes
/// alive cannot fill the new grid.
pub(crate) fn fill(job: &Job<'_>, new: &Layout, map: &mut RankMap, dropped: &[u32]) -> Result<u32> {
    let old = job.layout;
    let dp = old.sizes().dp;
    let dp2 = new.sizes().dp;
    let off = job.offset;
    let mut broken = vec![false; dp as usize];
    for &p in job.failed.iter().filter(|&&p| p < job.world) {
        let d = old.placement(p + off)?.coord.dp;
        if let Some(b) = broken.get_mut(d as usize) {
            *b = true;
        }
    }
    for &d in dropped {
        if let Some(b) = broken.get_mut(d as usize) {
            *b = true;
        }
    }
    // The new replica of each intact old replica. When they are enough,
    // the first dp2 of them, in order (the data-parallel groups shrink);
    // else each keeps its place below dp2, those above fill the broken
    // places, and the places left are refilled position by position.
    let intact: Vec<u32> = (0..dp)
        .filter(|&d| broken.get(d as usize) == Some(&false))
        .collect();
    let mut slot_of = vec![None; dp as usize];
    let mut refill = Vec::new();
    if intact.len() as u32 >= dp2 {
        for (s, &d) in intact.iter().take(dp2 as usize).enumerate() {
            if let Some(x) = slot_of.get_mut(d as usize) {
                *x = Some(s as u32);
            }
        }
    } else {
        let mut holes = (0..dp2).filter(|&d| broken.get(d as usize) == Some(&true));
        for &d in &intact {
            let s = if d < dp2 { Some(d) } else { holes.next() };
            if let Some(x) = slot_of.get_mut(d as usize) {
                *x = s;
            }
        }
        refill.extend(holes);
    }
    let refilling = !refill.is_empty();
    // The dense grid is a mixed radix: rank = inner + s * (d + dp * outer),
    // with s the stride of dp; so is the new one, with the same s.
    let s = dp_stride(old)?;
    if dp2 > 1 && dp_stride(new)? != s {
        return Err(no(format!(
            "the new grid's data-parallel stride differs from the old one's ({s})"
        )));
    }
    let split = |p: u32| (p % s, (p / s) % dp, p / (s * dp));
    let place = |inner: u32, slot: u32, outer: u32| inner + s * (slot + dp2 * outer);
    // One pass over the old ranks: intact replicas placed, broken ones'
    // survivors queued by position (their rank in replica 0).
    let mut queues: BTreeMap<u32, VecDeque<u32>> = BTreeMap::new();
    for p in 0..job.world {
        if !map.is_free(p) {
            continue;
        }
        let (inner, d, outer) = split(p);
        match slot_of.get(d as usize).copied().flatten() {
            Some(slot) => map.assign(p, place(inner, slot, outer)),
            None if refilling && broken.get(d as usize) == Some(&true) => {
                queues
                    .entry(inner + s * dp * outer)
                    .or_default()
                    .push_back(p);
            }
            None => {}
        }
    }
    let mut holes = Vec::new();
    let outers = job.world / (s * dp);
    for &slot in &refill {
        for outer in 0..outers {
            for inner in 0..s {
                let n = place(inner, slot, outer);
                match queues
                    .get_mut(&(inner + s * dp * outer))
                    .and_then(VecDeque::pop_front)
                {
                    Some(p) => map.assign(p, n),
                    None => holes.push(n),
                }
            }
        }
    }
    let filled = holes.len() as u32;
    let free: Vec<u32> = (0..map.len())
        .filter(|&p| map.is_free(p))
        .take(holes.len())
        .collect();
    let mut free = free.into_iter();
    for n in holes {
        match free.next() {
            Some(p) => map.assign(p, n),
            None => {
                return Err(no(format!(
                    "{} processes are alive and the grid of dp {dp2} needs {}",
                    job.alive(),
                    new.world_size()
                )));
            }
        }
    }
    Ok(filled)
}

/// The stride of `dp` in `layout`'s rank numbering (ranks counted from its
/// offset): the rank of coordinate dp = 1, the others 0; checked against
/// the rank of dp = dp - 1.
fn dp_stride(layout: &Layout) -> Result<u32> {
    let dp = layout.sizes().dp;
    if dp < 2 {
        return Ok(layout.world_size().max(1));
    }
    let off = layout.rank_offset();
    let at = |d: u32| {
        layout.rank(
            Part::Decoder,
            Coord {
                dp: d,
                ..Coord::default()
            },
        )
    };
    let s = at(1)? - off;
    if at(dp - 1)? - off != s * (dp - 1) || s == 0 {
        return Err(no(format!(
            "the data-parallel axis of {} is not one stride",
            layout.config()
        )));
    }
    Ok(s)
}
