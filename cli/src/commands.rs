//! Runs a parsed command: builds the layout from the merged configuration
//! and prints the report the subcommand asks for.

use std::io::{self, BufWriter, Write};

use crate::args::{Cli, Command, Picture};
use crate::check::CheckReport;
use crate::describe::DescribeReport;
use crate::error::{Failure, build_layout};
use crate::render;
use crate::report::groups::GroupsReport;
use crate::report::rank::RankReport;
use crate::report::{emit, kinds_or_all, parse_kinds};
use crate::suggest::SuggestReport;

/// How a command that did its work ended.
pub enum Outcome {
    /// Everything is fine.
    Done,
    /// `check --strict` found kinds that must stay inside a node and do not.
    StrictFailed(String),
}

/// Runs the command.
pub fn run(cli: &Cli) -> Result<Outcome, Failure> {
    match &cli.command {
        Command::Groups { setup, output } => {
            let layout = build_layout(&setup.setup()?.config)?;
            let kinds = kinds_or_all(&layout, &parse_kinds(&output.kinds)?)?;
            emit(
                &GroupsReport::new(&layout, kinds, output.full),
                output.format,
            )?;
        }
        Command::Rank {
            rank,
            setup,
            output,
        } => {
            let setup = setup.setup()?;
            let layout = build_layout(&setup.config)?;
            let kinds = kinds_or_all(&layout, &parse_kinds(&output.kinds)?)?;
            let report = RankReport::new(&layout, *rank, &kinds, setup.topology, output.full)?;
            emit(&report, output.format)?;
        }
        Command::Check {
            setup,
            kinds,
            format,
            require,
            strict,
        } => {
            let setup = setup.setup()?;
            let layout = build_layout(&setup.config)?;
            let report = CheckReport::new(
                &layout,
                setup.topology,
                &parse_kinds(kinds)?,
                &parse_kinds(require)?,
            )?;
            emit(&report, *format)?;
            if *strict && !report.failed().is_empty() {
                let names: Vec<String> = report.failed().iter().map(|k| k.to_string()).collect();
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
            let setup = setup.setup()?;
            let layout = build_layout(&setup.config)?;
            let report = SuggestReport::new(
                &layout,
                setup.topology,
                priority.as_deref(),
                top.map(|n| n as usize),
            )?;
            emit(&report, *format)?;
        }
        Command::Describe { setup, format } => {
            let setup = setup.setup()?;
            let layout = build_layout(&setup.config)?;
            emit(
                &DescribeReport::new(&layout, &setup.config, setup.topology),
                *format,
            )?;
        }
        Command::Render {
            setup,
            kinds,
            format,
            max_ranks,
        } => {
            let setup = setup.setup()?;
            let layout = build_layout(&setup.config)?;
            let kinds = parse_kinds(kinds)?;
            let picture = render::Picture::new(&layout, setup.topology, &kinds, *max_ranks)?;
            // Written as it is computed: memory stays flat at any size.
            let mut out = BufWriter::new(io::stdout().lock());
            if *format == Picture::Html {
                render::html::write_html(&mut out, &picture)?;
            } else {
                render::svg::write_svg(&mut out, &picture, true)?;
            }
            out.flush()?;
        }
    }
    Ok(Outcome::Done)
}
