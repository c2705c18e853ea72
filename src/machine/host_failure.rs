//! The failure of a placed job: failed hosts to failed ranks, and the idle
//! hosts that can take their places.

use crate::error::{Error, Result};
use crate::machine::hosts::Hosts;
use crate::machine::place::NodePlan;

/// What fails when hosts of a placed job fail, in the machine's terms:
/// every rank of their nodes (and any other rank given), the spares (the
/// placement's idle healthy hosts, the failed ones left out, in the
/// table's order), and the domain of every node of the job and of every
/// spare. `relayout::Failure::from` makes the re-layout's failure of it.
///
/// ```
/// use rank_layout::machine::{Hosts, PlaceOptions, Placed};
/// use rank_layout::{Config, Layout};
/// let hosts = Hosts::parse_plain("a r0 2\nb r0 2\nc r1 2\nd r0 2\n")?;
/// let layout = Layout::new(&Config::new().tp(2).dp(3))?;
/// let placed = Placed::layout(&layout, None, hosts, &PlaceOptions::default())?;
/// let lost = placed.fail(&["b"], &[0])?;
/// assert_eq!((lost.failed.clone(), lost.spare_hosts.clone()), (vec![0, 2, 3], vec!["c".to_string()]));
/// assert!(placed.fail(&["zz"], &[]).is_err());
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct HostFailure {
    /// GPUs (ranks) per node.
    pub gpus_per_node: u32,
    /// The failed ranks (of the layout, from its `rank_offset`), sorted,
    /// each once.
    pub failed: Vec<u32>,
    /// The spare hosts, by name, in spare order (spare `s` holds the
    /// processes `world + s*G ..`).
    pub spare_hosts: Vec<String>,
    /// The domain of logical node `n` of the job (`None`: unknown).
    pub job_domains: Vec<Option<String>>,
    /// The domain of each spare (`None`: unknown).
    pub spare_domains: Vec<Option<String>>,
}

impl HostFailure {
    /// The failure of the job placed by `plan` on `hosts` (its ranks from
    /// `rank_offset`) when the hosts named `failed_hosts` fail, every rank
    /// of their nodes, and the ranks `failed_ranks` besides.
    ///
    /// # Errors
    /// [`Error::NoRelayout`] naming a failed host the table does not have.
    pub fn new(
        plan: &NodePlan,
        hosts: &Hosts,
        rank_offset: u32,
        failed_hosts: &[&str],
        failed_ranks: &[u32],
    ) -> Result<HostFailure> {
        let g = plan.gpus_per_node;
        let mut failed_index = Vec::new();
        for name in failed_hosts {
            let i = hosts.index_of(name).ok_or_else(|| Error::NoRelayout {
                problem: format!("failed host {name:?} is not in the host table"),
            })?;
            failed_index.push(i);
        }
        let mut failed = failed_ranks.to_vec();
        for (n, host) in (0u64..).zip(&plan.node_hosts) {
            if failed_index.contains(host) {
                let first = u64::from(rank_offset) + n * u64::from(g);
                failed.extend((0..u64::from(g)).filter_map(|l| u32::try_from(first + l).ok()));
            }
        }
        failed.sort_unstable();
        failed.dedup();
        let domain = |i: &usize| hosts.get(*i).and_then(|h| h.domain()).map(str::to_string);
        let spares: Vec<usize> = plan
            .idle
            .iter()
            .copied()
            .filter(|i| !failed_index.contains(i))
            .collect();
        Ok(HostFailure {
            gpus_per_node: g,
            failed,
            spare_hosts: spares
                .iter()
                .filter_map(|&i| hosts.get(i))
                .map(|h| h.name.clone())
                .collect(),
            job_domains: plan.node_hosts.iter().map(domain).collect(),
            spare_domains: spares.iter().map(domain).collect(),
        })
    }
}
