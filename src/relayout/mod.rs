//! After a failure: the next layout, the old -> new rank map, and which
//! groups of every kind are kept, shrunk, new or gone ([`relayout`]).
//!
//! Every surviving process computes the same [`Relayout`] from the same
//! inputs (the old layout, the failed ranks, the spares and the policy),
//! with no communication; its [`hash`](Relayout::hash) lets ranks check
//! that cheaply. The policies and what each guarantees are in
//! [`semantics`](crate::semantics), section "Re-layout".
//!
//! ```
//! use rank_layout::relayout::{relayout, Failure, Policy, RelayoutOptions};
//! use rank_layout::{Config, Kind, Layout, Order};
//! // Megatron order tp-dp-pp, tp 8, pp 4, dp 36: 1,152 GPUs, 4 per node;
//! // the node of ranks 200-203 fails.
//! let layout = Layout::new(&Config::new().tp(8).pp(4).dp(36).order("tp-dp-pp".parse::<Order>()?))?;
//! let failure = Failure::new(4, 200..204);
//! let plan = relayout(&layout, &failure, Policy::DropReplica, &RelayoutOptions::default())?;
//! assert_eq!(plan.layout().world_size(), 1120);
//! let tp = plan.changes(Kind::TP).unwrap();
//! assert_eq!((tp.kept, tp.new.len()), (140, 0));
//! assert_eq!(plan.changes(Kind::DP).unwrap().shrunk.len(), 32);
//! assert_eq!(plan.cost().new_communicators, 0);
//! # Ok::<(), rank_layout::Error>(())
//! ```

mod assign;
mod changes;
mod failure;
mod group_fate;
mod options;
mod plan;
mod policy;
mod rank_list;
mod rank_map;

pub use changes::{KindChanges, Shrink};
pub use failure::{Failure, NodeDomains};
pub use group_fate::{Change, GroupFate};
pub use options::RelayoutOptions;
pub use plan::{Cost, Relayout};
pub use policy::Policy;
pub use rank_list::{MAX_LISTED_RANKS, parse_rank_list};
pub use rank_map::{Fate, RankMap};

use crate::error::{Error, Result};
use crate::kind::Kind;
use crate::layout::Layout;

/// The kinds whose groups need a communicator: `tp`, `cp`, `ep`, `dp`
/// and `pp`, and `etp` and `edp` when the layout has experts (`ep` > 1 or
/// `etp` other than `tp`), those the layout has, without the kinds whose
/// groups are one rank each (a communicator of one rank needs no peer).
///
/// ```
/// use rank_layout::relayout::default_kinds;
/// use rank_layout::{Config, Kind, Layout};
/// let layout = Layout::new(&Config::new().tp(8).pp(4).dp(36))?;
/// assert_eq!(default_kinds(&layout), [Kind::TP, Kind::DP, Kind::PP]);
/// # Ok::<(), rank_layout::Error>(())
/// ```
pub fn default_kinds(layout: &Layout) -> Vec<Kind> {
    let s = layout.sizes();
    let experts = s.ep > 1 || s.etp != s.tp;
    let mut kinds = vec![Kind::TP, Kind::CP, Kind::EP, Kind::DP, Kind::PP];
    if experts {
        kinds.extend([Kind::ETP, Kind::EDP]);
    }
    kinds
        .into_iter()
        .filter(|k| layout.kinds().contains(k))
        .filter(|&k| {
            layout
                .groups(k)
                .is_ok_and(|g| g.group_len().is_none_or(|n| n > 1))
        })
        .collect()
}

/// The re-layout of `layout` after `failure` under `policy`: the new
/// layout, the rank map and every kind's changes (the kinds of
/// `options.kinds`, else [`default_kinds`]).
///
/// Time O(ranks x kinds); the plan keeps O(ranks) for the rank map and
/// O(changed groups) for the changes.
///
/// # Errors
/// [`Error::NoRelayout`] when a failed rank is not the layout's, or the
/// policy cannot go on (too few spares, no valid smaller grid); the
/// layout's error for a kind it does not have.
pub fn relayout(
    layout: &Layout,
    failure: &Failure,
    policy: Policy,
    options: &RelayoutOptions,
) -> Result<Relayout> {
    let job = assign::Job::new(layout, failure, options)?;
    let assign::Assigned {
        layout: new,
        mut map,
        notes,
    } = assign::assign(&job, policy)?;
    if !map.seal(new.world_size()) {
        return Err(Error::NoRelayout {
            problem: format!(
                "{policy} did not give every rank of the new layout ({}) exactly one process",
                new.world_size()
            ),
        });
    }
    let kinds = options
        .kinds
        .clone()
        .unwrap_or_else(|| default_kinds(layout));
    let changes = kinds
        .iter()
        .map(|&k| changes::classify(layout, &new, &map, k))
        .collect::<Result<Vec<_>>>()?;
    let mut plan = Relayout {
        policy,
        old: layout.clone(),
        layout: new,
        map,
        kinds: changes,
        notes,
        cost: Cost::default(),
        hash: 0,
    };
    plan.count_cost()?;
    if policy == Policy::DropReplica && plan.cost.new_communicators > 0 {
        // Only when no whole expert data-parallel lanes could be dropped
        // (the note of the policy says why): which kinds pay for it.
        let made: Vec<String> = plan
            .kinds
            .iter()
            .filter(|c| !c.new.is_empty())
            .map(|c| format!("{} {}", c.kind, c.new.len()))
            .collect();
        plan.notes.push(format!(
            "communicators made for the groups of the replicas left that are no old group: {}",
            made.join(", ")
        ));
    }
    plan.seal_hash();
    Ok(plan)
}
