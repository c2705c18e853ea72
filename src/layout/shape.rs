//! The shape of a layout: one dense grid with its expert view, or an
//! encoder's and a decoder's.

use crate::config::ExpertLayout;
use crate::coord::Part;
use crate::grid::Grid;
use crate::layout::sizes::Sizes;
use crate::layout_shape::LayoutShape;
use crate::order::Order;
use crate::plan::view::{GridId, View};

/// One dense grid and its expert view over the same ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dense {
    pub part: Part,
    pub sizes: Sizes,
    pub order: Order,
    pub experts: ExpertLayout,
    /// Axes tp, cp, dp, pp (ep dropped).
    pub attention: Grid,
    /// Nested: tp, cp, ep, edp = dp / ep, pp (dp split at the ep token).
    /// Folded: etp, cp = 1, ep, edp, pp.
    pub expert: Grid,
}

impl Dense {
    #[inline]
    pub fn grid(&self, view: View) -> &Grid {
        match view {
            View::Attention => &self.attention,
            View::Expert => &self.expert,
        }
    }

    pub fn id(&self, view: View) -> GridId {
        GridId {
            part: self.part,
            view,
        }
    }
}

/// The grids of a layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Shape {
    Single(Dense),
    EncoderDecoder { encoder: Box<Dense>, decoder: Dense },
}

impl Shape {
    pub fn name(&self) -> LayoutShape {
        match self {
            Shape::Single(d) if d.experts == ExpertLayout::Folded => LayoutShape::Folded,
            Shape::Single(_) => LayoutShape::Nested,
            Shape::EncoderDecoder { .. } => LayoutShape::EncoderDecoder,
        }
    }

    /// The grid that is not the encoder: the decoder, or the only grid.
    #[inline]
    pub fn main(&self) -> &Dense {
        match self {
            Shape::Single(d) | Shape::EncoderDecoder { decoder: d, .. } => d,
        }
    }

    #[inline]
    pub fn encoder(&self) -> Option<&Dense> {
        match self {
            Shape::EncoderDecoder { encoder, .. } => Some(encoder),
            Shape::Single(_) => None,
        }
    }

    /// The grid holding `rank` (the encoder's ranks come first).
    #[inline]
    pub fn dense_of(&self, rank: u32) -> &Dense {
        match self.encoder() {
            Some(e) if e.attention.contains(rank) => e,
            _ => self.main(),
        }
    }

    pub fn offset(&self) -> u32 {
        self.encoder().unwrap_or(self.main()).attention.offset()
    }

    /// Every rank: both grids.
    pub fn world(&self) -> u32 {
        let encoder = self.encoder().map_or(0, |e| e.attention.world());
        // Checked when the layout was built.
        encoder.wrapping_add(self.main().attention.world())
    }
}
