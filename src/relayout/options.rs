//! The choices of a re-layout beside its policy.

use crate::kind::Kind;

/// What a re-layout may do and what it reports.
///
/// ```
/// use rank_layout::relayout::RelayoutOptions;
/// use rank_layout::Kind;
/// let options = RelayoutOptions::default().min_dp(4).global_batch(1024, 2).kinds(vec![Kind::TP]);
/// assert_eq!((options.min_dp, options.global_batch), (4, Some((1024, 2))));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RelayoutOptions {
    /// The smallest data-parallel size the new layout may have (1 by
    /// default).
    pub min_dp: u32,
    /// The global batch and the micro-batch, when the data-parallel size
    /// must keep the global batch by gradient accumulation: the smaller
    /// grids of `next-grid`, `shift-ranks` and `fill-gaps` are those whose
    /// `dp * micro_batch` divides the global batch; `drop-replica` says
    /// when it does not.
    pub global_batch: Option<(u32, u32)>,
    /// The kinds whose groups the plan classifies; `None`: the layout's
    /// groups that need a communicator (see [`default_kinds`](crate::relayout::default_kinds)).
    pub kinds: Option<Vec<Kind>>,
}

impl Default for RelayoutOptions {
    fn default() -> RelayoutOptions {
        RelayoutOptions {
            min_dp: 1,
            global_batch: None,
            kinds: None,
        }
    }
}

impl RelayoutOptions {
    /// With the smallest data-parallel size allowed.
    #[must_use]
    pub fn min_dp(mut self, min_dp: u32) -> RelayoutOptions {
        self.min_dp = min_dp;
        self
    }

    /// With the global batch and micro-batch to keep.
    #[must_use]
    pub fn global_batch(mut self, global: u32, micro: u32) -> RelayoutOptions {
        self.global_batch = Some((global, micro));
        self
    }

    /// With the kinds to classify.
    #[must_use]
    pub fn kinds(mut self, kinds: Vec<Kind>) -> RelayoutOptions {
        self.kinds = Some(kinds);
        self
    }
}
