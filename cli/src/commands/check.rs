//! `rank-layout check`: where each kind's groups fall on nodes and
//! domains, with warnings and fixes, for a layout, a mesh, or each module
//! of a `--modules` file; `--strict` fails when a kind that must stay
//! inside a node does not.

use crate::args::{Format, MachineArgs, SetupArgs};
use crate::error::{Failure, Outcome};
use crate::input::Input;
use crate::on_hosts::OnHosts;
use crate::report::check::CheckReport;
use crate::report::emit;
use crate::report::hosts::{HostsReport, WithHosts};
use crate::report::modules::Checks;
use crate::target::DimSet;

/// Runs `check`.
///
/// # Errors
/// Every error of the input and of a `--kind` or `--require-intra-node`
/// it does not have; with `--hosts`, the host table's.
pub fn run(
    args: &SetupArgs,
    kinds: &[String],
    require: &[String],
    format: Format,
    strict: bool,
    machine: &MachineArgs,
) -> Result<Outcome, Failure> {
    let failed: Vec<String> = match Input::load(args)? {
        Input::One { setup, target } => {
            let sets = target.parse_sets(kinds)?;
            let report =
                CheckReport::new(&target, setup.topology, &sets, &target.parse_sets(require)?)?;
            match OnHosts::load(machine, &target, args.gpus_per_node)? {
                Some(on) => {
                    let hosts = HostsReport::new(&target, &on, &target.sets_or_all(&sets)?, None)?;
                    emit(&WithHosts::new(&report, &hosts), format)?;
                }
                None => emit(&report, format)?,
            }
            report.failed().iter().map(DimSet::to_string).collect()
        }
        Input::Modules { topology, modules } => {
            if machine.hosts.is_some() {
                return Err(Failure::Message(
                    "--hosts takes a layout or a mesh, not a --modules file".to_string(),
                ));
            }
            let checks = Checks::new(&modules, topology, kinds, require)?;
            emit(&checks, format)?;
            checks.failed()
        }
    };
    if strict && !failed.is_empty() {
        return Ok(Outcome::StrictFailed(format!(
            "check --strict: {} groups cross node boundaries",
            failed.join(", ")
        )));
    }
    Ok(Outcome::Done)
}
