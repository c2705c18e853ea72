//! A kind's groups as a NumPy array, written by the crate's fill.

use numpy::{PyArray1, PyArray2, PyArrayMethods};
use pyo3::prelude::*;
use rank_layout::Groups;

use crate::error::{OrRaise, raise};

/// The groups as a C-contiguous `uint32` array of shape (groups, group
/// size): one allocation, filled by [`Groups::fill`] without the GIL, then
/// handed to NumPy without a copy.
///
/// # Errors
/// A [`LayoutError`](crate::error::LayoutError) when the groups do not all
/// have one size (an encoder + decoder layout's encoder and decoder groups).
pub(crate) fn array_of<'py>(
    py: Python<'py>,
    kind: &str,
    groups: Groups<'_>,
) -> PyResult<Bound<'py, PyArray2<u32>>> {
    let count = groups.len();
    // A kind's groups come in at most two runs of one size (the encoder's
    // groups, then the decoder's), so the first and the last tell.
    let width = match (groups.clone().next(), groups.clone().next_back()) {
        (Some(first), Some(last)) if first.len() != last.len() => {
            return Err(raise(format!(
                "the groups of kind {kind} have two sizes ({} and {}): groups_array needs one; use groups(kind)",
                first.len(),
                last.len()
            )));
        }
        (Some(first), _) => first.len(),
        _ => 0,
    };
    let members = py
        .detach(move || groups.table().map(|t| t.into_members()))
        .or_raise()?;
    PyArray1::from_vec(py, members).reshape([count, width])
}
