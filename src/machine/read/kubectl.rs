//! Kubernetes nodes (`kubectl get nodes -o json`), with the NVLink domain
//! in a node label.

use serde_json::Value;

use crate::error::Result;
use crate::machine::hosts::{Host, Hosts, bad};

/// The label NVIDIA's GPU operator (GPU feature discovery) puts the GPUs'
/// clique in, `"<ClusterUUID>.<CliqueId>"`.
pub const DEFAULT_CLIQUE_LABEL: &str = "nvidia.com/gpu.clique";

impl Hosts {
    /// Reads `kubectl get nodes -o json` (a `List` of nodes, or one `Node`):
    /// a host per node, named by `metadata.name`; its domain is the value
    /// of the node label `label` (usually [`DEFAULT_CLIQUE_LABEL`];
    /// unknown when absent or empty); its GPUs are
    /// `status.allocatable["nvidia.com/gpu"]`. It is unhealthy when its
    /// `Ready` condition is not `True`, it is unschedulable
    /// (`spec.unschedulable`, as `kubectl cordon` sets), or it has no GPU.
    /// Needs the feature `serde`.
    ///
    /// ```
    /// use rank_layout::machine::{DEFAULT_CLIQUE_LABEL, Hosts};
    /// let json = r#"{"kind": "List", "items": [{"metadata": {"name": "gb01",
    ///   "labels": {"nvidia.com/gpu.clique": "c1.7"}},
    ///   "status": {"allocatable": {"nvidia.com/gpu": "4"},
    ///              "conditions": [{"type": "Ready", "status": "True"}]}}]}"#;
    /// let hosts = Hosts::parse_kubectl_nodes(json, DEFAULT_CLIQUE_LABEL)?;
    /// let gb01 = hosts.get(0).unwrap();
    /// assert_eq!((gb01.domain(), gb01.gpus, gb01.healthy), (Some("c1.7"), Some(4), true));
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::BadHostTable`](crate::Error::BadHostTable): JSON that does
    /// not read (with its line), not a node list, a node without a name, a
    /// GPU count that is not an integer, a name given twice (line 0, the
    /// node named in the text).
    pub fn parse_kubectl_nodes(json: &str, label: &str) -> Result<Hosts> {
        let doc: Value =
            serde_json::from_str(json).map_err(|e| bad(e.line(), &e.to_string(), "not JSON"))?;
        let nodes = match (doc.get("kind").and_then(Value::as_str), doc.get("items")) {
            (Some("Node"), _) => std::slice::from_ref(&doc),
            (_, Some(Value::Array(items))) => items.as_slice(),
            _ => {
                return Err(bad(
                    0,
                    doc.get("kind").and_then(Value::as_str).unwrap_or(""),
                    "expected `kubectl get nodes -o json` (a List with items, or a Node)",
                ));
            }
        };
        let mut rows = Vec::with_capacity(nodes.len());
        for (i, node) in nodes.iter().enumerate() {
            let name = node
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .ok_or_else(|| bad(0, &format!("items[{i}]"), "a node without metadata.name"))?;
            let keys = match node
                .get("metadata")
                .and_then(|m| m.get("labels"))
                .and_then(|l| l.get(label))
            {
                None => Vec::new(),
                Some(Value::String(s)) if s.is_empty() => Vec::new(),
                Some(Value::String(s)) => vec![s.clone()],
                Some(other) => {
                    return Err(bad(
                        0,
                        &other.to_string(),
                        &format!("node {name:?}: label {label:?} is not a string"),
                    ));
                }
            };
            let gpus = match node
                .get("status")
                .and_then(|s| s.get("allocatable"))
                .and_then(|a| a.get("nvidia.com/gpu"))
            {
                None => 0,
                Some(Value::String(s)) => s.parse::<u32>().map_err(|_| {
                    bad(
                        0,
                        s,
                        &format!("node {name:?}: allocatable nvidia.com/gpu is not an integer"),
                    )
                })?,
                Some(Value::Number(n)) => n
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        bad(
                            0,
                            &n.to_string(),
                            &format!("node {name:?}: allocatable nvidia.com/gpu is not an integer"),
                        )
                    })?,
                Some(other) => {
                    return Err(bad(
                        0,
                        &other.to_string(),
                        &format!("node {name:?}: allocatable nvidia.com/gpu is not an integer"),
                    ));
                }
            };
            let ready = node
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|conditions| {
                    conditions.iter().any(|c| {
                        c.get("type").and_then(Value::as_str) == Some("Ready")
                            && c.get("status").and_then(Value::as_str) == Some("True")
                    })
                });
            let unschedulable =
                node.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true);
            rows.push((
                0,
                Host {
                    name: name.to_string(),
                    gpus: (gpus > 0).then_some(gpus),
                    healthy: ready && !unschedulable && gpus > 0,
                    keys,
                },
            ));
        }
        Hosts::checked(rows)
    }
}
