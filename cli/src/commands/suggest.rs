//! `rank-layout suggest`: every order of a layout's axes (a mesh's dims)
//! ranked, best first, then the check of the best; one module's mesh at a
//! time (not a `--modules` file).

use clap::Args;

use crate::args::{Format, SetupArgs};
use crate::error::{Failure, Outcome};
use crate::input::Input;
use crate::report::emit;
use crate::report::suggest::SuggestReport;
use crate::values::at_least_one;

/// Rank every order of the layout's axes (the mesh's dims) by how well it
/// keeps bandwidth-hungry groups inside nodes and domains, best first.
#[derive(Debug, Args)]
pub struct SuggestArgs {
    /// The layout and the machine.
    #[command(flatten)]
    setup: SetupArgs,
    /// What matters most, most important first: tiers separated by ','
    /// and kinds of one tier joined by '+' (default tp,cp+ep+etp,pp,dp;
    /// for a mesh its dim sets, default its dims so named, the others
    /// last).
    #[arg(long, value_name = "TIERS")]
    priority: Option<String>,
    /// Print only the best N orders, N >= 1 (default: all).
    #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true)]
    top: Option<u32>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// Runs `suggest`.
///
/// # Errors
/// Every error of the input and of `--priority`; [`Failure::Message`] for
/// a `--modules` file.
pub fn run(args: &SuggestArgs) -> Result<Outcome, Failure> {
    let (priority, top, format) = (args.priority.as_deref(), args.top, args.format);
    let (topology, target) = match Input::load(&args.setup)? {
        Input::One { setup, target } => (setup.topology, target),
        Input::Modules { .. } => {
            return Err(Failure::Message(
                "suggest does not take --modules: give one module's mesh with --mesh".into(),
            ));
        }
    };
    let report = SuggestReport::new(&target, topology, priority, top.map(|n| n as usize))?;
    emit(&report, format)?;
    Ok(Outcome::Done)
}
