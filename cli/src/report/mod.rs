//! Reports of a layout (or mesh) as the command line prints them: a
//! readable table (`Display`) and JSON (`Serialize`).
//!
//! - [`groups`]: every group of some kinds (`rank-layout groups`);
//! - [`rank`]: one rank's card (`rank-layout rank R`);
//! - [`check`], [`suggest`]: the planner's check and ranked orders;
//! - [`describe`]: the layout explained (`rank-layout describe`);
//! - [`audit`]: Megatron-LM's encoder + decoder joins (`rank-layout audit`);
//! - [`bridge`]: the bridge plans of a modules file (`rank-layout bridge`);
//! - [`modules`]: the reports of a `--modules` file, module by module;
//! - [`shards`]: the reports of inference shards, shard by shard;
//! - [`mesh`]: a mesh described for JSON;
//! - [`place`]: a layout placed on a host table (`rank-layout place`).

pub mod audit;
pub mod bridge;
pub mod check;
pub mod describe;
pub mod groups;
pub mod hosts;
pub mod mesh;
pub mod modules;
pub mod place;
pub mod rank;
pub mod relayout;
pub mod shards;
pub mod suggest;

use std::fmt;
use std::io::{self, BufWriter, Write};

use rank_layout::Sizes;
use serde::Serialize;

use crate::args::Format;
use crate::error::Failure;

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
