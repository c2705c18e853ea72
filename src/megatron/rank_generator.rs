//! Megatron-LM's `RankGenerator`, by its name and signature, over [`Layout`].

use crate::axis::{Axis, AxisSet};
use crate::config::{Config, ExpertLayout};
use crate::error::{Error, Result};
use crate::kind::Kind;
use crate::layout::Layout;
use crate::order::Order;

/// Megatron-LM's `RankGenerator` (`megatron/core/parallel_state.py`, commit
/// 4ff9e66): the same constructor and `get_ranks`, returning exactly its
/// lists, so that code ported from Megatron-LM keeps working. A thin
/// adapter over [`Layout`] with nested experts.
///
/// `get_ranks(token, false)` is the groups of the axes in `token` (`"tp-dp"`)
/// with `ep` left out of the grid; `get_ranks(token, true)` reads the grid
/// with `dp` split into `ep` and `dp / ep` ("independent ep"), where `dp`
/// means `dp / ep`.
///
/// ```
/// use rank_layout::megatron::RankGenerator;
/// // Megatron-LM's docstring example: [tp, dp, pp] = [2, 3, 4].
/// let g = RankGenerator::new(2, 1, 3, 4, 1, "tp-dp-pp", 0)?;
/// let dp = g.get_ranks("dp", false)?;
/// assert_eq!((dp[0].clone(), dp[7].clone()), (vec![0, 2, 4], vec![19, 21, 23]));
/// let moe = RankGenerator::new(1, 2, 4, 1, 1, "tp-cp-ep-dp-pp", 10)?;
/// assert_eq!(moe.get_ranks("ep", true)?, vec![vec![10, 11], vec![12, 13]]);
/// assert_eq!(moe.get_ranks("dp", true)?, vec![vec![10, 12], vec![11, 13]]);
/// assert!(moe.get_ranks("ep", false).is_err()); // ep is not an axis without independent_ep
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct RankGenerator {
    /// The grid with ep left out (`independent_ep = false`).
    dense: Layout,
    /// The grid with dp split into ep and dp / ep, or why it cannot be.
    with_ep: std::result::Result<Layout, Error>,
}

impl RankGenerator {
    /// `RankGenerator(tp, ep, dp, pp, cp, order, rank_offset)`: world
    /// `tp * dp * pp * cp`, ep carved out of dp.
    ///
    /// # Errors
    /// As Megatron-LM refuses them, as typed errors: an order token other
    /// than tp, cp, ep, dp, pp ([`Error::UnknownAxis`]), repeated or empty;
    /// an axis of size > 1 missing from the order ([`Error::MissingAxis`]);
    /// `ep` in the order but not next to `dp` ([`Error::EpNotAdjacentToDp`]);
    /// a size of 0; a world past `u32`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        tp: u32,
        ep: u32,
        dp: u32,
        pp: u32,
        cp: u32,
        order: &str,
        rank_offset: u32,
    ) -> Result<RankGenerator> {
        let order: Order = order.parse()?;
        if ep == 0 {
            return Err(Error::ZeroSize { what: "ep" });
        }
        let base = Config::new()
            .tp(tp)
            .dp(dp)
            .pp(pp)
            .cp(cp)
            .order(order)
            .rank_offset(rank_offset)
            .expert_layout(ExpertLayout::Nested);
        if ep > 1 && !base.order.is_written(Axis::Ep) {
            return Err(Error::MissingAxis {
                axis: Axis::Ep,
                size: ep,
                order: base.order.to_string(),
            });
        }
        let dense = Layout::new(&base)?;
        let with_ep = Layout::new(&base.ep(ep));
        Ok(RankGenerator { dense, with_ep })
    }

    /// The groups of the axes named in `token` (`"tp"`, `"tp-dp"`,
    /// `"dp-cp"`, token order free), each group's ranks and the groups in
    /// Megatron-LM's order. With `independent_ep`, `ep` is an axis and `dp`
    /// means `dp / ep`.
    ///
    /// # Errors
    /// [`Error::UnknownKind`] for a token that is not an axis of the grid
    /// (`ep` without `independent_ep`, as Megatron-LM's `'ep' is not in
    /// list`); with `independent_ep`, [`Error::DpNotDivisibleByEp`] when
    /// `ep` does not divide `dp` (Megatron-LM divides by zero or returns
    /// incomplete groups).
    pub fn get_ranks(&self, token: &str, independent_ep: bool) -> Result<Vec<Vec<u32>>> {
        let unknown = || Error::UnknownKind {
            name: token.to_owned(),
        };
        let mut set = AxisSet::EMPTY;
        for name in token.split('-') {
            let axis = Axis::from_name(name)
                .filter(|a| Axis::ORDER_TOKENS.contains(a))
                .ok_or_else(unknown)?;
            if axis == Axis::Ep && !independent_ep {
                return Err(unknown());
            }
            set = set.with(axis);
        }
        if !independent_ep {
            let kind = Kind::of_axes(set).ok_or_else(unknown)?;
            return Ok(self.dense.groups(kind)?.to_vecs());
        }
        let layout = self.with_ep.as_ref().map_err(Clone::clone)?;
        let kind = if set.contains(Axis::Dp) {
            Kind::mod_ep(set)
        } else {
            Kind::of_axes(set)
        };
        Ok(layout.groups(kind.ok_or_else(unknown)?)?.to_vecs())
    }
}
