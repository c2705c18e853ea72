//! A kind's groups as a NumPy array, written by the crate's fill.

use numpy::{PyArray1, PyArray2, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PySlice};
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
    let width = width_of(kind, &groups)?;
    let members = py
        .detach(move || groups.table().map(|t| t.into_members()))
        .or_raise()?;
    PyArray1::from_vec(py, members).reshape([count, width])
}

/// Every kind of `kinds` as a `uint32` array of shape (groups, group size),
/// all views of **one** NumPy allocation filled by the crate without the
/// GIL: one set of page faults (NumPy advises huge pages for large
/// arrays) instead of one per kind, which is what costs most when every
/// array is kept.
///
/// # Errors
/// A [`LayoutError`](crate::error::LayoutError) for a kind whose groups
/// have two sizes, or the crate's error for a kind the layout lacks.
pub(crate) fn arrays_of<'py>(
    py: Python<'py>,
    kinds: &[(String, Groups<'_>)],
) -> PyResult<Bound<'py, PyDict>> {
    let mut shapes = Vec::with_capacity(kinds.len());
    let mut total = 0u64;
    for (kind, groups) in kinds {
        let width = width_of(kind, groups)?;
        total += groups.member_count();
        shapes.push((groups.len(), width));
    }
    crate::memory::check_array(total)?;
    let len = usize::try_from(total)
        .map_err(|_| raise(format!("{total} members do not fit this machine")))?;
    let base = PyArray1::<u32>::zeros(py, len, false);
    {
        let mut rw = base.readwrite();
        let all = rw.as_slice_mut().map_err(|e| raise(e.to_string()))?;
        py.detach(|| -> Result<(), rank_layout::Error> {
            let mut at = 0usize;
            for (_, groups) in kinds {
                let rest = all.get_mut(at..).unwrap_or_default();
                at += groups.clone().fill(rest)?;
            }
            Ok(())
        })
        .or_raise()?;
    }
    let out = PyDict::new(py);
    let mut at = 0usize;
    for ((kind, _), (count, width)) in kinds.iter().zip(shapes) {
        let n = count * width;
        let view = base
            .get_item(PySlice::new(py, at as isize, (at + n) as isize, 1))?
            .call_method1("reshape", ((count, width),))?;
        out.set_item(kind, view)?;
        at += n;
    }
    Ok(out)
}

/// The one size of every group of `kind`.
fn width_of(kind: &str, groups: &Groups<'_>) -> PyResult<usize> {
    match (groups.clone().next(), groups.clone().next_back()) {
        (Some(first), Some(last)) if first.len() != last.len() => Err(raise(format!(
            "the groups of kind {kind} have two sizes ({} and {}): an array needs one; use groups(kind)",
            first.len(),
            last.len()
        ))),
        (Some(first), _) => Ok(first.len()),
        _ => Ok(0),
    }
}
