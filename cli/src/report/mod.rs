//! Reports of a layout as the command line prints them: a readable table
//! (`Display`) and JSON (`Serialize`), whose shapes docs/semantics.md states.
//!
//! - [`groups`]: every group of some kinds (`rank-layout groups`);
//! - [`rank`]: one rank's card (`rank-layout rank R`).

pub mod groups;
pub mod rank;

use std::fmt;
use std::io::{self, BufWriter, Write};

use rank_layout::{Kind, Layout, Sizes};
use serde::Serialize;

use crate::args::Format;
use crate::error::Failure;

/// The kinds named on the command line, parsed, without repeats.
///
/// # Errors
/// [`Failure::Input`] for a name that is not a kind.
pub fn parse_kinds(names: &[String]) -> Result<Vec<Kind>, Failure> {
    let mut kinds: Vec<Kind> = Vec::with_capacity(names.len());
    for name in names {
        let kind: Kind = name.parse()?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    Ok(kinds)
}

/// `kinds`, or every kind of the layout when empty; each checked to be a
/// kind of `layout`.
///
/// # Errors
/// [`Failure::Input`] for a kind the layout does not have.
pub fn kinds_or_all(layout: &Layout, kinds: &[Kind]) -> Result<Vec<Kind>, Failure> {
    if kinds.is_empty() {
        return Ok(layout.kinds().to_vec());
    }
    for kind in kinds {
        let _ = layout.groups(*kind)?;
    }
    Ok(kinds.to_vec())
}

/// Prints `value` on stdout as a table (`Display`) or one line of JSON.
///
/// # Errors
/// [`Failure::Output`] when stdout cannot be written.
pub fn emit<T: fmt::Display + Serialize>(value: &T, format: Format) -> Result<(), Failure> {
    match format {
        Format::Table => print(value),
        Format::Json => print_json(value),
    }
}

/// Prints `value`'s `Display` on stdout, buffered.
///
/// # Errors
/// [`Failure::Output`] when stdout cannot be written.
pub fn print(value: &impl fmt::Display) -> Result<(), Failure> {
    let mut out = BufWriter::new(io::stdout().lock());
    write!(out, "{value}")?;
    out.flush()?;
    Ok(())
}

/// Prints `value` on stdout as one line of JSON.
///
/// # Errors
/// [`Failure::Output`] when stdout cannot be written.
pub fn print_json(value: &impl Serialize) -> Result<(), Failure> {
    let mut out = BufWriter::new(io::stdout().lock());
    serde_json::to_writer(&mut out, value).map_err(io::Error::from)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// The JSON of a grid's sizes: `{"tp", "cp", "ep", "dp", "pp", "etp", "edp"}`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SizesOut {
    tp: u32,
    cp: u32,
    ep: u32,
    dp: u32,
    pp: u32,
    etp: u32,
    edp: u32,
}

impl From<Sizes> for SizesOut {
    fn from(s: Sizes) -> SizesOut {
        SizesOut {
            tp: s.tp,
            cp: s.cp,
            ep: s.ep,
            dp: s.dp,
            pp: s.pp,
            etp: s.etp,
            edp: s.edp,
        }
    }
}

/// Serializes pairs as a JSON object, keys in the order given.
pub struct Entries<'a, V>(pub &'a [(String, V)]);

impl<V: Serialize> Serialize for Entries<'_, V> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}
