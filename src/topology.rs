//! Where ranks run: GPUs per node and nodes per domain.

use crate::error::{Error, Result};

/// The machine a layout runs on: `gpus_per_node` GPUs per node (ranks
/// `[n*G, (n+1)*G)` are node `n`) and, optionally, `nodes_per_domain` nodes
/// per domain (an NVLink domain or a rack: a GB200 NVL72 rack is 18 nodes
/// of 4 GPUs, `Topology::new(4, Some(18))`).
///
/// A rank's node is its global rank divided by `gpus_per_node`, so a
/// layout's `rank_offset` that is not a multiple of it shifts where groups
/// fall.
///
/// ```
/// use rank_layout::Topology;
/// let t = Topology::new(4, Some(18))?; // NVL72 racks
/// assert_eq!((t.node(75), t.local(75), t.domain(75)), (18, 3, Some(1)));
/// assert!(Topology::new(0, None).is_err());
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Topology {
    gpus_per_node: u32,
    nodes_per_domain: Option<u32>,
}

impl Default for Topology {
    /// 8 GPUs per node, no domains.
    fn default() -> Self {
        Topology {
            gpus_per_node: 8,
            nodes_per_domain: None,
        }
    }
}

impl Topology {
    /// A topology of `gpus_per_node` GPUs per node and, optionally,
    /// `nodes_per_domain` nodes per domain.
    ///
    /// # Errors
    /// [`Error::ZeroSize`] for a size of 0; [`Error::Overflow`] when a
    /// domain's GPUs do not fit a `u32`.
    pub fn new(gpus_per_node: u32, nodes_per_domain: Option<u32>) -> Result<Topology> {
        if gpus_per_node == 0 {
            return Err(Error::ZeroSize {
                what: "gpus_per_node",
            });
        }
        if let Some(m) = nodes_per_domain {
            if m == 0 {
                return Err(Error::ZeroSize {
                    what: "nodes_per_domain",
                });
            }
            gpus_per_node
                .checked_mul(m)
                .ok_or_else(|| Error::Overflow {
                    what: format!("gpus_per_node * nodes_per_domain = {gpus_per_node} * {m}"),
                })?;
        }
        Ok(Topology {
            gpus_per_node,
            nodes_per_domain,
        })
    }

    /// GPUs per node.
    pub fn gpus_per_node(&self) -> u32 {
        self.gpus_per_node
    }

    /// Nodes per domain, if domains are set.
    pub fn nodes_per_domain(&self) -> Option<u32> {
        self.nodes_per_domain
    }

    /// GPUs per domain, if domains are set.
    pub fn gpus_per_domain(&self) -> Option<u32> {
        // Checked by `new`.
        self.nodes_per_domain
            .map(|m| m.wrapping_mul(self.gpus_per_node))
    }

    /// The node of `rank`.
    pub fn node(&self, rank: u32) -> u32 {
        rank / self.gpus_per_node
    }

    /// The GPU of `rank` on its node.
    pub fn local(&self, rank: u32) -> u32 {
        rank % self.gpus_per_node
    }

    /// The domain of `rank`, if domains are set.
    pub fn domain(&self, rank: u32) -> Option<u32> {
        self.gpus_per_domain().map(|g| rank / g)
    }
}
