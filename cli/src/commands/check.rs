//! `rank-layout check`: where each kind's groups fall on nodes and
//! domains, with warnings and fixes, for a layout, a mesh, or each module
//! of a `--modules` file; `--strict` fails when a kind that must stay
//! inside a node does not.

use clap::Args;

use crate::args::{Format, MachineArgs, SetupArgs, kinds_help};
use crate::error::{Failure, Outcome};
use crate::input::Input;
use crate::on_hosts::OnHosts;
use crate::report::check::CheckReport;
use crate::report::emit;
use crate::report::hosts::{HostsReport, WithHosts};
use crate::report::modules::Checks;
use crate::target::DimSet;

/// Check where each kind's groups fall on nodes and domains, and warn when
/// bandwidth-critical groups (tp, cp, ep, etp, gtp_remat) leave a node.
///
/// The table's size is the groups' size; in an encoder + decoder layout it
/// reads encoder/decoder (2/4: encoder groups of 2, decoder groups of 4)
/// where the two differ (JSON: "encoder_size" and "decoder_size"). Also
/// warns when the layout's ranks fill the last node, or the last domain,
/// only partly.
#[derive(Debug, Args)]
#[command(after_help = kinds_help())]
pub struct CheckArgs {
    /// The layout and the machine.
    #[command(flatten)]
    setup: SetupArgs,
    /// A kind (a mesh's dim set) to check (repeatable); default: every
    /// kind of the layout (every dim set of the mesh).
    #[arg(long = "kind", value_name = "KIND")]
    kinds: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Kinds that must stay inside a node (replaces the default tp, cp, ep,
    /// etp and weight shards gtp_remat, egtp_remat; hcp-0 instead of cp
    /// with hierarchical cp; a mesh's dims of those names, in the mesh or a
    /// view).
    #[arg(long = "require-intra-node", value_name = "KIND", num_args = 1..)]
    require: Vec<String>,
    /// Exit with status 1 when a kind that must stay inside a node does not.
    #[arg(long)]
    strict: bool,
    /// The hosts the job got: how many groups of each kind cross a domain
    /// (and each topology level) there.
    #[command(flatten)]
    machine: MachineArgs,
}

/// Runs `check`.
///
/// # Errors
/// Every error of the input and of a `--kind` or `--require-intra-node`
/// it does not have; with `--hosts`, the host table's.
pub fn run(args: &CheckArgs) -> Result<Outcome, Failure> {
    let (kinds, require, format) = (&args.kinds, &args.require, args.format);
    let failed: Vec<String> = match Input::load(&args.setup)? {
        Input::One { setup, target } => {
            let sets = target.parse_sets(kinds)?;
            let require = target.parse_sets(require)?;
            match OnHosts::load(&args.machine, &target, &setup)? {
                Some(on) => {
                    let topology = on.topology(&setup)?;
                    let report = CheckReport::new(&target, topology, &sets, &require)?;
                    let hosts = HostsReport::new(&target, &on, &target.sets_or_all(&sets)?, None)?;
                    emit(&WithHosts::new(&report, &hosts), format)?;
                    report.failed().iter().map(DimSet::to_string).collect()
                }
                None => {
                    let report = CheckReport::new(&target, setup.topology, &sets, &require)?;
                    emit(&report, format)?;
                    report.failed().iter().map(DimSet::to_string).collect()
                }
            }
        }
        Input::Modules { topology, modules } => {
            if args.machine.hosts.is_some() {
                return Err(Failure::Message(
                    "--hosts takes a layout or a mesh, not a --modules file".to_string(),
                ));
            }
            let checks = Checks::new(&modules, topology, kinds, require)?;
            emit(&checks, format)?;
            checks.failed()
        }
    };
    if args.strict && !failed.is_empty() {
        return Ok(Outcome::StrictFailed(format!(
            "check --strict: {} groups cross node boundaries",
            failed.join(", ")
        )));
    }
    Ok(Outcome::Done)
}
