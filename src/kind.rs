//! Kinds of process groups: typed values, parsed from their names at the edges.

use std::fmt;
use std::str::FromStr;

use crate::axis::{Axis, AxisSet};
use crate::error::Error;

/// A kind of process group, such as `tp`, `dp-cp` or `embd`.
///
/// An opaque value with one spelling: the named constants (`Kind::TP`,
/// `Kind::DP_CP`, `Kind::EMBD`, `Kind::DP_CP_INTRA`, ...), [`Kind::hcp`],
/// [`Kind::of_axes`] and [`Kind::mod_ep`] build every kind there is, and every
/// kind prints its name and parses back from it. Most kinds are a set of axes:
/// the groups are the ranks that agree on every other axis. Any non-empty set
/// of the layout's axes is a valid kind, not only the named constants; the
/// order of tokens in the name does not matter (`cp-dp` is `dp-cp`). The
/// others are Megatron-LM's special families; [`semantics`](crate::semantics)
/// defines each.
///
/// `Display`, `Debug` and `FromStr` use the kind's name (`tp-dp`, `embd`).
///
/// ```
/// use rank_layout::{Axis, AxisSet, Kind};
/// assert_eq!("cp-dp".parse::<Kind>()?, Kind::DP_CP);
/// assert_eq!(Kind::DP_CP.to_string(), "dp-cp");
/// assert_eq!("dp-cp-mod-ep".parse::<Kind>()?, Kind::DP_CP_MOD_EP);
/// assert_eq!("hcp-1".parse::<Kind>()?, Kind::hcp(1));
/// assert_eq!(Kind::of_axes(AxisSet::of(&[Axis::Tp, Axis::Pp])), Some(Kind::TP_PP));
/// assert_eq!(Kind::of_axes(AxisSet::EMPTY), None); // no kind without a name
/// assert_eq!(format!("{:?}", Kind::POS_EMBD), "pos-embd");
/// assert!("tp-xp".parse::<Kind>().is_err());
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Kind(Repr);

/// What a [`Kind`] is, inside the crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Repr {
    /// The groups spanned by a non-empty set of axes (`tp`, `dp-cp`, ...).
    Axes(AxisSet),
    /// A non-empty set of axes of the nested expert view, where `dp` means
    /// `dp / ep` (Megatron-LM `get_ranks(..., independent_ep=True)`); named
    /// `<axes>-mod-ep`.
    ModEp(AxisSet),
    /// Embedding groups: `[first, last]` stage of each pipeline (`[only]` when pp = 1).
    Embd,
    /// Position-embedding groups: `[first]` stage of each pipeline.
    PosEmbd,
    /// Hierarchical context parallel, level `n` (`hcp-n`).
    Hcp(u8),
    /// Each dp-cp group cut into contiguous distributed-optimizer slices.
    DpCpIntra,
    /// Each edp group cut into contiguous distributed-optimizer slices.
    EdpIntra,
    /// Replicas of the same optimizer shard across distributed-optimizer instances.
    DpCpInter,
    /// The ranks of one distributed-optimizer instance.
    DistOptInstance,
}

const fn axes(list: &[Axis]) -> Kind {
    Kind(Repr::Axes(AxisSet::of(list)))
}

impl Kind {
    /// `tp`
    pub const TP: Kind = axes(&[Axis::Tp]);
    /// `pp`
    pub const PP: Kind = axes(&[Axis::Pp]);
    /// `dp`
    pub const DP: Kind = axes(&[Axis::Dp]);
    /// `cp`
    pub const CP: Kind = axes(&[Axis::Cp]);
    /// `dp-cp`
    pub const DP_CP: Kind = axes(&[Axis::Dp, Axis::Cp]);
    /// `tp-pp`
    pub const TP_PP: Kind = axes(&[Axis::Tp, Axis::Pp]);
    /// `tp-cp`
    pub const TP_CP: Kind = axes(&[Axis::Tp, Axis::Cp]);
    /// `tp-dp`
    pub const TP_DP: Kind = axes(&[Axis::Tp, Axis::Dp]);
    /// `tp-dp-cp`
    pub const TP_DP_CP: Kind = axes(&[Axis::Tp, Axis::Dp, Axis::Cp]);
    /// `ep`
    pub const EP: Kind = axes(&[Axis::Ep]);
    /// `tp-ep`
    pub const TP_EP: Kind = axes(&[Axis::Tp, Axis::Ep]);
    /// `tp-ep-pp`
    pub const TP_EP_PP: Kind = axes(&[Axis::Tp, Axis::Ep, Axis::Pp]);
    /// `dp-mod-ep`
    pub const DP_MOD_EP: Kind = Kind(Repr::ModEp(AxisSet::of(&[Axis::Dp])));
    /// `dp-cp-mod-ep`
    pub const DP_CP_MOD_EP: Kind = Kind(Repr::ModEp(AxisSet::of(&[Axis::Dp, Axis::Cp])));
    /// `etp`
    pub const ETP: Kind = axes(&[Axis::Etp]);
    /// `etp-ep`
    pub const ETP_EP: Kind = axes(&[Axis::Etp, Axis::Ep]);
    /// `etp-ep-pp`
    pub const ETP_EP_PP: Kind = axes(&[Axis::Etp, Axis::Ep, Axis::Pp]);
    /// `edp`
    pub const EDP: Kind = axes(&[Axis::Edp]);
    /// `gtp_remat`: the dense grid's weight-shard groups (Megatron-Core 0.19).
    pub const GTP_REMAT: Kind = axes(&[Axis::GtpRemat]);
    /// `gtp_remat-dp`: data distribution across weight shards and replicas.
    pub const GTP_REMAT_DP: Kind = axes(&[Axis::GtpRemat, Axis::Dp]);
    /// `gtp_remat-dp-cp`
    pub const GTP_REMAT_DP_CP: Kind = axes(&[Axis::GtpRemat, Axis::Dp, Axis::Cp]);
    /// `tp-gtp_remat-pp`: Megatron-Core 0.19's model-parallel group.
    pub const TP_GTP_REMAT_PP: Kind = axes(&[Axis::Tp, Axis::GtpRemat, Axis::Pp]);
    /// `tp-gtp_remat-dp`
    pub const TP_GTP_REMAT_DP: Kind = axes(&[Axis::Tp, Axis::GtpRemat, Axis::Dp]);
    /// `tp-gtp_remat-dp-cp`
    pub const TP_GTP_REMAT_DP_CP: Kind = axes(&[Axis::Tp, Axis::GtpRemat, Axis::Dp, Axis::Cp]);
    /// `egtp_remat`: the expert grid's weight-shard groups (Megatron-Core 0.19).
    pub const EGTP_REMAT: Kind = axes(&[Axis::EgtpRemat]);
    /// `egtp_remat-edp`: expert data distribution across weight shards.
    pub const EGTP_REMAT_EDP: Kind = axes(&[Axis::EgtpRemat, Axis::Edp]);
    /// `etp-ep-egtp_remat-pp`
    pub const ETP_EP_EGTP_REMAT_PP: Kind = axes(&[Axis::Etp, Axis::Ep, Axis::EgtpRemat, Axis::Pp]);
    /// `embd`: the first and last stage of each pipeline.
    pub const EMBD: Kind = Kind(Repr::Embd);
    /// `pos-embd`: the first stage of each pipeline.
    pub const POS_EMBD: Kind = Kind(Repr::PosEmbd);
    /// `dp-cp-intra`
    pub const DP_CP_INTRA: Kind = Kind(Repr::DpCpIntra);
    /// `edp-intra`
    pub const EDP_INTRA: Kind = Kind(Repr::EdpIntra);
    /// `dp-cp-inter`
    pub const DP_CP_INTER: Kind = Kind(Repr::DpCpInter);
    /// `dist-opt-instance`
    pub const DIST_OPT_INSTANCE: Kind = Kind(Repr::DistOptInstance);

    /// `hcp-level`: hierarchical context parallel, level `level`.
    pub const fn hcp(level: u8) -> Kind {
        Kind(Repr::Hcp(level))
    }

    /// The kind spanned by the axes of `set` (`None` for the empty set,
    /// which names no groups).
    pub const fn of_axes(set: AxisSet) -> Option<Kind> {
        if set.is_empty() {
            None
        } else {
            Some(Kind(Repr::Axes(set)))
        }
    }

    /// The kind of the nested expert view spanned by `set`, where `dp`
    /// means `dp / ep` (`<axes>-mod-ep`; `None` for the empty set).
    pub const fn mod_ep(set: AxisSet) -> Option<Kind> {
        if set.is_empty() {
            None
        } else {
            Some(Kind(Repr::ModEp(set)))
        }
    }

    /// The axes of a kind spanned by a set of axes (`tp-dp` -> {tp, dp});
    /// `None` for the special families (`embd`, `hcp-0`, `dp-mod-ep`, ...).
    pub const fn axis_set(self) -> Option<AxisSet> {
        match self.0 {
            Repr::Axes(set) => Some(set),
            _ => None,
        }
    }

    /// The level of a hierarchical context-parallel kind (`hcp-2` -> 2).
    pub const fn hcp_level(self) -> Option<u8> {
        match self.0 {
            Repr::Hcp(level) => Some(level),
            _ => None,
        }
    }

    /// What the kind is, for the crate's own matching.
    pub(crate) const fn repr(self) -> Repr {
        self.0
    }

    /// The dense kinds shared by every layout's attention grid, in their
    /// listing order.
    pub(crate) const ATTENTION: [Kind; 9] = [
        Kind::TP,
        Kind::PP,
        Kind::DP,
        Kind::CP,
        Kind::DP_CP,
        Kind::TP_PP,
        Kind::TP_CP,
        Kind::TP_DP,
        Kind::TP_DP_CP,
    ];
    /// The nested expert kinds.
    pub(crate) const NESTED_EXPERT: [Kind; 5] = [
        Kind::EP,
        Kind::TP_EP,
        Kind::TP_EP_PP,
        Kind::DP_MOD_EP,
        Kind::DP_CP_MOD_EP,
    ];
    /// The folded expert kinds.
    pub(crate) const FOLDED_EXPERT: [Kind; 5] = [
        Kind::EP,
        Kind::ETP,
        Kind::ETP_EP,
        Kind::ETP_EP_PP,
        Kind::EDP,
    ];
    /// The kinds of the dense grid's weight-shard axis, listed when its size
    /// is > 1 (Megatron-Core 0.19 creates them then).
    pub(crate) const GTP: [Kind; 6] = [
        Kind::GTP_REMAT,
        Kind::GTP_REMAT_DP,
        Kind::GTP_REMAT_DP_CP,
        Kind::TP_GTP_REMAT_PP,
        Kind::TP_GTP_REMAT_DP,
        Kind::TP_GTP_REMAT_DP_CP,
    ];
    /// The kinds of the expert grid's weight-shard axis, likewise.
    pub(crate) const EXPERT_GTP: [Kind; 3] = [
        Kind::EGTP_REMAT,
        Kind::EGTP_REMAT_EDP,
        Kind::ETP_EP_EGTP_REMAT_PP,
    ];
    /// The distributed-optimizer kinds.
    pub(crate) const DIST_OPT: [Kind; 4] = [
        Kind::DP_CP_INTRA,
        Kind::EDP_INTRA,
        Kind::DP_CP_INTER,
        Kind::DIST_OPT_INSTANCE,
    ];
}

fn parse_axes(s: &str, whole: &str) -> Result<AxisSet, Error> {
    let unknown = || Error::UnknownKind {
        name: whole.to_owned(),
    };
    let mut set = AxisSet::EMPTY;
    for token in s.split('-') {
        let axis = Axis::from_name(token).ok_or_else(unknown)?;
        if set.contains(axis) {
            return Err(unknown());
        }
        set = set.with(axis);
    }
    Ok(set)
}

impl FromStr for Kind {
    type Err = Error;

    /// Parses a kind name, case-insensitively.
    fn from_str(s: &str) -> Result<Self, Error> {
        let lower = s.to_ascii_lowercase();
        let special = match lower.as_str() {
            "embd" => Some(Kind::EMBD),
            "pos-embd" => Some(Kind::POS_EMBD),
            "dp-cp-intra" => Some(Kind::DP_CP_INTRA),
            "edp-intra" => Some(Kind::EDP_INTRA),
            "dp-cp-inter" => Some(Kind::DP_CP_INTER),
            "dist-opt-instance" => Some(Kind::DIST_OPT_INSTANCE),
            _ => None,
        };
        if let Some(kind) = special {
            return Ok(kind);
        }
        if let Some(level) = lower.strip_prefix("hcp-") {
            return level
                .parse::<u8>()
                .map(Kind::hcp)
                .map_err(|_| Error::UnknownKind { name: s.to_owned() });
        }
        if let Some(base) = lower.strip_suffix("-mod-ep") {
            return parse_axes(base, s).map(|set| Kind(Repr::ModEp(set)));
        }
        parse_axes(&lower, s).map(|set| Kind(Repr::Axes(set)))
    }
}

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Kind {
    /// The kind's name; honours width and alignment (`{:<12}`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.0 {
            Repr::Axes(set) => set.to_string(),
            Repr::ModEp(set) => format!("{set}-mod-ep"),
            Repr::Embd => "embd".into(),
            Repr::PosEmbd => "pos-embd".into(),
            Repr::Hcp(level) => format!("hcp-{level}"),
            Repr::DpCpIntra => "dp-cp-intra".into(),
            Repr::EdpIntra => "edp-intra".into(),
            Repr::DpCpInter => "dp-cp-inter".into(),
            Repr::DistOptInstance => "dist-opt-instance".into(),
        };
        f.pad(&name)
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}
