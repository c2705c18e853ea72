//! Where processes run: the node and the NVLink domain of each, from
//! GPUs per node and nodes per domain, or from a host table and a
//! placement.

use crate::cast::{saturating_usize, to_usize};
use fnv::FnvHashMap;

use crate::machine::{Hosts, NodePlan};
use crate::topology::Topology;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Inner {
    /// Process `p` on node `p / G`, domain `p / (G * M)`.
    Topology(Topology),
    /// Process `p` on the host of logical node `p / G` of a placement.
    Hosts {
        gpus_per_node: u32,
        /// The host of each logical node.
        node_host: Vec<u32>,
        /// The logical node of each host placed.
        host_node: FnvHashMap<u32, u32>,
        /// The domain (numbered) of each host, `None`: unknown.
        host_domain: Vec<Option<u32>>,
        /// The logical nodes of each domain.
        domain_nodes: Vec<Vec<u32>>,
    },
}

/// A node or a domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Scope {
    Node(u64),
    Domain(u64),
}

/// The node and NVLink domain of every process, which a reshard uses to
/// take each piece from a holder near its destination.
///
/// ```
/// use rank_layout::reshard::Locality;
/// use rank_layout::Topology;
/// let nvl72 = Locality::new(Topology::new(4, Some(18))?);
/// assert_eq!((nvl72.node_of(75), nvl72.domain_of(75)), (Some(18), Some(1)));
/// let plain = Locality::new(Topology::new(8, None)?);
/// assert_eq!(plain.domain_of(75), None); // no domains: a node is its own
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locality {
    inner: Inner,
}

impl Default for Locality {
    /// 8 GPUs per node, no domains.
    fn default() -> Self {
        Locality::new(Topology::default())
    }
}

impl Locality {
    /// Processes `[n*G, (n+1)*G)` on node `n`, nodes `[d*M, (d+1)*M)` in
    /// domain `d` (when the topology has domains).
    pub fn new(topology: Topology) -> Locality {
        Locality {
            inner: Inner::Topology(topology),
        }
    }

    /// Process `p` on the host that `plan` gives job rank `p` (the plan
    /// places every process of both sides, counted from 0), in the domain
    /// of that host in `hosts`. A process the plan does not place, and a
    /// host of unknown domain, are in no domain (a host is then its own).
    pub fn hosts(plan: &NodePlan, hosts: &Hosts) -> Locality {
        let mut domain_ids: FnvHashMap<&str, u32> = FnvHashMap::default();
        let host_domain: Vec<Option<u32>> = hosts
            .iter()
            .map(|h| {
                h.domain().map(|d| {
                    let next = u32::try_from(domain_ids.len()).unwrap_or(u32::MAX);
                    *domain_ids.entry(d).or_insert(next)
                })
            })
            .collect();
        let node_host: Vec<u32> = plan
            .node_hosts
            .iter()
            .map(|h| u32::try_from(*h).unwrap_or(u32::MAX))
            .collect();
        let mut host_node = FnvHashMap::default();
        let mut domain_nodes = vec![Vec::new(); domain_ids.len()];
        for (l, &h) in node_host.iter().enumerate() {
            let l = u32::try_from(l).unwrap_or(u32::MAX);
            host_node.insert(h, l);
            if let Some(Some(d)) = host_domain.get(to_usize(h)) {
                if let Some(nodes) = domain_nodes.get_mut(to_usize(*d)) {
                    nodes.push(l);
                }
            }
        }
        Locality {
            inner: Inner::Hosts {
                gpus_per_node: plan.gpus_per_node.max(1),
                node_host,
                host_node,
                host_domain,
                domain_nodes,
            },
        }
    }

    /// The node of `process` (a host's index with a host table), `None`
    /// when unknown.
    pub fn node_of(&self, process: u32) -> Option<u64> {
        match &self.inner {
            Inner::Topology(t) => Some(u64::from(t.node(process))),
            Inner::Hosts {
                gpus_per_node,
                node_host,
                ..
            } => node_host
                .get(to_usize(process / gpus_per_node))
                .map(|h| u64::from(*h)),
        }
    }

    /// The domain of `process`, `None` when there are no domains or its
    /// host's is unknown.
    pub fn domain_of(&self, process: u32) -> Option<u64> {
        match &self.inner {
            Inner::Topology(t) => t.domain(process).map(u64::from),
            Inner::Hosts { host_domain, .. } => {
                let host = self.node_of(process)?;
                host_domain
                    .get(saturating_usize(host))
                    .copied()
                    .flatten()
                    .map(u64::from)
            }
        }
    }

    /// Whether two processes share a node (an unknown node is shared with
    /// no other process).
    pub fn same_node(&self, a: u32, b: u32) -> bool {
        a == b || matches!((self.node_of(a), self.node_of(b)), (Some(x), Some(y)) if x == y)
    }

    /// Whether two processes share an NVLink domain: their node, or a
    /// known domain. Without domains a node is its own.
    pub fn same_domain(&self, a: u32, b: u32) -> bool {
        self.same_node(a, b)
            || matches!((self.domain_of(a), self.domain_of(b)), (Some(x), Some(y)) if x == y)
    }

    /// The processes of a node or a domain, ascending.
    pub(crate) fn members(&self, scope: Scope) -> Vec<u32> {
        match scope {
            Scope::Node(n) => self.node_members(n),
            Scope::Domain(d) => self.domain_members(d),
        }
    }

    /// The processes of `node`, ascending.
    fn node_members(&self, node: u64) -> Vec<u32> {
        match &self.inner {
            Inner::Topology(t) => range(node, u64::from(t.gpus_per_node())),
            Inner::Hosts {
                gpus_per_node,
                host_node,
                ..
            } => match u32::try_from(node).ok().and_then(|h| host_node.get(&h)) {
                Some(l) => range(u64::from(*l), u64::from(*gpus_per_node)),
                None => Vec::new(),
            },
        }
    }

    /// The processes of `domain`, ascending.
    fn domain_members(&self, domain: u64) -> Vec<u32> {
        match &self.inner {
            Inner::Topology(t) => match t.gpus_per_domain() {
                Some(g) => range(domain, u64::from(g)),
                None => Vec::new(),
            },
            Inner::Hosts {
                gpus_per_node,
                domain_nodes,
                ..
            } => {
                let mut out = Vec::new();
                for l in domain_nodes
                    .get(saturating_usize(domain))
                    .into_iter()
                    .flatten()
                {
                    out.extend(range(u64::from(*l), u64::from(*gpus_per_node)));
                }
                out.sort_unstable();
                out
            }
        }
    }
}

/// Processes `[i*size, (i+1)*size)` that fit a `u32`.
fn range(i: u64, size: u64) -> Vec<u32> {
    let lo = i.saturating_mul(size);
    let hi = lo.saturating_add(size).min(1 << 32);
    (lo..hi).filter_map(|p| u32::try_from(p).ok()).collect()
}
