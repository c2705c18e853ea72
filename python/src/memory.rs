//! Whether the members asked for fit this machine's memory as Python
//! objects, checked before any is made: a list of two billion ranks fails
//! as `MemoryError` instead of taking the machine (or the interpreter) down.

use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;

/// Bytes one rank takes in a Python list: the list's pointer and an `int`
/// object (28 bytes on 64-bit CPython), rounded up.
const BYTES_PER_INT: u64 = 40;

/// The memory the system can still give, from `/proc/meminfo`'s
/// `MemAvailable` (Linux); `None` where it cannot be read.
fn available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// `Ok` when `members` ranks fit as Python ints in the memory available
/// (always where it cannot be read: the allocations are fallible then).
///
/// # Errors
/// `MemoryError` naming the count and the memory they would need.
pub(crate) fn check_ints(members: u64) -> PyResult<()> {
    check(
        members,
        BYTES_PER_INT,
        "Python ints",
        "use groups_array (4 bytes a rank), or ask for one rank's answers (split, splits)",
    )
}

/// `Ok` when `members` ranks fit in the memory available as a `uint32`
/// array.
///
/// # Errors
/// `MemoryError` naming the count and the memory they would need.
pub(crate) fn check_array(members: u64) -> PyResult<()> {
    check(
        members,
        4,
        "a uint32 array",
        "ask for fewer kinds, or one rank's answers (split, splits)",
    )
}

fn check(members: u64, each: u64, what: &str, instead: &str) -> PyResult<()> {
    let needed = members.saturating_mul(each);
    match available() {
        Some(free) if needed > free => Err(PyMemoryError::new_err(format!(
            "{members} ranks as {what} need about {:.1} GB, more than the {:.1} GB available; {instead}",
            needed as f64 / 1e9,
            free as f64 / 1e9
        ))),
        _ => Ok(()),
    }
}
