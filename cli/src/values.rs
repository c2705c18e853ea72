//! The value parsers of the command line's flags (clap `value_parser`
//! functions): whole numbers in range, and `--hierarchical-cp`'s lists of
//! sizes. Their errors are clap's reason after the flag and the value.

/// A whole number from `min` to `max`, or why `value` is not one (clap
/// puts the flag and the value before the reason).
fn whole(value: &str, min: u64, max: u64) -> Result<u64, String> {
    let text = value.trim();
    let expected = format!("expected a whole number from {min} to {max}");
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("not a whole number; {expected}"));
    }
    if text.starts_with('-') && digits.bytes().any(|b| b != b'0') {
        return Err(format!("negative; {expected}"));
    }
    match digits.parse::<u64>() {
        Ok(n) if n < min => Err(format!("too small; {expected}")),
        Ok(n) if n <= max => Ok(n),
        _ => Err(format!("too large; {expected}")),
    }
}

/// A size, a rank or a count of a `u32` flag.
pub fn whole_u32(value: &str) -> Result<u32, String> {
    whole(value, 0, u64::from(u32::MAX)).map(|n| n as u32)
}

/// A rank that may lie beyond a `u32` (the error then says which world
/// size would hold it).
pub fn whole_u64(value: &str) -> Result<u64, String> {
    whole(value, 0, u64::MAX)
}

/// A count that must be at least 1 (`--top`, `--max-ranks`).
pub fn at_least_one(value: &str) -> Result<u32, String> {
    whole(value, 1, u64::from(u32::MAX)).map(|n| n as u32)
}

/// Parses one `--hierarchical-cp` value: sizes separated by commas.
pub fn parse_levels(value: &str) -> Result<Vec<u32>, String> {
    value
        .split(',')
        .map(whole_u32)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{value:?} is not a comma-separated list of sizes: {e}"))
}

/// A re-layout policy by its name (`drop-replica`, `spare`, `next-grid`,
/// `shift-ranks`, `fill-gaps`).
pub fn policy(value: &str) -> Result<rank_layout::relayout::Policy, String> {
    value.trim().parse().map_err(|_| {
        "expected drop-replica, spare, next-grid, shift-ranks or fill-gaps".to_string()
    })
}
