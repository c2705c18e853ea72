//! A rank's coordinates, decoded once, and the grids they are read in.

use crate::coord::Part;
use crate::grid::Coords;

/// Which view of a layout's grids a rank's coordinates are read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum View {
    /// The dense (attention) grid: tp, cp, dp, pp.
    Attention = 0,
    /// The expert grid: nested (dp split into ep and dp / ep) or folded.
    Expert = 1,
}

/// One grid of a layout: the part it covers and the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct GridId {
    pub part: Part,
    pub view: View,
}

/// A rank's coordinates, decoded once, in both views of the grid it is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RankView {
    pub part: Part,
    /// By [`View`]: attention, expert.
    pub coords: [Coords; 2],
}

impl RankView {
    /// The coordinates in view `view` of the rank's grid.
    #[inline]
    pub fn of(&self, view: View) -> &Coords {
        let [attention, expert] = &self.coords;
        match view {
            View::Attention => attention,
            View::Expert => expert,
        }
    }

    /// The coordinates in `grid`, or `None` when the rank is not in it.
    #[inline]
    pub fn coords(&self, grid: GridId) -> Option<&Coords> {
        (grid.part == self.part).then(|| self.of(grid.view))
    }
}
