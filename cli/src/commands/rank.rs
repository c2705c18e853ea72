//! `rank-layout rank R`: one rank's card, in a layout, a mesh, or every
//! module of a `--modules` file it is in (with its stage and its roles on
//! the edges).

use crate::args::{OutputArgs, SetupArgs};
use crate::error::{Failure, Outcome};
use crate::input::Input;
use crate::report::emit;
use crate::report::modules::RankCard;
use crate::report::rank::RankReport;

/// Runs `rank`.
///
/// # Errors
/// Every error of the input, of a `--kind` it does not have and of a rank
/// outside it.
pub fn run(rank: u64, args: &SetupArgs, output: &OutputArgs) -> Result<Outcome, Failure> {
    match Input::load(args)? {
        Input::One { setup, target } => {
            let kinds = target.sets_or_all(&target.parse_sets(&output.kinds)?)?;
            let report = RankReport::new(&target, rank, &kinds, setup.topology, output.full)?;
            emit(&report, output.format)?;
        }
        Input::Modules { topology, modules } => {
            let sets = modules.sets(&output.kinds, true)?;
            emit(
                &RankCard::new(&modules, rank, &sets, topology, output.full)?,
                output.format,
            )?;
        }
    }
    Ok(Outcome::Done)
}
