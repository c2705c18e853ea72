//! From a kind to its plan: every decision about which grid, which axes
//! and which join a kind means in a layout, in one place.

use crate::axis::{Axis, AxisSet};
use crate::config::ExpertLayout;
use crate::error::{Error, Result};
use crate::kind::{Kind, Repr};
use crate::layout::families::{self, Families, masked};
use crate::layout::shape::{Dense, Shape};
use crate::plan::boxes::Boxes;
use crate::plan::pp_group_mapper::PpGroupMapper;
use crate::plan::view::View;
use crate::plan::{Pair, Plan};

/// Every kind of a layout, in listing order: the dense kinds (with the
/// `gtp_remat` kinds in place of `tp-pp`, `tp-dp` and `tp-dp-cp` when that
/// axis is > 1), the expert kinds (with the
/// `egtp_remat` kinds likewise), `embd`, `pos-embd` (before the expert
/// kinds in the folded layout, as Megatron-Core lists them), then `hcp-*`
/// and the distributed-optimizer kinds when configured.
pub(crate) fn kinds(shape: &Shape, families: &Families) -> Vec<Kind> {
    let mut kinds = Kind::ATTENTION.to_vec();
    let main = shape.main();
    if main.sizes.gtp_remat > 1 {
        // Megatron-Core 0.19 builds its model-parallel and tensor + data
        // groups across the weight shards: tp-gtp_remat-pp, ... replace
        // tp-pp, tp-dp and tp-dp-cp.
        kinds.retain(|k| ![Kind::TP_PP, Kind::TP_DP, Kind::TP_DP_CP].contains(k));
        kinds.extend(Kind::GTP);
    }
    if main.experts == ExpertLayout::Folded {
        kinds.extend([Kind::EMBD, Kind::POS_EMBD]);
        kinds.extend(Kind::FOLDED_EXPERT);
        if main.sizes.egtp_remat > 1 {
            kinds.extend(Kind::EXPERT_GTP);
        }
    } else {
        kinds.extend(Kind::NESTED_EXPERT);
        kinds.extend([Kind::EMBD, Kind::POS_EMBD]);
    }
    // At most 64 levels (checked when the layout was built).
    kinds.extend(
        (0..families.hierarchical_cp.len()).map(|l| Kind::hcp(u8::try_from(l).unwrap_or(u8::MAX))),
    );
    if families.dist_opt_instances > 1 {
        match shape.encoder() {
            // Megatron-LM 5a3b6bcf1f: slices of the dp-cp groups only.
            Some(_) => kinds.extend([Kind::DP_CP_INTRA, Kind::DP_CP_INTER]),
            None => kinds.extend(Kind::DIST_OPT),
        }
    }
    kinds
}

/// The plan of `kind` in a layout of `shape` and `families`.
///
/// # Errors
/// [`Error::KindNotInLayout`], with a hint saying what would make the kind
/// exist.
pub(crate) fn resolve(shape: &Shape, families: &Families, kind: Kind) -> Result<Plan> {
    let not_here = |hint: &'static str| Error::KindNotInLayout {
        kind,
        layout: shape.name(),
        hint,
    };
    let main = shape.main();
    // Encoder first, then the decoder, each from its own grid.
    let stacked = |of: &dyn Fn(&Dense) -> Option<Plan>| -> Option<Plan> {
        match shape.encoder() {
            Some(encoder) => Some(Plan::Stack(Box::new(Pair {
                first: of(encoder)?,
                second: of(main)?,
            }))),
            None => of(main),
        }
    };
    match kind.repr() {
        Repr::Hcp(level) => {
            return stacked(&|d| families::hierarchical_cp(d, &families.hierarchical_cp, level))
                .ok_or(not_here(
                    ": set hierarchical_cp with one size per level (hcp-0 is the first)",
                ));
        }
        Repr::DpCpIntra | Repr::EdpIntra | Repr::DpCpInter | Repr::DistOptInstance => {
            let hint = ": set dist_opt_instances > 1 with the folded expert layout";
            let n = families.dist_opt_instances;
            if n <= 1 || main.experts != ExpertLayout::Folded {
                return Err(not_here(hint));
            }
            let plan = match shape.encoder() {
                Some(_) => stacked(&|d| families::dist_opt_slices(kind, n, d)),
                None => families::dist_opt(kind, n, main),
            };
            return plan.ok_or(not_here(hint));
        }
        _ => {}
    }
    let Shape::EncoderDecoder { encoder, decoder } = shape else {
        return dense(main, kind).ok_or_else(|| not_here(hint(main, kind)));
    };
    let pipelines = |d: &Dense| masked(d, View::Attention, &[Axis::Pp]);
    let joined = || -> Option<Plan> {
        let mapper = PpGroupMapper::new(
            &encoder.attention,
            pipelines(encoder)?,
            &decoder.attention,
            pipelines(decoder)?,
        )
        .ok()?;
        Some(Plan::Joined(Box::new(mapper)))
    };
    let plan = match kind {
        Kind::PP => joined(),
        Kind::EMBD => joined().map(|p| Plan::ends(p, true)),
        // Fan-out: the first appearances of encoder pipelines come in the
        // encoder's own order, so pos-embd is the encoder's. Fan-in: every
        // joined pipeline has its own encoder pipeline.
        Kind::POS_EMBD if decoder.sizes.tp >= encoder.sizes.tp => {
            pipelines(encoder).map(|p| Plan::ends(Plan::Boxes(p), false))
        }
        Kind::POS_EMBD => joined().map(|p| Plan::ends(p, false)),
        Kind::TP_PP => {
            let tp_pp = |d: &Dense| masked(d, View::Attention, &[Axis::Tp, Axis::Pp]);
            tp_pp(encoder)
                .zip(tp_pp(decoder))
                .map(|(first, second)| Plan::Concat(Box::new(Pair { first, second })))
        }
        _ => dense(encoder, kind)
            .zip(dense(decoder, kind))
            .map(|(first, second)| Plan::Stack(Box::new(Pair { first, second }))),
    };
    plan.ok_or_else(|| not_here(hint(decoder, kind)))
}

/// The plan of `kind` in one dense grid and its expert view, or `None` when
/// the grid lacks one of the kind's axes.
fn dense(d: &Dense, kind: Kind) -> Option<Plan> {
    let (view, axes) = match kind.repr() {
        Repr::Embd | Repr::PosEmbd => {
            let pipelines = masked(d, View::Attention, &[Axis::Pp])?;
            return Some(Plan::ends(Plan::Boxes(pipelines), kind == Kind::EMBD));
        }
        Repr::Axes(set) => match d.experts {
            ExpertLayout::Nested if set.intersects(AxisSet::of(&[Axis::Ep, Axis::Edp])) => {
                (View::Expert, dp_to_edp(set))
            }
            ExpertLayout::Folded
                if set.intersects(AxisSet::of(&[
                    Axis::Etp,
                    Axis::Ep,
                    Axis::Edp,
                    Axis::EgtpRemat,
                ])) =>
            {
                (View::Expert, set)
            }
            _ => (View::Attention, set),
        },
        Repr::ModEp(set) if d.experts == ExpertLayout::Nested => (View::Expert, dp_to_edp(set)),
        _ => return None,
    };
    let grid = d.grid(view);
    let mask = grid.mask(axes)?;
    Some(Plan::Boxes(Boxes::masked(grid, d.id(view), mask)))
}

/// In the nested expert view, dp means dp / ep.
fn dp_to_edp(set: AxisSet) -> AxisSet {
    if set.contains(Axis::Dp) {
        set.without(Axis::Dp).with(Axis::Edp)
    } else {
        set
    }
}

/// What to say when `kind` is not in a grid like `d`.
fn hint(d: &Dense, kind: Kind) -> &'static str {
    match (d.experts, kind.repr()) {
        (ExpertLayout::Folded, Repr::ModEp(_)) => ": the *-mod-ep kinds are nested-only, use edp",
        (ExpertLayout::Folded, Repr::Axes(set)) if set.contains(Axis::GtpRemat) => {
            ": gtp_remat is an axis when gtp_remat > 1 (or the order names it)"
        }
        (ExpertLayout::Folded, Repr::Axes(set)) if set.contains(Axis::EgtpRemat) => {
            ": egtp_remat is an axis when expert_gtp_remat > 1 (or the order names gtp_remat)"
        }
        (ExpertLayout::Folded, _) => {
            ": attention kinds combine tp, gtp_remat, cp, dp and pp; expert kinds etp, ep, egtp_remat, edp and pp"
        }
        (ExpertLayout::Nested, Repr::Axes(set)) if set.contains(Axis::Etp) => {
            ": etp exists in the folded expert layout (expert_layout = folded)"
        }
        _ => "",
    }
}
