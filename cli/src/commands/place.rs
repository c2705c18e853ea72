//! `rank-layout place`: the layout (or mesh) placed on the hosts of a host
//! table, as a report or as a launcher file.

use std::path::PathBuf;

use clap::Args;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use rank_layout::Kind;
use rank_layout::machine::{Launcher, Placed, Shortfall};

use crate::args::{Format, HostsReadArgs, SetupArgs};
use crate::error::{Failure, Outcome};
use crate::hosts_file;
use crate::input::Input;
use crate::report::emit;
use crate::report::place::PlaceReport;
use crate::target::{DimSet, Target};

/// The host table's formats, for `place --help`.
const HOSTS_HELP: &str = "Host table (--hosts FILE): one host per line, `host domain [gpus] [state]` \
(host may be a Slurm hostlist, gb[001-018]), `#` comments; domain `-` or `unknown` for none, or keys from the outermost joined by `/` \
(`cluster1/rack07`); state `up` (default) or `down`/`drain`. Or JSON: a list of \
{\"host\", \"domain\" (or \"keys\": [...]), \"gpus\", \"healthy\"}. \
Other formats by --hosts-format: nvidia-smi, topology-conf, topology-yaml, scontrol, \
slurm-topology-addr, kubectl (see docs/semantics.md, section 10). \
GPUs per node: --gpus-per-node (or gpus_per_node in --config), else the GPU count of the table's healthy hosts; \
a table that gives none (Slurm's topology files) needs it.";

/// Place the layout (or mesh) on the hosts the job got: the node order
/// that keeps tp, cp and the expert tensor x expert groups (or the
/// --must-fit kinds) inside NVLink domains, how every kind's groups then
/// fall, and the launcher files that start each rank there.
#[derive(Debug, Args)]
#[command(after_help = HOSTS_HELP)]
pub struct PlaceArgs {
    /// The layout (or mesh).
    #[command(flatten)]
    setup: SetupArgs,
    /// The host table.
    #[arg(long, value_name = "FILE")]
    hosts: PathBuf,
    /// How to read it.
    #[command(flatten)]
    hosts_read: HostsReadArgs,
    /// A kind that must stay inside a domain (repeatable; default: tp, cp
    /// and etp-ep of a layout, the tp, cp, ep dims of a mesh).
    #[arg(long = "must-fit", value_name = "KIND")]
    must_fit: Vec<String>,
    /// When the domains cannot hold every unit whole (a failed placement
    /// exits 2).
    #[arg(long, value_name = "POLICY", default_value = "straddle", value_parser = shortfall())]
    on_shortfall: Shortfall,
    /// Output format of the report.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Print this launcher file instead of the report (its command line
    /// goes to stderr).
    #[arg(long, value_name = "LAUNCHER", value_parser = launcher())]
    emit: Option<Launcher>,
}

/// `--on-shortfall`: the library's policies, by name.
fn shortfall() -> impl TypedValueParser<Value = Shortfall> {
    PossibleValuesParser::new(Shortfall::ALL.map(|p| PossibleValue::new(p.name()).help(p.about())))
        .try_map(|name| name.parse::<Shortfall>())
}

/// `--emit`: the library's launcher files, by name.
fn launcher() -> impl TypedValueParser<Value = Launcher> {
    PossibleValuesParser::new(Launcher::ALL.map(|l| PossibleValue::new(l.name()).help(l.about())))
        .try_map(|name| name.parse::<Launcher>())
}

/// Runs `place`.
///
/// # Errors
/// Every error of the input, the host table and a `--must-fit` kind; no
/// placement (exit status 2).
pub fn run(args: &PlaceArgs) -> Result<Outcome, Failure> {
    let Input::One { setup, target } = Input::load(&args.setup)? else {
        return Err(Failure::Message(
            "place takes a layout or a mesh, not a --modules file".to_string(),
        ));
    };
    let hosts = hosts_file::read(&args.hosts, args.hosts_read.reader())?;
    let options = setup.place_options(&hosts, args.on_shortfall)?;
    let must: Option<Vec<DimSet>> = if args.must_fit.is_empty() {
        None
    } else {
        Some(target.parse_sets(&args.must_fit)?)
    };
    let placed = match &target {
        Target::Layout { layout, .. } => {
            let kinds: Option<Vec<Kind>> = must.as_ref().map(|sets| {
                sets.iter()
                    .filter_map(|s| match s {
                        DimSet::Kind(k) => Some(*k),
                        DimSet::Mesh(_) => None,
                    })
                    .collect()
            });
            Placed::layout(layout, kinds.as_deref(), hosts, &options)?
        }
        Target::Mesh(m) => {
            let names: Option<Vec<String>> =
                must.map(|sets| sets.iter().map(DimSet::to_string).collect());
            let names: Option<Vec<&str>> = names
                .as_ref()
                .map(|n| n.iter().map(String::as_str).collect());
            Placed::mesh(&m.mesh, names.as_deref(), hosts, &options)?
        }
    };
    if let Some(launcher) = args.emit {
        eprintln!("{}", placed.command(launcher, "FILE"));
        crate::report::print(&placed.file(launcher))?;
        return Ok(Outcome::Done);
    }
    let report = PlaceReport::new(&target, &placed)?;
    emit(&report, args.format)?;
    Ok(Outcome::Done)
}
