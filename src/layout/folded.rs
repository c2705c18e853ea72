//! The folded expert grid of Megatron-Core's "MoE parallel folding": a
//! second grid over the same ranks as the attention grid.

use crate::axis::Axis;
use crate::config::ExpertLayout;
use crate::coord::Part;
use crate::error::{Error, Result};
use crate::grid::Grid;
use crate::layout::shape::Dense;
use crate::layout::sizes::Sizes;
use crate::math::checked_product;
use crate::order::Order;

/// The expert name of an order token: tp is `etp`, dp is `edp`, the
/// weight-shard axis `egtp_remat`.
fn expert_name(axis: Axis) -> Axis {
    match axis {
        Axis::Tp => Axis::Etp,
        Axis::Dp => Axis::Edp,
        Axis::GtpRemat => Axis::EgtpRemat,
        a => a,
    }
}

/// The axes of one grid of `order` with the weight-shard axis placed after
/// `anchor` (see [`Order::grid_axes`]), kept when its size is > 1 or the
/// order writes it, and `dropped` left out.
fn grid_axes(order: &Order, anchor: Axis, shards: u32, dropped: Option<Axis>) -> Vec<Axis> {
    let keep_shards = shards > 1 || order.is_written(Axis::GtpRemat);
    order
        .grid_axes(anchor)
        .into_iter()
        .filter(|a| Some(*a) != dropped && (*a != Axis::GtpRemat || keep_shards))
        .collect()
}

/// The axes of the attention grid of `sizes` in `order`, with their sizes:
/// the order's axes without `ep`, the weight-shard axis where it belongs
/// (every layout's attention grid, encoder and nested ones included).
pub(crate) fn attention_axes(order: &Order, sizes: &Sizes) -> Vec<(Axis, u32)> {
    grid_axes(order, Axis::Tp, sizes.gtp_remat, Some(Axis::Ep))
        .into_iter()
        .map(|a| (a, sizes[a]))
        .collect()
}

/// The attention grid (tp, gtp_remat, cp, dp, pp; ep = 1) of `sizes` and,
/// over the same ranks in the same order string, the expert grid: `tp ->
/// etp`, `ep`, `gtp_remat -> egtp_remat` (after `ep`), `dp -> edp = world /
/// (etp*ep*egtp_remat*pp)`, `pp`, and cp of size 1.
///
/// # Errors
/// - [`Error::MissingAxis`] for an axis of size > 1 (in either grid) left out;
/// - [`Error::ExpertWorldNotDivisible`] when `etp*ep*pp` does not divide the world;
/// - [`Error::FoldedDpMismatch`] when pp > 1, the order does not end in pp
///   (an axis of size > 1 comes after it) and `edp != dp`;
/// - [`Error::FoldedPpMismatch`] when the two grids' pipelines differ;
/// - [`Error::Overflow`].
pub(crate) fn folded(sizes: Sizes, order: &Order, offset: u32) -> Result<Dense> {
    let Sizes {
        cp,
        ep,
        dp,
        pp,
        etp,
        egtp_remat,
        ..
    } = sizes;
    let dense = |a: Axis| match a {
        Axis::Ep => 1,
        a => sizes[a],
    };
    order.check_written(dense, |a| a)?;
    let attention = Grid::new(&attention_axes(order, &sizes), offset)?;
    let world = attention.world();
    let per_replica =
        checked_product([etp, ep, pp, egtp_remat]).ok_or_else(|| Error::Overflow {
            what: format!("etp*ep*pp*expert_gtp_remat = {etp}*{ep}*{pp}*{egtp_remat}"),
        })?;
    if world % per_replica != 0 {
        if egtp_remat > 1 {
            return Err(Error::WorldNotDivisible {
                world_size: world,
                what: "etp*ep*pp*expert_gtp_remat",
                divisor: per_replica,
            });
        }
        return Err(Error::ExpertWorldNotDivisible {
            world_size: world,
            etp,
            ep,
            pp,
        });
    }
    let edp = world / per_replica;
    let expert_size = |a: Axis| match a {
        Axis::Tp => etp,
        Axis::Ep => ep,
        Axis::Dp => edp,
        Axis::Pp => pp,
        Axis::GtpRemat => egtp_remat,
        _ => 1,
    };
    order.check_written(expert_size, expert_name)?;
    let expert_axes: Vec<(Axis, u32)> = grid_axes(order, Axis::Ep, egtp_remat, None)
        .into_iter()
        .map(|a| (expert_name(a), expert_size(a)))
        .collect();
    let expert = Grid::new(&expert_axes, offset)?;
    if pp > 1 {
        // "Ends in pp": no axis of size > 1 (in either grid) after pp.
        let ends_in_pp = order
            .axes()
            .into_iter()
            .skip_while(|a| *a != Axis::Pp)
            .skip(1)
            .all(|a| dense(a) == 1 && expert_size(a) == 1);
        if !ends_in_pp && edp != dp {
            return Err(Error::FoldedDpMismatch {
                order: order.to_string(),
                pp,
                dp,
                edp,
            });
        }
        let (attention_stride, expert_stride) =
            (attention.stride(Axis::Pp), expert.stride(Axis::Pp));
        if attention_stride != expert_stride {
            return Err(Error::FoldedPpMismatch {
                order: order.to_string(),
                attention_stride,
                expert_stride,
            });
        }
    }
    Ok(Dense {
        part: Part::Decoder,
        sizes: Sizes { cp, edp, ..sizes },
        order: order.clone(),
        experts: ExpertLayout::Folded,
        attention,
        expert,
    })
}

/// The encoder grid of an encoder + decoder layout whose decoder has folded
/// experts: the attention grid (tp, cp, dp, pp), and as its expert view the
/// same grid with tp named `etp`, dp named `edp` and an `ep` axis of size 1.
/// There is no expert grid on encoder ranks (Megatron-LM 5a3b6bcf1f): their
/// `ep` groups are singletons, `etp` and `etp-ep` the encoder's tp groups,
/// `etp-ep-pp` its tp-pp groups and `edp` its dp groups (without cp).
///
/// # Errors
/// [`Error::MissingAxis`] for an axis of size > 1 left out of the order;
/// [`Error::Overflow`].
pub(crate) fn encoder_view(sizes: Sizes, order: &Order, offset: u32) -> Result<Dense> {
    let sizes = Sizes {
        ep: 1,
        etp: sizes.tp,
        edp: sizes.dp,
        ..sizes
    };
    order.check_written(|a| sizes[a], |a| a)?;
    let attention = attention_axes(order, &sizes);
    let expert: Vec<(Axis, u32)> = order
        .axes()
        .into_iter()
        .map(|a| (expert_name(a), sizes[a]))
        .collect();
    Ok(Dense {
        part: Part::Encoder,
        sizes,
        order: order.clone(),
        experts: ExpertLayout::Folded,
        attention: Grid::new(&attention, offset)?,
        expert: Grid::new(&expert, offset)?,
    })
}
