//! Whether two grids over the same ranks line up their data lanes (rule
//! C1), decided from sizes and strides in O(dims) when the two grids' digit
//! boundaries form one chain, as views' shared dims are.
//!
//! Every rank is `sum t_j * b_j` over **atoms**: the digits between
//! consecutive boundaries `b_j | b_{j+1}` of both grids (each dim of either
//! grid is a run of atoms). A lane is then linear in the atoms: `Ls = sum
//! alpha_j t_j`, `Ld = sum beta_j t_j`, and fan-in's `Ld = Ls div k` holds
//! for every rank exactly when `Ls - k Ld = sum (alpha_j - k beta_j) t_j`
//! stays in `0..k` for every choice of `t_j` in `0..m_j`: every coefficient
//! non-negative, and their sum at the largest `t_j` below `k`. (Fan-out
//! swaps the sides; equal lanes are `k = 1`.)

use crate::modules::lanes::{Dim, LaneGrid};

/// A grid's dims with size > 1 as (stride, size, weight in the lane).
fn dims(g: &LaneGrid) -> Vec<(u64, u64, u64)> {
    let [d0, d1] = g.data;
    [
        (g.tp, 0),
        (g.cp, 0),
        (g.pp, 0),
        (d0, 1),
        (d1, u64::from(d0.size)),
    ]
    .into_iter()
    .filter(|(d, _): &(Dim, u64)| d.size > 1)
    .map(|(d, w)| (u64::from(d.stride), u64::from(d.size), w))
    .collect()
}

/// The weight of the atom at `base` in the lane of a grid of `dims`: its
/// place value inside its dim times the dim's weight.
fn weight(dims: &[(u64, u64, u64)], base: u64) -> i128 {
    dims.iter()
        .find(|(s, n, _)| *s <= base && base < s * n)
        .map_or(0, |(s, _, w)| i128::from(base / s) * i128::from(*w))
}

/// `Some(None)` when every rank of the two grids (same offset and world)
/// has `narrow lane = wide lane div k` (`wide` the side with more lanes;
/// `k = 1` for equal lanes), `Some(Some(rank))` with a rank where it fails,
/// `None` when the boundaries do not form a chain (undecided here).
pub(crate) fn lanes_line_up(wide: &LaneGrid, narrow: &LaneGrid, k: u32) -> Option<Option<u32>> {
    let (w, n) = (dims(wide), dims(narrow));
    let mut bounds: Vec<u64> = w
        .iter()
        .chain(&n)
        .flat_map(|(s, size, _)| [*s, s * size])
        .chain([1])
        .collect();
    bounds.sort_unstable();
    bounds.dedup();
    let pairs = || bounds.iter().zip(bounds.iter().skip(1));
    if pairs().any(|(lo, hi)| hi % lo != 0) {
        return None;
    }
    let k = i128::from(k);
    // (base, size, coefficient) of every atom.
    let atoms: Vec<(u64, u64, i128)> = pairs()
        .map(|(&lo, &hi)| (lo, hi / lo, weight(&w, lo) - k * weight(&n, lo)))
        .collect();
    let offset = u64::from(wide.offset);
    let rank = |r: u64| u32::try_from(offset + r).unwrap_or(u32::MAX);
    // A negative coefficient: its atom at 1 alone gives Ls - k Ld < 0.
    if let Some((b, _, _)) = atoms.iter().filter(|a| a.2 < 0).min_by_key(|a| a.0) {
        return Some(Some(rank(*b)));
    }
    // The positive ones at their largest, lowest first, until past k - 1.
    let (mut sum, mut at) = (0i128, 0u64);
    for (b, m, c) in atoms.iter().filter(|a| a.2 > 0) {
        sum += c * i128::from(m - 1);
        at += (m - 1) * b;
        if sum > k - 1 {
            return Some(Some(rank(at)));
        }
    }
    Some(None)
}
