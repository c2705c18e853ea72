//! Megatron-Core's extra group families: hierarchical context parallel and
//! distributed-optimizer instances.
//!
//! Both cut existing groups by position:
//!
//! - `hcp-l`: in each cp group `g`, with `U = s0*...*s(l-1)` and `S = s(l)`,
//!   position `i = a + b*U + c*U*S`; a group fixes `(a, c)` and runs over
//!   `b`. With cp = 16 and levels `[2, 2, 4]`: `hcp-0` is `[0,1],[2,3],...`,
//!   `hcp-1` is `[0,2],[1,3],[4,6],...`, `hcp-2` is `[0,4,8,12],...`.
//! - With `N` instances and `m = edp / N`: `dp-cp-intra` cuts each dp-cp group
//!   into `N` contiguous slices; `edp-intra` cuts each edp group into `N`
//!   contiguous slices of `m`; `dp-cp-inter` takes, in each edp group, the
//!   positions `a, a+m, ..., a+(N-1)m`; `dist-opt-instance` concatenates the
//!   etp-ep-pp groups `m` at a time.

use crate::axis::{Axis, AxisSet};
use crate::error::{Error, Result};
use crate::kind::Kind;
use crate::layout::shape::Dense;
use crate::math::saturating_product;
use crate::plan::{Boxes, Plan, Slices, View};

/// Most hierarchical context-parallel levels.
const MAX_LEVELS: usize = 64;

/// The families configured on top of a layout's shape.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub(crate) struct Families {
    /// Hierarchical context-parallel level sizes, innermost first (empty: none).
    pub hierarchical_cp: Vec<u32>,
    /// Distributed-optimizer instances (1: none).
    pub dist_opt_instances: u32,
}

/// Checks that the levels multiply to `cp` (no levels: no hcp kinds).
///
/// # Errors
/// [`Error::HierarchicalCpProduct`]; [`Error::InvalidConfig`] past 64 levels.
pub(crate) fn check_hierarchical_cp(levels: &[u32], cp: u32) -> Result<()> {
    if levels.is_empty() {
        return Ok(());
    }
    if levels.len() > MAX_LEVELS {
        return Err(Error::InvalidConfig {
            message: format!(
                "hierarchical_cp has {} levels, at most {MAX_LEVELS} are supported",
                levels.len()
            ),
        });
    }
    let product = saturating_product(levels.iter().copied());
    if product != u64::from(cp) {
        return Err(Error::HierarchicalCpProduct {
            levels: levels.to_vec(),
            product,
            cp,
        });
    }
    Ok(())
}

/// The masked groups of `axes` in one view of `dense`, if it has them all.
pub(crate) fn masked(dense: &Dense, view: View, axes: &[Axis]) -> Option<Boxes> {
    let grid = dense.grid(view);
    let mask = grid.mask(AxisSet::of(axes))?;
    Some(Boxes::masked(grid, dense.id(view), mask))
}

/// `boxes` refined by position (see [`Boxes::refine`]): boxes again when
/// the cuts fall on digit boundaries, strided slices otherwise.
fn refined(boxes: Boxes, unit: u32, span: u32) -> Plan {
    match boxes.refine(unit, span) {
        Some(b) => Plan::Boxes(b),
        None => Plan::Slices(Slices { boxes, unit, span }),
    }
}

/// The plan of `hcp-level` over the cp groups of `dense`, or `None` when
/// there is no such level.
pub(crate) fn hierarchical_cp(dense: &Dense, levels: &[u32], level: u8) -> Option<Plan> {
    let l = usize::from(level);
    let span = *levels.get(l)?;
    let unit = levels.get(..l)?.iter().product();
    Some(refined(
        masked(dense, View::Attention, &[Axis::Cp])?,
        unit,
        span,
    ))
}

/// Checks divisibility and the order rule of distributed-optimizer instances.
///
/// # Errors
/// [`Error::DistOptNotDivisible`], [`Error::DistOptOrder`].
pub(crate) fn check_dist_opt(instances: u32, dense: &Dense) -> Result<()> {
    if instances <= 1 {
        return Ok(());
    }
    let sizes = dense.sizes;
    let dp_cp = sizes.dp * sizes.cp;
    let edp = sizes.edp;
    if dp_cp % instances != 0 || edp % instances != 0 {
        return Err(Error::DistOptNotDivisible {
            instances,
            dp_cp,
            edp,
        });
    }
    let axes = dense.order.axes();
    let position = |a: Axis| axes.iter().position(|x| *x == a).unwrap_or(axes.len());
    let bad = |first: Axis, second: Axis| Error::DistOptOrder {
        instances,
        order: dense.order.to_string(),
        first,
        second,
    };
    if sizes.tp > 1 {
        for (axis, size) in [(Axis::Cp, sizes.cp), (Axis::Dp, sizes.dp)] {
            if size > 1 && position(axis) < position(Axis::Tp) {
                return Err(bad(Axis::Tp, axis));
            }
        }
    }
    if edp > 1 {
        for (token, axis, size) in [
            (Axis::Tp, Axis::Etp, sizes.etp),
            (Axis::Ep, Axis::Ep, sizes.ep),
        ] {
            if size > 1 && position(Axis::Dp) < position(token) {
                return Err(bad(axis, Axis::Edp));
            }
        }
    }
    Ok(())
}

/// The plan of a distributed-optimizer kind over a folded `dense` grid
/// (checked by [`check_dist_opt`]); `None` for another kind.
pub(crate) fn dist_opt(kind: Kind, instances: u32, dense: &Dense) -> Option<Plan> {
    let per_instance = dense.sizes.edp / instances.max(1);
    let edp = || masked(dense, View::Expert, &[Axis::Edp]);
    Some(match kind {
        Kind::DpCpIntra => {
            let dp_cp = masked(dense, View::Attention, &[Axis::Dp, Axis::Cp])?;
            let span = dp_cp.size() / instances.max(1);
            refined(dp_cp, 1, span)
        }
        Kind::EdpIntra => refined(edp()?, 1, per_instance),
        Kind::DpCpInter => refined(edp()?, per_instance, instances),
        Kind::DistOptInstance => {
            let shards = masked(dense, View::Expert, &[Axis::Etp, Axis::Ep, Axis::Pp])?;
            Plan::Boxes(shards.merge(per_instance)?)
        }
        _ => return None,
    })
}
