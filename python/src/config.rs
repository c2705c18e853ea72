//! Keyword arguments to a [`Config`], and a [`Config`] back to a dict: the
//! keys and defaults of the JSON configuration (`--config`).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use rank_layout::{Config, ExpertLayout, Order, Sizes};

use crate::error::{OrRaise, raise};
use crate::value::{describe, offset, size, string};

/// Every key, in the JSON configuration's order.
pub(crate) const KEYS: [&str; 16] = [
    "tp",
    "cp",
    "ep",
    "dp",
    "pp",
    "world_size",
    "order",
    "rank_offset",
    "encoder_tp",
    "encoder_pp",
    "expert_layout",
    "etp",
    "hierarchical_cp",
    "dist_opt_instances",
    "gtp_remat",
    "expert_gtp_remat",
];

/// The configuration of `kwargs`: every key optional, `None` the same as
/// leaving the key out, an unknown key an error (as in the JSON file).
pub(crate) fn from_kwargs(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Config> {
    let mut config = Config::default();
    let Some(kwargs) = kwargs else {
        return Ok(config);
    };
    for (key, value) in kwargs.iter() {
        let key: String = key.extract()?;
        if value.is_none() {
            if !KEYS.contains(&key.as_str()) {
                return Err(unknown(&key));
            }
            continue;
        }
        let v = &value;
        match key.as_str() {
            "tp" => config.tp = size("tp", v)?,
            "cp" => config.cp = size("cp", v)?,
            "ep" => config.ep = size("ep", v)?,
            "dp" => config.dp = Some(size("dp", v)?),
            "pp" => config.pp = size("pp", v)?,
            "world_size" => config.world_size = Some(size("world_size", v)?),
            "order" => {
                config.order = string("order", "'tp-cp-ep-dp-pp'", v)?
                    .parse::<Order>()
                    .or_raise()?;
            }
            "rank_offset" => config.rank_offset = offset("rank_offset", v)?,
            "encoder_tp" => config.encoder_tp = Some(size("encoder_tp", v)?),
            "encoder_pp" => config.encoder_pp = Some(size("encoder_pp", v)?),
            "expert_layout" => {
                config.expert_layout = string("expert_layout", "'nested' or 'folded'", v)?
                    .parse::<ExpertLayout>()
                    .or_raise()?;
            }
            "etp" => config.etp = Some(size("etp", v)?),
            "hierarchical_cp" => config.hierarchical_cp = levels(v)?,
            "dist_opt_instances" => {
                config.dist_opt_instances = size("dist_opt_instances", v)?;
            }
            "gtp_remat" => config.gtp_remat = size("gtp_remat", v)?,
            "expert_gtp_remat" => config.expert_gtp_remat = size("expert_gtp_remat", v)?,
            _ => return Err(unknown(&key)),
        }
    }
    Ok(config)
}

/// The hierarchical context-parallel levels: a sequence of sizes (not a str).
fn levels(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
    let not_a_list = || {
        raise(format!(
            "hierarchical_cp must be a list of ints such as [2, 2], got {}",
            describe(obj)
        ))
    };
    if obj.is_instance_of::<PyString>() {
        return Err(not_a_list());
    }
    let items = obj.try_iter().map_err(|_| not_a_list())?;
    items
        .enumerate()
        .map(|(i, item)| size(&format!("hierarchical_cp[{i}]"), &item?))
        .collect()
}

/// The crate's message for a key the configuration does not have.
fn unknown(key: &str) -> PyErr {
    crate::error::from_crate(rank_layout::Error::InvalidConfig {
        message: format!("unknown key {key:?} (expected one of {})", KEYS.join(", ")),
    })
}

/// `config` as a dict of every key (`None` where a key is unset).
pub(crate) fn to_dict<'py>(py: Python<'py>, config: &Config) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("tp", config.tp)?;
    d.set_item("cp", config.cp)?;
    d.set_item("ep", config.ep)?;
    d.set_item("dp", config.dp)?;
    d.set_item("pp", config.pp)?;
    d.set_item("world_size", config.world_size)?;
    d.set_item("order", config.order.to_string())?;
    d.set_item("rank_offset", config.rank_offset)?;
    d.set_item("encoder_tp", config.encoder_tp)?;
    d.set_item("encoder_pp", config.encoder_pp)?;
    d.set_item("expert_layout", config.expert_layout.to_string())?;
    d.set_item("etp", config.etp)?;
    d.set_item("hierarchical_cp", config.hierarchical_cp.clone())?;
    d.set_item("dist_opt_instances", config.dist_opt_instances)?;
    d.set_item("gtp_remat", config.gtp_remat)?;
    d.set_item("expert_gtp_remat", config.expert_gtp_remat)?;
    Ok(d)
}

/// `{"tp", "cp", "ep", "dp", "pp", "etp", "edp", "gtp_remat", "egtp_remat"}`
/// of one grid.
pub(crate) fn sizes<'py>(py: Python<'py>, s: &Sizes) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, value) in [
        ("tp", s.tp),
        ("cp", s.cp),
        ("ep", s.ep),
        ("dp", s.dp),
        ("pp", s.pp),
        ("etp", s.etp),
        ("edp", s.edp),
        ("gtp_remat", s.gtp_remat),
        ("egtp_remat", s.egtp_remat),
    ] {
        d.set_item(name, value)?;
    }
    Ok(d)
}
