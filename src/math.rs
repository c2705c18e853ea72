//! Pure index arithmetic: checked products, mixed-radix numbers, balanced blocks.
//!
//! Nothing here knows about axes or kinds; everything is O(number of digits).

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

/// A digit of a mixed-radix number: its radix (`size`) and its weight (`stride`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Digit {
    pub size: u32,
    pub stride: u32,
}

/// `sum(digit_i(n) * stride_i)` where `digit_i(n)` are the digits of `n` in
/// the mixed radix of `digits`, first digit fastest.
///
/// Sizes `(2, 3)` with strides `(1, 10)`: n = 4 = 0 + 2*2 -> 0*1 + 2*10 = 20.
/// The caller guarantees the result fits (it is a member of a grid).
pub(crate) fn spread(n: u32, digits: &[Digit]) -> u32 {
    let mut rest = n;
    let mut out = 0u32;
    for d in digits {
        out = out.wrapping_add((rest % d.size).wrapping_mul(d.stride));
        rest /= d.size;
    }
    out
}

/// A split of `0..n` into `parts` contiguous blocks whose sizes differ by at
/// most one, the first `n % parts` blocks one larger (SPEC 3.3).
///
/// n = 5, parts = 3: blocks `0..2`, `2..4`, `4..5`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Blocks {
    n: u32,
    parts: u32,
}

impl Blocks {
    /// Requires `1 <= parts <= n`, so that every block is non-empty.
    pub fn new(n: u32, parts: u32) -> Blocks {
        debug_assert!(parts >= 1 && parts <= n);
        Blocks { n, parts }
    }

    fn small(self) -> u32 {
        self.n / self.parts
    }

    fn big_blocks(self) -> u32 {
        self.n % self.parts
    }

    /// The block holding index `i < n`.
    pub fn block_of(self, i: u32) -> u32 {
        let (q, r) = (self.small(), self.big_blocks());
        let in_big = r * (q + 1);
        if i < in_big {
            i / (q + 1)
        } else {
            r + (i - in_big) / q
        }
    }

    /// The indices of block `b < parts`.
    pub fn range(self, b: u32) -> Range<u32> {
        let (q, r) = (self.small(), self.big_blocks());
        let start = b * q + b.min(r);
        let len = q + u32::from(b < r);
        start..start + len
    }

    /// The size of the largest block.
    pub fn max_len(self) -> u32 {
        self.small() + u32::from(self.big_blocks() > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_five_into_three() {
        let b = Blocks::new(5, 3);
        assert_eq!(
            (0..3).map(|i| b.range(i)).collect::<Vec<_>>(),
            vec![0..2, 2..4, 4..5]
        );
        assert_eq!(
            (0..5).map(|i| b.block_of(i)).collect::<Vec<_>>(),
            vec![0, 0, 1, 1, 2]
        );
        assert_eq!(b.max_len(), 2);
    }

    #[test]
    fn block_of_agrees_with_range() {
        for n in 1..40 {
            for parts in 1..=n {
                let b = Blocks::new(n, parts);
                let mut next = 0;
                for block in 0..parts {
                    let r = b.range(block);
                    assert_eq!(r.start, next, "n={n} parts={parts}");
                    assert!(r.len() as u32 + 1 >= b.max_len() && r.len() as u32 <= b.max_len());
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
    fn checked_product_overflows_to_none() {
        assert_eq!(checked_product([1 << 16, 1 << 15]), Some(1 << 31));
        assert_eq!(checked_product([1 << 16, 1 << 16]), None);
    }
}
