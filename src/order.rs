//! The axis order of a grid, parsed once from its dash-separated string.

use std::fmt;
use std::str::FromStr;

use arrayvec::ArrayVec;

use crate::axis::Axis;
use crate::error::{Error, Result};

/// A validated axis order such as `tp-cp-ep-dp-pp`: the first axis varies fastest.
///
/// Parsing is case-insensitive and checks the tokens alone (known, not
/// repeated, not empty). Besides the five order tokens an order may name
/// `gtp_remat`, the weight-shard axis, to place it in both grids as
/// Megatron-Core 0.19 does (see [`Order::grid_axes`]). Axes left out are appended after the written ones;
/// whether a left-out axis really has size 1 is checked when a grid is built
/// from the order and its sizes.
///
/// ```
/// use rank_layout::{Axis, Order};
/// let order: Order = "PP-dp-tp".parse()?;
/// assert_eq!(order.to_string(), "pp-dp-tp");
/// assert_eq!(order.written(), &[Axis::Pp, Axis::Dp, Axis::Tp]);
/// assert_eq!(order.axes(), [Axis::Pp, Axis::Dp, Axis::Tp, Axis::Cp, Axis::Ep]);
/// assert!("tp-xp".parse::<Order>().is_err());
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Order {
    written: ArrayVec<Axis, 6>,
}

impl Order {
    /// The axes as written, first (fastest) first.
    pub fn written(&self) -> &[Axis] {
        &self.written
    }

    /// All five order axes: the written ones, then the left-out ones in
    /// `tp-cp-ep-dp-pp` order. A written `gtp_remat` is not among them: see
    /// [`Order::grid_axes`].
    pub fn axes(&self) -> [Axis; 5] {
        let mut all: ArrayVec<Axis, 5> = self
            .written
            .iter()
            .copied()
            .filter(|a| *a != Axis::GtpRemat)
            .collect();
        for axis in Axis::ORDER_TOKENS {
            if !all.contains(&axis) {
                let _ = all.try_push(axis);
            }
        }
        all.into_inner().unwrap_or(Axis::ORDER_TOKENS)
    }

    /// The axes of a grid with a weight-shard axis, first fastest, as
    /// Megatron-Core 0.19 places it (`_inject_gtp_remat_axis`): where the
    /// order writes `gtp_remat`, else right after `anchor` (the dense grid
    /// passes `tp`, the expert grid `ep`), else right after `tp`, else
    /// first; then the left-out order tokens. The weight-shard axis is
    /// [`Axis::GtpRemat`] in both grids' lists.
    ///
    /// ```
    /// use rank_layout::{Axis, Order};
    /// let order = Order::default();
    /// assert_eq!(order.grid_axes(Axis::Tp)[..3], [Axis::Tp, Axis::GtpRemat, Axis::Cp]);
    /// assert_eq!(order.grid_axes(Axis::Ep)[2..4], [Axis::Ep, Axis::GtpRemat]);
    /// let written: Order = "gtp_remat-tp-cp-ep-dp-pp".parse()?;
    /// assert_eq!(written.grid_axes(Axis::Ep)[0], Axis::GtpRemat);
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn grid_axes(&self, anchor: Axis) -> [Axis; 6] {
        let mut all = self.written.clone();
        if !all.contains(&Axis::GtpRemat) {
            let after = |axis: Axis| all.iter().position(|a| *a == axis);
            let at = after(anchor)
                .or_else(|| after(Axis::Tp))
                .map_or(0, |p| p + 1);
            // Five order tokens at most besides gtp_remat, so there is room.
            let _ = all.try_insert(at, Axis::GtpRemat);
        }
        for axis in Axis::ORDER_TOKENS {
            if !all.contains(&axis) {
                let _ = all.try_push(axis);
            }
        }
        all.into_inner().unwrap_or([
            Axis::Tp,
            Axis::GtpRemat,
            Axis::Cp,
            Axis::Ep,
            Axis::Dp,
            Axis::Pp,
        ])
    }

    /// Whether `axis` was written in the order.
    pub fn is_written(&self, axis: Axis) -> bool {
        self.written.contains(&axis)
    }

    /// Position of `axis` among the written axes.
    pub(crate) fn written_position(&self, axis: Axis) -> Option<usize> {
        self.written.iter().position(|a| *a == axis)
    }

    /// Checks that every order axis whose `size` is greater than 1 is
    /// written; `name` gives the axis's name in the grid being built (the
    /// folded expert grid calls tp `etp` and dp `edp`).
    ///
    /// # Errors
    /// [`Error::MissingAxis`] for the first one that is not.
    pub(crate) fn check_written(
        &self,
        size: impl Fn(Axis) -> u32,
        name: impl Fn(Axis) -> Axis,
    ) -> Result<()> {
        for axis in Axis::ORDER_TOKENS {
            let s = size(axis);
            if s > 1 && !self.is_written(axis) {
                return Err(Error::MissingAxis {
                    axis: name(axis),
                    size: s,
                    order: self.to_string(),
                });
            }
        }
        Ok(())
    }
}

impl Default for Order {
    /// `tp-cp-ep-dp-pp`, Megatron-LM's default.
    fn default() -> Self {
        Order {
            written: Axis::ORDER_TOKENS.into_iter().collect(),
        }
    }
}

impl FromStr for Order {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let lower = s.to_ascii_lowercase();
        let mut written = ArrayVec::<Axis, 6>::new();
        for token in lower.split('-') {
            if token.is_empty() {
                return Err(Error::EmptyAxis {
                    order: s.to_owned(),
                });
            }
            let axis = Axis::from_name(token)
                .filter(|a| Axis::ORDER_TOKENS.contains(a) || *a == Axis::GtpRemat)
                .ok_or_else(|| Error::UnknownAxis {
                    token: token.to_owned(),
                    order: s.to_owned(),
                })?;
            if written.contains(&axis) {
                return Err(Error::RepeatedAxis {
                    axis,
                    order: s.to_owned(),
                });
            }
            // Six distinct order tokens at most, so there is room.
            let _ = written.try_push(axis);
        }
        Ok(Order { written })
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, axis) in self.written.iter().enumerate() {
            if i > 0 {
                f.write_str("-")?;
            }
            f.write_str(axis.name())?;
        }
        Ok(())
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Order {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Order {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}
