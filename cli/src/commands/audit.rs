//! `rank-layout audit --megatron 2024|2025`: the encoder + decoder
//! pipeline joins Megatron-LM builds at that commit for a layout, checked
//! against rank-layout's join by coordinates (a layout only: not a mesh,
//! not a `--modules` file).

use clap::Args;
use rank_layout::Error;
use rank_layout::megatron::MegatronJoin;

use crate::args::{Format, SetupArgs};
use crate::error::{Failure, Outcome};
use crate::input::Input;
use crate::report::audit::AuditReport;
use crate::report::emit;
use crate::target::Target;

/// Audit Megatron-LM's encoder + decoder pipeline joins: rebuild the joined
/// pipelines a Megatron-LM commit makes for the layout, and count those that
/// mix cp slices or dp replicas and those that pair other tp ranks than
/// rank-layout's join by coordinates.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The Megatron-LM commit: 2024 (4ff9e66, zip(cycle(...))) or 2025
    /// (5a3b6bcf1f, its block map).
    #[arg(long, value_name = "COMMIT")]
    megatron: MegatronJoin,
    /// The layout (an encoder + decoder one).
    #[command(flatten)]
    setup: SetupArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// Audits the joins of the `--megatron` commit for the layout and prints
/// the report (the setup's notes go to stderr).
///
/// # Errors
/// [`Failure::Input`] for an invalid layout, one without an encoder or one
/// Megatron-LM does not build at that commit; [`Failure::Message`] for a
/// mesh or a `--modules` file.
pub fn run(args: &AuditArgs) -> Result<Outcome, Failure> {
    let (join, format) = (args.megatron, args.format);
    let input = Input::load_with(&args.setup, |failure| match failure {
        // 4ff9e66 nests experts in dp, and so checks no expert grid.
        Failure::Input {
            error: error @ (Error::FoldedDpMismatch { .. } | Error::FoldedPpMismatch { .. }),
            hint,
        } if join == MegatronJoin::Zip2024 => Failure::Input {
            error,
            hint: format!(
                "{hint}; Megatron-LM 4ff9e66 nests experts in dp: give --expert-layout nested"
            ),
        },
        other => other,
    })?;
    let target = match input {
        Input::One { target, .. } => target,
        Input::Modules { .. } => {
            return Err(Failure::Message(
                "audit takes an encoder + decoder layout, not --modules".into(),
            ));
        }
    };
    let Target::Layout { layout, .. } = &target else {
        return Err(Failure::Message(
            "audit compares Megatron-LM's encoder + decoder pipeline joins: it needs a layout, not a mesh".to_owned(),
        ));
    };
    emit(&AuditReport::new(layout, join)?, format)?;
    Ok(Outcome::Done)
}
