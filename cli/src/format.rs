//! Small text helpers shared by every report: numbers with thousands
//! separators, plurals, and member lists shortened so that output scales.

use std::fmt::{self, Write};

use rank_layout::{ExpertLayout, Group};

/// Member lists up to this length are printed whole.
pub const SHORT_LIST: usize = 16;

/// Arithmetic runs longer than this are printed as a run.
const SHORT_RUN: usize = 8;

/// Members shown at each end of a list that is not an arithmetic run.
const ENDS: usize = 4;

/// Groups longer than this are not scanned member by member to prove they
/// are an arithmetic run (the first and last members are shown instead).
pub const SCAN_LIMIT: usize = 1 << 22;

/// The expert layout as every text header names it, with the Megatron
/// version it matches: `experts nested (Megatron-LM 2024)` or `experts
/// folded (Megatron-Core)`.
pub fn experts(layout: ExpertLayout) -> &'static str {
    if layout == ExpertLayout::Folded {
        "experts folded (Megatron-Core)"
    } else {
        "experts nested (Megatron-LM 2024)"
    }
}

/// `n` with a comma every three digits: `16384` -> `16,384`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `1 group`, `2 groups`: the count (with separators) and the noun, plural
/// unless the count is one.
pub fn count(n: u64, singular: &str, plural: &str) -> String {
    format!(
        "{} {}",
        thousands(n),
        if n == 1 { singular } else { plural }
    )
}

/// Ranks joined by `separator`: `0 4 8`, or `0, 4, 8`.
pub fn join_ranks(ranks: &[u32], separator: &str) -> String {
    ranks
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(separator)
}

/// A byte count in B, KB, MB or GB (powers of 1000, one decimal).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if n < 1000 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1000.0;
    let mut unit = UNITS[0];
    for next in &UNITS[1..] {
        if value < 1000.0 {
            break;
        }
        value /= 1000.0;
        unit = next;
    }
    format!("{value:.1} {unit}")
}

/// How to print a member list: whole, or shortened past [`SHORT_LIST`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shorten {
    /// Print every member, however many.
    pub full: bool,
    /// Scan at most this many members to prove an arithmetic run.
    pub scan_limit: usize,
}

impl Shorten {
    /// Shortened lists (the default of the table formats).
    pub const SHORT: Shorten = Shorten {
        full: false,
        scan_limit: SCAN_LIMIT,
    };

    /// Shortened unless `full`.
    pub fn new(full: bool) -> Shorten {
        Shorten {
            full,
            ..Shorten::SHORT
        }
    }

    /// The members of `group`, written by [`write_members`].
    pub fn members(self, group: &Group) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = write_members(&mut out, group, self);
        out
    }
}

/// Writes the members of `group`: all of them when `how.full` or the list
/// is short (up to 8 members); else an arithmetic run as `0..8184 step 8
/// (1,024 ranks)` (both ends included; `step` left out when it is 1); else
/// all of them up to [`SHORT_LIST`]; otherwise the first and last few
/// members and the count: `0 1 2 3 … 60 61 62 63 (32 ranks)`.
pub fn write_members(out: &mut impl Write, group: &Group, how: Shorten) -> fmt::Result {
    let n = group.len();
    let whole = |out: &mut dyn Write| {
        for (i, r) in group.iter().enumerate() {
            if i > 0 {
                out.write_char(' ')?;
            }
            write!(out, "{r}")?;
        }
        Ok(())
    };
    if how.full || n <= SHORT_RUN {
        return whole(out);
    }
    let total = thousands(n as u64);
    if n <= how.scan_limit {
        if let Some((first, last, step)) = arithmetic(group) {
            return if step == 1 {
                write!(out, "{first}..{last} ({total} ranks)")
            } else {
                write!(out, "{first}..{last} step {step} ({total} ranks)")
            };
        }
    }
    if n <= SHORT_LIST {
        return whole(out);
    }
    let ends = |range: std::ops::Range<usize>| {
        range
            .filter_map(|i| group.get(i))
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    write!(
        out,
        "{} … {} ({total} ranks)",
        ends(0..ENDS),
        ends(n - ENDS..n)
    )
}

/// `(first, last, step)` when the members of `group` (at least two) go up
/// by one positive step.
fn arithmetic(group: &Group) -> Option<(u32, u32, u32)> {
    let mut members = group.iter();
    let first = members.next()?;
    let second = members.next()?;
    let step = second.checked_sub(first).filter(|s| *s > 0)?;
    let mut last = second;
    for r in members {
        if r.checked_sub(last) != Some(step) {
            return None;
        }
        last = r;
    }
    Some((first, last, step))
}

/// The weight-shard sizes of a layout's grid as words to append after the
/// dense sizes (` gtp_remat=2`) and after the expert sizes
/// (` egtp_remat=2`); empty where the axis is 1, so layouts without weight
/// shards print as before.
pub fn gtp_sizes(s: rank_layout::Sizes) -> (String, String) {
    let word = |name: &str, n: u32| {
        if n > 1 {
            format!(" {name}={n}")
        } else {
            String::new()
        }
    };
    (
        word("gtp_remat", s.gtp_remat),
        word("egtp_remat", s.egtp_remat),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(16384), "16,384");
        assert_eq!(thousands(2147483648), "2,147,483,648");
    }

    #[test]
    fn plurals_and_bytes() {
        assert_eq!(count(1, "group", "groups"), "1 group");
        assert_eq!(count(2, "group", "groups"), "2 groups");
        assert_eq!(count(1024, "rank", "ranks"), "1,024 ranks");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(1470000), "1.5 MB");
    }
}
