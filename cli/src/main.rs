//! `rank-layout`: see and check a distributed-training rank layout before
//! launching it.
//!
//! The binary is thin: `main` parses the command line ([`commands::Cli`]:
//! a file per subcommand, each with its flags and its `run`, over the
//! shared flag groups of [`args`]), runs it with the one dispatcher and
//! maps the outcome to the exit status: 0 on success (and on a closed
//! output pipe), 1 when `check --strict` fails or `relayout` finds no
//! policy that can go on, 2 for bad input with the error on stderr and
//! nothing on stdout.
//!
//! Below the commands: [`input`] reads what a command works on from its
//! flags, either one [`target`] (a layout or a mesh, from the flags merged
//! over a configuration file by [`config`]; the file read by
//! `rank_layout_cli::config_file`, this package's library half;
//! Megatron-LM's arguments read by [`megatron`]) or a `--modules` file's
//! modules ([`modules_target`]); [`report`] and [`render`] print what the
//! commands ask of them; [`values`] parses the flags' values and [`error`]
//! says how a command ended.
//!
//! The planner is layered, each module using only those below it:
//! `report::suggest` (the ranked orders, then the check of the best)
//! stands on `report::check` (the spread table and warnings with fixes),
//! which stands on [`ranking`] (every order scored), which stands on
//! [`spread`] (each kind's spread and the table both print), which stands
//! on [`target`]. `tests/layering.rs` checks this, and that no files
//! import each other in a circle of more than two.
#![forbid(unsafe_code)]

mod args;
mod commands;
mod config;
mod error;
mod format;
mod hosts_file;
mod input;
mod megatron;
mod modules_target;
mod on_hosts;
mod ranking;
mod render;
mod report;
mod spread;
mod target;
mod values;

use std::io;
use std::process::ExitCode;

use clap::Parser;

use commands::Cli;
use error::{Failure, Outcome};

/// Parses the command line, runs it, and maps the outcome to the exit
/// status (usage errors exit 2 from clap's own parser).
fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command.run() {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::StrictFailed(message) | Outcome::Refused(message)) => {
            eprintln!("{message}");
            ExitCode::from(1)
        }
        Err(Failure::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(Failure::Output(e)) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
