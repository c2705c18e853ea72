//! One process group as a lazy, slice-like view of its ranks.

use std::fmt;
use std::iter::FusedIterator;

use arrayvec::ArrayVec;

use crate::math::{Digit, spread};

/// Most digits a segment needs: the five grid axes plus one for concatenation.
pub(crate) const MAX_DIGITS: usize = 6;

/// Ranks `base + spread(start + i * step)` for `i` in `0..len`: a strided
/// slice of a mixed-radix box of ranks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Segment {
    base: u32,
    digits: ArrayVec<Digit, MAX_DIGITS>,
    start: u32,
    step: u32,
    len: u32,
}

impl Segment {
    /// The whole box: every combination of `digits`, first digit fastest.
    pub fn boxed(base: u32, digits: impl IntoIterator<Item = Digit>) -> Segment {
        let digits: ArrayVec<Digit, MAX_DIGITS> = digits.into_iter().collect();
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
        Segment::boxed(rank, [])
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

    /// The segment with one more, slowest, digit.
    pub fn extended(mut self, digit: Digit) -> Segment {
        debug_assert!(self.start == 0 && self.step == 1);
        self.digits.push(digit);
        self.len *= digit.size;
        self
    }

    pub fn len(&self) -> u32 {
        self.len
    }

    /// Member `i < len`.
    pub fn at(&self, i: u32) -> u32 {
        self.base
            .wrapping_add(spread(self.start + i * self.step, &self.digits))
    }
}

/// One process group: its member ranks in Megatron-LM's order.
///
/// A group is a small value (no heap) that computes its members on demand:
/// `len`, `get`, `first`, `last` are O(axes), iterating is O(len * axes).
/// Collect it with `to_vec()` or `collect()`.
///
/// ```
/// use rank_layout::{Config, Kind, Layout};
/// let layout = Layout::new(&Config { tp: 2, pp: 4, world_size: Some(16), ..Config::default() })?;
/// let pp0 = layout.groups(Kind::PP)?.next().unwrap();
/// assert_eq!(pp0.len(), 4);
/// assert_eq!(pp0.to_vec(), vec![0, 4, 8, 12]);
/// assert_eq!(pp0.last(), Some(12));
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Group {
    segments: ArrayVec<Segment, 2>,
}

impl Group {
    pub(crate) fn new(segment: Segment) -> Group {
        let mut segments = ArrayVec::new();
        segments.push(segment);
        Group { segments }
    }

    /// The concatenation of two segments (encoder part, then decoder part).
    pub(crate) fn joined(first: Segment, second: Segment) -> Group {
        let mut segments = ArrayVec::new();
        segments.push(first);
        segments.push(second);
        Group { segments }
    }

    /// The number of members.
    #[allow(clippy::len_without_is_empty)] // a group is never empty
    pub fn len(&self) -> usize {
        self.segments.iter().map(|s| s.len() as usize).sum()
    }

    /// Member `i` (in group order), or `None` past the end.
    pub fn get(&self, i: usize) -> Option<u32> {
        let mut i = u32::try_from(i).ok()?;
        for segment in &self.segments {
            if i < segment.len() {
                return Some(segment.at(i));
            }
            i -= segment.len();
        }
        None
    }

    /// The first member.
    pub fn first(&self) -> Option<u32> {
        self.get(0)
    }

    /// The last member.
    pub fn last(&self) -> Option<u32> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    /// An iterator over the members, in order.
    pub fn iter(&self) -> Members {
        Members::new(self.clone())
    }

    /// The members collected into a vector.
    pub fn to_vec(&self) -> Vec<u32> {
        self.iter().collect()
    }
}

impl fmt::Debug for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl IntoIterator for Group {
    type Item = u32;
    type IntoIter = Members;
    fn into_iter(self) -> Members {
        self.iter()
    }
}

impl IntoIterator for &Group {
    type Item = u32;
    type IntoIter = Members;
    fn into_iter(self) -> Members {
        self.iter()
    }
}

/// An iterator over the member ranks of a [`Group`].
///
/// Created by [`Group::iter`].
#[derive(Debug, Clone)]
#[must_use = "iterators are lazy and do nothing unless consumed"]
pub struct Members {
    group: Group,
    /// The next segment to load.
    segment: usize,
    /// Members left in the current segment.
    left: u32,
    /// Index in the current segment of the next member.
    index: u32,
    remaining: usize,
    /// The current segment has unit step: advance by odometer.
    unit: bool,
    /// The last rank yielded, and its digits, sizes and strides (unit step).
    rank: u32,
    digits: [u32; MAX_DIGITS],
    sizes: [u32; MAX_DIGITS],
    strides: [u32; MAX_DIGITS],
}

impl Members {
    fn new(group: Group) -> Members {
        let remaining = group.len();
        Members {
            group,
            segment: 0,
            left: 0,
            index: 0,
            remaining,
            unit: false,
            rank: 0,
            digits: [0; MAX_DIGITS],
            sizes: [0; MAX_DIGITS],
            strides: [0; MAX_DIGITS],
        }
    }

    /// Loads the next non-empty segment and yields its first member.
    #[cold]
    fn load(&mut self) -> Option<u32> {
        loop {
            let segment = self.group.segments.get(self.segment)?;
            self.segment += 1;
            if segment.len == 0 {
                continue;
            }
            self.unit = segment.step == 1;
            let mut rest = segment.start;
            for (i, d) in segment.digits.iter().enumerate() {
                self.digits[i] = rest % d.size;
                self.sizes[i] = d.size;
                self.strides[i] = d.stride;
                rest /= d.size;
            }
            self.rank = segment.at(0);
            self.left = segment.len - 1;
            self.index = 1;
            self.remaining -= 1;
            return Some(self.rank);
        }
    }
}

impl Iterator for Members {
    type Item = u32;

    #[inline]
    fn next(&mut self) -> Option<u32> {
        if self.left == 0 {
            return self.load();
        }
        self.left -= 1;
        self.remaining -= 1;
        if self.unit {
            // Odometer, first digit fastest: a member follows, so some
            // digit below the last one absorbs the carry.
            for i in 0..MAX_DIGITS {
                self.digits[i] += 1;
                self.rank = self.rank.wrapping_add(self.strides[i]);
                if self.digits[i] < self.sizes[i] {
                    break;
                }
                self.digits[i] = 0;
                self.rank = self
                    .rank
                    .wrapping_sub(self.sizes[i].wrapping_mul(self.strides[i]));
            }
        } else {
            let segment = &self.group.segments[self.segment - 1];
            self.rank = segment.at(self.index);
        }
        self.index += 1;
        Some(self.rank)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Members {}
impl FusedIterator for Members {}
