//! The iterator over the groups of one kind.

use crate::cast::to_usize;
use std::borrow::Cow;
use std::iter::FusedIterator;

use crate::error::{Error, Result};
use crate::group::{Group, try_zeroed};
use crate::plan::Plan;
use crate::plan::table::GroupTable;

/// An iterator over the groups of one kind, in Megatron-LM's order.
///
/// Each group is computed in O(axes) when it is reached; nothing is
/// materialised. To get every member at once, [`fill`](Groups::fill) writes
/// them into a buffer of yours at memory speed, and [`table`](Groups::table)
/// collects them with one allocation.
///
/// Created by [`Layout::groups`](crate::Layout::groups).
#[derive(Debug, Clone)]
#[must_use = "iterators are lazy and do nothing unless consumed"]
pub struct Groups<'a> {
    plan: Cow<'a, Plan>,
    next: u32,
    end: u32,
}

impl<'a> Groups<'a> {
    pub(crate) fn new(plan: Cow<'a, Plan>) -> Groups<'a> {
        let end = plan.count();
        Groups { plan, next: 0, end }
    }

    /// The number of members of the remaining groups: the length
    /// [`fill`](Groups::fill) needs.
    ///
    /// ```
    /// use rank_layout::{Config, Kind, Layout};
    /// let layout = Layout::new(&Config::new().tp(4).world_size(Some(64)))?;
    /// assert_eq!(layout.groups(Kind::TP)?.member_count(), 64);
    /// assert_eq!(layout.groups(Kind::EMBD)?.member_count(), 64); // pp = 1: [only] per pipeline
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn member_count(&self) -> u64 {
        self.plan.members(self.next..self.end)
    }

    /// The size of every remaining group, when they all have one size
    /// (every kind but some of an encoder + decoder layout, whose encoder
    /// and decoder groups may differ); `None` otherwise.
    ///
    /// ```
    /// use rank_layout::{Config, Kind, Layout};
    /// let layout = Layout::new(&Config::new().tp(2).dp(Some(2)).encoder_tp(Some(1)))?;
    /// assert_eq!(layout.groups(Kind::DP)?.group_len(), Some(2));
    /// assert_eq!(layout.groups(Kind::TP)?.group_len(), None); // [0], [1], [2, 3], [4, 5]
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn group_len(&self) -> Option<usize> {
        let mut lens = self
            .plan
            .runs_in(self.next..self.end)
            .into_iter()
            .map(|r| r.len);
        let first = lens.next().unwrap_or(0);
        lens.all(|l| l == first).then_some(to_usize(first))
    }

    /// Writes every member of the remaining groups, group after group in
    /// enumeration order, into the start of `out`, and returns how many it
    /// wrote ([`member_count`](Groups::member_count)).
    ///
    /// Uses the grid's structure: a tile of the output is an earlier tile
    /// plus a constant, so the buffer is written by vectorised add-and-copy
    /// passes, with no division per member. Needs no memory beyond `out`.
    ///
    /// # Errors
    /// [`Error::BufferTooSmall`] when `out` is shorter than the members;
    /// nothing is written then.
    ///
    /// # Example
    /// ```
    /// use rank_layout::{Config, Kind, Layout};
    /// // Megatron's docstring: [tp, dp, pp] = [2, 3, 4], kind dp.
    /// let layout = Layout::new(&Config::new().tp(2).dp(Some(3)).pp(4).order("tp-dp-pp".parse()?))?;
    /// let mut out = vec![0u32; 24];
    /// assert_eq!(layout.groups(Kind::DP)?.fill(&mut out)?, 24);
    /// assert_eq!(&out[..6], &[0, 2, 4, 1, 3, 5]);
    /// assert_eq!(&out[21..], &[19, 21, 23]);
    /// assert!(layout.groups(Kind::DP)?.fill(&mut out[..23]).is_err());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn fill(self, out: &mut [u32]) -> Result<usize> {
        let needed = self.member_count();
        let len = usize::try_from(needed)
            .ok()
            .filter(|n| *n <= out.len())
            .ok_or(Error::BufferTooSmall {
                needed,
                len: out.len(),
            })?;
        let (head, _) = out.split_at_mut(len);
        self.plan.fill(self.next..self.end, head);
        Ok(len)
    }

    /// Every remaining group collected into one table: one allocation for
    /// all members, each group a slice.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when the members cannot be allocated.
    pub fn table(self) -> Result<GroupTable> {
        let mut members = try_zeroed(self.member_count())?;
        let runs = self.plan.runs_in(self.next..self.end);
        self.fill(&mut members)?;
        Ok(GroupTable::new(members, runs))
    }

    /// Every remaining group collected into vectors of ranks.
    pub fn to_vecs(self) -> Vec<Vec<u32>> {
        self.map(|g| g.to_vec()).collect()
    }
}

impl Iterator for Groups<'_> {
    type Item = Group;

    fn next(&mut self) -> Option<Group> {
        (self.next < self.end).then(|| {
            self.next += 1;
            self.plan.group(self.next - 1)
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = to_usize(self.end - self.next);
        (n, Some(n))
    }

    fn nth(&mut self, n: usize) -> Option<Group> {
        let skip = u32::try_from(n).unwrap_or(u32::MAX);
        self.next = self.next.saturating_add(skip).min(self.end);
        self.next()
    }
}

impl DoubleEndedIterator for Groups<'_> {
    fn next_back(&mut self) -> Option<Group> {
        (self.next < self.end).then(|| {
            self.end -= 1;
            self.plan.group(self.end)
        })
    }
}

impl ExactSizeIterator for Groups<'_> {}
impl FusedIterator for Groups<'_> {}
