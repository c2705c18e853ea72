//! The one dispatcher: runs the parsed command line's subcommand, each in
//! its own file. Every command serves a layout, a mesh and a `--modules`
//! file alike, through [`crate::input::Input`].

mod audit;
mod bridge;
mod check;
mod describe;
mod groups;
mod place;
mod rank;
mod relayout;
mod render;
mod reshard;
mod suggest;

use crate::args::{Cli, Command};
use crate::error::{Failure, Outcome};

/// Runs the command.
///
/// # Errors
/// Every error of the command.
pub fn run(cli: &Cli) -> Result<Outcome, Failure> {
    match &cli.command {
        Command::Groups { setup, output } => groups::run(setup, output),
        Command::Rank {
            rank,
            setup,
            output,
            machine,
        } => rank::run(*rank, setup, output, machine),
        Command::Check {
            setup,
            kinds,
            format,
            require,
            strict,
            machine,
        } => check::run(setup, kinds, require, *format, *strict, machine),
        Command::Suggest {
            setup,
            priority,
            top,
            format,
        } => suggest::run(setup, priority.as_deref(), *top, *format),
        Command::Describe { setup, format } => describe::run(setup, *format),
        Command::Render {
            setup,
            kinds,
            format,
            max_ranks,
        } => render::run(setup, kinds, *format, *max_ranks),
        Command::Audit {
            megatron,
            setup,
            format,
        } => audit::run(setup, *megatron, *format),
        Command::Bridge(args) => bridge::run(args),
        Command::Place(args) => place::run(args),
        Command::Relayout(args) => relayout::run(args),
        Command::Reshard(args) => reshard::run(args),
    }
}
