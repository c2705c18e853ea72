//! Filling a grid with fewer data-parallel replicas: intact replicas keep
//! their place, broken ones are refilled position by position.

use crate::cast::to_usize;
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
    let mut broken = vec![false; to_usize(dp)];
    for &p in job.failed.iter().filter(|&&p| p < job.world) {
        let d = old.placement(p + off)?.coord.dp;
        if let Some(b) = broken.get_mut(to_usize(d)) {
            *b = true;
        }
    }
    for &d in dropped {
        if let Some(b) = broken.get_mut(to_usize(d)) {
            *b = true;
        }
    }
    // The new replica of each intact old replica. When they are enough,
    // the first dp2 of them, in order (the data-parallel groups shrink);
    // else each keeps its place below dp2, those above fill the broken
    // places, and the places left are refilled position by position.
    let intact: Vec<u32> = (0..dp)
        .filter(|&d| broken.get(to_usize(d)) == Some(&false))
        .collect();
    let mut slot_of = vec![None; to_usize(dp)];
    let mut refill = Vec::new();
    // Replicas are counted as u32s: there are dp of them.
    if intact.len() >= to_usize(dp2) {
        for (s, &d) in (0u32..).zip(intact.iter().take(to_usize(dp2))) {
            if let Some(x) = slot_of.get_mut(to_usize(d)) {
                *x = Some(s);
            }
        }
    } else {
        let mut holes = (0..dp2).filter(|&d| broken.get(to_usize(d)) == Some(&true));
        for &d in &intact {
            let s = if d < dp2 { Some(d) } else { holes.next() };
            if let Some(x) = slot_of.get_mut(to_usize(d)) {
                *x = s;
            }
        }
        refill.extend(holes);
    }
    let refilling = !refill.is_empty();
    // Each grid (the encoder's, then the decoder's, or the only one) is a
    // mixed radix: rank = base + inner + s * (d + dp * outer), with s the
    // stride of dp in that grid; so is the new one, with the same s.
    let grids = grids(old, new)?;
    // One pass over the old ranks: intact replicas placed, broken ones'
    // survivors queued by grid and position (their rank in replica 0).
    let mut queues: BTreeMap<(usize, u32), VecDeque<u32>> = BTreeMap::new();
    for (g, grid) in grids.iter().enumerate() {
        for p in grid.base..grid.base + grid.len {
            if !map.is_free(p) {
                continue;
            }
            let (inner, d, outer) = grid.split(p, dp);
            match slot_of.get(to_usize(d)).copied().flatten() {
                Some(slot) => map.assign(p, grid.place(inner, slot, outer, dp2)),
                None if refilling && broken.get(to_usize(d)) == Some(&true) => {
                    queues
                        .entry((g, inner + grid.stride * dp * outer))
                        .or_default()
                        .push_back(p);
                }
                None => {}
            }
        }
    }
    let mut holes = Vec::new();
    for &slot in &refill {
        for (g, grid) in grids.iter().enumerate() {
            for outer in 0..grid.len / (grid.stride * dp) {
                for inner in 0..grid.stride {
                    let n = grid.place(inner, slot, outer, dp2);
                    match queues
                        .get_mut(&(g, inner + grid.stride * dp * outer))
                        .and_then(VecDeque::pop_front)
                    {
                        Some(p) => map.assign(p, n),
                        None => holes.push(n),
                    }
                }
            }
        }
    }
    // The holes are distinct ranks of the new layout: a u32 counts them.
    let filled = u32::try_from(holes.len()).unwrap_or(u32::MAX);
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

/// One grid of a layout (its encoder's or its decoder's, or its only
/// one) in the old and the new numbering.
struct Grid {
    /// The grid's first process (counted from the old layout's offset).
    base: u32,
    /// The grid's processes in the old layout.
    len: u32,
    /// The grid's first rank in the new layout (from its offset).
    new_base: u32,
    /// The stride of `dp` in both.
    stride: u32,
}

impl Grid {
    /// Process `p`'s (inner, dp, outer) digits in the old grid.
    fn split(&self, p: u32, dp: u32) -> (u32, u32, u32) {
        let q = p - self.base;
        (
            q % self.stride,
            (q / self.stride) % dp,
            q / (self.stride * dp),
        )
    }

    /// The new rank of digits (inner, slot, outer) with `dp2` replicas.
    fn place(&self, inner: u32, slot: u32, outer: u32, dp2: u32) -> u32 {
        self.new_base + inner + self.stride * (slot + dp2 * outer)
    }
}

/// The grids of `old` and `new` (the same shape but `dp`), the encoder's
/// first.
fn grids(old: &Layout, new: &Layout) -> Result<Vec<Grid>> {
    let (enc, enc2) = (old.encoder_world_size(), new.encoder_world_size());
    let mut parts = vec![(Part::Decoder, enc, old.world_size() - enc, enc2)];
    if old.has_encoder() {
        parts.insert(0, (Part::Encoder, 0, enc, 0));
    }
    parts
        .into_iter()
        .map(|(part, base, len, new_base)| {
            let stride = dp_stride(old, part)?;
            if new.sizes().dp > 1 && dp_stride(new, part)? != stride {
                return Err(no(format!(
                    "the new {} grid's data-parallel stride differs from the old one's ({stride})",
                    part.name()
                )));
            }
            Ok(Grid {
                base,
                len,
                new_base,
                stride,
            })
        })
        .collect()
}

/// The stride of `dp` in `layout`'s grid `part` (the rank of coordinate
/// dp = 1 less that of dp = 0, the others 0), checked against the rank of
/// dp = dp - 1; the grid's size when dp is 1.
pub(super) fn dp_stride(layout: &Layout, part: Part) -> Result<u32> {
    let dp = layout.sizes().dp;
    let at = |d: u32| {
        layout.rank(
            part,
            Coord {
                dp: d,
                ..Coord::default()
            },
        )
    };
    if dp < 2 {
        let enc = layout.encoder_world_size();
        return Ok(match part {
            Part::Encoder => enc,
            Part::Decoder => layout.world_size() - enc,
        }
        .max(1));
    }
    let zero = at(0)?;
    let s = at(1)? - zero;
    if at(dp - 1)? - zero != s * (dp - 1) || s == 0 {
        return Err(no(format!(
            "the data-parallel axis of {} is not one stride",
            layout.config()
        )));
    }
    Ok(s)
}
