//! The `scontrol_topology` target: `scontrol show topology` output.

use rank_layout::machine::Hosts;

use super::shared::{check_topology, too_many_names};

/// The bytes (unless their hostlists stand for too many names) as `scontrol
/// show topology` output: nothing panics, a refusal is a host table error;
/// a table read is canonical, every host healthy with known keys.
pub fn scontrol_topology(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if too_many_names(text) {
        return;
    }
    // Aggregated blocks add outer keys: at most one per block level.
    check_topology(text, Hosts::parse_scontrol_topology(text), usize::MAX);
}
