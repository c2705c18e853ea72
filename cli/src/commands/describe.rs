//! `rank-layout describe`: a layout or mesh explained (derived sizes and
//! why, groups per kind, what listing them costs), or a `--modules` file's
//! graph, edges and each module described as a mesh.

use clap::Args;

use crate::args::{Format, SetupArgs};
use crate::error::{Failure, Outcome};
use crate::input::Input;
use crate::report::describe::DescribeReport;
use crate::report::emit;
use crate::report::modules::Describe;

/// Explain the layout: derived sizes and why, groups per kind, and what
/// listing every group would cost.
#[derive(Debug, Args)]
pub struct DescribeArgs {
    /// The layout and the machine.
    #[command(flatten)]
    setup: SetupArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// Runs `describe`.
///
/// # Errors
/// Every error of the input.
pub fn run(args: &DescribeArgs) -> Result<Outcome, Failure> {
    let format = args.format;
    match Input::load(&args.setup)? {
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
