//! One rank's answers as Python dicts: its coordinates, and per kind its
//! groups with color, key and members.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use rank_layout::{Layout, Membership};

use crate::error::OrRaise;

/// `{"color": .., "key": .., "members": [..]}` of one membership.
pub(crate) fn membership<'py>(py: Python<'py>, m: &Membership) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("color", m.color)?;
    d.set_item("key", m.key)?;
    crate::memory::check_ints(m.group.len() as u64)?;
    d.set_item(
        "members",
        crate::lists::ints(py, m.group.try_to_vec().or_raise()?)?,
    )?;
    Ok(d)
}

/// A list of [`membership`] dicts.
pub(crate) fn memberships<'py>(py: Python<'py>, ms: &[Membership]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for m in ms {
        list.append(membership(py, m)?)?;
    }
    Ok(list)
}

/// The rank card: `{"rank", "part", "coord", "groups"}`.
pub(crate) fn card<'py>(
    py: Python<'py>,
    layout: &Layout,
    rank: u32,
) -> PyResult<Bound<'py, PyDict>> {
    let p = layout.placement(rank).or_raise()?;
    let coord = PyDict::new(py);
    let sizes = layout.sizes();
    for (axis, value) in p.named_with_gtp() {
        let shown = match axis {
            rank_layout::Axis::GtpRemat => sizes.gtp_remat > 1,
            rank_layout::Axis::EgtpRemat => sizes.egtp_remat > 1,
            _ => true,
        };
        if shown {
            coord.set_item(axis.name(), value)?;
        }
    }
    let groups = PyDict::new(py);
    for kind in layout.kinds() {
        let ms = layout.memberships(rank, *kind).or_raise()?;
        groups.set_item(kind.to_string(), memberships(py, &ms)?)?;
    }
    let stage = layout.stage(rank).or_raise()?;
    let pipeline = PyDict::new(py);
    pipeline.set_item("stage", stage.stage)?;
    pipeline.set_item("stages", stage.stages)?;
    pipeline.set_item("prev", layout.pipeline_prev(rank).or_raise()?)?;
    pipeline.set_item("next", layout.pipeline_next(rank).or_raise()?)?;
    let d = PyDict::new(py);
    d.set_item("rank", rank)?;
    d.set_item("part", p.part.name())?;
    d.set_item("coord", coord)?;
    d.set_item("pipeline", pipeline)?;
    d.set_item("groups", groups)?;
    Ok(d)
}
