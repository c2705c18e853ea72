//! Megatron-Core's extra group families (SPEC 3.4): hierarchical context
//! parallel and distributed-optimizer instances.
//!
//! Both refine existing groups by position (see [`Plan::Refine`]):
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

use crate::folded::FoldedExpert;
use crate::grid::Grid;
use crate::math::saturating_product;
use crate::plan::Plan;
use crate::rank_generator::RankGenerator;
use crate::{Axis, AxisSet, Error, Kind, Order, Result};

/// Most hierarchical context-parallel levels.
const MAX_LEVELS: usize = 64;

/// Checks that the levels multiply to `cp` (no levels: no hcp kinds).
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

fn mask_of(grid: &Grid, axes: &[Axis]) -> crate::grid::Mask {
    grid.mask(AxisSet::of(axes))
        .unwrap_or_else(|| unreachable!("the grid has axes {axes:?}"))
}

/// The plan of `hcp-level` over the cp groups of `attention`, or `None`
/// when there is no such level.
pub(crate) fn hierarchical_cp(attention: &Grid, levels: &[u32], level: u8) -> Option<Plan> {
    let l = usize::from(level);
    let span = *levels.get(l)?;
    Some(Plan::Refine {
        grid: attention.clone(),
        mask: mask_of(attention, &[Axis::Cp]),
        unit: levels[..l].iter().product(),
        span,
    })
}

/// Checks divisibility and the order rule of distributed-optimizer instances.
pub(crate) fn check_dist_opt(
    instances: u32,
    attention: &RankGenerator,
    expert: &FoldedExpert,
    order: &Order,
) -> Result<()> {
    if instances <= 1 {
        return Ok(());
    }
    let sizes = attention.sizes();
    let dp_cp = sizes.dp * sizes.cp;
    let edp = expert.grid().size(Axis::Edp);
    if dp_cp % instances != 0 || edp % instances != 0 {
        return Err(Error::DistOptNotDivisible {
            instances,
            dp_cp,
            edp,
        });
    }
    let axes = order.axes();
    let position = |a: Axis| axes.iter().position(|x| *x == a).unwrap_or(axes.len());
    let bad = |first: Axis, second: Axis| Error::DistOptOrder {
        instances,
        order: order.to_string(),
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
        let grid = expert.grid();
        for (token, axis) in [(Axis::Tp, Axis::Etp), (Axis::Ep, Axis::Ep)] {
            if grid.size(axis) > 1 && position(Axis::Dp) < position(token) {
                return Err(bad(axis, Axis::Edp));
            }
        }
    }
    Ok(())
}

/// The plan of a distributed-optimizer kind (checked by [`check_dist_opt`]).
pub(crate) fn dist_opt(
    kind: Kind,
    instances: u32,
    attention: &RankGenerator,
    expert: &FoldedExpert,
) -> Plan {
    let grid = expert.grid();
    let edp_mask = mask_of(grid, &[Axis::Edp]);
    let per_instance = grid.size(Axis::Edp) / instances;
    match kind {
        Kind::DpCpIntra => {
            let attention = attention.attention();
            let mask = mask_of(attention, &[Axis::Dp, Axis::Cp]);
            Plan::Refine {
                grid: attention.clone(),
                mask,
                unit: 1,
                span: attention.group_size(mask) / instances,
            }
        }
        Kind::EdpIntra => Plan::Refine {
            grid: grid.clone(),
            mask: edp_mask,
            unit: 1,
            span: per_instance,
        },
        Kind::DpCpInter => Plan::Refine {
            grid: grid.clone(),
            mask: edp_mask,
            unit: per_instance,
            span: instances,
        },
        _ => Plan::Merge {
            grid: grid.clone(),
            mask: mask_of(grid, &[Axis::Etp, Axis::Ep, Axis::Pp]),
            blocks: per_instance,
            outer: grid
                .digit(Axis::Edp)
                .unwrap_or_else(|| unreachable!("the folded grid has edp")),
        },
    }
}
