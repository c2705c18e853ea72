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

/// Copies `groups` groups from `out[src..]` to `out[dst..]` (`src` before
/// `dst`, not overlapping), adding `deltas[0]` to the first part of each
/// group and `deltas[1]` to the second.
fn add_copy_groups(
    out: &mut [u32],
    src: usize,
    dst: usize,
    groups: usize,
    parts: Parts,
    deltas: [u32; 2],
) {
    let p = parts[0] + parts[1];
    if parts[1] == 0 || deltas[0] == deltas[1] {
        add_copy(out, src, dst, groups * p, deltas[0]);
        return;
    }
    let total = groups * p;
    let Some((head, tail)) = out.split_at_mut_checked(dst) else {
        return;
    };
    let (Some(from), Some(to)) = (head.get(src..src + total), tail.get_mut(..total)) else {
        return;
    };
    for (t, f) in to.chunks_exact_mut(p).zip(from.chunks_exact(p)) {
        let (Some((t0, t1)), Some((f0, f1))) = (
            t.split_at_mut_checked(parts[0]),
            f.split_at_checked(parts[0]),
        ) else {
            return;
        };
        for (a, b) in t0.iter_mut().zip(f0) {
            *a = b.wrapping_add(deltas[0]);
        }
        for (a, b) in t1.iter_mut().zip(f1) {
            *a = b.wrapping_add(deltas[1]);
        }
    }
}

/// Given a tile of `tile` groups at member place `at`, writes `count - 1`
/// more tiles after it, tile `i` being the first plus `i * steps` (per part).
pub(crate) fn replicate_groups(
    out: &mut [u32],
    at: usize,
    tile: usize,
    parts: Parts,
    count: u32,
    steps: [u32; 2],
) {
    let tile_len = tile * (parts[0] + parts[1]);
    let mut have = 1u32;
    while have < count {
        let n = have.min(count - have);
        let deltas = steps.map(|s| s.wrapping_mul(have));
        add_copy_groups(
            out,
            at,
            at + have as usize * tile_len,
            n as usize * tile,
            parts,
            deltas,
        );
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
    for (x, y) in da.iter().zip(&db) {
        replicate_groups(out, 0, tile, parts, x.size, [x.stride, y.stride]);
        tile *= x.size as usize;
    }
    Some(())
}
