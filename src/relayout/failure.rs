//! What failed, and what is there to replace it.

use crate::error::{Error, Result};
use crate::machine::{HostFailure, Hosts, NodePlan};

/// The domain of every node of the job and of every spare node, where a
/// placement knows them ([`Failure::of_hosts`]); the spare policy takes a
/// spare of the failed node's domain first.
///
/// ```
/// use rank_layout::relayout::{Failure, NodeDomains};
/// let domains = NodeDomains::new(vec![Some("rack0".into()), Some("rack1".into())], vec![Some("rack1".into())]);
/// let failure = Failure::new(4, 4..8).spare_nodes(1).domains(domains);
/// assert_eq!(failure.node_domains().map(|d| d.spares.len()), Some(1));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct NodeDomains {
    /// The domain of logical node `n` of the job (`None`: unknown).
    pub job: Vec<Option<String>>,
    /// The domain of spare node `s` (`None`: unknown).
    pub spares: Vec<Option<String>>,
}

impl NodeDomains {
    /// The domains of the job's logical nodes, in order, and of the
    /// spare nodes, in order (`None`: unknown).
    pub fn new(job: Vec<Option<String>>, spares: Vec<Option<String>>) -> NodeDomains {
        NodeDomains { job, spares }
    }
}

/// A failure: the ranks that are gone, the whole spare nodes that can
/// take their places (numbered after the old world, `gpus_per_node`
/// ranks each, in order), and, from a placement, the nodes' domains.
///
/// Ranks are the layout's ranks (a layout with a `rank_offset` counts
/// from it); spare ranks continue after the layout's last rank.
///
/// ```
/// use rank_layout::relayout::Failure;
/// let failure = Failure::new(4, [203, 200, 201, 202, 201]).spare_nodes(1);
/// assert_eq!(failure.failed(), [200, 201, 202, 203]);
/// assert_eq!((failure.gpus_per_node(), failure.spares()), (4, 1));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Failure {
    failed: Vec<u32>,
    gpus_per_node: u32,
    spare_nodes: u32,
    domains: Option<NodeDomains>,
}

impl Failure {
    /// The failure of `failed` ranks (any order, repeats ignored) of a
    /// job of nodes of `gpus_per_node` GPUs, with no spares.
    pub fn new(gpus_per_node: u32, failed: impl IntoIterator<Item = u32>) -> Failure {
        let mut failed: Vec<u32> = failed.into_iter().collect();
        failed.sort_unstable();
        failed.dedup();
        Failure {
            failed,
            gpus_per_node,
            spare_nodes: 0,
            domains: None,
        }
    }

    /// With `n` whole spare nodes after the old world.
    #[must_use]
    pub fn spare_nodes(mut self, n: u32) -> Failure {
        self.spare_nodes = n;
        self
    }

    /// With the domains of the job's nodes and of the spares.
    #[must_use]
    pub fn domains(mut self, domains: NodeDomains) -> Failure {
        self.domains = Some(domains);
        self
    }

    /// The failure of the job placed by `plan` on `hosts` when the hosts
    /// named `failed_hosts` fail: every rank of their nodes fails, the
    /// placement's idle healthy hosts (in the table's order, the failed
    /// ones left out) are the spare nodes, and the domains are the hosts'.
    ///
    /// ```
    /// use rank_layout::machine::{place, Hosts, KindGroups, PlaceOptions};
    /// use rank_layout::relayout::Failure;
    /// let hosts = Hosts::parse_plain("a r0 2\nb r0 2\nc r1 2\nd r0 2\n")?;
    /// let tp = KindGroups::new("tp", vec![vec![0, 1], vec![2, 3], vec![4, 5]]);
    /// let plan = place(6, &[tp], &[], &hosts, &PlaceOptions::default())?;
    /// let failure = Failure::of_hosts(&plan, &hosts, 0, &["b"])?;
    /// assert_eq!((failure.failed(), failure.spares()), (&[2, 3][..], 1));
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::NoRelayout`] naming a failed host the table does not have.
    pub fn of_hosts(
        plan: &NodePlan,
        hosts: &Hosts,
        rank_offset: u32,
        failed_hosts: &[&str],
    ) -> Result<Failure> {
        HostFailure::new(plan, hosts, rank_offset, failed_hosts, &[]).map(|f| Failure::from(&f))
    }

    /// Checks that every failed rank is one of `layout`'s or a spare's (a
    /// spare may fail too: it is then no spare) and that a node has GPUs.
    ///
    /// ```
    /// use rank_layout::relayout::Failure;
    /// use rank_layout::{Config, Layout};
    /// let layout = Layout::new(&Config::new().tp(8).dp(2))?;
    /// assert!(Failure::new(8, [15]).check(&layout).is_ok());
    /// assert!(Failure::new(8, [16]).check(&layout).unwrap_err().to_string().contains("16"));
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::NoRelayout`] naming the first rank outside the layout and
    /// its spares, or GPUs per node of 0.
    pub fn check(&self, layout: &crate::layout::Layout) -> Result<()> {
        if self.gpus_per_node == 0 {
            return Err(Error::NoRelayout {
                problem: "the GPUs per node must be at least 1".to_string(),
            });
        }
        let first = layout.rank_offset();
        let end = layout.rank_end() + u64::from(self.spare_nodes) * u64::from(self.gpus_per_node);
        match self
            .failed
            .iter()
            .find(|&&r| r < first || u64::from(r) >= end)
        {
            Some(r) => Err(Error::NoRelayout {
                problem: format!(
                    "failed rank {r} is not a rank of the layout or of a spare ({first}..{end})"
                ),
            }),
            None => Ok(()),
        }
    }

    /// The failed ranks, sorted, each once.
    pub fn failed(&self) -> &[u32] {
        &self.failed
    }

    /// GPUs (ranks) per node.
    pub fn gpus_per_node(&self) -> u32 {
        self.gpus_per_node
    }

    /// The spare nodes.
    pub fn spares(&self) -> u32 {
        self.spare_nodes
    }

    /// The nodes' domains, when known.
    pub fn node_domains(&self) -> Option<&NodeDomains> {
        self.domains.as_ref()
    }
}

impl From<&HostFailure> for Failure {
    /// The re-layout's failure of a placed job's: its failed ranks, its
    /// spare hosts as spare nodes, and the domains.
    fn from(lost: &HostFailure) -> Failure {
        Failure::new(lost.gpus_per_node, lost.failed.iter().copied())
            .spare_nodes(u32::try_from(lost.spare_hosts.len()).unwrap_or(u32::MAX))
            .domains(NodeDomains::new(
                lost.job_domains.clone(),
                lost.spare_domains.clone(),
            ))
    }
}
