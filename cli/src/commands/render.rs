//! `rank-layout render`: the picture of a layout or mesh on its machine,
//! or of a `--modules` file's modules (one band each), as SVG or an HTML
//! page, written to stdout as it is computed.

use std::io::{self, BufWriter, Write};

use clap::{Args, ValueEnum};

use crate::args::{SetupArgs, kinds_help};
use crate::error::{Failure, Outcome};
use crate::input::Input;
use crate::render;
use crate::render::html::write_html;
use crate::render::modules::write_modules;
use crate::render::svg::write_svg;
use crate::values::at_least_one;

/// Draw the layout: nodes as rows, GPUs as cells labelled with their rank,
/// one panel per kind, each group its own colour.
#[derive(Debug, Args)]
#[command(after_help = kinds_help())]
pub struct RenderArgs {
    /// The layout and the machine.
    #[command(flatten)]
    setup: SetupArgs,
    /// A kind to draw (repeatable; default tp, cp, pp, dp; a mesh's every
    /// dim set).
    #[arg(long = "kind", value_name = "KIND")]
    kinds: Vec<String>,
    /// svg: the picture; html: the picture with a legend and a tooltip per cell.
    #[arg(long, value_enum, default_value_t = Picture::Svg)]
    format: Picture,
    /// Draw every rank up to this many; past it, draw the first nodes and
    /// the last and say so in the picture.
    #[arg(long, value_name = "N", default_value_t = 4096, value_parser = at_least_one, allow_negative_numbers = true)]
    max_ranks: u32,
}

/// Output format of `render`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Picture {
    /// A standalone SVG picture.
    Svg,
    /// An HTML page: the picture, a legend and a tooltip per cell.
    Html,
}

/// Runs `render`.
///
/// # Errors
/// Every error of the input, of a `--kind` it does not have and of a
/// picture too big to draw; [`Failure::Output`] when stdout cannot be
/// written.
pub fn run(args: &RenderArgs) -> Result<Outcome, Failure> {
    let (kinds, format, max_ranks) = (&args.kinds, args.format, args.max_ranks);
    match Input::load(&args.setup)? {
        Input::One { setup, target } => {
            let kinds = target.parse_sets(kinds)?;
            let picture = render::Picture::new(&target, setup.topology, &kinds, max_ranks)?;
            // Written as it is computed: memory stays flat at any size.
            let mut out = BufWriter::new(io::stdout().lock());
            if format == Picture::Html {
                write_html(&mut out, &picture)?;
            } else {
                write_svg(&mut out, &picture, true)?;
            }
            out.flush()?;
        }
        Input::Modules { topology, modules } => {
            let sets = modules.sets(kinds, false)?;
            let mut out = BufWriter::new(io::stdout().lock());
            write_modules(
                &mut out,
                &modules,
                topology,
                &sets,
                max_ranks,
                format == Picture::Html,
            )?;
            out.flush()?;
        }
    }
    Ok(Outcome::Done)
}
