//! A grid of ranks: ordered axes with sizes and strides, and its masked groups.

use arrayvec::ArrayVec;

use crate::group::Segment;
use crate::math::{Digit, checked_product};
use crate::{Axis, AxisSet, Error, Result};

/// Most axes a grid has (the five order tokens).
pub(crate) const MAX_AXES: usize = 5;

/// Bit `i` set: grid axis `i` is spanned by the groups (a resolved kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Mask(u8);

impl Mask {
    fn has(self, i: usize) -> bool {
        self.0 & (1 << i) != 0
    }
}

/// Ordered axes, first fastest: `rank = offset + sum(coord[a] * stride[a])`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Grid {
    axes: ArrayVec<(Axis, Digit), MAX_AXES>,
    offset: u32,
    world: u32,
}

impl Grid {
    /// A grid of the given axes (distinct, at most five, in order) at `offset`.
    ///
    /// # Errors
    /// [`Error::Overflow`] when the world or its last rank does not fit a `u32`.
    pub fn new(axes: &[(Axis, u32)], offset: u32) -> Result<Grid> {
        let world =
            checked_product(axes.iter().map(|(_, s)| *s)).ok_or_else(|| Error::Overflow {
                what: format!(
                    "the grid {}",
                    axes.iter()
                        .map(|(a, s)| format!("{a}={s}"))
                        .collect::<Vec<_>>()
                        .join(" * ")
                ),
            })?;
        if u64::from(offset) + u64::from(world) > 1 << 32 {
            return Err(Error::Overflow {
                what: format!("rank_offset ({offset}) + world ({world})"),
            });
        }
        // Sizes (a, b, c) => strides (1, a, a*b): the first axis varies fastest.
        let mut stride = 1u32;
        let mut out = ArrayVec::new();
        for &(axis, size) in axes {
            out.push((axis, Digit { size, stride }));
            stride = stride.wrapping_mul(size);
        }
        Ok(Grid {
            axes: out,
            offset,
            world,
        })
    }

    pub fn world(&self) -> u32 {
        self.world
    }

    pub fn offset(&self) -> u32 {
        self.offset
    }

    /// One past the last rank, as `u64` (it may be 2^32).
    pub fn end(&self) -> u64 {
        u64::from(self.offset) + u64::from(self.world)
    }

    pub fn axes(&self) -> impl Iterator<Item = (Axis, Digit)> + '_ {
        self.axes.iter().copied()
    }

    pub fn digit(&self, axis: Axis) -> Option<Digit> {
        self.axes.iter().find(|(a, _)| *a == axis).map(|(_, d)| *d)
    }

    pub fn size(&self, axis: Axis) -> u32 {
        self.digit(axis).map_or(1, |d| d.size)
    }

    pub fn contains(&self, rank: u32) -> bool {
        u64::from(rank) >= u64::from(self.offset) && u64::from(rank) < self.end()
    }

    /// The error for a rank outside this grid.
    pub fn out_of_range(&self, rank: u64) -> Error {
        Error::RankOutOfRange {
            rank,
            first: self.offset,
            end: self.end(),
        }
    }

    /// The coordinate of `rank` along `axis` (0 for an axis the grid lacks).
    pub fn coord(&self, rank: u32, axis: Axis) -> Option<u32> {
        if !self.contains(rank) {
            return None;
        }
        let local = rank - self.offset;
        Some(self.digit(axis).map_or(0, |d| (local / d.stride) % d.size))
    }

    /// The rank whose coordinate along each axis is `coord(axis)`.
    ///
    /// # Errors
    /// [`Error::CoordOutOfRange`] for a coordinate past its axis.
    pub fn rank_with(&self, coord: impl Fn(Axis) -> u32) -> Result<u32> {
        let mut rank = self.offset;
        for &(axis, d) in &self.axes {
            let value = coord(axis);
            if value >= d.size {
                return Err(Error::CoordOutOfRange {
                    axis,
                    value,
                    size: d.size,
                });
            }
            rank += value * d.stride;
        }
        Ok(rank)
    }

    /// The mask of `axes`, or `None` if one of them is not an axis of this grid.
    pub fn mask(&self, axes: AxisSet) -> Option<Mask> {
        let mut bits = 0u8;
        let mut seen = AxisSet::EMPTY;
        for (i, (axis, _)) in self.axes.iter().enumerate() {
            if axes.contains(*axis) {
                bits |= 1 << i;
                seen = seen.with(*axis);
            }
        }
        (seen == axes).then_some(Mask(bits))
    }

    /// The groups of `mask`, with their digits split once.
    pub fn partition(&self, mask: Mask) -> Partition {
        let (mut masked, mut unmasked) = (ArrayVec::new(), ArrayVec::new());
        for (i, (_, d)) in self.axes.iter().enumerate() {
            if mask.has(i) {
                masked.push(*d);
            } else {
                unmasked.push(*d);
            }
        }
        Partition {
            offset: self.offset,
            masked,
            unmasked,
        }
    }

    /// Members per group of `mask`.
    pub fn group_size(&self, mask: Mask) -> u32 {
        self.partition(mask).size()
    }

    /// Number of groups of `mask`.
    pub fn group_count(&self, mask: Mask) -> u32 {
        self.partition(mask).count()
    }

    /// Group `index < group_count(mask)`.
    pub fn group_segment(&self, mask: Mask, index: u32) -> Segment {
        self.partition(mask).segment(index)
    }

    /// `(group index, position in group)` of `rank` for `mask`, or `None`
    /// outside the grid.
    pub fn locate(&self, mask: Mask, rank: u32) -> Option<(u32, u32)> {
        if !self.contains(rank) {
            return None;
        }
        let local = rank - self.offset;
        let (mut index, mut key) = (0u32, 0u32);
        let (mut index_weight, mut key_weight) = (1u32, 1u32);
        for (i, (_, d)) in self.axes.iter().enumerate() {
            let c = (local / d.stride) % d.size;
            if mask.has(i) {
                key += c * key_weight;
                key_weight *= d.size;
            } else {
                index += c * index_weight;
                index_weight *= d.size;
            }
        }
        Some((index, key))
    }
}

/// The groups of one mask of a grid: masked digits (members) and unmasked
/// digits (group index), split once so that each group costs O(axes).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Partition {
    offset: u32,
    masked: ArrayVec<Digit, MAX_AXES>,
    unmasked: ArrayVec<Digit, MAX_AXES>,
}

impl Partition {
    /// Members per group.
    pub fn size(&self) -> u32 {
        self.masked.iter().map(|d| d.size).product()
    }

    /// Number of groups.
    pub fn count(&self) -> u32 {
        self.unmasked.iter().map(|d| d.size).product()
    }

    /// Group `index < count()`: the unmasked coordinates are the
    /// mixed-radix digits of `index`, the members run over the masked ones.
    pub fn segment(&self, index: u32) -> Segment {
        let base = self.offset + crate::math::spread(index, &self.unmasked);
        Segment::boxed(base, self.masked.iter().copied())
    }
}
