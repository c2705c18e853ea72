//! `rank-layout`: see and check a distributed-training rank layout before
//! launching it.
//!
//! A thin consumer of the library: [`args`] parses the command line,
//! [`config`] merges the flags over a configuration file in one place (the
//! file read by `rank_layout_cli::config_file`, this package's library
//! half; [`megatron`] reads Megatron-LM's arguments through the library's
//! table),
//! [`target`] builds what the commands work on (a layout or a mesh) and
//! answers every report's questions of it,
//! [`commands`] runs the subcommand (each has its module; [`audit`] checks
//! Megatron-LM's encoder + decoder joins), and `main` maps
//! the outcome to an exit status: 0 on success (and on a closed output
//! pipe), 1 when `check --strict` fails, 2 for bad input with the error on
//! stderr and nothing on stdout.
//!
//! The planner is layered, each module using only those below it:
//! [`suggest`] (the ranked orders, then the check of the best) stands on
//! [`check`] (the spread table and warnings with fixes), which stands on
//! [`ranking`] (every order scored), which stands on [`spread`] (each
//! kind's spread and the table both print), which stands on [`target`].
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

mod args;
mod audit;
mod bridge;
mod check;
mod commands;
mod config;
mod describe;
mod error;
mod format;
mod megatron;
mod modules;
mod ranking;
mod render;
mod report;
mod spread;
mod suggest;
mod target;
mod values;

use std::io;
use std::process::ExitCode;

use clap::Parser;

use args::Cli;
use commands::run;
use error::{Failure, Outcome};

/// Parses the command line, runs it, and maps the outcome to the exit
/// status (usage errors exit 2 from clap's own parser).
fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::StrictFailed(message)) => {
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
