//! Strided boxes of ranks: the arithmetic that grids, groups and the fast
//! enumeration share.
//!
//! A *box* is `base + spread(p, digits)` for every position `p` of a mixed
//! radix, first digit fastest; a [`Segment`] is a strided slice of one. The
//! `fill` functions write boxes into a caller's buffer without a division
//! per member: an aligned tile of a box is an earlier tile of the same shape
//! plus a constant, so the buffer is built by vectorisable "add a constant
//! and copy" passes whose length doubles each time.

use crate::cast::{len_usize, low32, to_u64, to_usize};
use arrayvec::ArrayVec;

/// Most digits one box or segment has: the five grid axes, two of them cut
/// in two by the hierarchical or distributed-optimizer families, and one
/// for the pipeline ends.
pub(crate) const MAX_DIGITS: usize = 8;

/// A digit of a mixed-radix number: its radix (`size`) and its weight
/// (`stride`, a distance between ranks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Digit {
    pub size: u32,
    pub stride: u32,
}

/// `sum(digit_i(n) * stride_i)` where `digit_i(n)` are the digits of `n` in
/// the mixed radix of `digits`, first digit fastest.
///
/// Sizes `(2, 3)` with strides `(1, 10)`: n = 4 = 0 + 2*2 -> 0*1 + 2*10 = 20.
/// Wrapping arithmetic: callers only ask for members of a valid grid, whose
/// ranks fit a `u32`.
pub(crate) fn spread(n: u64, digits: &[Digit]) -> u32 {
    let mut rest = n;
    let mut out = 0u32;
    for d in digits {
        let size = u64::from(d.size.max(1));
        // The remainder is below a u32 size.
        out = out.wrapping_add(low32(rest % size).wrapping_mul(d.stride));
        rest /= size;
    }
    out
}

/// Ranks `base + spread(start + i * step)` for `i` in `0..len`: a strided
/// slice of a mixed-radix box of ranks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Segment {
    pub base: u32,
    pub digits: ArrayVec<Digit, MAX_DIGITS>,
    pub start: u32,
    pub step: u32,
    pub len: u32,
}

impl Segment {
    /// The whole box: every combination of `digits`, first digit fastest.
    pub fn boxed(base: u32, digits: &[Digit]) -> Segment {
        let digits: ArrayVec<Digit, MAX_DIGITS> = digits.iter().copied().take(MAX_DIGITS).collect();
        let len = digits.iter().map(|d| d.size).product();
        Segment {
            base,
            digits,
            start: 0,
            step: 1,
            len,
        }
    }

    /// One rank.
    pub fn single(rank: u32) -> Segment {
        Segment::boxed(rank, &[])
    }

    /// Members `start, start + step, ...` (`len` of them) of this segment.
    pub fn strided(self, start: u32, step: u32, len: u32) -> Segment {
        Segment {
            start: self.start + start * self.step,
            step: self.step * step,
            len,
            ..self
        }
    }

    pub fn len(&self) -> u32 {
        self.len
    }

    /// Member `i < len`.
    pub fn at(&self, i: u32) -> u32 {
        let p = u64::from(self.start) + u64::from(i) * u64::from(self.step);
        self.base.wrapping_add(spread(p, &self.digits))
    }

    /// Writes the members into `out` (its first `len` places).
    pub fn fill(&self, out: &mut [u32]) {
        let len = to_usize(self.len).min(out.len());
        let out = out.get_mut(..len).unwrap_or_default();
        if self.step == 1 {
            fill_box(self.base, &self.digits, u64::from(self.start), out);
        } else {
            for (i, slot) in (0u32..).zip(out.iter_mut()) {
                *slot = self.at(i);
            }
        }
    }
}

/// `out[dst + i] = out[src + i] + delta` for `i < len`, where the source
/// lies before the destination (`src + len <= dst`). Out-of-range requests
/// write nothing; callers compute ranges that fit.
#[inline]
pub(crate) fn add_copy(out: &mut [u32], src: usize, dst: usize, len: usize, delta: u32) {
    let Some((head, tail)) = out.split_at_mut_checked(dst) else {
        return;
    };
    let (Some(from), Some(to)) = (head.get(src..src + len), tail.get_mut(..len)) else {
        return;
    };
    for (t, f) in to.iter_mut().zip(from) {
        *t = f.wrapping_add(delta);
    }
}

/// Given a unit of `len` values at `out[at..]`, writes `count - 1` more
/// units after it, unit `i` being the first plus `i * stride`.
///
/// Each pass copies everything written so far, so there are
/// `log2(count)` passes, each a contiguous add-and-copy.
pub(crate) fn replicate(out: &mut [u32], at: usize, len: usize, count: u64, stride: u32) {
    if len == 1 {
        // Units of one value: an arithmetic progression, written directly
        // rather than by `log2(count)` short copies.
        let end = len_usize(to_u64(at).saturating_add(count).min(to_u64(out.len())));
        let Some((first, rest)) = out.get_mut(at..end).and_then(|r| r.split_first_mut()) else {
            return;
        };
        let mut value = *first;
        for slot in rest {
            value = value.wrapping_add(stride);
            *slot = value;
        }
        return;
    }
    let mut have = 1u64;
    while have < count {
        let n = have.min(count - have);
        // Positions stay inside the caller's slice, whose length is a usize.
        let (n_len, have_len) = (len_usize(n) * len, len_usize(have) * len);
        add_copy(
            out,
            at,
            at + have_len,
            n_len,
            // Modulo 2^32, as every rank sum.
            low32(have).wrapping_mul(stride),
        );
        have += n;
    }
}

/// Writes `out[i] = base + spread(start + i, digits)` for every place of
/// `out` (which must not run past the box).
///
/// The positions `start..start + out.len()` are cut into runs of aligned
/// tiles: a tile of level `k` is `prod(size_0..size_k)` positions starting
/// at a multiple of that product, and consecutive tiles of level `k` inside
/// the same tile of level `k + 1` differ by the constant `stride_k`. The
/// first tile of each level is built once (one value, then [`replicate`]
/// along each digit); every later tile of that level is a copy of it plus a
/// constant. A fresh box (`start = 0`, the whole length) is written by
/// [`fill_whole`].
// Every index is a level `<= n <= MAX_DIGITS` into arrays of `MAX_DIGITS + 1`.
#[allow(clippy::indexing_slicing)]
pub(crate) fn fill_box(base: u32, digits: &[Digit], start: u64, out: &mut [u32]) {
    let total: u64 = digits.iter().map(|d| u64::from(d.size.max(1))).product();
    if start == 0 && to_u64(out.len()) == total {
        fill_whole(base, digits, out);
        return;
    }
    let n = digits.len().min(MAX_DIGITS);
    // tile[k] = positions per tile of level k = prod(size_0 .. size_k).
    let mut tile = [1u64; MAX_DIGITS + 1];
    for (k, d) in digits.iter().take(n).enumerate() {
        tile[k + 1] = tile[k] * u64::from(d.size.max(1));
    }
    // The last tile written of each level: (place in out, its first value).
    let mut last: [Option<(usize, u32)>; MAX_DIGITS + 1] = [None; MAX_DIGITS + 1];
    let (mut w, mut pos) = (0usize, start);
    while w < out.len() {
        let remaining = to_u64(out.len() - w);
        // The highest level whose tile starts here and fits.
        let mut level = 0;
        while level < n && pos % tile[level + 1] == 0 && tile[level + 1] <= remaining {
            level += 1;
        }
        let value = base.wrapping_add(spread(pos, &digits[..n]));
        // How many tiles of this level follow along digit `level`.
        let (count, stride) = match digits.get(level) {
            Some(d) if level < n => {
                let size = u64::from(d.size.max(1));
                let c = (pos / tile[level]) % size;
                ((size - c).min(remaining / tile[level]), d.stride)
            }
            _ => (1, 0),
        };
        // The first tile: a copy of the highest level already built, then
        // replicated up to `level`.
        let mut from = level;
        while from > 0 && last[from].is_none() {
            from -= 1;
        }
        match last[from] {
            Some((src, first)) => {
                add_copy(
                    out,
                    src,
                    w,
                    len_usize(tile[from]),
                    value.wrapping_sub(first),
                );
            }
            None => {
                if let Some(slot) = out.get_mut(w) {
                    *slot = value;
                }
            }
        }
        last[from] = Some((w, value));
        for (k, d) in digits.iter().enumerate().take(level).skip(from) {
            replicate(out, w, len_usize(tile[k]), u64::from(d.size), d.stride);
            last[k + 1] = Some((w, value));
        }
        replicate(out, w, len_usize(tile[level]), count, stride);
        let written = count * tile[level];
        w += len_usize(written);
        pos += written;
    }
}

/// Length from which [`fill_whole`] writes the runs of a box's first digit
/// as arithmetic progressions (one add and one store per vector, as a
/// plain write) rather than as copies of a stamped tile (which also load).
const RUN_MEMBERS: u64 = 256;

/// `digits` with every digit that continues the one before it (its stride
/// is the span of the one before: sizes `(8, 2)` with strides `(1, 8)` are
/// one digit of 16) merged into it, and digits of size 1 dropped: the same
/// box, in fewer and longer digits.
fn merged(digits: &[Digit]) -> ArrayVec<Digit, MAX_DIGITS> {
    let mut out: ArrayVec<Digit, MAX_DIGITS> = ArrayVec::new();
    for d in digits.iter().filter(|d| d.size > 1) {
        match out.last_mut() {
            Some(last)
                if u64::from(last.size) * u64::from(last.stride) == u64::from(d.stride)
                    && u64::from(last.size) * u64::from(d.size) <= u64::from(u32::MAX) =>
            {
                last.size *= d.size;
            }
            _ => out.push(*d),
        }
    }
    out
}

/// Writes a whole box whose first digit is `run`, digit by digit: each run
/// of it is `start + i * run.stride`, the starts following the digits
/// `above` by an odometer.
fn fill_runs(base: u32, run: Digit, above: &[Digit], out: &mut [u32]) {
    let mut counts = [0u32; MAX_DIGITS];
    let mut start = base;
    for chunk in out.chunks_mut(to_usize(run.size.max(1))) {
        // A recurrence, which vectorises as an add per vector (`i *
        // stride` would need a vector multiply the baseline target lacks).
        let mut value = start;
        for slot in chunk {
            *slot = value;
            value = value.wrapping_add(run.stride);
        }
        advance(&mut counts, &mut start, above);
    }
}

/// One step of an odometer over `digits` (first fastest): `counts` are the
/// digit values and `offset` their weighted sum, both updated. `false`
/// when every digit wrapped round (the odometer is back at zero).
fn advance(counts: &mut [u32; MAX_DIGITS], offset: &mut u32, digits: &[Digit]) -> bool {
    for (count, d) in counts.iter_mut().zip(digits) {
        *count += 1;
        *offset = offset.wrapping_add(d.stride);
        if *count < d.size {
            return true;
        }
        *count = 0;
        *offset = offset.wrapping_sub(d.size.wrapping_mul(d.stride));
    }
    false
}

/// Positions of the tile [`fill_whole`] stamps: 8 KiB of `u32`, so that the
/// tile and the place it is copied to (16 KiB) stay in the first-level
/// cache together (16 KiB tiles measured 1.3x a plain write at 1,048,576
/// ranks, 8 KiB ones 1.0x).
const STAMP: u64 = 2048;

/// Writes a whole box (`out.len()` is its size). Its digits are merged
/// first; when the first is a run of at least [`RUN_MEMBERS`] values, the
/// box is written run by run ([`fill_runs`]). Otherwise a tile of at most
/// [`STAMP`] positions (whole digits, then `f` units of the next digit) is
/// built by doubling, then stamped over the rest of the buffer, each copy
/// plus the offset of its place: along the cut digit in steps of `f` units
/// (the last step shorter when `f` does not divide its size), and over the
/// digits above it by an odometer. Every member is written once and read
/// from a tile that stays in cache, so the cost is close to a plain
/// sequential write.
fn fill_whole(base: u32, digits: &[Digit], out: &mut [u32]) {
    let digits = merged(digits);
    if let [run, above @ ..] = digits.as_slice() {
        if u64::from(run.size) >= RUN_MEMBERS {
            fill_runs(base, *run, above, out);
            return;
        }
    }
    let digits = digits.as_slice();
    let Some(slot) = out.first_mut() else {
        return;
    };
    *slot = base;
    let mut tile = 1u64;
    let mut rest = digits;
    while let [d, tail @ ..] = rest {
        let size = u64::from(d.size.max(1));
        if tile * size > STAMP {
            break;
        }
        replicate(out, 0, len_usize(tile), size, d.stride);
        tile *= size;
        rest = tail;
    }
    let [cut, above @ ..] = rest else {
        return;
    };
    // `f` units of the cut digit make the stamp.
    let size = cut.size.max(1);
    let f = u32::try_from((STAMP / tile).max(1)).unwrap_or(1).min(size);
    replicate(out, 0, len_usize(tile), u64::from(f), cut.stride);
    let unit = len_usize(tile);
    // Odometer over the digits above the cut one, first fastest.
    let mut counts = [0u32; MAX_DIGITS];
    let mut high = 0u32;
    let mut at = 0usize;
    loop {
        let mut j = 0u32;
        while j < size {
            let n = f.min(size - j);
            if at > 0 {
                let delta = high.wrapping_add(j.wrapping_mul(cut.stride));
                add_copy(out, 0, at, to_usize(n) * unit, delta);
            }
            at += to_usize(n) * unit;
            j += n;
        }
        if at >= out.len() {
            return;
        }
        if !advance(&mut counts, &mut high, above) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn naive(base: u32, digits: &[Digit], start: u64, len: usize) -> Vec<u32> {
        (0..to_u64(len))
            .map(|i| base.wrapping_add(spread(start + i, digits)))
            .collect()
    }

    #[test]
    fn spread_is_mixed_radix() {
        let d = [
            Digit { size: 2, stride: 1 },
            Digit {
                size: 3,
                stride: 10,
            },
        ];
        let got: Vec<u32> = (0..6).map(|n| spread(n, &d)).collect();
        assert_eq!(got, vec![0, 1, 10, 11, 20, 21]);
    }

    #[test]
    fn fill_box_whole_and_partial() {
        let d = [
            Digit { size: 3, stride: 8 },
            Digit { size: 2, stride: 1 },
            Digit {
                size: 4,
                stride: 100,
            },
        ];
        for start in 0..24u64 {
            for len in 0..=(24 - usize::try_from(start).unwrap()) {
                let mut out = vec![0; len];
                fill_box(5, &d, start, &mut out);
                assert_eq!(out, naive(5, &d, start, len), "start {start} len {len}");
            }
        }
    }

    fn digits() -> impl Strategy<Value = Vec<Digit>> {
        proptest::collection::vec(
            (1u32..7, 0u32..1000).prop_map(|(size, stride)| Digit { size, stride }),
            0..6,
        )
    }

    /// Digits of up to 40 values where each, half the time, continues the
    /// one before (its stride is the span of the one before), so that
    /// merged runs reach [`RUN_MEMBERS`] and beyond.
    fn runs_of_digits() -> impl Strategy<Value = Vec<Digit>> {
        proptest::collection::vec((1u32..40, 0u32..5000, any::<bool>()), 0..5).prop_map(|v| {
            let mut out: Vec<Digit> = Vec::new();
            for (size, stride, continues) in v {
                let stride = match out.last() {
                    Some(last) if continues => last.size * last.stride,
                    _ => stride,
                };
                out.push(Digit { size, stride });
            }
            out
        })
    }

    #[test]
    fn merged_digits_are_the_same_box() {
        let digit = |size, stride| Digit { size, stride };
        let d = [digit(8, 1), digit(1, 77), digit(2, 8), digit(3, 5)];
        assert_eq!(merged(&d).as_slice(), [digit(16, 1), digit(3, 5)]);
        let mut out = vec![0; 48];
        fill_box(9, &d, 0, &mut out);
        assert_eq!(out, naive(9, &d, 0, 48));
    }

    proptest! {
        /// A whole box, written as runs or as stamped tiles, equals the
        /// per-position formula.
        #[test]
        fn whole_boxes_of_long_runs_equal_spread(d in runs_of_digits(), base in any::<u32>()) {
            let total: u64 = d.iter().map(|d| u64::from(d.size)).product();
            prop_assume!(total <= 1 << 20);
            let mut out = vec![0; usize::try_from(total).unwrap()];
            fill_box(base, &d, 0, &mut out);
            prop_assert_eq!(out, naive(base, &d, 0, usize::try_from(total).unwrap()));
        }

        /// Any window of any box equals the per-position formula.
        #[test]
        fn fill_box_equals_spread(d in digits(), base in any::<u32>(), a in any::<u64>(), b in any::<u64>()) {
            let total: u64 = d.iter().map(|d| u64::from(d.size)).product();
            let (a, b) = (a % (total + 1), b % (total + 1));
            let (start, end) = (a.min(b), a.max(b));
            let mut out = vec![0; usize::try_from(end - start).unwrap()];
            fill_box(base, &d, start, &mut out);
            prop_assert_eq!(out, naive(base, &d, start, usize::try_from(end - start).unwrap()));
        }

        /// Strided segments fill like their members.
        #[test]
        fn segment_fill_equals_at(d in digits(), start in 0u32..8, step in 1u32..4) {
            let whole = Segment::boxed(3, &d);
            let len = whole.len().saturating_sub(start) / step;
            let s = whole.strided(start, step, len);
            let mut out = vec![0; usize::try_from(len).unwrap()];
            s.fill(&mut out);
            prop_assert_eq!(out, (0..len).map(|i| s.at(i)).collect::<Vec<_>>());
        }
    }
}
