//! Writing the groups of plans whose groups have two parts (an encoder
//! part, then a decoder part) into one buffer.
//!
//! Such output is periodic too: along a digit of the group index, a tile of
//! groups is an earlier tile with one constant added to every first part
//! and another to every second part. [`replicate_groups`] builds the copies
//! by doubling, as [`replicate`](crate::segment::replicate) does for
//! one-part groups.

use std::ops::Range;

use crate::plan::Plan;
use crate::plan::boxes::Boxes;
use crate::segment::add_copy;

/// Members per part of every group: `[first part, second part]`.
pub(crate) type Parts = [usize; 2];

/// Members per block of [`Pattern`]: the per-member constants of a copy
/// repeat every group, so a block of whole groups is one vectorisable add
/// over a slice of the same length.
const BLOCK_MEMBERS: usize = 256;

/// Which members of a block of whole groups are in the second part of their
/// group: all ones there, zeros in the first part. A copy adds `d0 + (mask &
/// (d1 - d0))` to every member: `d0` to first parts, `d1` to second parts.
pub(crate) struct Pattern {
    parts: Parts,
    mask: Vec<u32>,
    /// Scratch: one copy's constant per member of a block.
    add: Vec<u32>,
}

impl Pattern {
    /// The pattern of groups of `parts` members.
    pub(crate) fn new(parts: Parts) -> Pattern {
        let p = (parts[0] + parts[1]).max(1);
        // Whole groups and whole vectors of 8 members: no remainder loop
        // inside a block.
        let unit = p / gcd(p, 8) * 8;
        let per_block = (BLOCK_MEMBERS / unit).max(1) * unit;
        let mut mask = Vec::with_capacity(per_block);
        while mask.len() < per_block {
            mask.extend(std::iter::repeat_n(0, parts[0]));
            mask.extend(std::iter::repeat_n(u32::MAX, parts[1]));
        }
        let add = vec![0; mask.len()];
        Pattern { parts, mask, add }
    }

    /// Copies `total` members from `out[src..]` to `out[dst..]` (`src`
    /// before `dst`, whole groups), adding the part's constant to each.
    fn add_copy(
        &mut self,
        out: &mut [u32],
        src: usize,
        dst: usize,
        total: usize,
        deltas: [u32; 2],
    ) {
        if deltas[0] == deltas[1] {
            add_copy(out, src, dst, total, deltas[0]);
            return;
        }
        let Some((head, tail)) = out.split_at_mut_checked(dst) else {
            return;
        };
        let (Some(from), Some(to)) = (head.get(src..src + total), tail.get_mut(..total)) else {
            return;
        };
        let (base, diff) = (deltas[0], deltas[1].wrapping_sub(deltas[0]));
        // This copy's constant per member of a block, once: the copy itself
        // is then one add per member.
        for (a, m) in self.add.iter_mut().zip(&self.mask).take(total) {
            *a = base.wrapping_add(m & diff);
        }
        let block = self.add.len().max(1);
        for (t, f) in to.chunks_mut(block).zip(from.chunks(block)) {
            for ((a, b), d) in t.iter_mut().zip(f).zip(&self.add) {
                *a = b.wrapping_add(*d);
            }
        }
    }
}

/// Members the copies of [`replicate_groups`] read at most: past this, the
/// tiles already written are stamped from the start rather than doubled,
/// so that every copy reads from the first levels of the cache.
const STAMP_MEMBERS: usize = 2048;

/// Given a tile of `tile` groups at member place `at`, writes `count - 1`
/// more tiles after it, tile `i` being the first plus `i * steps` (per part).
///
/// The tiles are doubled (each pass copies all written so far) until they
/// hold [`STAMP_MEMBERS`] members, then that run is stamped over the rest:
/// tile `j + i` is tile `i` plus `j * steps`, whatever `j`.
pub(crate) fn replicate_groups(
    out: &mut [u32],
    at: usize,
    tile: usize,
    pattern: &mut Pattern,
    count: u32,
    steps: [u32; 2],
) {
    let parts = pattern.parts;
    let tile_len = tile * (parts[0] + parts[1]);
    let mut have = 1u32;
    let mut chunk = u32::MAX;
    while have < count {
        if chunk == u32::MAX && have as usize * tile_len >= STAMP_MEMBERS {
            chunk = have;
        }
        let n = have.min(chunk).min(count - have);
        let deltas = steps.map(|s| s.wrapping_mul(have));
        let members = n as usize * tile * (parts[0] + parts[1]);
        pattern.add_copy(out, at, at + have as usize * tile_len, members, deltas);
        have += n;
    }
}

/// Writes groups `range` of `plan` one after the other (the general path:
/// O(axes) per group plus the members).
pub(crate) fn each_group(plan: &Plan, range: Range<u32>, out: &mut [u32]) {
    let mut at = 0usize;
    for index in range {
        let group = plan.group(index);
        if let Some(rest) = out.get_mut(at..) {
            at += group.fill_into(rest);
        }
    }
}

/// Writes every group of the concatenation of `a` and `b` (group `i` is
/// `a`'s group `i`, then `b`'s), when both have the same group digits;
/// `None` (nothing useful written) otherwise.
pub(crate) fn concat(a: &Boxes, b: &Boxes, out: &mut [u32]) -> Option<()> {
    let (da, db) = (a.group_steps(), b.group_steps());
    if da.len() != db.len() || da.iter().zip(&db).any(|(x, y)| x.size != y.size) {
        return None;
    }
    let parts = [a.size() as usize, b.size() as usize];
    a.segment(0).fill(out);
    b.segment(0).fill(out.get_mut(parts[0]..)?);
    let mut tile = 1usize;
    let mut pattern = Pattern::new(parts);
    for (x, y) in da.iter().zip(&db) {
        replicate_groups(out, 0, tile, &mut pattern, x.size, [x.stride, y.stride]);
        tile *= x.size as usize;
    }
    Some(())
}

/// The greatest common divisor.
fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}
