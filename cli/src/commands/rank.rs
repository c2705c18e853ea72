//! `rank-layout rank R`: one rank's card, in a layout, a mesh, or every
//! module of a `--modules` file it is in (with its stage and its roles on
//! the edges).

use crate::args::{MachineArgs, OutputArgs, SetupArgs};
use crate::error::{Failure, Outcome};
use crate::input::Input;
use crate::on_hosts::OnHosts;
use crate::report::emit;
use crate::report::hosts::{HostsReport, WithHosts};
use crate::report::modules::RankCard;
use crate::report::rank::RankReport;

/// Runs `rank`.
///
/// # Errors
/// Every error of the input, of a `--kind` it does not have and of a rank
/// outside it; with `--hosts`, the host table's.
pub fn run(
    rank: u64,
    args: &SetupArgs,
    output: &OutputArgs,
    machine: &MachineArgs,
) -> Result<Outcome, Failure> {
    match Input::load(args)? {
        Input::One { setup, target } => {
            let kinds = target.sets_or_all(&target.parse_sets(&output.kinds)?)?;
            let report = RankReport::new(&target, rank, &kinds, setup.topology, output.full)?;
            match OnHosts::load(machine, &target, args.gpus_per_node)? {
                Some(on) => {
                    // The card has checked the rank: it is one of the target's.
                    let r = u32::try_from(rank).unwrap_or(u32::MAX);
                    let hosts = HostsReport::new(&target, &on, &kinds, Some(r))?;
                    emit(&WithHosts::new(&report, &hosts), output.format)?;
                }
                None => emit(&report, output.format)?,
            }
        }
        Input::Modules { topology, modules } => {
            if machine.hosts.is_some() {
                return Err(Failure::Message(
                    "--hosts takes a layout or a mesh, not a --modules file".to_string(),
                ));
            }
            let sets = modules.sets(&output.kinds, true)?;
            emit(
                &RankCard::new(&modules, rank, &sets, topology, output.full)?,
                output.format,
            )?;
        }
    }
    Ok(Outcome::Done)
}
