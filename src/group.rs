//! One process group as a lazy, slice-like view of its ranks.

use crate::cast::{to_u64, to_usize};
use std::fmt;
use std::iter::FusedIterator;

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrayvec::ArrayVec;

use crate::error::{Error, Result};
use crate::segment::{MAX_DIGITS, Segment};

/// `n` zeros, allocated fallibly.
///
/// # Errors
/// [`Error::OutOfMemory`] when they cannot be allocated.
pub(crate) fn try_zeroed(n: u64) -> Result<Vec<u32>> {
    let error = || Error::OutOfMemory {
        members: n,
        bytes: n.saturating_mul(4),
    };
    let len = usize::try_from(n).map_err(|_| error())?;
    let mut out: Vec<u32> = Vec::new();
    out.try_reserve_exact(len).map_err(|_| error())?;
    out.resize(len, 0);
    Ok(out)
}

/// One process group: its member ranks in Megatron-LM's order.
///
/// A group is a small value (no heap) that computes its members on demand:
/// `len`, `get`, `first`, `last` are O(axes), iterating is O(len) (an
/// odometer, no division per member). Collect it with `to_vec()` or
/// `collect()`.
///
/// Two groups are equal (and hash alike) when they list the same ranks in
/// the same order, whatever kind or layout they come from: with cp = 1 the
/// `tp` group `[0, 1]` equals the `tp-cp` group `[0, 1]`. Comparing is
/// O(len).
///
/// ```
/// use rank_layout::{Config, Kind, Layout};
/// let layout = Layout::new(&Config::new().tp(2).pp(4).world_size(Some(16)))?;
/// let pp0 = layout.groups(Kind::PP)?.next().unwrap();
/// assert_eq!(pp0.len(), 4);
/// assert_eq!(pp0.to_vec(), vec![0, 4, 8, 12]);
/// assert_eq!(pp0.last(), Some(12));
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Clone)]
pub struct Group {
    segments: ArrayVec<Segment, 2>,
    map: Option<RankMap>,
}

/// A mesh's rank map: the segments' values are positions in the mesh, and
/// position `p` is rank `offset + ranks[p]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RankMap {
    pub offset: u32,
    pub ranks: Arc<[u32]>,
}

impl RankMap {
    /// The rank at position `p` (a position past the map stays as it is;
    /// callers pass positions of the mesh).
    #[inline]
    pub fn rank(&self, p: u32) -> u32 {
        let mapped = self.ranks.get(to_usize(p)).copied().unwrap_or(p);
        self.offset.wrapping_add(mapped)
    }
}

impl Group {
    pub(crate) fn new(segment: Segment) -> Group {
        let mut segments = ArrayVec::new();
        let _ = segments.try_push(segment);
        Group {
            segments,
            map: None,
        }
    }

    /// The concatenation of two segments (encoder part, then decoder part).
    pub(crate) fn joined(first: Segment, second: Segment) -> Group {
        let mut segments = ArrayVec::new();
        let _ = segments.try_push(first);
        let _ = segments.try_push(second);
        Group {
            segments,
            map: None,
        }
    }

    /// The group whose segment values are mesh positions, mapped to ranks by `map`.
    pub(crate) fn mapped(segment: Segment, map: RankMap) -> Group {
        Group {
            map: Some(map),
            ..Group::new(segment)
        }
    }

    /// The rank of a segment value.
    #[inline]
    fn rank_of(&self, raw: u32) -> u32 {
        match &self.map {
            Some(map) => map.rank(raw),
            None => raw,
        }
    }

    /// The number of members.
    #[allow(clippy::len_without_is_empty)] // a group is never empty
    pub fn len(&self) -> usize {
        self.segments.iter().map(|s| to_usize(s.len())).sum()
    }

    /// Member `i` (in group order), or `None` past the end.
    pub fn get(&self, i: usize) -> Option<u32> {
        let mut i = u32::try_from(i).ok()?;
        for segment in &self.segments {
            if i < segment.len() {
                return Some(self.rank_of(segment.at(i)));
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
    ///
    /// # Panics
    /// When the allocation fails (a group of billions of ranks): use
    /// [`try_to_vec`](Self::try_to_vec) where the group's size comes from input.
    pub fn to_vec(&self) -> Vec<u32> {
        let mut out = vec![0; self.len()];
        self.fill_into(&mut out);
        out
    }

    /// The members collected into a vector, or [`Error::OutOfMemory`]
    /// when it cannot be allocated.
    ///
    /// ```
    /// use rank_layout::{Config, Kind, Layout};
    /// let layout = Layout::new(&Config::new().tp(4).world_size(8))?;
    /// let tp = layout.groups(Kind::TP)?.next().unwrap();
    /// assert_eq!(tp.try_to_vec()?, vec![0, 1, 2, 3]);
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::OutOfMemory`].
    pub fn try_to_vec(&self) -> Result<Vec<u32>> {
        let mut out = try_zeroed(to_u64(self.len()))?;
        self.fill_into(&mut out);
        Ok(out)
    }

    /// Writes the members into the start of `out` (as many as fit) and
    /// returns how many it wrote.
    pub(crate) fn fill_into(&self, out: &mut [u32]) -> usize {
        let mut at = 0;
        for segment in &self.segments {
            let len = to_usize(segment.len());
            if let Some(rest) = out.get_mut(at..) {
                segment.fill(rest);
            }
            at += len;
        }
        let written = at.min(out.len());
        if let (Some(map), Some(done)) = (&self.map, out.get_mut(..written)) {
            for r in done {
                *r = map.rank(*r);
            }
        }
        written
    }
}

impl PartialEq for Group {
    fn eq(&self, other: &Group) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Group {}

impl Hash for Group {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_usize(self.len());
        for rank in self {
            state.write_u32(rank);
        }
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
            self.sizes = [u32::MAX; MAX_DIGITS];
            self.strides = [0; MAX_DIGITS];
            for (((digit, size), stride), d) in self
                .digits
                .iter_mut()
                .zip(&mut self.sizes)
                .zip(&mut self.strides)
                .zip(&segment.digits)
            {
                *digit = rest % d.size;
                *size = d.size;
                *stride = d.stride;
                rest /= d.size;
            }
            self.rank = segment.at(0);
            self.left = segment.len - 1;
            self.index = 1;
            self.remaining -= 1;
            return Some(self.group.rank_of(self.rank));
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
            // digit absorbs the carry (digits past the segment's have size
            // u32::MAX and never carry).
            for ((digit, size), stride) in
                self.digits.iter_mut().zip(&self.sizes).zip(&self.strides)
            {
                *digit += 1;
                self.rank = self.rank.wrapping_add(*stride);
                if *digit < *size {
                    break;
                }
                *digit = 0;
                self.rank = self.rank.wrapping_sub(size.wrapping_mul(*stride));
            }
        } else {
            if let Some(segment) = self
                .segment
                .checked_sub(1)
                .and_then(|s| self.group.segments.get(s))
            {
                self.rank = segment.at(self.index);
            }
        }
        self.index += 1;
        Some(self.group.rank_of(self.rank))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Members {}
impl FusedIterator for Members {}
