//! `rank-layout groups`: the groups of every kind (or of the `--kind`s
//! given), of a layout, a mesh, or each module of a `--modules` file.

use clap::Args;

use crate::args::{OutputArgs, SetupArgs, kinds_help};
use crate::error::{Failure, Outcome};
use crate::input::Input;
use crate::report::emit;
use crate::report::groups::GroupsReport;
use crate::report::modules;

/// Print the groups of every kind (or of the --kind given).
#[derive(Debug, Args)]
#[command(after_help = kinds_help())]
pub struct GroupsArgs {
    /// The layout and the machine.
    #[command(flatten)]
    setup: SetupArgs,
    /// Kinds and format.
    #[command(flatten)]
    output: OutputArgs,
}

/// Runs `groups`.
///
/// # Errors
/// Every error of the input and of a `--kind` it does not have.
pub fn run(args: &GroupsArgs) -> Result<Outcome, Failure> {
    let output = &args.output;
    match Input::load(&args.setup)? {
        Input::One { target, .. } => {
            let kinds = target.sets_or_all(&target.parse_sets(&output.kinds)?)?;
            emit(
                &GroupsReport::new(&target, kinds, output.full),
                output.format,
            )?;
        }
        Input::Modules { modules: m, .. } => {
            let sets = m.sets(&output.kinds, true)?;
            modules::groups(&m, &sets, output.full, output.format)?;
        }
    }
    Ok(Outcome::Done)
}
