//! A box of a tensor in global coordinates, and a point of it (an offset
//! per dim): plain values, no heap.

use std::fmt;
use std::ops::Deref;

/// The most dims a tensor may have.
pub const MAX_DIMS: usize = 6;

/// An offset (or a length) per dim of a tensor: at most [`MAX_DIMS`]
/// values, read as a slice.
///
/// ```
/// use rank_layout::reshard::Point;
/// let p = Point::new(&[3, 0, 8]).unwrap();
/// assert_eq!(&p[..], &[3, 0, 8]);
/// assert!(Point::new(&[0; 7]).is_none());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Point {
    values: [u64; MAX_DIMS],
    dims: u8,
}

impl Point {
    /// The point of `values`, `None` past [`MAX_DIMS`] dims.
    pub fn new(values: &[u64]) -> Option<Point> {
        let mut p = Point::default();
        for v in values {
            p.push(*v)?;
        }
        Some(p)
    }

    pub(crate) fn push(&mut self, v: u64) -> Option<()> {
        let slot = self.values.get_mut(usize::from(self.dims))?;
        *slot = v;
        self.dims += 1;
        Some(())
    }

    /// The values as a vector.
    pub fn to_vec(&self) -> Vec<u64> {
        self.deref().to_vec()
    }
}

impl Deref for Point {
    type Target = [u64];

    fn deref(&self) -> &[u64] {
        self.values
            .get(..usize::from(self.dims))
            .unwrap_or(&self.values)
    }
}

impl fmt::Debug for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A box of a tensor: `[lo[d], hi[d])` on every dim, in global
/// coordinates, never empty.
///
/// ```
/// use rank_layout::reshard::Region;
/// let r = Region::new(&[(0, 72), (16, 48)]).unwrap();
/// assert_eq!((r.dims(), r.numel(), r.range(1)), (2, 72 * 32, Some((16, 48))));
/// assert_eq!(r.to_string(), "[[0, 72], [16, 48]]");
/// assert!(Region::new(&[(4, 4)]).is_none()); // empty
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Region {
    lo: Point,
    hi: Point,
}

impl Region {
    /// The box of `ranges` (`lo`, `hi`) per dim, `None` when one is empty
    /// or there are more than [`MAX_DIMS`].
    pub fn new(ranges: &[(u64, u64)]) -> Option<Region> {
        let mut r = Region {
            lo: Point::default(),
            hi: Point::default(),
        };
        for &(lo, hi) in ranges {
            if hi <= lo {
                return None;
            }
            r.lo.push(lo)?;
            r.hi.push(hi)?;
        }
        Some(r)
    }

    pub(crate) fn from_points(lo: Point, hi: Point) -> Region {
        Region { lo, hi }
    }

    /// Its dims.
    pub fn dims(&self) -> usize {
        self.lo.len()
    }

    /// Its first element per dim.
    pub fn lo(&self) -> &[u64] {
        &self.lo
    }

    /// One past its last element per dim.
    pub fn hi(&self) -> &[u64] {
        &self.hi
    }

    /// `(lo, hi)` of dim `dim`.
    pub fn range(&self, dim: usize) -> Option<(u64, u64)> {
        Some((*self.lo.get(dim)?, *self.hi.get(dim)?))
    }

    /// Its length per dim.
    pub fn shape(&self) -> Point {
        let mut p = Point::default();
        for (lo, hi) in self.lo.iter().zip(self.hi.iter()) {
            let _ = p.push(hi - lo);
        }
        p
    }

    /// Its elements (`u64`: a tensor's elements fit, checked when its
    /// model was made).
    pub fn numel(&self) -> u64 {
        self.lo
            .iter()
            .zip(self.hi.iter())
            .fold(1u64, |a, (lo, hi)| a.saturating_mul(hi - lo))
    }
}

impl fmt::Display for Region {
    /// `[[lo, hi], ...]`, as the JSON output writes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (d, (lo, hi)) in self.lo.iter().zip(self.hi.iter()).enumerate() {
            if d > 0 {
                f.write_str(", ")?;
            }
            write!(f, "[{lo}, {hi}]")?;
        }
        f.write_str("]")
    }
}

impl fmt::Debug for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
