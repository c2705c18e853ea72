//! The `topology_conf` target: Slurm's `topology.conf`.

use rank_layout::machine::Hosts;

use super::shared::{check_topology, too_many_names};

/// The bytes (unless their hostlists stand for too many names) as
/// `topology.conf`: nothing panics, a refusal is a host table error; a
/// table read is canonical, every host healthy with no GPUs given and known
/// keys (each listed node is under a block or a switch), at most 64 levels
/// deep; restricted to its first host, it is that host.
pub fn topology_conf(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if too_many_names(text) {
        return;
    }
    let Some(hosts) = check_topology(text, Hosts::parse_topology_conf(text), 64) else {
        return;
    };
    if let Some(first) = hosts.get(0) {
        if let Ok(one) = hosts.restrict_to(&first.name) {
            assert_eq!(one.iter().collect::<Vec<_>>(), [first]);
        }
    }
}
