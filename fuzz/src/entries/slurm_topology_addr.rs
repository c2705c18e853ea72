//! The `slurm_topology_addr` target: `SLURM_TOPOLOGY_ADDR` lines.

use rank_layout::machine::Hosts;

use super::shared::{check_hosts, check_refusal};

/// The bytes as `SLURM_TOPOLOGY_ADDR=` lines: nothing panics, a refusal is
/// a host table error; a table read is canonical and not empty, every host
/// healthy with no GPUs given, and each host's name and keys appear in the
/// text.
pub fn slurm_topology_addr(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Hosts::parse_slurm_topology_addr(text) {
        Ok(hosts) => {
            check_hosts(&hosts);
            assert!(!hosts.is_empty());
            for h in &hosts {
                assert!(h.healthy && h.gpus.is_none(), "{h:?}");
                assert!(text.contains(&h.name), "{h:?}");
                assert!(h.keys.iter().all(|k| text.contains(k.as_str())), "{h:?}");
            }
        }
        Err(e) => check_refusal(&e),
    }
}
