//! The subcommands, one file each, and the one dispatcher.
//!
//! Each file owns its flags (`XArgs`: the shared groups of
//! [`crate::args`] flattened with its own; the struct's doc comment is the
//! command's help) and its `run`, which converts the flags, calls the
//! library and prints the report. No command file imports another. A new
//! subcommand is one new file and one line in the list below: the line
//! declares its module, names its variant and its flags, and the macro
//! makes the [`Command`] enum and the dispatch from the list.

use clap::{Parser, Subcommand};

use crate::args::kinds_help;
use crate::error::{Failure, Outcome};

/// The subcommands of the list: a module per command, the variant of
/// [`Command`] and the command's flags (its `XArgs`); the module's `run`
/// takes them.
macro_rules! commands {
    ($(mod $module:ident; $variant:ident($flags:ty),)*) => {
        $(mod $module;)*

        /// The subcommands.
        #[derive(Debug, Subcommand)]
        pub enum Command {
            $(
                #[allow(missing_docs)]
                $variant($flags),
            )*
        }

        impl Command {
            /// Runs the command.
            ///
            /// # Errors
            /// Every error of the command.
            pub fn run(&self) -> Result<Outcome, Failure> {
                match self {
                    $(Command::$variant(args) => $module::run(args),)*
                }
            }
        }
    };
}

commands! {
    mod groups; Groups(groups::GroupsArgs),
    mod rank; Rank(rank::RankArgs),
    mod check; Check(check::CheckArgs),
    mod suggest; Suggest(suggest::SuggestArgs),
    mod describe; Describe(describe::DescribeArgs),
    mod render; Render(render::RenderArgs),
    mod audit; Audit(audit::AuditArgs),
    mod bridge; Bridge(bridge::BridgeArgs),
    mod place; Place(place::PlaceArgs),
    mod relayout; Relayout(relayout::RelayoutArgs),
    mod reshard; Reshard(reshard::ReshardArgs),
}

/// Process-group rank layouts of distributed training (Megatron-LM
/// ordering) and named meshes (--mesh, DeviceMesh's --device-mesh): print
/// the groups, one rank's view, and check, rank, describe or draw a layout
/// on a machine of nodes and domains before launching it.
#[derive(Debug, Parser)]
#[command(name = "rank-layout", version, about, after_help = kinds_help())]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}
