//! `rank-layout describe`: a layout or mesh explained (derived sizes and
//! why, groups per kind, what listing them costs), or a `--modules` file's
//! graph, edges and each module described as a mesh.

use crate::args::{Format, SetupArgs};
use crate::error::{Failure, Outcome};
use crate::input::Input;
use crate::report::describe::DescribeReport;
use crate::report::emit;
use crate::report::modules::Describe;

/// Runs `describe`.
///
/// # Errors
/// Every error of the input.
pub fn run(args: &SetupArgs, format: Format) -> Result<Outcome, Failure> {
    match Input::load(args)? {
        Input::One { setup, target } => {
            emit(&DescribeReport::new(&target, setup.topology), format)?;
        }
        Input::Modules { topology, modules } => {
            emit(
                &Describe {
                    m: &modules,
                    topology,
                },
                format,
            )?;
        }
    }
    Ok(Outcome::Done)
}
