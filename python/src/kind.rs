//! Kind names (`"tp"`, `"dp-cp"`, `"embd"`) to the crate's [`Kind`].

use pyo3::prelude::*;
use rank_layout::Kind;

use crate::error::OrRaise;
use crate::value::string;

/// The kind named by `obj`, a `str` parsed by the crate (case-insensitive,
/// tokens in any order).
pub(crate) fn kind(obj: &Bound<'_, PyAny>) -> PyResult<Kind> {
    string("kind", "'tp' or 'dp-cp'", obj)?
        .parse::<Kind>()
        .or_raise()
}
