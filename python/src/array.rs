//! A kind's groups as a NumPy array, written by the crate's fill.

use numpy::{PyArray1, PyArray2, PyArrayMethods};
use pyo3::exceptions::PyMemoryError;
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
    crate::memory::check_array(groups.member_count())?;
    crate::lists::numpy_loaded(py)?;
    let members = py
        .detach(move || groups.table().map(|t| t.into_members()))
        .or_raise()?;
    PyArray1::from_vec(py, members).reshape([count, width])
}

/// Every kind of `kinds` as a `uint32` array of shape (groups, group size),
/// all views of **one** allocation filled by the crate without the GIL
/// and handed to NumPy without a copy. (A NumPy allocation of that size
/// gets huge-page advice, whose compaction made it five times slower when
/// every array is kept: measured, not used.)
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
    crate::lists::numpy_loaded(py)?;
    let len = usize::try_from(total)
        .map_err(|_| PyMemoryError::new_err(format!("{total} members do not fit this machine")))?;
    let members = py
        .detach(|| -> Result<Vec<u32>, rank_layout::Error> {
            let mut all: Vec<u32> = Vec::new();
            all.try_reserve_exact(len)
                .map_err(|_| rank_layout::Error::OutOfMemory {
                    members: total,
                    bytes: total.saturating_mul(4),
                })?;
            // Each kind's part is zeroed right before it is filled, so the
            // fill finds it in the cache (zeroing all 14 parts first made
            // the fill a second pass over memory).
            for (_, groups) in kinds {
                let at = all.len();
                let n = usize::try_from(groups.member_count()).unwrap_or(usize::MAX);
                all.resize(at.saturating_add(n).min(len), 0);
                let part = all.get_mut(at..).unwrap_or_default();
                groups.clone().fill(part)?;
            }
            Ok(all)
        })
        .or_raise()?;
    let base = PyArray1::from_vec(py, members);
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
