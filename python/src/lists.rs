//! Ranks as Python lists of ints, every allocation fallible.
//!
//! PyO3 makes an int with `PyLong_FromLong` and panics when it returns
//! null, so a list of a billion ranks that the memory cannot hold ended in
//! `PanicException: PyObject pointer is null` (a `BaseException`), or a
//! hang. Here the members go, without a copy, into a NumPy `uint32` array
//! whose `tolist` makes the ints and lists and raises `MemoryError` when
//! one cannot be allocated; the members themselves are collected with
//! `try_reserve`. NumPy itself is imported first where a failure is an
//! exception ([`numpy_loaded`]).

use numpy::{PyArray1, PyArrayMethods};
use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyList;
use rank_layout::GroupTable;

/// Whether NumPy's array module has been imported by [`numpy_loaded`].
static NUMPY: PyOnceLock<()> = PyOnceLock::new();

/// `Ok` once NumPy's array module is imported. The `numpy` crate imports
/// it on first use and panics when that fails, as it does in a process at
/// its address-space limit (NumPy's extension cannot be mapped), where an
/// answer too small to be checked against the limits ([`crate::memory`])
/// could be the first. Every array is made after this.
///
/// # Errors
/// NumPy's `ImportError`.
pub(crate) fn numpy_loaded(py: Python<'_>) -> PyResult<()> {
    NUMPY
        .get_or_try_init(py, || numpy::get_array_module(py).map(drop))
        .copied()
}

/// `MemoryError` for `members` ranks that cannot be collected.
fn no_memory(members: usize) -> PyErr {
    PyMemoryError::new_err(format!(
        "cannot allocate {} bytes for {members} members (collect fewer, or fill a buffer of yours)",
        members.saturating_mul(4)
    ))
}

/// `members` copied into a new vector, or `MemoryError`.
pub(crate) fn try_copy(members: &[u32]) -> PyResult<Vec<u32>> {
    let mut out = Vec::new();
    out.try_reserve_exact(members.len())
        .map_err(|_| no_memory(members.len()))?;
    out.extend_from_slice(members);
    Ok(out)
}

/// `members` as a list of ints.
///
/// # Errors
/// `MemoryError` when an int or the list cannot be allocated.
pub(crate) fn ints(py: Python<'_>, members: Vec<u32>) -> PyResult<Bound<'_, PyList>> {
    numpy_loaded(py)?;
    Ok(PyArray1::from_vec(py, members)
        .call_method0("tolist")?
        .cast_into::<PyList>()?)
}

/// `members`, `count` groups of `width` ranks one after another, as a list
/// of lists of ints.
///
/// # Errors
/// `MemoryError` when an int or a list cannot be allocated.
pub(crate) fn rows(
    py: Python<'_>,
    members: Vec<u32>,
    count: usize,
    width: usize,
) -> PyResult<Bound<'_, PyList>> {
    numpy_loaded(py)?;
    Ok(PyArray1::from_vec(py, members)
        .reshape([count, width])?
        .call_method0("tolist")?
        .cast_into::<PyList>()?)
}

/// Every group of `table` as a list of lists of ints, in order (groups of
/// two sizes, an encoder's and a decoder's, as two runs).
///
/// # Errors
/// `MemoryError` when the groups cannot be held.
pub(crate) fn table_rows(py: Python<'_>, table: GroupTable) -> PyResult<Bound<'_, PyList>> {
    let count = table.len();
    if let Some(width) = table.group_len() {
        return rows(py, table.into_members(), count, width);
    }
    // The runs of one size (two: an encoder's groups, then a decoder's).
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for group in &table {
        match runs.last_mut() {
            Some((n, width)) if *width == group.len() => *n += 1,
            _ => runs.push((1, group.len())),
        }
    }
    let out = PyList::empty(py);
    let mut groups = table.iter();
    for (n, width) in runs {
        let total = n.saturating_mul(width);
        let mut members = Vec::new();
        members
            .try_reserve_exact(total)
            .map_err(|_| no_memory(total))?;
        for group in groups.by_ref().take(n) {
            members.extend_from_slice(group);
        }
        out.call_method1("extend", (rows(py, members, n, width)?,))?;
    }
    Ok(out)
}
