//! How a command ends: done, a failed `check --strict` or every policy of
//! `relayout` refused ([`Outcome`]), or what went wrong ([`Failure`]); and
//! the exit status each gets: bad input 2, a failed `check --strict` and
//! a refusal of every policy 1, a closed output pipe 0.

use std::fmt;
use std::io;

use rank_layout::{Config, Error, Layout};

use crate::format::thousands;

/// A command's failure.
#[derive(Debug)]
pub enum Failure {
    /// Bad input: the library's error, with advice appended where the CLI
    /// has some (exit status 2).
    Input {
        /// The library's error.
        error: Error,
        /// Advice, empty or starting with `"; "`.
        hint: String,
    },
    /// Bad input the library does not judge: a configuration file that
    /// cannot be read or parsed, a picture too big to draw (exit status 2).
    Message(String),
    /// Writing the output failed (exit status 0 for a closed pipe, else 1).
    Output(io::Error),
}

/// How a command that did its work ended.
pub enum Outcome {
    /// Everything is fine.
    Done,
    /// `check --strict` found kinds that must stay inside a node and do not.
    StrictFailed(String),
    /// The report is printed, and it says no plan can go on (`relayout`
    /// with every policy refused).
    Refused(String),
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure::Input {
            error,
            hint: String::new(),
        }
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::Output(e)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Input { error, hint } => write!(f, "{error}{hint}"),
            Failure::Message(message) => f.write_str(message),
            Failure::Output(e) => write!(f, "{e}"),
        }
    }
}

/// `Layout::new`, with the nearest valid world sizes added to a
/// divisibility error ("...; nearest valid: 60, 72").
///
/// # Errors
/// Every error of [`Layout::new`], as a [`Failure::Input`].
pub fn build_layout(config: &Config) -> Result<Layout, Failure> {
    Layout::new(config).map_err(|error| {
        let hint = match &error {
            Error::WorldNotDivisible {
                world_size,
                divisor,
                ..
            } => nearest_valid(*world_size, *divisor),
            Error::ExpertWorldNotDivisible {
                world_size,
                etp,
                ep,
                pp,
            } => u64::from(*etp)
                .checked_mul(u64::from(*ep))
                .and_then(|p| p.checked_mul(u64::from(*pp)))
                .and_then(|p| u32::try_from(p).ok())
                .map(|divisor| nearest_valid(*world_size, divisor))
                .unwrap_or_default(),
            _ => String::new(),
        };
        Failure::Input { error, hint }
    })
}

/// `"; nearest valid: 60, 72"`: the multiples of `divisor` on either side
/// of `world_size` (only the one above when the one below is 0; none when
/// they do not fit a `u32`).
pub fn nearest_valid(world_size: u32, divisor: u32) -> String {
    if divisor == 0 {
        return String::new();
    }
    let (w, d) = (u64::from(world_size), u64::from(divisor));
    let below = w / d * d;
    let above = below + d;
    let valid: Vec<String> = [below, above]
        .into_iter()
        .filter(|v| *v > 0 && *v <= u64::from(u32::MAX))
        .map(|v| v.to_string())
        .collect();
    if valid.is_empty() {
        String::new()
    } else {
        format!("; nearest valid: {}", valid.join(", "))
    }
}

/// The error for `rank` outside `layout`, with a hint: the layout's size
/// and the smallest `--world-size` (same sizes, dp derived) that holds the
/// rank, or that ranks start at the offset. The layout's ranks are written
/// `first..last`, both included, as everywhere in the CLI's output.
pub fn rank_outside(layout: &Layout, rank: u64) -> Failure {
    let first = layout.rank_offset();
    let last = layout.rank_end().saturating_sub(1);
    let hint = if rank < u64::from(first) {
        format!("; ranks start at --rank-offset {first}")
    } else {
        match world_size_holding(layout, rank) {
            Some(world) => format!(
                "; the layout has {} ranks: give --world-size {world} (dp derived) or more to include rank {rank}",
                thousands(u64::from(layout.world_size()))
            ),
            None => format!(
                "; the layout has {} ranks, and no world size of these sizes reaches rank {rank}",
                thousands(u64::from(layout.world_size()))
            ),
        }
    };
    Failure::Input {
        error: Error::RankOutOfRange { rank, first, last },
        hint,
    }
}

/// The smallest world size, a multiple of the ranks of one data-parallel
/// replica, whose layout (the same sizes, dp derived) holds `rank`.
fn world_size_holding(layout: &Layout, rank: u64) -> Option<u32> {
    let dp = layout.sizes().dp.max(1);
    let replica = u64::from(layout.world_size() / dp).max(1);
    let needed = rank.checked_sub(u64::from(layout.rank_offset()))? + 1;
    let mut world = needed.div_ceil(replica) * replica;
    // The first few multiples: expert parallelism may need dp to be a
    // multiple of ep, which one of the next few multiples is.
    for _ in 0..64 {
        let size = u32::try_from(world).ok()?;
        let config = layout.config().clone().dp(None).world_size(size);
        if Layout::new(&config).is_ok() {
            return Some(size);
        }
        world += replica;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_valid_world_sizes() {
        assert_eq!(nearest_valid(64, 12), "; nearest valid: 60, 72");
        assert_eq!(nearest_valid(10, 4), "; nearest valid: 8, 12");
        assert_eq!(nearest_valid(3, 4), "; nearest valid: 4");
    }
}
