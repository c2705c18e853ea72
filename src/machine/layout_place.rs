//! Placing a layout: its must-fit kinds' groups, and the smaller job of
//! [`Shortfall::Shrink`].

use std::borrow::Cow;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::kind::Kind;
use crate::layout::Layout;
use crate::machine::hosts::Hosts;
use crate::machine::place::{KindGroups, NodePlan, PlaceOptions, Shortfall, place_with};

/// The kinds a layout keeps inside a domain unless told: `tp`, `cp` and
/// the expert tensor x expert group `etp-ep`, those it has.
pub fn default_must_fit(layout: &Layout) -> Vec<Kind> {
    [Kind::TP, Kind::CP, Kind::ETP_EP]
        .into_iter()
        .filter(|k| layout.kinds().contains(k))
        .collect()
}

/// [`place`](crate::machine::place) for a layout, with `must_fit` kinds
/// and every other kind of the layout (its [`Layout::kinds`]) as the
/// others kept under few parents and compared with the table's order; under
/// [`Shortfall::Shrink`], when the domains fall short, the layout with the
/// largest smaller data-parallel size whose units all fit whole (the
/// remainders idle) and its placement. Returns the layout placed (the
/// same, or the smaller one) and its plan.
///
/// ```
/// use rank_layout::machine::{place_layout, Hosts, PlaceOptions, Shortfall};
/// use rank_layout::{Config, Kind, Layout};
/// // Two racks of 3 nodes of 4 GPUs: units of 2 nodes (tp 8), 2 fit whole.
/// let hosts = Hosts::parse_plain("a r0 4\nb r0 4\nc r0 4\nd r1 4\ne r1 4\nf r1 4\n")?;
/// let layout = Layout::new(&Config::new().tp(8).dp(3))?;
/// let shrink = PlaceOptions::default().shortfall(Shortfall::Shrink);
/// let (placed, plan) = place_layout(&layout, &[Kind::TP], &hosts, &shrink)?;
/// assert_eq!((placed.sizes().dp, plan.node_hosts.len(), plan.idle.len()), (2, 4, 2));
/// # Ok::<(), rank_layout::Error>(())
/// ```
///
/// # Errors
/// The layout's error for a kind it does not have; [`Error::NoPlacement`]
/// as [`place`](crate::machine::place), or when no smaller data-parallel size fits either.
pub fn place_layout(
    layout: &Layout,
    must_fit: &[Kind],
    hosts: &Hosts,
    options: &PlaceOptions,
) -> Result<(Layout, NodePlan)> {
    match place_as_is(layout, must_fit, hosts, options) {
        Err(Error::NoPlacement { .. }) if options.shortfall == Shortfall::Shrink => {}
        other => return other.map(|plan| (layout.clone(), plan)),
    }
    let dp = layout.sizes().dp;
    let model = layout.world_size() / dp.max(1);
    for smaller in (1..dp).rev() {
        let config: Config = layout
            .config()
            .clone()
            .dp(smaller)
            .world_size(model * smaller);
        let Ok(candidate) = Layout::new(&config) else {
            continue;
        };
        if let Ok(plan) = place_as_is(&candidate, must_fit, hosts, options) {
            return Ok((candidate, plan));
        }
    }
    Err(Error::NoPlacement {
        problem: format!(
            "the domains cannot hold the job whole, nor with any data-parallel size smaller than {dp}"
        ),
    })
}

fn place_as_is(
    layout: &Layout,
    must_fit: &[Kind],
    hosts: &Hosts,
    options: &PlaceOptions,
) -> Result<NodePlan> {
    let kinds = must_fit
        .iter()
        .map(|&k| KindGroups::of_layout(layout, k))
        .collect::<Result<Vec<_>>>()?;
    let others = || {
        layout
            .kinds()
            .iter()
            .filter(|k| !must_fit.contains(k))
            .map(|&k| KindGroups::of_layout(layout, k))
            .collect::<Result<Vec<_>>>()
            .map(Cow::Owned)
    };
    place_with(layout.world_size(), &kinds, others, hosts, options)
}
