//! `rank-layout bridge --modules FILE [--edge SRC:DST]`: the bridge plan
//! of every edge of a modules file (or of one), as
//! [`crate::report::bridge`] prints it.

use crate::args::BridgeArgs;
use crate::error::{Failure, Outcome};
use crate::modules_target::ModulesTarget;
use crate::report::bridge::Plans;
use crate::report::emit;

/// Runs `bridge`.
///
/// # Errors
/// [`Failure::Message`] for a bad file or `--edge`; [`Failure::Input`]
/// for an edge the modules do not have.
pub fn run(args: &BridgeArgs) -> Result<Outcome, Failure> {
    let m = ModulesTarget::load(&args.modules)?;
    let plans = match &args.edge {
        None => m.modules.bridges()?,
        Some(edge) => {
            let (src, dst) = edge.split_once(':').ok_or_else(|| {
                Failure::Message(format!(
                    "--edge {edge:?}: expected SRC:DST, two module names joined by ':'"
                ))
            })?;
            vec![m.modules.bridge(src.trim(), dst.trim())?]
        }
    };
    emit(
        &Plans {
            plans,
            full: args.full,
        },
        args.format,
    )?;
    Ok(Outcome::Done)
}
