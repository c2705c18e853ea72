//! The ranking of orders shared by `suggest` and `check`'s fixes: every
//! order of the layout's axes scored by how well it keeps bandwidth-hungry
//! groups inside nodes and domains.
//!
//! The orders are the permutations of the axes of size > 1 (size-1 axes
//! are left out); orders the layout rejects (ep not next to dp in the
//! nested layout, folded grids whose pipelines differ) are skipped and
//! counted. Each order is scored per tier of kinds, most important tier
//! first (default `tp`, then `cp`/`ep`/`etp`, then `pp`, then `dp`): within
//! a tier, the domains its groups span, the groups crossing domains, the
//! nodes its groups span, the groups crossing nodes, summed over its kinds.
//! Lower is better, compared tier by tier. Ties keep the given order first,
//! then the order closest to Megatron-LM's `tp-cp-ep-dp-pp`.

use rank_layout::{Axis, Kind, Layout, Order, Topology};

use crate::error::Failure;
use crate::spread::{KindSpread, spreads};

/// Tiers of kinds, most important first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Priority(pub Vec<Vec<Kind>>);

impl Priority {
    /// Parses `tp,cp+ep+etp,pp,dp`: tiers separated by `,`, the kinds of a
    /// tier joined by `+`.
    ///
    /// # Errors
    /// [`Failure::Input`] for a name that is not a kind.
    pub fn parse(text: &str) -> Result<Priority, Failure> {
        let tiers = text
            .split(',')
            .map(|tier| {
                tier.split('+')
                    .map(|name| name.trim().parse::<Kind>().map_err(Failure::from))
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Priority(tiers))
    }

    /// The default tiers, with hcp-0 standing in for cp when context
    /// parallelism is hierarchical (the outer levels are meant to cross).
    pub fn default_for(layout: &Layout) -> Priority {
        let cp = if layout.hierarchical_cp().is_empty() {
            Kind::CP
        } else {
            Kind::hcp(0)
        };
        Priority(vec![
            vec![Kind::TP],
            vec![cp, Kind::EP, Kind::ETP],
            vec![Kind::PP],
            vec![Kind::DP],
        ])
    }

    /// The tiers restricted to the kinds `layout` has (others ignored).
    fn present(&self, layout: &Layout) -> Vec<Vec<Kind>> {
        self.0
            .iter()
            .map(|tier| {
                tier.iter()
                    .copied()
                    .filter(|k| layout.groups(*k).is_ok())
                    .collect()
            })
            .collect()
    }
}

/// One order, its layout and how its prioritised kinds fall.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The order.
    pub order: Order,
    /// The layout with that order.
    pub layout: Layout,
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

/// The axes of any grid of `layout` whose size is greater than 1, in the
/// default order (the expert grid's etp counts as tp and edp as dp).
fn big_axes(layout: &Layout) -> Vec<Axis> {
    let grids = [Some(layout.sizes()), layout.encoder_sizes()];
    Axis::ORDER_TOKENS
        .into_iter()
        .filter(|axis| {
            grids.iter().flatten().any(|s| {
                let expert = match axis {
                    Axis::Tp => s.etp,
                    Axis::Dp => s.edp,
                    _ => 1,
                };
                s[*axis] > 1 || expert > 1
            })
        })
        .collect()
}

/// Every permutation of `items`.
fn permutations(items: &[Axis]) -> Vec<Vec<Axis>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for (i, first) in items.iter().enumerate() {
        let mut rest = items.to_vec();
        rest.remove(i);
        for mut tail in permutations(&rest) {
            tail.insert(0, *first);
            out.push(tail);
        }
    }
    out
}

/// How many pairs of axes `order` lists the other way round from
/// `tp-cp-ep-dp-pp`.
fn inversions(order: &[Axis]) -> usize {
    let pos = |a: &Axis| Axis::ORDER_TOKENS.iter().position(|b| b == a);
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

/// Ranks every order of `layout`'s axes on `topology` by `priority`.
///
/// # Errors
/// [`Failure::Input`] when the kinds cannot be placed (not expected for a
/// valid layout).
pub fn rank_orders(
    layout: &Layout,
    topology: &Topology,
    priority: &Priority,
) -> Result<Ranking, Failure> {
    let mut axes = big_axes(layout);
    if axes.is_empty() {
        // Every size is 1: one order, any axis.
        axes.push(Axis::Tp);
    }
    let given: Vec<Axis> = layout
        .config()
        .order
        .axes()
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
        let mut score = Vec::new();
        let mut all = Vec::new();
        for tier in priority.present(&candidate) {
            let tier_spreads = spreads(&candidate, &tier, topology)?;
            score.extend(tier_score(&tier_spreads));
            all.extend(tier_spreads.into_iter().filter(|k| k.spread.size > 1));
        }
        candidates.push((
            inversions(&axes),
            Candidate {
                given: axes == given,
                order,
                layout: candidate,
                spreads: all,
                score,
            },
        ));
    }
    candidates.sort_by(|(ia, a), (ib, b)| {
        a.score
            .cmp(&b.score)
            .then(b.given.cmp(&a.given))
            .then(ia.cmp(ib))
            .then_with(|| a.order.to_string().cmp(&b.order.to_string()))
    });
    Ok(Ranking {
        candidates: candidates.into_iter().map(|(_, c)| c).collect(),
        invalid,
        invalid_reason,
    })
}
