//! A rank's place in the groups of one kind: the arguments of `MPI_Comm_split`.

use std::fmt;

/// A rank's comm-split pair for one kind (and round): the group's index
/// among the kind's groups, which is the `MPI_Comm_split` color, and the
/// rank's position in that group, which is the key (and its rank in the
/// communicator).
///
/// ```
/// use rank_layout::{Config, Kind, Layout, Split};
/// let layout = Layout::new(&Config::new().tp(2).pp(4).world_size(Some(16)))?;
/// // pp groups [0, 4, 8, 12], [1, 5, 9, 13], ...: rank 13 is the fourth member of group 1.
/// assert_eq!(layout.split(13, Kind::PP)?, Some(Split { color: 1, key: 3 }));
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Split {
    /// The group's index in [`Layout::groups`](crate::Layout::groups) order.
    pub color: u32,
    /// The rank's position in the group.
    pub key: u32,
}

impl Split {
    /// The same split with its color moved by `by` groups (a second grid's
    /// groups listed after a first one's).
    pub(crate) fn shifted(self, by: u32) -> Split {
        Split {
            color: self.color + by,
            ..self
        }
    }
}

impl fmt::Display for Split {
    /// `color/key`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.color, self.key)
    }
}
