//! Python values to the crate's scalars (`u32`, `str`), with our own errors.
//!
//! Arguments arrive as plain Python objects, never as `u32` parameters, so
//! that pyo3 never raises its own `TypeError` or `OverflowError`: every
//! value no `u32` holds (a float, a string, a bool, a negative or huge int)
//! becomes a [`LayoutError`](crate::error::LayoutError) naming the argument.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyString};
use rank_layout::{Error, Kind};

use crate::error::raise;

/// Why a Python object is not a `u32`.
pub(crate) enum NotU32 {
    /// Not an integer (a float, a string, a bool, None, ...): its type and value.
    Type(String),
    /// A negative integer, in decimal.
    Negative(String),
    /// An integer of 2^32 or more, in decimal.
    TooBig(String),
}

/// `obj` as a `u32`: a Python `int` or anything with `__index__` (NumPy
/// integers), but not a `bool`.
pub(crate) fn u32_of(obj: &Bound<'_, PyAny>) -> Result<u32, NotU32> {
    let type_error = || NotU32::Type(describe(obj));
    if obj.is_instance_of::<PyBool>() {
        return Err(type_error());
    }
    let int = match obj.cast::<PyInt>() {
        Ok(int) => int.clone(),
        Err(_) => obj
            .call_method0("__index__")
            .ok()
            .and_then(|i| i.cast_into::<PyInt>().ok())
            .ok_or_else(type_error)?,
    };
    int.extract::<u32>().map_err(|_| {
        let text = int.str().map(|s| s.to_string()).unwrap_or_default();
        if int.lt(0).unwrap_or(false) {
            NotU32::Negative(text)
        } else {
            NotU32::TooBig(text)
        }
    })
}

/// `obj`'s type and value, for a message: `float 2.5`, `str '4'`.
pub(crate) fn describe(obj: &Bound<'_, PyAny>) -> String {
    let type_name = obj
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".into());
    let mut value = obj
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "?".into());
    if value.chars().count() > 60 {
        value = value.chars().take(57).chain("...".chars()).collect();
    }
    format!("{type_name} {value}")
}

/// A size (`tp`, `world_size`, ...): 0 passes, the crate reports it.
pub(crate) fn size(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<u32> {
    u32_of(obj).map_err(|e| match e {
        NotU32::Type(what) => raise(format!("{name} must be an int, got {what}")),
        NotU32::Negative(v) => raise(format!("{name} must be at least 1, got {v}")),
        NotU32::TooBig(v) => too_big(name, &v),
    })
}

/// A rank number such as `rank_offset`: at least 0.
pub(crate) fn offset(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<u32> {
    u32_of(obj).map_err(|e| match e {
        NotU32::Type(what) => raise(format!("{name} must be an int, got {what}")),
        NotU32::Negative(v) => raise(format!("{name} must be at least 0, got {v}")),
        NotU32::TooBig(v) => too_big(name, &v),
    })
}

/// An index (a split round, a group index); `bound` writes the error for a
/// value past the end.
pub(crate) fn index(
    name: &str,
    obj: &Bound<'_, PyAny>,
    bound: impl FnOnce(String) -> PyErr,
) -> PyResult<u32> {
    u32_of(obj).map_err(|e| match e {
        NotU32::Type(what) => raise(format!("{name} must be an int, got {what}")),
        NotU32::Negative(v) | NotU32::TooBig(v) => bound(v),
    })
}

/// A split round of `kind`, built in `rounds` rounds.
pub(crate) fn round_of(kind: Kind, rounds: u32, obj: &Bound<'_, PyAny>) -> PyResult<u32> {
    index("round", obj, |r| {
        raise(format!(
            "kind {kind} is built in {rounds} rounds, round {r} does not exist"
        ))
    })
}

/// The crate's overflow message for a value past `u32`.
fn too_big(name: &str, value: &str) -> PyErr {
    crate::error::from_crate(Error::Overflow {
        what: format!("{name} = {value}"),
    })
}

/// `obj` as a `str`, or an error naming `name` and what is expected.
pub(crate) fn string(name: &str, example: &str, obj: &Bound<'_, PyAny>) -> PyResult<String> {
    obj.cast::<PyString>()
        .map_err(|_| {
            raise(format!(
                "{name} must be a str such as {example}, got {}",
                describe(obj)
            ))
        })
        .and_then(|s| s.extract::<String>())
}
