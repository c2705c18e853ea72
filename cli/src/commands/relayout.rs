//! `rank-layout relayout`: the re-layout after ranks fail, under one policy
//! or every policy side by side.

use rank_layout::machine::{PlaceOptions, Shortfall, default_must_fit, place_layout};
use rank_layout::relayout::{self, Failure as Lost, Policy, RelayoutOptions, parse_rank_list};
use rank_layout::{Kind, Layout};
use rank_layout_cli::hosts_file;

use crate::args::RelayoutArgs;
use crate::error::{Failure, Outcome};
use crate::input::Input;
use crate::report::emit;
use crate::report::relayout::{Comparison, PlanReport};
use crate::target::Target;

/// Runs `relayout`.
///
/// # Errors
/// Every error of the input and of the rank list; under one `--policy`,
/// its reason when it cannot go on (exit status 2).
pub fn run(args: &RelayoutArgs) -> Result<Outcome, Failure> {
    let Input::One { setup, target } = Input::load(&args.setup)? else {
        return Err(Failure::Message(
            "relayout takes a layout, not a --modules file".to_string(),
        ));
    };
    let Target::Layout { layout, .. } = target else {
        return Err(Failure::Message(
            "relayout takes a layout (its tp, cp, ep, dp and pp), not a mesh".to_string(),
        ));
    };
    let failed = match &args.failed_ranks {
        Some(list) => {
            parse_rank_list(list).map_err(|e| Failure::Message(format!("--failed-ranks: {e}")))?
        }
        None => Vec::new(),
    };
    let (lost, spare_hosts) = match &args.hosts {
        Some(path) => placed_failure(args, &layout, path, failed)?,
        None => (
            Lost::new(setup.topology.gpus_per_node(), failed).spare_nodes(args.spare_hosts),
            None,
        ),
    };
    lost.check(&layout)?;
    let mut options = RelayoutOptions::default().min_dp(args.min_dp);
    if let Some(global) = args.global_batch {
        options = options.global_batch(global, args.micro_batch);
    }
    if let Some(kinds) = kinds(&layout, &args.kinds)? {
        options = options.kinds(kinds);
    }
    match args.policy {
        Some(policy) => {
            let plan = relayout::relayout(&layout, &lost, policy, &options)?;
            emit(
                &PlanReport::new(&plan).spare_hosts(spare_hosts),
                args.format,
            )?;
        }
        None => {
            let plans = Policy::ALL
                .into_iter()
                .map(|p| (p, relayout::relayout(&layout, &lost, p, &options)))
                .collect::<Vec<_>>();
            emit(&Comparison::new(&plans), args.format)?;
        }
    }
    Ok(Outcome::Done)
}

/// The failure of the job as `place` places it on `--hosts`: the
/// `--failed-hosts`' nodes and the `failed` ranks fail; the idle healthy
/// hosts are the spares (returned by name, in spare order).
fn placed_failure(
    args: &RelayoutArgs,
    layout: &Layout,
    path: &std::path::Path,
    failed: Vec<u32>,
) -> Result<(Lost, Option<Vec<String>>), Failure> {
    let hosts = hosts_file::read(path).map_err(Failure::Message)?;
    let mut options = PlaceOptions::default().shortfall(Shortfall::Straddle);
    options.gpus_per_node = args.setup.gpus_per_node;
    let (_, plan) = place_layout(layout, &default_must_fit(layout), &hosts, &options)?;
    let names: Vec<&str> = args.failed_hosts.iter().map(String::as_str).collect();
    let on_hosts = Lost::of_hosts(&plan, &hosts, layout.rank_offset(), &names)?;
    let spares: Vec<String> = plan
        .idle
        .iter()
        .filter_map(|&i| hosts.get(i))
        .filter(|h| !names.contains(&h.name.as_str()))
        .map(|h| h.name.clone())
        .collect();
    let mut lost = Lost::new(
        on_hosts.gpus_per_node(),
        on_hosts.failed().iter().copied().chain(failed),
    )
    .spare_nodes(on_hosts.spares());
    if let Some(domains) = on_hosts.node_domains() {
        lost = lost.domains(domains.clone());
    }
    Ok((lost, Some(spares)))
}

/// The `--kind`s: `None` for the library's default; `all` for every kind
/// of the layout.
fn kinds(layout: &Layout, given: &[String]) -> Result<Option<Vec<Kind>>, Failure> {
    if given.is_empty() {
        return Ok(None);
    }
    let mut kinds = Vec::new();
    for name in given {
        if name == "all" {
            kinds.extend(layout.kinds().iter().copied());
            continue;
        }
        let kind: Kind = name
            .parse()
            .map_err(|e| Failure::Message(format!("--kind {name:?}: {e}")))?;
        if !layout.kinds().contains(&kind) {
            return Err(Failure::Message(format!(
                "--kind {name:?}: the layout has no such groups (its kinds: {})",
                layout
                    .kinds()
                    .iter()
                    .map(Kind::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            )));
        }
        kinds.push(kind);
    }
    let mut seen = Vec::new();
    kinds.retain(|k| {
        let fresh = !seen.contains(k);
        seen.push(*k);
        fresh
    });
    Ok(Some(kinds))
}
