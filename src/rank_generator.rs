//! One dense grid with expert parallelism nested in data parallelism (SPEC 3.1).

use crate::grid::Grid;
use crate::plan::{Groups, Plan};
use crate::{Axis, AxisSet, Coord, Error, ExpertCoord, Kind, Order, Result};

/// The sizes of the five order axes of one grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sizes {
    /// Tensor-parallel size.
    pub tp: u32,
    /// Context-parallel size.
    pub cp: u32,
    /// Expert-parallel size (carved out of dp).
    pub ep: u32,
    /// Data-parallel size.
    pub dp: u32,
    /// Pipeline-parallel size.
    pub pp: u32,
}

impl Default for Sizes {
    /// Every size 1.
    fn default() -> Self {
        Sizes {
            tp: 1,
            cp: 1,
            ep: 1,
            dp: 1,
            pp: 1,
        }
    }
}

impl Sizes {
    fn of(&self, axis: Axis) -> u32 {
        match axis {
            Axis::Tp | Axis::Etp => self.tp,
            Axis::Cp => self.cp,
            Axis::Ep => self.ep,
            Axis::Dp | Axis::Edp => self.dp,
            Axis::Pp => self.pp,
        }
    }
}

/// Megatron-LM's `RankGenerator`: a `tp x cp x ep x dp x pp` grid in a given
/// order, first axis fastest, at a rank offset.
///
/// It has two views of the same ranks: the attention view (axes tp, cp, dp,
/// pp; `ep` dropped) and the expert view, where dp is split at the `ep` token
/// into `ep` and `dp / ep` (axis [`Axis::Edp`]). Kinds that name `ep` (and the
/// `*-mod-ep` kinds) use the expert view, the others the attention view.
///
/// ```
/// use rank_layout::{Kind, Order, RankGenerator, Sizes};
/// // Megatron's docstring: [tp, dp, pp] = [2, 3, 4].
/// let order: Order = "tp-dp-pp".parse()?;
/// let g = RankGenerator::new(Sizes { tp: 2, dp: 3, pp: 4, ..Sizes::default() }, &order, 0)?;
/// let dp = g.groups(Kind::DP)?.to_vecs();
/// assert_eq!(dp[0], vec![0, 2, 4]);
/// assert_eq!(dp[7], vec![19, 21, 23]);
/// assert_eq!(g.comm_split(21, Kind::DP)?, Some((7, 1)));
/// // ep must divide dp:
/// assert!(RankGenerator::new(Sizes { ep: 2, dp: 3, ..Sizes::default() }, &Order::default(), 0).is_err());
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankGenerator {
    sizes: Sizes,
    order: Order,
    attention: Grid,
    expert: Grid,
}

impl RankGenerator {
    /// A grid with expert parallelism nested in dp.
    ///
    /// # Errors
    /// - [`Error::ZeroSize`] for a size of 0;
    /// - [`Error::MissingAxis`] for an axis of size > 1 left out of the order;
    /// - [`Error::EpNotAdjacentToDp`] when `ep` is written in the order but not next to `dp`;
    /// - [`Error::DpNotDivisibleByEp`] when `dp % ep != 0`;
    /// - [`Error::Overflow`] when the world or its last rank does not fit a `u32`.
    pub fn new(sizes: Sizes, order: &Order, rank_offset: u32) -> Result<RankGenerator> {
        Self::build(sizes, order, rank_offset, true)
    }

    /// `nested`: apply the ep/dp rules of SPEC 3.1 (off for the attention
    /// grid of the folded layout, where ep = 1 and no rule applies).
    pub(crate) fn build(
        sizes: Sizes,
        order: &Order,
        rank_offset: u32,
        nested: bool,
    ) -> Result<RankGenerator> {
        for axis in Axis::ORDER_TOKENS {
            if sizes.of(axis) == 0 {
                return Err(Error::ZeroSize { what: axis.name() });
            }
        }
        check_written(order, |a| sizes.of(a))?;
        if nested {
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
        }
        if sizes.dp % sizes.ep != 0 {
            return Err(Error::DpNotDivisibleByEp {
                dp: sizes.dp,
                ep: sizes.ep,
            });
        }
        let attention: Vec<(Axis, u32)> = order
            .axes()
            .into_iter()
            .filter(|a| *a != Axis::Ep)
            .map(|a| (a, sizes.of(a)))
            .collect();
        let expert: Vec<(Axis, u32)> = order
            .axes()
            .into_iter()
            .map(|a| match a {
                Axis::Dp => (Axis::Edp, sizes.dp / sizes.ep),
                a => (a, sizes.of(a)),
            })
            .collect();
        Ok(RankGenerator {
            sizes,
            order: order.clone(),
            attention: Grid::new(&attention, rank_offset)?,
            expert: Grid::new(&expert, rank_offset)?,
        })
    }

    /// The sizes.
    pub fn sizes(&self) -> Sizes {
        self.sizes
    }

    /// The order.
    pub fn order(&self) -> &Order {
        &self.order
    }

    /// `tp * cp * dp * pp`.
    pub fn world_size(&self) -> u32 {
        self.attention.world()
    }

    /// The first rank.
    pub fn rank_offset(&self) -> u32 {
        self.attention.offset()
    }

    pub(crate) fn attention(&self) -> &Grid {
        &self.attention
    }

    pub(crate) fn expert(&self) -> &Grid {
        &self.expert
    }

    /// Resolves `kind`; `layout` names the layout in errors.
    pub(crate) fn plan(&self, kind: Kind, layout: &'static str) -> Result<Plan> {
        let not_here = || Error::KindNotInLayout {
            kind,
            layout,
            hint: "",
        };
        let expert_axes = AxisSet::of(&[Axis::Ep, Axis::Edp]);
        let (grid, axes) = match kind {
            Kind::Axes(set) if !set.intersects(expert_axes) => (&self.attention, set),
            Kind::Axes(set) | Kind::ModEp(set) => {
                let set = if set.contains(Axis::Dp) {
                    set.without(Axis::Dp).with(Axis::Edp)
                } else {
                    set
                };
                (&self.expert, set)
            }
            Kind::Embd | Kind::PosEmbd => {
                return Ok(Plan::Ends {
                    grid: self.attention.clone(),
                    pp: self
                        .attention
                        .mask(AxisSet::of(&[Axis::Pp]))
                        .ok_or_else(not_here)?,
                    last: kind == Kind::Embd,
                });
            }
            _ => return Err(not_here()),
        };
        let mask = grid.mask(axes).ok_or_else(not_here)?;
        Ok(Plan::grid(grid, mask))
    }

    /// The groups of `kind`, in Megatron-LM's order.
    ///
    /// # Errors
    /// [`Error::KindNotInLayout`] for a kind this grid does not have
    /// (`etp`, `hcp-0`, ...).
    pub fn groups(&self, kind: Kind) -> Result<Groups> {
        Ok(Groups::new(self.plan(kind, "nested")?))
    }

    /// The comm-split `(color, key)` of `rank` for `kind`: its group's index
    /// and its position in the group; `None` when the rank is in no group
    /// (`embd`, `pos-embd`).
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`] for a rank outside the grid;
    /// [`Error::KindNotInLayout`] for a kind the grid does not have.
    pub fn comm_split(&self, rank: u32, kind: Kind) -> Result<Option<(u32, u32)>> {
        let plan = self.plan(kind, "nested")?;
        if !self.attention.contains(rank) {
            return Err(self.attention.out_of_range(rank.into()));
        }
        Ok(plan.locate(rank).first().copied())
    }

    /// The coordinates of `rank` in the attention view, or `None` outside the grid.
    pub fn coord(&self, rank: u32) -> Option<Coord> {
        let c = |a| self.attention.coord(rank, a);
        Some(Coord {
            tp: c(Axis::Tp)?,
            cp: c(Axis::Cp)?,
            dp: c(Axis::Dp)?,
            pp: c(Axis::Pp)?,
        })
    }

    /// The coordinates of `rank` in the expert view, or `None` outside the grid.
    pub fn expert_coord(&self, rank: u32) -> Option<ExpertCoord> {
        ExpertCoord::in_grid(&self.expert, rank, Axis::Tp)
    }

    /// The rank at `coord` (the inverse of [`coord`](Self::coord)).
    ///
    /// # Errors
    /// [`Error::CoordOutOfRange`] for a coordinate past its axis.
    pub fn rank(&self, coord: Coord) -> Result<u32> {
        self.attention.rank_with(|a| match a {
            Axis::Tp => coord.tp,
            Axis::Cp => coord.cp,
            Axis::Dp => coord.dp,
            _ => coord.pp,
        })
    }
}

/// Checks that every axis of size > 1 is written in `order`.
pub(crate) fn check_written(order: &Order, size: impl Fn(Axis) -> u32) -> Result<()> {
    for axis in Axis::ORDER_TOKENS {
        let s = size(axis);
        if s > 1 && !order.is_written(axis) {
            return Err(Error::MissingAxis {
                axis,
                size: s,
                order: order.to_string(),
            });
        }
    }
    Ok(())
}
