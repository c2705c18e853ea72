//! Pure index arithmetic: checked products, division by a constant, balanced
//! blocks.
//!
//! Nothing here knows about axes, grids or kinds.

use std::ops::Range;

/// The product of `values`, or `None` when it does not fit in a `u32`.
///
/// Guarantees: `Some(p)` means every partial product fits too, so any rank
/// built from a prefix of these factors is a valid `u32`.
pub(crate) fn checked_product(values: impl IntoIterator<Item = u32>) -> Option<u32> {
    values
        .into_iter()
        .try_fold(1u32, |acc, v| acc.checked_mul(v))
}

/// The product of `values` in `u64`, saturating (for error messages).
pub(crate) fn saturating_product(values: impl IntoIterator<Item = u32>) -> u64 {
    values
        .into_iter()
        .fold(1u64, |acc, v| acc.saturating_mul(u64::from(v)))
}

/// Division of any `u32` by one fixed divisor, with a multiplication
/// instead of a `div` instruction (Lemire, Kaser and Kurz, "Faster
/// remainder by direct computation", 2019).
///
/// With `m = ceil(2^64 / d)`, `n / d` is the high 64 bits of `m * n` for
/// every 32-bit `n` and every `d >= 2`; `d = 1` (for which `m` would be
/// `2^64`) is kept apart. A divisor of 0 is treated as 1: no caller divides
/// by a size of 0, and the type stays total.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Div {
    d: u32,
    /// `ceil(2^64 / d)`, or 0 when `d <= 1`.
    m: u64,
}

impl Div {
    pub fn new(d: u32) -> Div {
        let d = d.max(1);
        let m = if d == 1 {
            0
        } else {
            u64::MAX / u64::from(d) + 1
        };
        Div { d, m }
    }

    /// The divisor.
    pub fn divisor(self) -> u32 {
        self.d
    }

    /// `n / d`.
    #[inline]
    #[allow(clippy::cast_possible_truncation)] // the high half is below 2^32, below
    pub fn div(self, n: u32) -> u32 {
        if self.m == 0 {
            return n;
        }
        // The high half of a 64 x 32-bit product is below 2^32.
        ((u128::from(self.m) * u128::from(n)) >> 64) as u32
    }

    /// `(n / d, n % d)`.
    #[inline]
    pub fn div_rem(self, n: u32) -> (u32, u32) {
        let q = self.div(n);
        (q, n.wrapping_sub(q.wrapping_mul(self.d)))
    }
}

/// A split of `0..n` into `parts` contiguous blocks whose sizes differ by at
/// most one, the first `n % parts` blocks one larger.
///
/// n = 5, parts = 3: blocks `0..2`, `2..4`, `4..5`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Blocks {
    /// Indices in the small blocks (`n / parts`) and in the big ones (one more).
    small: Div,
    big: Div,
    /// The number of big blocks, `n % parts`.
    bigs: u32,
}

impl Blocks {
    /// `None` unless `1 <= parts <= n`, so that every block is non-empty.
    pub fn new(n: u32, parts: u32) -> Option<Blocks> {
        (parts >= 1 && parts <= n).then(|| {
            let small = n / parts;
            Blocks {
                small: Div::new(small),
                big: Div::new(small + 1),
                bigs: n % parts,
            }
        })
    }

    /// The block holding index `i < n`.
    pub fn block_of(self, i: u32) -> u32 {
        let in_big = self.bigs * self.big.divisor();
        if i < in_big {
            self.big.div(i)
        } else {
            self.bigs + self.small.div(i - in_big)
        }
    }

    /// The indices of block `b < parts`.
    pub fn range(self, b: u32) -> Range<u32> {
        let q = self.small.divisor();
        let start = b * q + b.min(self.bigs);
        let len = q + u32::from(b < self.bigs);
        start..start + len
    }

    /// The size of the largest block.
    pub fn max_len(self) -> u32 {
        self.small.divisor() + u32::from(self.bigs > 0)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn blocks_five_into_three() {
        let b = Blocks::new(5, 3).unwrap();
        assert_eq!(
            (0..3).map(|i| b.range(i)).collect::<Vec<_>>(),
            vec![0..2, 2..4, 4..5]
        );
        assert_eq!(
            (0..5).map(|i| b.block_of(i)).collect::<Vec<_>>(),
            vec![0, 0, 1, 1, 2]
        );
        assert_eq!(b.max_len(), 2);
        assert_eq!(Blocks::new(2, 3), None);
        assert_eq!(Blocks::new(2, 0), None);
    }

    #[test]
    fn block_of_agrees_with_range() {
        for n in 1..40 {
            for parts in 1..=n {
                let b = Blocks::new(n, parts).unwrap();
                let mut next = 0;
                for block in 0..parts {
                    let r = b.range(block);
                    assert_eq!(r.start, next, "n={n} parts={parts}");
                    let len = u32::try_from(r.len()).unwrap();
                    assert!(len + 1 >= b.max_len() && len <= b.max_len());
                    for i in r.clone() {
                        assert_eq!(b.block_of(i), block);
                    }
                    next = r.end;
                }
                assert_eq!(next, n);
            }
        }
    }

    #[test]
    fn checked_product_overflows_to_none() {
        assert_eq!(checked_product([1 << 16, 1 << 15]), Some(1 << 31));
        assert_eq!(checked_product([1 << 16, 1 << 16]), None);
    }

    #[test]
    fn div_edge_cases() {
        for d in [
            1,
            2,
            3,
            7,
            10,
            641,
            65_537,
            (1 << 31) - 1,
            1 << 31,
            u32::MAX,
        ] {
            let div = Div::new(d);
            for n in [0, 1, d - 1, d, d.wrapping_add(1), u32::MAX - 1, u32::MAX] {
                assert_eq!(div.div_rem(n), (n / d, n % d), "{n} / {d}");
            }
        }
        assert_eq!(Div::new(0).div_rem(9), (9, 0));
    }

    proptest! {
        /// The multiplication gives exactly `/` and `%` for every divisor and dividend.
        #[test]
        fn div_is_exact(d in 1u32.., n in any::<u32>()) {
            prop_assert_eq!(Div::new(d).div_rem(n), (n / d, n % d));
        }
    }
}
