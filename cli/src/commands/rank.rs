//! `rank-layout rank R`: one rank's card, in a layout, a mesh, or every
//! module of a `--modules` file it is in (with its stage and its roles on
//! the edges).

use clap::Args;

use crate::args::{MachineArgs, OutputArgs, SetupArgs, kinds_help};
use crate::error::{Failure, Outcome};
use crate::input::Input;
use crate::on_hosts::OnHosts;
use crate::report::emit;
use crate::report::hosts::{HostsReport, WithHosts};
use crate::report::modules::RankCard;
use crate::report::rank::RankReport;
use crate::values::whole_u64;

/// Print one rank's card: grid, coordinates, node, groups, pipeline
/// neighbours (computed arithmetically, instant at any size).
#[derive(Debug, Args)]
#[command(after_help = kinds_help())]
pub struct RankArgs {
    /// The rank.
    #[arg(value_parser = whole_u64, allow_negative_numbers = true)]
    rank: u64,
    /// The layout and the machine.
    #[command(flatten)]
    setup: SetupArgs,
    /// Kinds and format.
    #[command(flatten)]
    output: OutputArgs,
    /// The hosts the job got: where the rank runs, and which of its groups
    /// cross a domain.
    #[command(flatten)]
    machine: MachineArgs,
}

/// Runs `rank`.
///
/// # Errors
/// Every error of the input, of a `--kind` it does not have and of a rank
/// outside it; with `--hosts`, the host table's.
pub fn run(args: &RankArgs) -> Result<Outcome, Failure> {
    let (rank, output) = (args.rank, &args.output);
    match Input::load(&args.setup)? {
        Input::One { setup, target } => {
            let kinds = target.sets_or_all(&target.parse_sets(&output.kinds)?)?;
            match OnHosts::load(&args.machine, &target, &setup)? {
                Some(on) => {
                    let topology = on.topology(&setup)?;
                    let report = RankReport::new(&target, rank, &kinds, topology, output.full)?;
                    // The card has checked the rank: it is one of the target's.
                    let r = u32::try_from(rank).unwrap_or(u32::MAX);
                    let hosts = HostsReport::new(&target, &on, &kinds, Some(r))?;
                    emit(&WithHosts::new(&report, &hosts), output.format)?;
                }
                None => {
                    let report =
                        RankReport::new(&target, rank, &kinds, setup.topology, output.full)?;
                    emit(&report, output.format)?;
                }
            }
        }
        Input::Modules { topology, modules } => {
            if args.machine.hosts.is_some() {
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
