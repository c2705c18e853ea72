//! The ranking of orders shared by `suggest` and `check`'s fixes: every
//! order of a layout's axes, or of a mesh's dims, scored by how well it
//! keeps bandwidth-hungry groups inside nodes and domains.
//!
//! The orders are the permutations of the axes (dims) of size > 1 (size-1
//! axes are left out; a mesh's size-1 dims stay where they are written);
//! orders the layout rejects (ep not next to dp in the nested layout,
//! folded grids whose pipelines differ), or in which a mesh's view or
//! flatten no longer builds, are skipped and counted. Each order is scored
//! per tier of kinds, most important tier first (default `tp`, then
//! `cp`/`ep`/`etp`, then `pp`, then `dp`; for a mesh the dims so named, in
//! the mesh and its views, and every other dim last): within a tier, the
//! domains its groups span, the groups crossing domains, the nodes its
//! groups span, the groups crossing nodes, summed over its kinds. Lower is
//! better, compared tier by tier. Ties keep the given order first, then
//! the order closest to Megatron-LM's `tp-cp-ep-dp-pp` (for a mesh, to the
//! given order).

use rank_layout::{Axis, Kind, Layout, Order, Topology};

use crate::error::Failure;
use crate::spread::{KindSpread, spreads};
use crate::target::{DimSet, MeshTarget, Target, written};

/// Tiers of kinds (or dim sets), most important first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Priority(pub Vec<Vec<DimSet>>);

impl Priority {
    /// Parses `tp,cp+ep+etp,pp,dp`: tiers separated by `,`, the kinds (dim
    /// sets) of a tier joined by `+`.
    ///
    /// # Errors
    /// [`Failure::Input`] for a name that is not a kind (or no dim set of
    /// the mesh).
    pub fn parse(text: &str, target: &Target) -> Result<Priority, Failure> {
        let tiers = text
            .split(',')
            .map(|tier| {
                tier.split('+')
                    .map(|name| target.parse_set(name.trim()))
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Priority(tiers))
    }

    /// The default tiers: for a layout, with hcp-0 standing in for cp when
    /// context parallelism is hierarchical (the outer levels are meant to
    /// cross); for a mesh, its dims (and its views' own) by name: tp; cp,
    /// ep, etp; pp; every other dim.
    pub fn default_for(target: &Target) -> Priority {
        match target {
            Target::Layout { layout, .. } => {
                let cp = if layout.hierarchical_cp().is_empty() {
                    Kind::CP
                } else {
                    Kind::hcp(0)
                };
                let tiers = [
                    vec![Kind::TP],
                    vec![cp, Kind::EP, Kind::ETP, Kind::GTP_REMAT, Kind::EGTP_REMAT],
                    vec![Kind::PP],
                    vec![Kind::DP],
                ];
                Priority(
                    tiers
                        .into_iter()
                        .map(|t| t.into_iter().map(DimSet::Kind).collect())
                        .collect(),
                )
            }
            Target::Mesh(m) => {
                let mut tiers: Vec<Vec<DimSet>> = vec![Vec::new(); 4];
                for (set, dim) in m.own_dims() {
                    let tier = match dim.as_str() {
                        "tp" => 0,
                        "cp" | "ep" | "etp" | "gtp_remat" | "egtp_remat" => 1,
                        "pp" => 2,
                        _ => 3,
                    };
                    if let Some(t) = tiers.get_mut(tier) {
                        t.push(DimSet::Mesh(set));
                    }
                }
                Priority(tiers)
            }
        }
    }

    /// The tiers restricted to the sets `target` has (others ignored).
    fn present(&self, target: &Target) -> Vec<Vec<DimSet>> {
        self.0
            .iter()
            .map(|tier| tier.iter().filter(|k| target.has(k)).cloned().collect())
            .collect()
    }
}

/// One order, its layout (or mesh) and how its prioritised kinds fall.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The order: `tp-cp-dp-pp`, or a mesh's dims `tp=2,cp=2,dp=4`.
    pub order: String,
    /// The flag that gives it: `--order tp-cp-dp-pp`, `--mesh tp=2,...`.
    pub flag: String,
    /// Its fastest axis or dim of size > 1.
    pub fastest: Option<String>,
    /// The layout (or mesh) with that order.
    pub target: Target,
    /// The prioritised kinds (of size > 1), tier by tier.
    pub spreads: Vec<KindSpread>,
    /// The score, lower is better: four numbers per tier.
    pub score: Vec<u64>,
    /// Whether this is the order the layout was given.
    pub given: bool,
}

/// Every valid order ranked, best first.
#[derive(Debug, Clone)]
pub struct Ranking {
    /// The valid orders, best first.
    pub candidates: Vec<Candidate>,
    /// How many orders the layout rejected.
    pub invalid: usize,
    /// Why the first rejected one was.
    pub invalid_reason: Option<String>,
}

/// The four numbers of a tier: domains spanned beyond one, groups crossing
/// domains, nodes spanned beyond one, groups crossing nodes (summed).
fn tier_score(spreads: &[KindSpread]) -> [u64; 4] {
    let mut score = [0u64; 4];
    for s in spreads.iter().map(|k| k.spread) {
        score[0] += u64::from(s.max_domains_per_group.unwrap_or(1).saturating_sub(1));
        score[1] += u64::from(s.cross_domain_groups.unwrap_or(0));
        score[2] += u64::from(s.max_nodes_per_group.saturating_sub(1));
        score[3] += u64::from(s.cross_node_groups);
    }
    score
}

/// The order tokens in Megatron-Core 0.19's default order, the
/// weight-shard axis right after tp.
const DEFAULT_TOKENS: [Axis; 6] = [
    Axis::Tp,
    Axis::GtpRemat,
    Axis::Cp,
    Axis::Ep,
    Axis::Dp,
    Axis::Pp,
];

/// The axes of any grid of `layout` whose size is greater than 1, in the
/// default order (the expert grid's etp counts as tp, edp as dp and
/// egtp_remat as gtp_remat: a written `gtp_remat` places both).
fn big_axes(layout: &Layout) -> Vec<Axis> {
    let grids = [Some(layout.sizes()), layout.encoder_sizes()];
    DEFAULT_TOKENS
        .into_iter()
        .filter(|axis| {
            grids.iter().flatten().any(|s| {
                let expert = match axis {
                    Axis::Tp => s.etp,
                    Axis::Dp => s.edp,
                    Axis::GtpRemat => s.egtp_remat,
                    _ => 1,
                };
                s[*axis] > 1 || expert > 1
            })
        })
        .collect()
}

/// Every permutation of `items`.
fn permutations<T: Clone>(items: &[T]) -> Vec<Vec<T>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for (i, first) in items.iter().enumerate() {
        let mut rest = items.to_vec();
        rest.remove(i);
        for mut tail in permutations(&rest) {
            tail.insert(0, first.clone());
            out.push(tail);
        }
    }
    out
}

/// How many pairs of axes `order` lists the other way round from
/// `tp-gtp_remat-cp-ep-dp-pp`.
fn inversions(order: &[Axis]) -> usize {
    let pos = |a: &Axis| DEFAULT_TOKENS.iter().position(|b| b == a);
    let mut n = 0;
    for (i, a) in order.iter().enumerate() {
        for b in order.iter().skip(i + 1) {
            if pos(a) > pos(b) {
                n += 1;
            }
        }
    }
    n
}

/// How one candidate's prioritised sets fall: its score and the spreads
/// of its sets of size > 1.
fn score(
    target: &Target,
    topology: &Topology,
    priority: &Priority,
) -> Result<(Vec<u64>, Vec<KindSpread>), Failure> {
    let mut score = Vec::new();
    let mut all = Vec::new();
    for tier in priority.present(target) {
        let tier_spreads = spreads(target, &tier, topology)?;
        score.extend(tier_score(&tier_spreads));
        all.extend(tier_spreads.into_iter().filter(|k| k.spread.size > 1));
    }
    Ok((score, all))
}

/// Ranks every order of `target`'s axes (dims) on `topology` by `priority`.
///
/// # Errors
/// [`Failure::Input`] when the kinds cannot be placed (not expected for a
/// valid layout).
pub fn rank_orders(
    target: &Target,
    topology: &Topology,
    priority: &Priority,
) -> Result<Ranking, Failure> {
    match target {
        Target::Layout { layout, given } => rank_layout_orders(layout, given, topology, priority),
        Target::Mesh(mesh) => rank_mesh_orders(mesh, topology, priority),
    }
}

/// Sorts `candidates` (each with its distance from the reference order):
/// by score, the given order first among equals, then the closest.
fn ranked(
    mut candidates: Vec<(usize, Candidate)>,
    invalid: usize,
    reason: Option<String>,
) -> Ranking {
    candidates.sort_by(|(ia, a), (ib, b)| {
        a.score
            .cmp(&b.score)
            .then(b.given.cmp(&a.given))
            .then(ia.cmp(ib))
            .then_with(|| a.order.cmp(&b.order))
    });
    Ranking {
        candidates: candidates.into_iter().map(|(_, c)| c).collect(),
        invalid,
        invalid_reason: reason,
    }
}

/// [`rank_orders`] of a layout.
fn rank_layout_orders(
    layout: &Layout,
    given_config: &rank_layout::Config,
    topology: &Topology,
    priority: &Priority,
) -> Result<Ranking, Failure> {
    let mut axes = big_axes(layout);
    if axes.is_empty() {
        // Every size is 1: one order, any axis.
        axes.push(Axis::Tp);
    }
    // Where the given order puts the weight-shard axis: after tp for the
    // dense grid's, after ep when only the expert grid has one.
    let anchor = if layout.sizes().gtp_remat > 1 {
        Axis::Tp
    } else {
        Axis::Ep
    };
    let given: Vec<Axis> = layout
        .config()
        .order
        .grid_axes(anchor)
        .into_iter()
        .filter(|a| axes.contains(a))
        .collect();
    let mut candidates = Vec::new();
    let mut invalid = 0;
    let mut invalid_reason = None;
    for axes in permutations(&axes) {
        let text: Vec<&str> = axes.iter().map(|a| a.name()).collect();
        let order: Order = text.join("-").parse()?;
        let config = layout.config().clone().order(order.clone());
        let candidate = match Layout::new(&config) {
            Ok(candidate) => candidate,
            Err(e) => {
                invalid += 1;
                invalid_reason.get_or_insert_with(|| format!("{order}: {e}"));
                continue;
            }
        };
        let candidate = Target::Layout {
            layout: candidate,
            given: given_config.clone(),
        };
        let (score, spreads) = score(&candidate, topology, priority)?;
        candidates.push((
            inversions(&axes),
            Candidate {
                given: axes == given,
                flag: format!("--order {order}"),
                fastest: axes.first().map(|a| a.name().to_owned()),
                order: order.to_string(),
                target: candidate,
                spreads,
                score,
            },
        ));
    }
    Ok(ranked(candidates, invalid, invalid_reason))
}

/// How many pairs of `order` (positions in a reference order) are the
/// other way round.
fn swaps(order: &[usize]) -> usize {
    let mut n = 0;
    for (i, a) in order.iter().enumerate() {
        n += order.iter().skip(i + 1).filter(|b| a > b).count();
    }
    n
}

/// [`rank_orders`] of a mesh: its dims of size > 1 permuted in their
/// written places, views and flattens re-applied (an order where one no
/// longer builds is skipped and counted).
fn rank_mesh_orders(
    mesh: &MeshTarget,
    topology: &Topology,
    priority: &Priority,
) -> Result<Ranking, Failure> {
    let dims = mesh.spec.dims.clone();
    let big: Vec<usize> = (0..dims.len())
        .filter(|i| dims.get(*i).is_some_and(|(_, s)| *s > 1))
        .collect();
    let mut candidates = Vec::new();
    let mut invalid = 0;
    let mut invalid_reason = None;
    for order in permutations(&big) {
        let mut written_dims = dims.clone();
        for (slot, from) in big.iter().zip(&order) {
            if let (Some(to), Some(dim)) = (written_dims.get_mut(*slot), dims.get(*from)) {
                *to = dim.clone();
            }
        }
        let text = written(&written_dims);
        let candidate = match mesh.reordered(written_dims) {
            Ok(candidate) => candidate,
            Err(e) => {
                invalid += 1;
                invalid_reason.get_or_insert_with(|| format!("{text}: {e}"));
                continue;
            }
        };
        let fastest = candidate
            .mesh
            .dims()
            .find(|(_, s)| *s > 1)
            .map(|(n, _)| n.to_owned());
        let flag = candidate.flag();
        let candidate = Target::Mesh(candidate);
        let (score, spreads) = score(&candidate, topology, priority)?;
        candidates.push((
            swaps(&order),
            Candidate {
                given: order == big,
                order: text,
                flag,
                fastest,
                target: candidate,
                spreads,
                score,
            },
        ));
    }
    Ok(ranked(candidates, invalid, invalid_reason))
}
