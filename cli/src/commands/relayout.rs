//! `rank-layout relayout`: the re-layout after ranks fail, under one policy
//! or every policy side by side.

use std::path::PathBuf;

use clap::Args;
use rank_layout::machine::{Placed, Shortfall};
use rank_layout::relayout::{self, Failure as Lost, Policy, RelayoutOptions, parse_rank_list};
use rank_layout::{Kind, Layout};

use crate::args::{Format, HostsReadArgs, SetupArgs};
use crate::error::{Failure, Outcome};
use crate::hosts_file;
use crate::input::Input;
use crate::report::emit;
use crate::report::relayout::{Comparison, PlanReport};
use crate::target::Target;
use crate::values::{at_least_one, policy, whole_u32};

/// The policies, for `relayout --help`.
const RELAYOUT_HELP: &str = "Policies: drop-replica (drop the data-parallel replicas holding a failed rank; \
tp, cp and pp groups kept, dp groups shrunk), spare (--spare-nodes whole nodes take the failed nodes' places), \
next-grid (the largest valid smaller grid, fewer dp first, then smaller cp, ep, pp or tp), shift-ranks and \
fill-gaps (nvidia-resiliency-ext's ShiftRanks and FillGaps, then the world trimmed to a valid grid). \
Without --policy every policy is compared; when none can go on, the command exits 1.";

/// Plan the re-layout after ranks fail: the new layout, every rank's new
/// rank, and which tp, cp, ep, dp and pp groups are kept, shrunk, new or
/// gone, under one --policy or every policy side by side.
#[derive(Debug, Args)]
#[command(after_help = RELAYOUT_HELP)]
pub struct RelayoutArgs {
    /// The layout before the failure; --gpus-per-node sizes the nodes (and
    /// the spare nodes).
    #[command(flatten)]
    setup: SetupArgs,
    /// The failed ranks: ranks and inclusive ranges, `200-203,517`.
    #[arg(
        long = "failed-ranks",
        value_name = "LIST",
        required_unless_present = "failed_hosts"
    )]
    failed_ranks: Option<String>,
    /// Whole spare nodes numbered after the old world, --gpus-per-node
    /// ranks each (without --hosts, whose idle hosts are the spares).
    #[arg(long = "spare-nodes", alias = "spare-hosts", value_name = "N", default_value_t = 0, value_parser = whole_u32, conflicts_with = "hosts")]
    spare_nodes: u32,
    /// The host table the job was placed on (as `place` places it): the
    /// failed hosts' nodes fail, the idle healthy hosts are the spares, and
    /// the spare policy takes a spare of the failed host's domain first.
    #[arg(long, value_name = "FILE")]
    hosts: Option<PathBuf>,
    /// How to read it.
    #[command(flatten)]
    hosts_read: HostsReadArgs,
    /// Failed hosts of --hosts, comma-separated (each node's ranks fail).
    #[arg(
        long = "failed-hosts",
        value_name = "HOSTS",
        value_delimiter = ',',
        requires = "hosts"
    )]
    failed_hosts: Vec<String>,
    /// The policy (default: every policy, side by side).
    #[arg(long, value_name = "POLICY", value_parser = policy)]
    policy: Option<Policy>,
    /// The smallest data-parallel size the new layout may have.
    #[arg(long = "min-dp", value_name = "N", default_value_t = 1, value_parser = at_least_one)]
    min_dp: u32,
    /// The global batch to keep by gradient accumulation: the new dp times
    /// --micro-batch must divide it.
    #[arg(long = "global-batch", value_name = "N", value_parser = at_least_one)]
    global_batch: Option<u32>,
    /// The micro-batch size (with --global-batch).
    #[arg(long = "micro-batch", value_name = "N", default_value_t = 1, value_parser = at_least_one)]
    micro_batch: u32,
    /// A kind to classify (repeatable; `all`: every kind of the layout;
    /// default: tp, cp, ep, dp, pp, and etp, edp with experts, those of
    /// more than one rank per group).
    #[arg(long = "kind", value_name = "KIND")]
    kinds: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// Runs `relayout`.
///
/// # Errors
/// Every error of the input and of the rank list; under one `--policy`,
/// its reason when it cannot go on (exit status 2). Without `--policy`,
/// when no policy can go on, the comparison is printed and the command
/// ends with status 1.
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
        Some(path) => {
            let hosts = hosts_file::read(path, args.hosts_read.reader())?;
            let options = setup.place_options(&hosts, Shortfall::Straddle)?;
            let placed = Placed::layout(&layout, None, hosts, &options)?;
            let names: Vec<&str> = args.failed_hosts.iter().map(String::as_str).collect();
            let on_hosts = placed.fail(&names, &failed)?;
            (Lost::from(&on_hosts), Some(on_hosts.spare_hosts))
        }
        None => (
            Lost::new(setup.topology.gpus_per_node(), failed).spare_nodes(args.spare_nodes),
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
            if plans.iter().all(|(_, plan)| plan.is_err()) {
                return Ok(Outcome::Refused(
                    "relayout: no policy can go on (each row says why)".to_string(),
                ));
            }
        }
    }
    Ok(Outcome::Done)
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
