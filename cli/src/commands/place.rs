//! `rank-layout place`: the layout (or mesh) placed on the hosts of a host
//! table, as a report or as a launcher file.

use rank_layout::Kind;
use rank_layout::machine::{
    self, Launcher, NodePlan, PlaceOptions, Shortfall, default_must_fit, place_layout,
};
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
    let hosts =
        hosts_file::read_with(&args.hosts, &args.hosts_read.options()).map_err(Failure::Message)?;
    let Input::One { target, .. } = Input::load(&args.setup)? else {
        return Err(Failure::Message(
            "place takes a layout or a mesh, not a --modules file".to_string(),
        ));
    };
    let mut options = PlaceOptions::default().shortfall(match args.on_shortfall {
        OnShortfall::Straddle => Shortfall::Straddle,
        OnShortfall::Shrink => Shortfall::Shrink,
        OnShortfall::Fail => Shortfall::Fail,
    });
    options.gpus_per_node = args.setup.gpus_per_node;
    let sets = must_fit(&target, &args.must_fit)?;
    let (target, plan, shrunk): (Target, NodePlan, Option<Shrunk>) = match &target {
        Target::Layout { layout, given } => {
            let kinds: Vec<Kind> = sets
                .iter()
                .filter_map(|s| match s {
                    DimSet::Kind(k) => Some(*k),
                    DimSet::Mesh(_) => None,
                })
                .collect();
            let (placed, plan) = place_layout(layout, &kinds, &hosts, &options)?;
            let shrunk = (placed.world_size() != layout.world_size()).then(|| Shrunk {
                dp: placed.sizes().dp,
                world_size: placed.world_size(),
                from_dp: layout.sizes().dp,
                from_world_size: layout.world_size(),
            });
            let given = if shrunk.is_some() {
                placed.config().clone()
            } else {
                given.clone()
            };
            (
                Target::Layout {
                    layout: placed,
                    given,
                },
                plan,
                shrunk,
            )
        }
        Target::Mesh(_) => {
            if args.on_shortfall == OnShortfall::Shrink {
                return Err(Failure::Message(
                    "--on-shortfall shrink takes a layout (its dp shrinks), not a mesh".to_string(),
                ));
            }
            let kinds = sets
                .iter()
                .map(|s| target.kind_groups(s))
                .collect::<Result<Vec<_>, _>>()?;
            let plan = machine::place(target.world_size(), &kinds, &[], &hosts, &options)?;
            (target, plan, None)
        }
    };
    if let Some(format) = args.emit {
        let launcher = match format {
            Emit::SlurmHostfile => Launcher::SlurmHostfile,
            Emit::Rankfile => Launcher::Rankfile,
            Emit::Torchrun => Launcher::Torchrun,
            Emit::Dlrover => Launcher::Dlrover,
            Emit::DeviceMesh => Launcher::DeviceMesh,
        };
        eprintln!("{}", launcher.command(&plan, &hosts, "FILE"));
        crate::report::print(&launcher.file(&plan, &hosts))?;
        return Ok(Outcome::Done);
    }
    let report = PlaceReport::new(&target, &hosts, &plan, &sets, shrunk)?;
    emit(&report, args.format)?;
    Ok(Outcome::Done)
}

/// The must-fit kinds: those given, else the library's default for a
/// layout, the tp, cp and ep dims of a mesh.
fn must_fit(target: &Target, given: &[String]) -> Result<Vec<DimSet>, Failure> {
    if !given.is_empty() {
        return target.parse_sets(given);
    }
    Ok(match target {
        Target::Layout { layout, .. } => default_must_fit(layout)
            .into_iter()
            .map(DimSet::Kind)
            .collect(),
        Target::Mesh(_) => ["tp", "cp", "ep"]
            .into_iter()
            .filter_map(|name| target.parse_set(name).ok())
            .collect(),
    })
}
