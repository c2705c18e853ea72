//! The one rule for the GPUs per node of a job on a host table.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::machine::hosts::Hosts;

impl Hosts {
    /// The GPUs (ranks) per node of a job on these hosts: `given` when
    /// given; else the GPU count the healthy hosts that give one agree on
    /// (an unhealthy host is never placed, so its count does not matter; a
    /// host that gives none takes the job's). Without a host table there
    /// is nothing to read: the default is [`Topology`](crate::Topology)'s,
    /// 8. Every placement, check and re-layout on a host table asks this.
    ///
    /// ```
    /// use rank_layout::machine::Hosts;
    /// let hosts = Hosts::parse_plain("a r0 4\nb r0\nc r1 8 down\n")?;
    /// assert_eq!(hosts.gpus_per_node(None)?, 4);
    /// assert_eq!(hosts.gpus_per_node(Some(2))?, 2);
    /// let unknown = Hosts::parse_plain("a r0\nb r1\n")?;
    /// assert!(unknown.gpus_per_node(None).unwrap_err().to_string().contains("gpus_per_node"));
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::ZeroSize`] for `given` 0; [`Error::NoPlacement`] when none
    /// is given and the healthy hosts give no GPU count, or different
    /// ones (naming them).
    pub fn gpus_per_node(&self, given: Option<u32>) -> Result<u32> {
        if let Some(g) = given {
            if g == 0 {
                return Err(Error::ZeroSize {
                    what: "gpus_per_node",
                });
            }
            return Ok(g);
        }
        let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
        for h in self.iter().filter(|h| h.healthy) {
            if let Some(n) = h.gpus {
                *counts.entry(n).or_default() += 1;
            }
        }
        let mut found = counts.keys();
        match (found.next(), found.next()) {
            (Some(&g), None) => Ok(g),
            (None, _) => Err(Error::NoPlacement {
                problem: "the GPUs per node are unknown: the host table gives no GPU count of a healthy host; give PlaceOptions::gpus_per_node".to_string(),
            }),
            (Some(_), Some(_)) => Err(Error::NoPlacement {
                problem: format!(
                    "the healthy hosts give different GPU counts ({}): give PlaceOptions::gpus_per_node",
                    counts
                        .iter()
                        .map(|(g, n)| format!("{g} on {n} host(s)"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        }
    }
}
