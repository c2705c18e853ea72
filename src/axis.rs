//! Parallelism axes and sets of them.

use std::fmt;

/// One axis of parallelism.
///
/// `Tp`, `Cp`, `Ep`, `Dp` and `Pp` are the order tokens of a grid. `Etp`
/// and `Edp` are the expert tensor- and expert data-parallel axes of the
/// folded expert grid; in the nested layout `Edp` is the `dp / ep` axis that
/// Megatron-LM calls "dp mod ep" (see [`semantics`](crate::semantics)).
/// `GtpRemat` and `EgtpRemat` are Megatron-Core 0.19's weight-shard axes
/// (generalized tensor parallelism with weight rematerialization, "GTP"):
/// `gtp_remat` on the dense grid, `egtp_remat` on the folded expert grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Axis {
    /// Tensor parallel.
    Tp,
    /// Context parallel.
    Cp,
    /// Expert parallel.
    Ep,
    /// Data parallel.
    Dp,
    /// Pipeline parallel.
    Pp,
    /// Expert tensor parallel (folded expert grid).
    Etp,
    /// Expert data parallel (folded grid), or dp / ep (nested grid).
    Edp,
    /// Weight shards of the dense grid (`gtp_remat`, Megatron-Core 0.19's
    /// `gtp_remat_size`): placed right after `tp` unless the order names it.
    GtpRemat,
    /// Weight shards of the folded expert grid (`egtp_remat`, Megatron-Core
    /// 0.19's `expert_gtp_remat_size`): placed right after `ep` unless the
    /// order names `gtp_remat`.
    EgtpRemat,
}

impl Axis {
    /// The five order tokens in the default order `tp-cp-ep-dp-pp`.
    pub const ORDER_TOKENS: [Axis; 5] = [Axis::Tp, Axis::Cp, Axis::Ep, Axis::Dp, Axis::Pp];

    /// The axes of rank-layout 1.0, in the order kind names list them
    /// (`tp-dp-cp`, `etp-ep-pp`); [`Axis::ALL`] adds the weight-shard axes.
    pub const NAME_ORDER: [Axis; 7] = [
        Axis::Tp,
        Axis::Etp,
        Axis::Ep,
        Axis::Dp,
        Axis::Edp,
        Axis::Cp,
        Axis::Pp,
    ];

    /// Every axis, in the order kind names list them (`tp-gtp_remat-dp-cp`,
    /// `etp-ep-egtp_remat-pp`).
    pub const ALL: [Axis; 9] = [
        Axis::Tp,
        Axis::GtpRemat,
        Axis::Etp,
        Axis::Ep,
        Axis::EgtpRemat,
        Axis::Dp,
        Axis::Edp,
        Axis::Cp,
        Axis::Pp,
    ];

    /// The lowercase name: `"tp"`, `"cp"`, `"ep"`, `"dp"`, `"pp"`, `"etp"`,
    /// `"edp"`, `"gtp_remat"`, `"egtp_remat"`.
    pub const fn name(self) -> &'static str {
        match self {
            Axis::Tp => "tp",
            Axis::Cp => "cp",
            Axis::Ep => "ep",
            Axis::Dp => "dp",
            Axis::Pp => "pp",
            Axis::Etp => "etp",
            Axis::Edp => "edp",
            Axis::GtpRemat => "gtp_remat",
            Axis::EgtpRemat => "egtp_remat",
        }
    }

    /// Parses a lowercase axis name; `None` for anything else.
    pub fn from_name(name: &str) -> Option<Axis> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    const fn bit(self) -> u16 {
        1 << (self as u8)
    }
}

impl fmt::Display for Axis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// A set of axes, stored as a bitmask: the axes a kind of group spans.
///
/// `Display` and `Debug` both print the kind-style name (`dp-cp`; the empty
/// set prints `{}`).
///
/// ```
/// use rank_layout::{Axis, AxisSet};
/// let s = AxisSet::of(&[Axis::Dp, Axis::Cp]);
/// assert!(s.contains(Axis::Cp));
/// assert_eq!(s.to_string(), "dp-cp");
/// assert_eq!(format!("{s:?}"), "dp-cp");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct AxisSet(u16);

impl AxisSet {
    /// The empty set.
    pub const EMPTY: AxisSet = AxisSet(0);

    /// The set of the given axes.
    pub const fn of(axes: &[Axis]) -> AxisSet {
        let mut bits = 0;
        let mut rest = axes;
        while let [first, tail @ ..] = rest {
            bits |= first.bit();
            rest = tail;
        }
        AxisSet(bits)
    }

    /// Whether `axis` is in the set.
    pub const fn contains(self, axis: Axis) -> bool {
        self.0 & axis.bit() != 0
    }

    /// The set with `axis` added.
    #[must_use]
    pub const fn with(self, axis: Axis) -> AxisSet {
        AxisSet(self.0 | axis.bit())
    }

    /// The set with `axis` removed.
    #[must_use]
    pub const fn without(self, axis: Axis) -> AxisSet {
        AxisSet(self.0 & !axis.bit())
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether some axis is in both sets.
    pub const fn intersects(self, other: AxisSet) -> bool {
        self.0 & other.0 != 0
    }

    /// The axes of the set, in kind-name order ([`Axis::ALL`]).
    pub fn iter(self) -> impl Iterator<Item = Axis> {
        Axis::ALL.into_iter().filter(move |a| self.contains(*a))
    }
}

impl fmt::Display for AxisSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("{}");
        }
        for (i, axis) in self.iter().enumerate() {
            if i > 0 {
                f.write_str("-")?;
            }
            f.write_str(axis.name())?;
        }
        Ok(())
    }
}

impl fmt::Debug for AxisSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
