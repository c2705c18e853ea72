//! Slurm hostlist expressions (`gb[001-018,020]`, `rack[1-2]-n[01-03]`,
//! `a[1-2],b3`): the host names they stand for.

use crate::cast::to_u64;
use crate::error::{Error, Result};

/// The most names one expression (and one plain host table) may stand
/// for: a guard against an expression like `n[0-999999999]` taking all
/// memory.
pub const MAX_HOSTS: usize = 1 << 20;

/// The host names of a Slurm hostlist expression, in Slurm's order: the
/// comma-separated parts from left to right, each part's bracket groups
/// expanded with the first group varying slowest. A range keeps the
/// zero-padding of its first bound (`[08-10]` gives `08`, `09`, `10`);
/// a name without brackets is itself.
///
/// ```
/// use rank_layout::machine::expand_hostlist;
/// assert_eq!(expand_hostlist("gb[001-003,010]")?, ["gb001", "gb002", "gb003", "gb010"]);
/// assert_eq!(expand_hostlist("r[1-2]n[8-9],x")?, ["r1n8", "r1n9", "r2n8", "r2n9", "x"]);
/// assert!(expand_hostlist("gb[3-1]").is_err());
/// # Ok::<(), rank_layout::Error>(())
/// ```
///
/// # Errors
/// [`Error::BadSpec`] naming the expression and what is wrong: an
/// unclosed or nested bracket, an empty part, a range that decreases or is
/// not of digits, more than [`MAX_HOSTS`] names.
pub fn expand_hostlist(expr: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for part in split_top(expr)? {
        if part.is_empty() {
            return Err(bad(expr, "an empty name"));
        }
        let mut names = vec![String::new()];
        let mut rest = part;
        while !rest.is_empty() {
            let (literal, after) = match rest.find('[') {
                Some(open) => rest.split_at(open),
                None => (rest, ""),
            };
            if literal.contains(']') {
                return Err(bad(expr, "a `]` without its `[`"));
            }
            for n in &mut names {
                n.push_str(literal);
            }
            if after.is_empty() {
                break;
            }
            let body_end = after
                .find(']')
                .ok_or_else(|| bad(expr, "a `[` without its `]`"))?;
            let body = after.get(1..body_end).unwrap_or_default();
            if body.contains('[') {
                return Err(bad(expr, "brackets inside brackets"));
            }
            let values = group(expr, body)?;
            if names
                .len()
                .saturating_mul(values.len())
                .saturating_add(out.len())
                > MAX_HOSTS
            {
                return Err(bad(expr, &format!("more than {MAX_HOSTS} names")));
            }
            names = names
                .iter()
                .flat_map(|n| values.iter().map(move |v| format!("{n}{v}")))
                .collect();
            rest = after.get(body_end + 1..).unwrap_or_default();
        }
        out.extend(names);
    }
    Ok(out)
}

/// The parts of `expr` split at commas outside brackets.
fn split_top(expr: &str) -> Result<Vec<&str>> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0u32, 0usize);
    for (i, c) in expr.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| bad(expr, "a `]` without its `[`"))?;
            }
            ',' if depth == 0 => {
                parts.push(expr.get(start..i).unwrap_or_default());
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(bad(expr, "a `[` without its `]`"));
    }
    parts.push(expr.get(start..).unwrap_or_default());
    Ok(parts)
}

/// The values of one bracket group: `1-3,7,09-10`.
fn group(expr: &str, body: &str) -> Result<Vec<String>> {
    let mut values = Vec::new();
    for item in body.split(',') {
        let (lo, hi) = item.split_once('-').unwrap_or((item, item));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(lo) || !digits(hi) {
            return Err(bad(
                expr,
                &format!("{item:?} is not a number or a range of numbers"),
            ));
        }
        let parse = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| bad(expr, &format!("{s:?} is too large")))
        };
        let (a, b) = (parse(lo)?, parse(hi)?);
        if b < a {
            return Err(bad(expr, &format!("the range {item:?} decreases")));
        }
        if b - a >= to_u64(MAX_HOSTS) {
            return Err(bad(expr, &format!("more than {MAX_HOSTS} names")));
        }
        let width = lo.len();
        for v in a..=b {
            values.push(format!("{v:0width$}"));
        }
    }
    Ok(values)
}

fn bad(expr: &str, problem: &str) -> Error {
    Error::BadSpec {
        what: "hostlist",
        text: expr.chars().take(200).collect(),
        problem: problem.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_documented_forms() {
        // Slurm's documentation (`scontrol show hostnames`): tux[1-3] and
        // lx[10-20] style lists, padded ranges, several groups.
        assert_eq!(
            expand_hostlist("tux[1-3]").unwrap(),
            ["tux1", "tux2", "tux3"]
        );
        assert_eq!(
            expand_hostlist("lx[08-10]").unwrap(),
            ["lx08", "lx09", "lx10"]
        );
        assert_eq!(expand_hostlist("a,b[2,4]").unwrap(), ["a", "b2", "b4"]);
        assert_eq!(expand_hostlist("n[1-2].ib").unwrap(), ["n1.ib", "n2.ib"]);
        for bad_expr in [
            "n[1-",
            "n]1",
            "n[[1]]",
            "n[a-b]",
            "n[2-1]",
            "",
            "a,,b",
            "n[0-99999999999]",
        ] {
            assert!(expand_hostlist(bad_expr).is_err(), "{bad_expr}");
        }
    }
}
