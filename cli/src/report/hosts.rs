//! The part of `check --hosts` and `rank --hosts` reports about the hosts:
//! how each kind's groups fall on the topology the job got, and where one
//! rank runs.

use std::fmt;

use serde::Serialize;

use crate::error::Failure;
use crate::on_hosts::OnHosts;
use crate::target::{DimSet, Target};

/// One kind's groups on the hosts.
#[derive(Debug, Serialize)]
pub struct KindOnHosts {
    kind: String,
    groups: usize,
    /// By topology level, outermost first (the last is the domain): the
    /// groups over more than one key of that level.
    crossing: Vec<usize>,
    /// By level: the most keys one group spans.
    widest: Vec<usize>,
}

/// Where one rank runs, and which of its groups cross a domain.
#[derive(Debug, Serialize)]
pub struct RankOnHosts {
    rank: u32,
    node: u32,
    host: String,
    /// Its topology keys, outermost first (empty: unknown domain).
    keys: Vec<String>,
    /// The kinds whose group of this rank spans more than one domain.
    crossing_kinds: Vec<String>,
}

/// The job on its hosts.
#[derive(Debug, Serialize)]
pub struct HostsReport {
    hosts_file: String,
    /// `table` (the hosts in the table's order) or `placed`.
    order: &'static str,
    node_hosts: Vec<String>,
    kinds: Vec<KindOnHosts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rank: Option<RankOnHosts>,
}

impl HostsReport {
    /// The report of `target`'s `sets` on `on`, and of `rank` when given.
    ///
    /// # Errors
    /// A kind the target cannot list.
    pub fn new(
        target: &Target,
        on: &OnHosts,
        sets: &[DimSet],
        rank: Option<u32>,
    ) -> Result<HostsReport, Failure> {
        let placed = &on.placed;
        let mut kinds = Vec::new();
        let mut groups_of = Vec::new();
        for set in sets {
            let groups = target.kind_groups(set)?;
            let c = placed.crossing(&groups).placed;
            kinds.push(KindOnHosts {
                kind: c.name,
                groups: c.groups,
                crossing: c.crossing,
                widest: c.widest,
            });
            groups_of.push(groups);
        }
        let rank = rank.and_then(|r| {
            let (node, host) = placed.node_of(r)?;
            let job = r - placed.rank_offset();
            // The kinds whose group of this rank spans more than one domain.
            let crossing_kinds = groups_of
                .iter()
                .filter_map(|k| {
                    let mine = k.groups.iter().find(|g| g.contains(&job))?;
                    placed.crosses_domains(mine).then(|| k.name.clone())
                })
                .collect();
            Some(RankOnHosts {
                rank: r,
                node,
                host: placed.host_name(host).to_string(),
                keys: placed
                    .hosts()
                    .get(host)
                    .map(|x| x.keys.clone())
                    .unwrap_or_default(),
                crossing_kinds,
            })
        });
        Ok(HostsReport {
            hosts_file: on.file.clone(),
            order: on.order,
            node_hosts: placed
                .node_hosts()
                .into_iter()
                .map(str::to_string)
                .collect(),
            kinds,
            rank,
        })
    }
}

impl fmt::Display for HostsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f)?;
        writeln!(
            f,
            "on the hosts of {} ({} nodes, {} order)",
            self.hosts_file,
            self.node_hosts.len(),
            if self.order == "placed" {
                "place's"
            } else {
                "the table's"
            }
        )?;
        if let Some(r) = &self.rank {
            writeln!(
                f,
                "rank {} runs on node {}, host {} ({}); its groups crossing a domain: {}",
                r.rank,
                r.node,
                r.host,
                if r.keys.is_empty() {
                    "domain unknown".to_string()
                } else {
                    r.keys.join("/")
                },
                if r.crossing_kinds.is_empty() {
                    "none".to_string()
                } else {
                    r.crossing_kinds.join(", ")
                }
            )?;
        }
        writeln!(
            f,
            "kind         groups  crossing a domain  (by level, outermost first)"
        )?;
        for k in &self.kinds {
            writeln!(
                f,
                "{:<12} {:>6}  {:>17}  ({})",
                k.kind,
                k.groups,
                k.crossing.last().copied().unwrap_or(0),
                k.crossing
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(" / ")
            )?;
        }
        Ok(())
    }
}

/// A report with the hosts' part beside it: its JSON keys, and `hosts`.
#[derive(Debug, Serialize)]
pub struct WithHosts<'a, T: Serialize> {
    #[serde(flatten)]
    report: &'a T,
    hosts: &'a HostsReport,
}

impl<'a, T: Serialize> WithHosts<'a, T> {
    /// `report` with `hosts`.
    pub fn new(report: &'a T, hosts: &'a HostsReport) -> WithHosts<'a, T> {
        WithHosts { report, hosts }
    }
}

impl<T: Serialize + fmt::Display> fmt::Display for WithHosts<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.report, self.hosts)
    }
}
