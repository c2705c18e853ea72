//! `rank-layout render`: the picture of a layout or mesh on its machine,
//! or of a `--modules` file's modules (one band each), as SVG or an HTML
//! page, written to stdout as it is computed.

use std::io::{self, BufWriter, Write};

use crate::args::{Picture, SetupArgs};
use crate::error::{Failure, Outcome};
use crate::input::Input;
use crate::render;
use crate::render::html::write_html;
use crate::render::modules::write_modules;
use crate::render::svg::write_svg;

/// Runs `render`.
///
/// # Errors
/// Every error of the input, of a `--kind` it does not have and of a
/// picture too big to draw; [`Failure::Output`] when stdout cannot be
/// written.
pub fn run(
    args: &SetupArgs,
    kinds: &[String],
    format: Picture,
    max_ranks: u32,
) -> Result<Outcome, Failure> {
    match Input::load(args)? {
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
