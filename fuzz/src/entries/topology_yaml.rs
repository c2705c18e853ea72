//! The `topology_yaml` target: Slurm's `topology.yaml` (and the YAML
//! subset reader under it).

use rank_layout::machine::Hosts;

use super::shared::{check_topology, too_many_names};

/// The bytes (unless their hostlists stand for too many names) as
/// `topology.yaml`, read for the default topology and for one named
/// `topo2`: nothing panics (deep nesting included), a refusal is a host
/// table error; a table read is canonical, every host healthy with known
/// keys.
pub fn topology_yaml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if too_many_names(text) {
        return;
    }
    for name in [None, Some("topo2")] {
        check_topology(text, Hosts::parse_topology_yaml(text, name), 64);
    }
}
