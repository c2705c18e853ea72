//! A grid of ranks: ordered axes with sizes and strides.

use arrayvec::ArrayVec;

use crate::axis::{Axis, AxisSet};
use crate::error::{Error, Result};
use crate::math::{Div, checked_product};
use crate::segment::Digit;

/// Most axes a grid has (the five order tokens and a weight-shard axis).
pub(crate) const MAX_AXES: usize = 6;

/// A rank's coordinates in a grid, by axis position (first axis first).
pub(crate) type Coords = [u32; MAX_AXES];

/// One axis of a grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct GridAxis {
    pub axis: Axis,
    pub digit: Digit,
    /// Division by the size, to decode coordinates.
    pub size: Div,
}

/// Ordered axes, first fastest: `rank = offset + sum(coord[a] * stride[a])`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Grid {
    axes: ArrayVec<GridAxis, MAX_AXES>,
    offset: u32,
    world: u32,
}

impl Grid {
    /// A grid of the given axes (distinct, at most five, in order) at `offset`.
    ///
    /// # Errors
    /// [`Error::Overflow`] when the world or its last rank does not fit a `u32`.
    pub fn new(axes: &[(Axis, u32)], offset: u32) -> Result<Grid> {
        let overflow = || Error::Overflow {
            what: format!(
                "the grid {}",
                axes.iter()
                    .map(|(a, s)| format!("{a}={s}"))
                    .collect::<Vec<_>>()
                    .join(" * ")
            ),
        };
        let world = checked_product(axes.iter().map(|(_, s)| *s)).ok_or_else(overflow)?;
        if u64::from(offset) + u64::from(world) > 1 << 32 {
            return Err(Error::Overflow {
                what: format!("rank_offset ({offset}) + world ({world})"),
            });
        }
        // Sizes (a, b, c) => strides (1, a, a*b): the first axis varies fastest.
        let mut stride = 1u32;
        let mut out = ArrayVec::new();
        for &(axis, size) in axes {
            out.try_push(GridAxis {
                axis,
                digit: Digit { size, stride },
                size: Div::new(size),
            })
            .map_err(|_| overflow())?;
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
    #[inline]
    pub fn end(&self) -> u64 {
        u64::from(self.offset) + u64::from(self.world)
    }

    pub fn axes(&self) -> &[GridAxis] {
        &self.axes
    }

    /// The position of `axis` in the grid.
    pub fn position(&self, axis: Axis) -> Option<usize> {
        self.axes.iter().position(|a| a.axis == axis)
    }

    pub fn digit(&self, axis: Axis) -> Option<Digit> {
        self.axes.iter().find(|a| a.axis == axis).map(|a| a.digit)
    }

    /// The size of `axis` (1 for an axis the grid lacks).
    pub fn size(&self, axis: Axis) -> u32 {
        self.digit(axis).map_or(1, |d| d.size)
    }

    /// The distance between neighbours along `axis` (0 for an axis the grid lacks).
    pub fn stride(&self, axis: Axis) -> u32 {
        self.digit(axis).map_or(0, |d| d.stride)
    }

    #[inline]
    pub fn contains(&self, rank: u32) -> bool {
        rank >= self.offset && u64::from(rank) < self.end()
    }

    /// The coordinates of `rank`, or `None` outside the grid.
    #[inline]
    pub fn decode(&self, rank: u32) -> Option<Coords> {
        if !self.contains(rank) {
            return None;
        }
        let mut rest = rank - self.offset;
        let mut coords = [0; MAX_AXES];
        for (c, a) in coords.iter_mut().zip(&self.axes) {
            let (q, r) = a.size.div_rem(rest);
            *c = r;
            rest = q;
        }
        Some(coords)
    }

    /// The rank whose coordinate along each axis is `coord(axis)`.
    ///
    /// # Errors
    /// [`Error::CoordOutOfRange`] for a coordinate past its axis.
    pub fn rank_with(&self, coord: impl Fn(Axis) -> u32) -> Result<u32> {
        let mut rank = self.offset;
        for a in &self.axes {
            let value = coord(a.axis);
            if value >= a.digit.size {
                return Err(Error::CoordOutOfRange {
                    axis: a.axis,
                    value,
                    size: a.digit.size,
                });
            }
            rank += value * a.digit.stride;
        }
        Ok(rank)
    }

    /// The positions of `axes` as a bit mask, or `None` if one of them is
    /// not an axis of this grid.
    pub fn mask(&self, axes: AxisSet) -> Option<u8> {
        let mut bits = 0u8;
        let mut seen = AxisSet::EMPTY;
        for (i, a) in self.axes.iter().enumerate() {
            if axes.contains(a.axis) {
                bits |= 1 << i;
                seen = seen.with(a.axis);
            }
        }
        (seen == axes).then_some(bits)
    }
}
