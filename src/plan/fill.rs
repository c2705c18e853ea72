//! Writing the groups of plans whose groups have two parts (an encoder
//! part, then a decoder part) into one buffer.
//!
//! Such output is periodic too: along a digit of the group index, a tile of
//! groups is an earlier tile with one constant added to every first part
//! and another to every second part. [`replicate_groups`] builds the copies
//! by doubling, as [`replicate`](crate::segment::replicate) does for
//! one-part groups.

use crate::cast::to_usize;
use std::ops::Range;

use crate::plan::Plan;
use crate::plan::boxes::Boxes;
use crate::segment::add_copy;

/// Members per part of every group: `[first part, second part]`.
pub(crate) type Parts = [usize; 2];

/// Lanes of the vectors a periodic copy is cut into (four `u32`, the
/// baseline SIMD width of every target the crate is built for).
const LANES: usize = 4;

/// Most vectors one period of a copy's constants may span to be held in
/// registers. Measured on 8 MiB outputs: a period of up to 16 vectors
/// copies at 0.8-0.9x a sequential write, as a plain copy does, where
/// loading the constants beside the source costs 1.5-1.7x.
const MAX_PERIOD_VECTORS: usize = 16;

/// Members a [`Method::Fix`] copy writes before it goes back over them to
/// correct the minor part, so that they are still in the first-level cache.
const FIX_MEMBERS: usize = 2048;

/// How the copies of a [`Pattern`] add their per-member constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    /// One period of the constants is this many whole vectors, kept in
    /// registers while the copy runs ([`copy_periodic`]).
    Periodic(usize),
    /// Longer periods: a plain copy adding the constant of the larger part
    /// (`major`), then, in place, the difference to the other part's
    /// constant over that part's members. Measured with parts of 8 and 64
    /// members at 0.8-0.9x a sequential write, against 1.2x for two copies
    /// per group and 1.3x for constants loaded beside the source.
    Fix { major: usize },
}

/// How the copies of groups of two parts add their constants: `d0` to the
/// members of every first part, `d1` to those of every second part.
pub(crate) struct Pattern {
    parts: Parts,
    method: Method,
    /// One period of [`Method::Periodic`]: zeros over first parts, all ones
    /// over second parts, so that a member's constant is `d0 + (mask & (d1
    /// - d0))`. Empty for [`Method::Fix`].
    mask: Vec<u32>,
    /// Scratch: one copy's constant per member of `mask`.
    add: Vec<u32>,
}

impl Pattern {
    /// The pattern of groups of `parts` members.
    pub(crate) fn new(parts: Parts) -> Pattern {
        let p = (parts[0] + parts[1]).max(1);
        // One period: whole groups and whole vectors.
        let vectors = p / gcd(p, LANES);
        let (method, len) = if vectors <= MAX_PERIOD_VECTORS {
            (Method::Periodic(vectors), vectors * LANES)
        } else {
            let major = usize::from(parts[1] >= parts[0]);
            (Method::Fix { major }, 0)
        };
        let mut mask = Vec::with_capacity(len);
        // (Groups of no members have no period: the mask stays empty.)
        while mask.len() < len && parts[0] + parts[1] > 0 {
            mask.extend(std::iter::repeat_n(0, parts[0]));
            mask.extend(std::iter::repeat_n(u32::MAX, parts[1]));
        }
        mask.truncate(len);
        let add = vec![0; len];
        Pattern {
            parts,
            method,
            mask,
            add,
        }
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
        match self.method {
            Method::Periodic(vectors) => {
                let (base, diff) = (deltas[0], deltas[1].wrapping_sub(deltas[0]));
                for (a, m) in self.add.iter_mut().zip(&self.mask) {
                    *a = base.wrapping_add(m & diff);
                }
                copy_periodic(to, from, &self.add, vectors);
            }
            Method::Fix { major } => {
                let p = self.parts[0] + self.parts[1];
                let minor = if major == 0 {
                    self.parts[0]..p
                } else {
                    0..self.parts[0]
                };
                let [d0, d1] = deltas;
                let (major_delta, minor_delta) = if major == 0 { (d0, d1) } else { (d1, d0) };
                let fix = minor_delta.wrapping_sub(major_delta);
                let chunk = (FIX_MEMBERS / p).max(1) * p;
                for (t, f) in to.chunks_mut(chunk).zip(from.chunks(chunk)) {
                    for (a, b) in t.iter_mut().zip(f) {
                        *a = b.wrapping_add(major_delta);
                    }
                    for group in t.chunks_exact_mut(p) {
                        for a in group.get_mut(minor.clone()).unwrap_or_default() {
                            *a = a.wrapping_add(fix);
                        }
                    }
                }
            }
        }
    }
}

/// `to[i] = from[i] + add[i % add.len()]`, where `add` is `vectors` whole
/// vectors: the copy is cut into periods with the constants held in
/// registers, so each member costs one load, one add and one store, as a
/// plain copy does.
fn copy_periodic(to: &mut [u32], from: &[u32], add: &[u32], vectors: usize) {
    macro_rules! periods {
        ($($v:literal)*) => {
            match vectors {
                $($v => periods::<$v>(to, from, add),)*
                _ => {}
            }
        };
    }
    periods!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
}

/// [`copy_periodic`] for a period of `V` vectors.
fn periods<const V: usize>(to: &mut [u32], from: &[u32], add: &[u32]) {
    let mut constants = [[0u32; LANES]; V];
    for (c, a) in constants.iter_mut().zip(add.chunks_exact(LANES)) {
        for (x, y) in c.iter_mut().zip(a) {
            *x = *y;
        }
    }
    let period = V * LANES;
    let mut to_periods = to.chunks_exact_mut(period);
    let mut from_periods = from.chunks_exact(period);
    for (t, f) in (&mut to_periods).zip(&mut from_periods) {
        let vectors = t.chunks_exact_mut(LANES).zip(f.chunks_exact(LANES));
        for ((tv, fv), c) in vectors.zip(&constants) {
            for ((a, b), d) in tv.iter_mut().zip(fv).zip(c) {
                *a = b.wrapping_add(*d);
            }
        }
    }
    let rest = to_periods
        .into_remainder()
        .iter_mut()
        .zip(from_periods.remainder());
    for ((a, b), d) in rest.zip(add) {
        *a = b.wrapping_add(*d);
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
        if chunk == u32::MAX && to_usize(have) * tile_len >= STAMP_MEMBERS {
            chunk = have;
        }
        let n = have.min(chunk).min(count - have);
        let deltas = steps.map(|s| s.wrapping_mul(have));
        let members = to_usize(n) * tile * (parts[0] + parts[1]);
        pattern.add_copy(out, at, at + to_usize(have) * tile_len, members, deltas);
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
    let parts = [to_usize(a.size()), to_usize(b.size())];
    a.segment(0).fill(out);
    b.segment(0).fill(out.get_mut(parts[0]..)?);
    let mut tile = 1usize;
    let mut pattern = Pattern::new(parts);
    for (x, y) in da.iter().zip(&db) {
        replicate_groups(out, 0, tile, &mut pattern, x.size, [x.stride, y.stride]);
        tile *= to_usize(x.size);
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Groups `0..count` of `parts` members, member `m` of group `g` being
    /// `g * 1000 + m` in the first part and `g * 7 + m + 500_000` in the
    /// second: each part moves by its own constant from group to group.
    fn naive(parts: Parts, count: usize) -> Vec<u32> {
        let mut out = Vec::new();
        for g in 0..u32::try_from(count).unwrap() {
            out.extend((0..u32::try_from(parts[0]).unwrap()).map(|m| g * 1000 + m));
            out.extend((0..u32::try_from(parts[1]).unwrap()).map(|m| g * 7 + m + 500_000));
        }
        out
    }

    #[test]
    fn every_method_is_chosen_somewhere() {
        assert_eq!(Pattern::new([2, 8]).method, Method::Periodic(5));
        assert_eq!(Pattern::new([1, 1]).method, Method::Periodic(1));
        assert_eq!(Pattern::new([8, 64]).method, Method::Fix { major: 1 });
        assert_eq!(Pattern::new([40, 3]).method, Method::Fix { major: 0 });
        assert!(Pattern::new([8, 64]).mask.is_empty());
        // Groups of no members: no period, and no endless mask.
        assert!(Pattern::new([0, 0]).mask.is_empty());
    }

    proptest! {
        /// Replicating one group along a digit, with either method, any
        /// part sizes and copies that end mid-period, writes what each
        /// group is.
        #[test]
        fn replicate_groups_matches_naive(
            first in 0usize..48,
            second in 0usize..80,
            count in 1u32..300,
        ) {
            let parts = [first, second];
            let p = first + second;
            prop_assume!(p > 0);
            let want = naive(parts, to_usize(count));
            let mut out = vec![0u32; want.len()];
            out[..p].copy_from_slice(&want[..p]);
            let mut pattern = Pattern::new(parts);
            replicate_groups(&mut out, 0, 1, &mut pattern, count, [1000, 7]);
            prop_assert_eq!(out, want);
        }
    }
}
