//! Every group of a kind, collected with one allocation.

use crate::cast::to_usize;
use std::iter::FusedIterator;

use arrayvec::ArrayVec;

use crate::plan::Run;

/// The groups of one kind as one buffer of members plus their boundaries:
/// indexable, and iterable as slices.
///
/// A kind's groups all have one size, except in an encoder + decoder
/// layout, where the encoder's groups (listed first) and the decoder's may
/// differ; the boundaries are kept as those runs, so the table is one
/// allocation.
///
/// Created by [`Groups::table`](crate::Groups::table).
///
/// ```
/// use rank_layout::{Config, Kind, Layout};
/// // Encoder tp = 1 before a decoder with tp = 2, dp = 2 (Megatron-LM's test).
/// let layout = Layout::new(&Config::new().tp(2).dp(2).encoder_tp(1).order("tp-dp-pp".parse()?))?;
/// let tp = layout.groups(Kind::TP)?.table()?;
/// assert_eq!(tp.len(), 4);
/// assert_eq!(tp.get(1), Some(&[1][..]));
/// assert_eq!(tp.get(2), Some(&[2, 3][..]));
/// assert_eq!(tp.iter().map(<[u32]>::len).collect::<Vec<_>>(), vec![1, 1, 2, 2]);
/// assert_eq!(tp.members(), &[0, 1, 2, 3, 4, 5]);
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupTable {
    members: Vec<u32>,
    runs: ArrayVec<Run, 2>,
}

impl GroupTable {
    /// `members` of groups whose sizes are `runs`.
    pub(crate) fn new(members: Vec<u32>, runs: ArrayVec<Run, 2>) -> GroupTable {
        GroupTable { members, runs }
    }

    /// The number of groups.
    pub fn len(&self) -> usize {
        self.runs.iter().map(|r| to_usize(r.count)).sum()
    }

    /// Whether there is no group.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Group `i`, or `None` past the end. O(1).
    pub fn get(&self, i: usize) -> Option<&[u32]> {
        let mut start = 0usize;
        let mut i = i;
        for run in &self.runs {
            let (count, len) = (to_usize(run.count), to_usize(run.len));
            if i < count {
                let at = start + i * len;
                return self.members.get(at..at + len);
            }
            i -= count;
            start += count * len;
        }
        None
    }

    /// Every member, group after group.
    pub fn members(&self) -> &[u32] {
        &self.members
    }

    /// The members buffer, group after group.
    pub fn into_members(self) -> Vec<u32> {
        self.members
    }

    /// The size of every group when they all have one size.
    pub fn group_len(&self) -> Option<usize> {
        match self.runs.as_slice() {
            [] => Some(0),
            [run] => Some(to_usize(run.len)),
            _ => None,
        }
    }

    /// An iterator over the groups as slices.
    pub fn iter(&self) -> TableIter<'_> {
        TableIter {
            table: self,
            next: 0,
            end: self.len(),
        }
    }
}

impl<'a> IntoIterator for &'a GroupTable {
    type Item = &'a [u32];
    type IntoIter = TableIter<'a>;
    fn into_iter(self) -> TableIter<'a> {
        self.iter()
    }
}

/// An iterator over the groups of a [`GroupTable`] as slices.
///
/// Created by [`GroupTable::iter`].
#[derive(Debug, Clone)]
#[must_use = "iterators are lazy and do nothing unless consumed"]
pub struct TableIter<'a> {
    table: &'a GroupTable,
    next: usize,
    end: usize,
}

impl<'a> Iterator for TableIter<'a> {
    type Item = &'a [u32];

    fn next(&mut self) -> Option<&'a [u32]> {
        (self.next < self.end).then(|| {
            self.next += 1;
            self.table.get(self.next - 1).unwrap_or_default()
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.end - self.next;
        (n, Some(n))
    }
}

impl DoubleEndedIterator for TableIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        (self.next < self.end).then(|| {
            self.end -= 1;
            self.table.get(self.end).unwrap_or_default()
        })
    }
}

impl ExactSizeIterator for TableIter<'_> {}
impl FusedIterator for TableIter<'_> {}
