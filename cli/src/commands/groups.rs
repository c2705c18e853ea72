//! `rank-layout groups`: the groups of every kind (or of the `--kind`s
//! given), of a layout, a mesh, or each module of a `--modules` file.

use crate::args::{OutputArgs, SetupArgs};
use crate::error::{Failure, Outcome};
use crate::input::Input;
use crate::report::emit;
use crate::report::groups::GroupsReport;
use crate::report::modules;

/// Runs `groups`.
///
/// # Errors
/// Every error of the input and of a `--kind` it does not have.
pub fn run(args: &SetupArgs, output: &OutputArgs) -> Result<Outcome, Failure> {
    match Input::load(args)? {
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
