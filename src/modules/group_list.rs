//! Equal-sized groups of ranks kept in one buffer.

use std::slice::ChunksExact;

use crate::error::{Error, Result};

/// Groups of ranks of one size, one after the other in one buffer: a
/// bridge plan's broadcast, gather and reduce groups.
///
/// ```
/// use rank_layout::{Mesh, Modules, modules::Spans};
/// let modules = Modules::new(
///     [("enc", Mesh::new([("tp", 2), ("dp", 2)])?), ("llm", Mesh::new([("tp", 4)])?)],
///     Spans::Consecutive,
/// )?
/// .edge("enc", "llm")?;
/// let plan = modules.bridge("enc", "llm")?;
/// assert_eq!(plan.src_broadcast.to_vecs(), vec![vec![0, 1], vec![2, 3]]);
/// assert_eq!(plan.src_broadcast.get(1), Some(&[2, 3][..]));
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct GroupList {
    members: Vec<u32>,
    size: usize,
}

impl GroupList {
    /// Groups of `size` ranks from `members` (a whole number of groups).
    pub(crate) fn new(members: Vec<u32>, size: usize) -> GroupList {
        debug_assert!(size == 0 || members.len() % size == 0);
        GroupList { members, size }
    }

    /// The number of groups.
    pub fn len(&self) -> usize {
        self.members.len().checked_div(self.size).unwrap_or(0)
    }

    /// Whether there is no group.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The size of every group.
    pub fn group_size(&self) -> usize {
        self.size
    }

    /// Group `i`.
    pub fn get(&self, i: usize) -> Option<&[u32]> {
        let start = i.checked_mul(self.size)?;
        self.members.get(start..start.checked_add(self.size)?)
    }

    /// The groups in order.
    pub fn iter(&self) -> ChunksExact<'_, u32> {
        self.members.chunks_exact(self.size.max(1))
    }

    /// Every member, group after group.
    pub fn members(&self) -> &[u32] {
        &self.members
    }

    /// The groups as vectors.
    pub fn to_vecs(&self) -> Vec<Vec<u32>> {
        self.iter().map(<[u32]>::to_vec).collect()
    }
}

impl<'a> IntoIterator for &'a GroupList {
    type Item = &'a [u32];
    type IntoIter = ChunksExact<'a, u32>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Whether `members` ranks can be allocated: a reservation that is given
/// back at once (nothing is touched), so that a plan too large for the
/// machine is an error rather than an abort.
///
/// # Errors
/// [`Error::OutOfMemory`].
pub(crate) fn can_hold(members: u64) -> Result<()> {
    let error = || Error::OutOfMemory {
        members,
        bytes: members.saturating_mul(4),
    };
    let len = usize::try_from(members).map_err(|_| error())?;
    let mut probe: Vec<u32> = Vec::new();
    probe.try_reserve_exact(len).map_err(|_| error())
}
