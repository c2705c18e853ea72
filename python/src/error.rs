//! `rank_layout.LayoutError`: the one exception of the package, and the
//! conversion of the crate's errors into it.

use pyo3::create_exception;
use pyo3::exceptions::{PyMemoryError, PyValueError};
use pyo3::prelude::*;
use rank_layout::Error;

create_exception!(
    rank_layout,
    LayoutError,
    PyValueError,
    "An invalid layout, or a question a layout cannot answer.\n\n\
     A ValueError whose message is rank-layout's own: it names the values \
     at fault and, where it helps, what to do instead.\n\n\
     >>> import rank_layout\n\
     >>> try:\n\
     ...     rank_layout.Layout(tp=4, world_size=10)\n\
     ... except rank_layout.LayoutError as e:\n\
     ...     print(e)\n\
     world_size (10) is not divisible by tp*cp*pp = 4"
);

/// The exception for a crate error: its message, unchanged, except where it
/// names a Rust call that is spelled differently in Python. Memory that
/// cannot be allocated is a `MemoryError`, as everywhere in Python.
pub(crate) fn from_crate(error: Error) -> PyErr {
    let message = match error {
        e @ Error::OutOfMemory { .. } => return PyMemoryError::new_err(e.to_string()),
        Error::OverlappingKind { kind, rounds, .. } => format!(
            "groups of kind {kind} overlap (a rank can be in {rounds} of them); \
             use split(rank, kind, round), splits(rank) or memberships(rank, kind)"
        ),
        other => other.to_string(),
    };
    LayoutError::new_err(message)
}

/// The exception for a problem found by the binding itself (a value of the
/// wrong Python type, an integer no `u32` holds).
pub(crate) fn raise(message: String) -> PyErr {
    LayoutError::new_err(message)
}

/// `?` on the crate's results: its errors become [`LayoutError`].
pub(crate) trait OrRaise<T> {
    /// The value, or the crate's error as a [`LayoutError`].
    fn or_raise(self) -> PyResult<T>;
}

impl<T> OrRaise<T> for Result<T, Error> {
    fn or_raise(self) -> PyResult<T> {
        self.map_err(from_crate)
    }
}
