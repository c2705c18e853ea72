//! The folded expert grid of Megatron-Core's "MoE parallel folding" (SPEC 3.2).

use crate::grid::Grid;
use crate::plan::Plan;
use crate::rank_generator::{RankGenerator, check_written};
use crate::{Axis, AxisSet, Error, ExpertCoord, Kind, Result};

/// The expert grid over the same ranks as the attention grid, in the same
/// order string: `tp -> etp`, `ep`, `dp -> edp = world / (etp*ep*pp)`, `pp`,
/// and cp of size 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FoldedExpert {
    grid: Grid,
}

impl FoldedExpert {
    /// Builds the expert grid of `attention` (whose ep is 1).
    pub fn new(attention: &RankGenerator, etp: u32, ep: u32) -> Result<FoldedExpert> {
        let order = attention.order();
        let world_size = attention.world_size();
        let pp = attention.sizes().pp;
        let dp = attention.sizes().dp;
        let per_replica =
            crate::math::checked_product([etp, ep, pp]).ok_or_else(|| Error::Overflow {
                what: format!("etp*ep*pp = {etp}*{ep}*{pp}"),
            })?;
        if world_size % per_replica != 0 {
            return Err(Error::ExpertWorldNotDivisible {
                world_size,
                etp,
                ep,
                pp,
            });
        }
        let edp = world_size / per_replica;
        let size = |axis: Axis| match axis {
            Axis::Tp | Axis::Etp => etp,
            Axis::Ep => ep,
            Axis::Dp | Axis::Edp => edp,
            Axis::Pp => pp,
            Axis::Cp => 1,
        };
        check_written(order, size).map_err(|e| match e {
            Error::MissingAxis { axis, size, order } => Error::MissingAxis {
                axis: match axis {
                    Axis::Tp => Axis::Etp,
                    Axis::Dp => Axis::Edp,
                    a => a,
                },
                size,
                order,
            },
            e => e,
        })?;
        let expert_name = |axis: Axis| match axis {
            Axis::Tp => Axis::Etp,
            Axis::Dp => Axis::Edp,
            a => a,
        };
        let axes: Vec<(Axis, u32)> = order
            .axes()
            .into_iter()
            .map(|a| (expert_name(a), size(a)))
            .collect();
        let grid = Grid::new(&axes, attention.rank_offset())?;
        if pp > 1 {
            // "Ends in pp": no axis of size > 1 (in either grid) after pp.
            let sizes = attention.sizes();
            let attention_size = |a: Axis| match a {
                Axis::Tp => sizes.tp,
                Axis::Cp => sizes.cp,
                Axis::Dp => sizes.dp,
                _ => 1,
            };
            let ends_in_pp = order
                .axes()
                .into_iter()
                .skip_while(|a| *a != Axis::Pp)
                .skip(1)
                .all(|a| attention_size(a) == 1 && size(a) == 1);
            if !ends_in_pp && edp != dp {
                return Err(Error::FoldedDpMismatch {
                    order: order.to_string(),
                    pp,
                    dp,
                    edp,
                });
            }
            let stride = |g: &Grid| g.digit(Axis::Pp).map_or(1, |d| d.stride);
            let (attention_stride, expert_stride) = (stride(attention.attention()), stride(&grid));
            if attention_stride != expert_stride {
                return Err(Error::FoldedPpMismatch {
                    order: order.to_string(),
                    attention_stride,
                    expert_stride,
                });
            }
        }
        Ok(FoldedExpert { grid })
    }

    pub fn grid(&self) -> &Grid {
        &self.grid
    }

    /// The plan of an expert kind; `None` for kinds of the attention grid.
    pub fn plan(&self, kind: Kind) -> Option<Result<Plan>> {
        let expert_axes = AxisSet::of(&[Axis::Etp, Axis::Ep, Axis::Edp]);
        match kind {
            Kind::Axes(set) if set.intersects(expert_axes) => Some(
                self.grid
                    .mask(set)
                    .map(|mask| Plan::grid(&self.grid, mask))
                    .ok_or(Error::KindNotInLayout {
                        kind,
                        layout: "folded",
                        hint: ": expert kinds combine etp, ep, edp and pp",
                    }),
            ),
            Kind::ModEp(_) => Some(Err(Error::KindNotInLayout {
                kind,
                layout: "folded",
                hint: ": the *-mod-ep kinds are nested-only, use edp",
            })),
            _ => None,
        }
    }

    /// The expert coordinates of `rank`, or `None` outside the grid.
    pub fn coord(&self, rank: u32) -> Option<ExpertCoord> {
        ExpertCoord::in_grid(&self.grid, rank, Axis::Etp)
    }
}
