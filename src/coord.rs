//! Where a rank sits: its grid and its coordinates there.

use std::fmt;

use crate::axis::Axis;

/// A rank's coordinates in the attention (dense) grid.
///
/// `dp` is the full data-parallel index (not split by expert parallelism).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Coord {
    /// Tensor-parallel index.
    pub tp: u32,
    /// Context-parallel index.
    pub cp: u32,
    /// Data-parallel index.
    pub dp: u32,
    /// Pipeline stage.
    pub pp: u32,
}

/// A rank's coordinates in the expert grid.
///
/// In the nested layout `etp` equals the tensor-parallel index and
/// `edp` is the index along dp / ep (Megatron-LM's "dp mod ep"); in the
/// folded layout they are the expert grid's own axes. Without
/// expert parallelism `ep` is 0 and `edp` is the data-parallel index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct ExpertCoord {
    /// Expert tensor-parallel index.
    pub etp: u32,
    /// Expert-parallel index.
    pub ep: u32,
    /// Expert data-parallel index.
    pub edp: u32,
    /// Pipeline stage.
    pub pp: u32,
    /// Index along the expert grid's weight shards (`egtp_remat`; 0 when
    /// `expert_gtp_remat` is 1).
    pub egtp_remat: u32,
}

/// Which grid of a layout a rank belongs to.
///
/// A layout without an encoder is all [`Part::Decoder`], as in Megatron-LM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Part {
    /// The encoder grid of an encoder + decoder layout.
    Encoder,
    /// The decoder grid, or the only grid.
    #[default]
    Decoder,
}

impl Part {
    /// `"encoder"` or `"decoder"`.
    pub const fn name(self) -> &'static str {
        match self {
            Part::Encoder => "encoder",
            Part::Decoder => "decoder",
        }
    }
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything about where one rank sits, answered in O(axes).
///
/// Created by [`Layout::placement`](crate::Layout::placement).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Placement {
    /// The rank.
    pub rank: u32,
    /// The grid it is in.
    pub part: Part,
    /// Its coordinates in that grid's attention view.
    pub coord: Coord,
    /// Its coordinates in that grid's expert view.
    pub expert: ExpertCoord,
    /// Its index along the dense grid's weight shards (`gtp_remat`; 0 when
    /// `gtp_remat` is 1). [`Coord`] has no room for it: see
    /// [`Layout::rank_with_gtp_remat`](crate::Layout::rank_with_gtp_remat).
    pub gtp_remat: u32,
}

impl Placement {
    /// Every coordinate by axis, in the order reports list them: `tp`,
    /// `cp`, `ep`, `dp`, `pp` (the attention view, with `ep` from the
    /// expert view), then `etp` and `edp` (the expert view).
    ///
    /// ```
    /// use rank_layout::{Axis, Config, Layout};
    /// let layout = Layout::new(&Config::new().tp(2).ep(2).world_size(Some(8)))?;
    /// let named = layout.placement(7)?.named();
    /// assert_eq!(named[0], (Axis::Tp, 1));
    /// assert_eq!(named[3], (Axis::Dp, 3));
    /// assert_eq!(named[6], (Axis::Edp, 1));
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// The weight-shard coordinates are in [`named_with_gtp`](Self::named_with_gtp).
    pub fn named(&self) -> [(Axis, u32); 7] {
        [
            (Axis::Tp, self.coord.tp),
            (Axis::Cp, self.coord.cp),
            (Axis::Ep, self.expert.ep),
            (Axis::Dp, self.coord.dp),
            (Axis::Pp, self.coord.pp),
            (Axis::Etp, self.expert.etp),
            (Axis::Edp, self.expert.edp),
        ]
    }

    /// [`named`](Self::named) with the weight-shard coordinates after `tp`
    /// (`gtp_remat`) and after `etp` (`egtp_remat`): `tp`, `gtp_remat`,
    /// `cp`, `ep`, `dp`, `pp`, `etp`, `egtp_remat`, `edp`.
    ///
    /// ```
    /// use rank_layout::{Axis, Config, Layout};
    /// let layout = Layout::new(&Config::new().tp(2).gtp_remat(2).world_size(Some(8)))?;
    /// let named = layout.placement(7)?.named_with_gtp();
    /// assert_eq!(named[1], (Axis::GtpRemat, 1));
    /// assert_eq!(named[4], (Axis::Dp, 1));
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn named_with_gtp(&self) -> [(Axis, u32); 9] {
        [
            (Axis::Tp, self.coord.tp),
            (Axis::GtpRemat, self.gtp_remat),
            (Axis::Cp, self.coord.cp),
            (Axis::Ep, self.expert.ep),
            (Axis::Dp, self.coord.dp),
            (Axis::Pp, self.coord.pp),
            (Axis::Etp, self.expert.etp),
            (Axis::EgtpRemat, self.expert.egtp_remat),
            (Axis::Edp, self.expert.edp),
        ]
    }
}
