//! The `kubectl_nodes` target: `kubectl get nodes -o json`.

use rank_layout::machine::{DEFAULT_CLIQUE_LABEL, Hosts};

use super::shared::{check_hosts, check_refusal};

/// The bytes as `kubectl get nodes -o json`: nothing panics, a refusal is a
/// host table error; a table read is canonical, at most one key per host,
/// and a host with no GPU is not healthy.
pub fn kubectl_nodes(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Hosts::parse_kubectl_nodes(text, DEFAULT_CLIQUE_LABEL) {
        Ok(hosts) => {
            check_hosts(&hosts);
            for h in &hosts {
                assert!(h.keys.len() <= 1, "{h:?}");
                assert!(h.gpus.is_some() || !h.healthy, "{h:?}");
            }
        }
        Err(e) => check_refusal(&e),
    }
}
