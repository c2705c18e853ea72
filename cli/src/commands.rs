//! Runs a parsed command: builds the layout (or mesh) from the merged
//! configuration and prints the report the subcommand asks for.

use std::io::{self, BufWriter, Write};

use crate::args::{Cli, Command, Picture, SetupArgs};
use crate::check::CheckReport;
use crate::config::Setup;
use crate::describe::DescribeReport;
use crate::error::{Failure, Outcome};
use crate::render;
use crate::report::emit;
use crate::report::groups::GroupsReport;
use crate::report::rank::RankReport;
use crate::suggest::SuggestReport;
use crate::target::{DimSet, Target};

/// The setup of the flags and the file, and its layout or mesh; the
/// setup's notes (the Megatron-LM arguments used) go to stderr.
fn load(args: &SetupArgs) -> Result<(Setup, Target), Failure> {
    let setup = args.setup()?;
    for note in &setup.notes {
        eprintln!("{note}");
    }
    let target = Target::build(&setup)?;
    Ok((setup, target))
}

/// Runs the command.
pub fn run(cli: &Cli) -> Result<Outcome, Failure> {
    if let Some(outcome) = crate::modules::run(cli)? {
        return Ok(outcome);
    }
    match &cli.command {
        Command::Groups { setup, output } => {
            let (_, target) = load(setup)?;
            let kinds = target.sets_or_all(&target.parse_sets(&output.kinds)?)?;
            emit(
                &GroupsReport::new(&target, kinds, output.full),
                output.format,
            )?;
        }
        Command::Rank {
            rank,
            setup,
            output,
        } => {
            let (setup, target) = load(setup)?;
            let kinds = target.sets_or_all(&target.parse_sets(&output.kinds)?)?;
            let report = RankReport::new(&target, *rank, &kinds, setup.topology, output.full)?;
            emit(&report, output.format)?;
        }
        Command::Check {
            setup,
            kinds,
            format,
            require,
            strict,
        } => {
            let (setup, target) = load(setup)?;
            let report = CheckReport::new(
                &target,
                setup.topology,
                &target.parse_sets(kinds)?,
                &target.parse_sets(require)?,
            )?;
            emit(&report, *format)?;
            if *strict && !report.failed().is_empty() {
                let names: Vec<String> = report.failed().iter().map(DimSet::to_string).collect();
                return Ok(Outcome::StrictFailed(format!(
                    "check --strict: {} groups cross node boundaries",
                    names.join(", ")
                )));
            }
        }
        Command::Suggest {
            setup,
            priority,
            top,
            format,
        } => {
            let (setup, target) = load(setup)?;
            let report = SuggestReport::new(
                &target,
                setup.topology,
                priority.as_deref(),
                top.map(|n| n as usize),
            )?;
            emit(&report, *format)?;
        }
        Command::Describe { setup, format } => {
            let (setup, target) = load(setup)?;
            emit(&DescribeReport::new(&target, setup.topology), *format)?;
        }
        Command::Render {
            setup,
            kinds,
            format,
            max_ranks,
        } => {
            let (setup, target) = load(setup)?;
            let kinds = target.parse_sets(kinds)?;
            let picture = render::Picture::new(&target, setup.topology, &kinds, *max_ranks)?;
            // Written as it is computed: memory stays flat at any size.
            let mut out = BufWriter::new(io::stdout().lock());
            if *format == Picture::Html {
                render::html::write_html(&mut out, &picture)?;
            } else {
                render::svg::write_svg(&mut out, &picture, true)?;
            }
            out.flush()?;
        }
        Command::Audit {
            megatron,
            setup,
            format,
        } => crate::audit::run(setup, *megatron, *format)?,
        Command::Bridge(args) => crate::bridge::run(args)?,
    }
    Ok(Outcome::Done)
}
