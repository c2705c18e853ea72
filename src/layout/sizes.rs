//! The sizes of a grid's axes, derived ones included.

use std::ops::Index;

use crate::axis::Axis;

/// The size of every axis of one grid of a layout, derived sizes included.
///
/// Indexable by [`Axis`]. In the nested expert layout `etp` is `tp` and
/// `edp` is `dp / ep`; in the folded one `edp = world / (etp * ep * pp)`. In
/// an encoder + decoder layout the encoder has its own sizes
/// ([`Layout::encoder_sizes`](crate::Layout::encoder_sizes)), with `ep = 1`.
///
/// ```
/// use rank_layout::{Axis, Config, Layout};
/// let layout = Layout::new(&Config::new().tp(2).ep(4).world_size(Some(64)))?;
/// let sizes = layout.sizes();
/// assert_eq!((sizes.dp, sizes.edp), (32, 8));
/// assert_eq!(sizes[Axis::Dp], 32);
/// assert_eq!(sizes.world(), 64);
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Sizes {
    /// Tensor parallel.
    pub tp: u32,
    /// Context parallel.
    pub cp: u32,
    /// Expert parallel.
    pub ep: u32,
    /// Data parallel.
    pub dp: u32,
    /// Pipeline parallel.
    pub pp: u32,
    /// Expert tensor parallel.
    pub etp: u32,
    /// Expert data parallel.
    pub edp: u32,
    /// Weight shards of the dense grid (1: none).
    pub gtp_remat: u32,
    /// Weight shards of the folded expert grid (1: none).
    pub egtp_remat: u32,
}

impl Sizes {
    /// The number of ranks of the grid: `tp * gtp_remat * cp * dp * pp`.
    pub fn world(&self) -> u32 {
        // Checked when the layout was built.
        self.tp
            .wrapping_mul(self.gtp_remat)
            .wrapping_mul(self.cp)
            .wrapping_mul(self.dp)
            .wrapping_mul(self.pp)
    }
}

impl Index<Axis> for Sizes {
    type Output = u32;

    fn index(&self, axis: Axis) -> &u32 {
        match axis {
            Axis::Tp => &self.tp,
            Axis::Cp => &self.cp,
            Axis::Ep => &self.ep,
            Axis::Dp => &self.dp,
            Axis::Pp => &self.pp,
            Axis::Etp => &self.etp,
            Axis::Edp => &self.edp,
            Axis::GtpRemat => &self.gtp_remat,
            Axis::EgtpRemat => &self.egtp_remat,
        }
    }
}
