//! `rank_layout._native`: the compiled half of the `rank_layout` Python
//! package. It converts types and errors and calls the `rank-layout` crate;
//! everything it computes, the crate computes. The pure-Python half
//! (`python/rank_layout`) adds `Layout.from_megatron_args` and
//! `rank_layout.torch`.
//!
//! - [`error`]: `LayoutError` and the crate's errors;
//! - [`value`]: Python values to `u32` and `str`, with our own errors;
//! - [`config`]: keyword arguments to a `Config`, and back to dicts;
//! - [`kind`]: kind names;
//! - [`layout`]: the `Layout` class;
//! - [`array`]: `groups_array`, NumPy arrays filled by the crate;
//! - [`card`]: a rank's answers as dicts;
//! - [`lists`]: ranks as Python lists, every allocation fallible;
//! - [`memory`]: the memory a list may take, checked before it is made.
//! - [`modules`]: the `Modules` class (modules, edges, bridge plans);
//! - [`machine`]: `place`, a layout or mesh placed on a host table.
//! - [`relayout`]: `relayout`, the re-layout after a failure.
//! - [`reshard`]: `reshard`, the plan moving a model's tensors between
//!   layouts.
//! - [`inference_shards`]: the `InferenceShards` class (Megatron-Core 0.19's
//!   `--inference-shards`).
#![forbid(unsafe_code)]
// The doc comments of `#[pyclass]` and `#[pymethods]` items are Python
// docstrings (reST with doctest examples, run by python/tests), not Markdown.
#![allow(clippy::doc_lazy_continuation, clippy::doc_markdown)]

mod array;
mod card;
mod config;
mod error;
mod inference_shards;
mod kind;
mod layout;
mod lists;
mod machine;
mod megatron;
mod memory;
mod mesh;
mod modules;
mod relayout;
mod reshard;
mod value;

use pyo3::prelude::*;

/// The compiled half of ``rank_layout``: use the ``rank_layout`` package.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("LayoutError", m.py().get_type::<error::LayoutError>())?;
    m.add_class::<layout::PyLayout>()?;
    m.add("CONFIG_KEYS", config::KEYS.to_vec())?;
    m.add_class::<megatron::PyRankGenerator>()?;
    m.add_class::<megatron::PyCoreRankGenerator>()?;
    m.add_class::<mesh::PyMesh>()?;
    m.add_class::<modules::PyModules>()?;
    m.add_class::<inference_shards::PyInferenceShards>()?;
    m.add_class::<inference_shards::PyInferenceShard>()?;
    m.add_function(wrap_pyfunction!(mesh::torchtitan_mesh, m)?)?;
    m.add_function(wrap_pyfunction!(megatron::megatron_config, m)?)?;
    m.add_function(wrap_pyfunction!(megatron::audit, m)?)?;
    m.add_function(wrap_pyfunction!(machine::place, m)?)?;
    m.add_class::<relayout::PyRelayout>()?;
    m.add_function(wrap_pyfunction!(relayout::relayout, m)?)?;
    m.add_class::<reshard::PyReshard>()?;
    m.add_function(wrap_pyfunction!(reshard::reshard, m)?)?;
    // Named apart from the package's `MEGATRON_ARGS` (argument -> key), a
    // dict built from these rows: one `MEGATRON_ARGS` in Python.
    m.add("MEGATRON_TABLE", megatron::table(m.py())?)?;
    m.add_function(wrap_pyfunction!(memory::memory_limits, m)?)?;
    m.add_function(wrap_pyfunction!(memory::check_ints_in_cgroups, m)?)?;
    Ok(())
}
