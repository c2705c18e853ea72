//! One dense grid with expert parallelism nested in data parallelism
//! (Megatron-LM's 2024 `RankGenerator`).

use crate::axis::Axis;
use crate::config::ExpertLayout;
use crate::coord::Part;
use crate::error::{Error, Result};
use crate::grid::Grid;
use crate::layout::folded::attention_axes;
use crate::layout::shape::Dense;
use crate::layout::sizes::Sizes;
use crate::order::Order;

/// The grid of `sizes` (tp, cp, ep, dp, pp; `etp` and `edp` are derived) in
/// `order` at `offset`, with its expert view: the same ranks with dp split
/// at the `ep` token into `ep` and `dp / ep` ([`Axis::Edp`]).
///
/// # Errors
/// - [`Error::MissingAxis`] for an axis of size > 1 left out of the order;
/// - [`Error::EpNotAdjacentToDp`] when `ep` is written but not next to `dp`;
/// - [`Error::DpNotDivisibleByEp`] when `dp % ep != 0`;
/// - [`Error::Overflow`] when the world or its last rank does not fit a `u32`.
pub(crate) fn nested(sizes: Sizes, order: &Order, offset: u32, part: Part) -> Result<Dense> {
    order.check_written(|a| sizes[a], |a| a)?;
    if let Some(ep) = order.written_position(Axis::Ep) {
        let adjacent = order
            .written_position(Axis::Dp)
            .is_some_and(|dp| dp.abs_diff(ep) == 1);
        if !adjacent {
            return Err(Error::EpNotAdjacentToDp {
                order: order.to_string(),
            });
        }
    }
    if sizes.dp % sizes.ep != 0 {
        return Err(Error::DpNotDivisibleByEp {
            dp: sizes.dp,
            ep: sizes.ep,
        });
    }
    let sizes = Sizes {
        etp: sizes.tp,
        edp: sizes.dp / sizes.ep,
        ..sizes
    };
    let attention = attention_axes(order, &sizes);
    let expert: Vec<(Axis, u32)> = order
        .axes()
        .into_iter()
        .map(|a| match a {
            Axis::Dp => (Axis::Edp, sizes.edp),
            a => (a, sizes[a]),
        })
        .collect();
    Ok(Dense {
        part,
        sizes,
        order: order.clone(),
        experts: ExpertLayout::Nested,
        attention: Grid::new(&attention, offset)?,
        expert: Grid::new(&expert, offset)?,
    })
}
