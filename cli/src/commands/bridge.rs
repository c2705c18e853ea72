//! `rank-layout bridge --modules FILE [--edge SRC:DST]`: the bridge plan
//! of every edge of a modules file (or of one), as
//! [`crate::report::bridge`] prints it.

use std::path::PathBuf;

use clap::Args;

use crate::args::Format;
use crate::error::{Failure, Outcome};
use crate::modules_target::ModulesTarget;
use crate::report::bridge::Plans;
use crate::report::emit;

/// Print the bridge plan of every edge of a --modules file (or of one
/// --edge): leaders, pairs, broadcast, cp and gather groups.
#[derive(Debug, Args)]
pub struct BridgeArgs {
    /// The modules file (TOML or JSON, as for --modules elsewhere).
    #[arg(long, value_name = "FILE")]
    modules: PathBuf,
    /// Only this edge: SRC:DST (module names).
    #[arg(long, value_name = "SRC:DST")]
    edge: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Table format: list every member and every group instead of
    /// shortening long lists.
    #[arg(long)]
    full: bool,
}

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
