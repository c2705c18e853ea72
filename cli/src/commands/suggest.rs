//! `rank-layout suggest`: every order of a layout's axes (a mesh's dims)
//! ranked, best first, then the check of the best; one module's mesh at a
//! time (not a `--modules` file).

use crate::args::{Format, SetupArgs};
use crate::error::{Failure, Outcome};
use crate::input::Input;
use crate::report::emit;
use crate::report::suggest::SuggestReport;

/// Runs `suggest`.
///
/// # Errors
/// Every error of the input and of `--priority`; [`Failure::Message`] for
/// a `--modules` file.
pub fn run(
    args: &SetupArgs,
    priority: Option<&str>,
    top: Option<u32>,
    format: Format,
) -> Result<Outcome, Failure> {
    let (topology, target) = match Input::load(args)? {
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
