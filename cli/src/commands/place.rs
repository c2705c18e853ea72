//! `rank-layout place`: the layout (or mesh) placed on the hosts of a host
//! table, as a report or as a launcher file.

use rank_layout::machine::{self, Hosts, Launcher, NodePlan, PlaceOptions, Shortfall};
use rank_layout::{Error, Kind};
use rank_layout_cli::hosts_file;

use crate::args::{Emit, OnShortfall, PlaceArgs};
use crate::error::{Failure, Outcome};
use crate::input::Input;
use crate::report::emit;
use crate::report::place::{PlaceReport, Shrunk};
use crate::target::{DimSet, Target};

/// Runs `place`.
///
/// # Errors
/// Every error of the input, the host table and a `--must-fit` kind; no
/// placement (exit status 2).
pub fn run(args: &PlaceArgs) -> Result<Outcome, Failure> {
    let hosts = hosts_file::read(&args.hosts).map_err(Failure::Message)?;
    let Input::One { target, .. } = Input::load(&args.setup)? else {
        return Err(Failure::Message(
            "place takes a layout or a mesh, not a --modules file".to_string(),
        ));
    };
    let options = PlaceOptions {
        gpus_per_node: args.setup.gpus_per_node,
        shortfall: match args.on_shortfall {
            OnShortfall::Straddle => Shortfall::Straddle,
            OnShortfall::Shrink | OnShortfall::Fail => Shortfall::Fail,
        },
    };
    let sets = must_fit(&target, &args.must_fit)?;
    let (target, plan, shrunk) = match placed(&target, &sets, &hosts, &options) {
        Ok(plan) => (target, plan, None),
        Err(Failure::Input {
            error: Error::NoPlacement { .. },
            ..
        }) if args.on_shortfall == OnShortfall::Shrink => {
            let (smaller, plan, shrunk) = shrink(&target, &args.must_fit, &hosts, &options)?;
            (smaller, plan, Some(shrunk))
        }
        Err(e) => return Err(e),
    };
    if let Some(format) = args.emit {
        let launcher = match format {
            Emit::SlurmHostfile => Launcher::SlurmHostfile,
            Emit::Rankfile => Launcher::Rankfile,
            Emit::Torchrun => Launcher::Torchrun,
            Emit::Dlrover => Launcher::Dlrover,
        };
        eprintln!("{}", launcher.command(&plan, &hosts, "FILE"));
        crate::report::print(&launcher.file(&plan, &hosts))?;
        return Ok(Outcome::Done);
    }
    let sets = must_fit(&target, &args.must_fit)?;
    let report = PlaceReport::new(&target, &hosts, &plan, &sets, shrunk)?;
    emit(&report, args.format)?;
    Ok(Outcome::Done)
}

/// The must-fit kinds: those given, else tp, cp and etp-ep of a layout
/// (those it has), the tp, cp and ep dims of a mesh.
fn must_fit(target: &Target, given: &[String]) -> Result<Vec<DimSet>, Failure> {
    if !given.is_empty() {
        return target.parse_sets(given);
    }
    Ok(match target {
        Target::Layout { layout, .. } => [Kind::TP, Kind::CP, Kind::ETP_EP]
            .into_iter()
            .filter(|k| layout.kinds().contains(k))
            .map(DimSet::Kind)
            .collect(),
        Target::Mesh(_) => ["tp", "cp", "ep"]
            .into_iter()
            .filter_map(|name| target.parse_set(name).ok())
            .collect(),
    })
}

fn placed(
    target: &Target,
    sets: &[DimSet],
    hosts: &Hosts,
    options: &PlaceOptions,
) -> Result<NodePlan, Failure> {
    let kinds = sets
        .iter()
        .map(|s| target.kind_groups(s))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(machine::place(target.world_size(), &kinds, hosts, options)?)
}

/// The largest smaller data-parallel size whose job fits whole.
fn shrink(
    target: &Target,
    must: &[String],
    hosts: &Hosts,
    options: &PlaceOptions,
) -> Result<(Target, NodePlan, Shrunk), Failure> {
    let Target::Layout { layout, given } = target else {
        return Err(Failure::Message(
            "--on-shortfall shrink takes a layout (its dp shrinks), not a mesh".to_string(),
        ));
    };
    let dp = layout.sizes().dp;
    let model = layout.world_size() / dp.max(1);
    for smaller in (1..dp).rev() {
        let config = given.clone().dp(smaller).world_size(model * smaller);
        let Ok(candidate) = rank_layout::Layout::new(&config) else {
            continue;
        };
        let t = Target::Layout {
            layout: candidate,
            given: config,
        };
        let sets = must_fit(&t, must)?;
        if let Ok(plan) = placed(&t, &sets, hosts, options) {
            let shrunk = Shrunk {
                dp: smaller,
                world_size: t.world_size(),
                from_dp: dp,
                from_world_size: layout.world_size(),
            };
            return Ok((t, plan, shrunk));
        }
    }
    Err(Failure::Message(format!(
        "no placement: no data-parallel size smaller than {dp} fits whole in the domains"
    )))
}
