//! The report of `rank-layout place`: the node order, the hosts left idle,
//! the unit, and how every kind's groups fall on the topology, against the
//! plain host order.

use std::collections::BTreeMap;
use std::fmt;

use rank_layout::machine::{Crossing, Hosts, Launcher, NodePlan};
use serde::Serialize;

use crate::error::Failure;
use crate::target::{DimSet, Target};

/// A smaller job (`--on-shortfall shrink`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Shrunk {
    /// Its data-parallel size.
    pub dp: u32,
    /// Its world size.
    pub world_size: u32,
    /// The data-parallel size asked.
    pub from_dp: u32,
    /// The world size asked.
    pub from_world_size: u32,
}

/// One kind's groups on the topology.
#[derive(Debug, Serialize)]
pub struct KindOut {
    kind: String,
    must_fit: bool,
    groups: usize,
    /// By topology level, outermost first (the last is the domain).
    crossing: Vec<usize>,
    widest: Vec<usize>,
    /// The same, with the job on the hosts in the table's order.
    plain_crossing: Vec<usize>,
}

/// A launcher file's command line.
#[derive(Debug, Serialize)]
pub struct LauncherOut {
    format: &'static str,
    command: String,
}

/// The report.
#[derive(Debug, Serialize)]
pub struct PlaceReport {
    world_size: u32,
    gpus_per_node: u32,
    node_hosts: Vec<String>,
    idle: Vec<String>,
    unhealthy: Vec<String>,
    unit_nodes: u32,
    units: u32,
    whole_units: u64,
    straddling_units: u32,
    /// Must-fit kind -> its groups that span more than one domain.
    crossing: BTreeMap<String, usize>,
    /// The same with the hosts in the table's order.
    plain_crossing: BTreeMap<String, usize>,
    kinds: Vec<KindOut>,
    shrunk: Option<Shrunk>,
    notes: Vec<String>,
    launchers: Vec<LauncherOut>,
}

impl PlaceReport {
    /// The report of `plan` for `target` on `hosts`, `must` its must-fit
    /// kinds, every kind of the target listed.
    ///
    /// # Errors
    /// A kind the target cannot list.
    pub fn new(
        target: &Target,
        hosts: &Hosts,
        plan: &NodePlan,
        must: &[DimSet],
        shrunk: Option<Shrunk>,
    ) -> Result<PlaceReport, Failure> {
        let plain = NodePlan::plain(target.world_size(), hosts, plan.gpus_per_node).ok();
        let name = |i: &usize| hosts.get(*i).map(|h| h.name.clone()).unwrap_or_default();
        let mut sets = must.to_vec();
        for set in target.all_sets() {
            if !sets.contains(&set) {
                sets.push(set);
            }
        }
        let mut kinds = Vec::new();
        let mut crossing = BTreeMap::new();
        let mut plain_crossing = BTreeMap::new();
        for set in &sets {
            let groups = target.kind_groups(set)?;
            let c: Crossing = plan.crossing(hosts, &groups);
            let p = plain.as_ref().map(|p| p.crossing(hosts, &groups).crossing);
            let is_must = must.contains(set);
            if is_must {
                crossing.insert(c.name.clone(), c.domain_crossing());
                if let Some(p) = &p {
                    plain_crossing.insert(c.name.clone(), p.last().copied().unwrap_or(0));
                }
            }
            kinds.push(KindOut {
                kind: c.name,
                must_fit: is_must,
                groups: c.groups,
                crossing: c.crossing,
                widest: c.widest,
                plain_crossing: p.unwrap_or_default(),
            });
        }
        Ok(PlaceReport {
            world_size: target.world_size(),
            gpus_per_node: plan.gpus_per_node,
            node_hosts: plan.node_hosts.iter().map(name).collect(),
            idle: plan.idle.iter().map(name).collect(),
            unhealthy: plan.unhealthy.iter().map(name).collect(),
            unit_nodes: plan.unit_nodes,
            units: plan.units,
            whole_units: plan.whole_units,
            straddling_units: plan.straddling_units,
            crossing,
            plain_crossing,
            kinds,
            shrunk,
            notes: plan.notes.clone(),
            launchers: Launcher::ALL
                .into_iter()
                .map(|l| LauncherOut {
                    format: l.name(),
                    command: l.command(plan, hosts, &format!("{}.txt", l.name())),
                })
                .collect(),
        })
    }
}

impl fmt::Display for PlaceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} ranks on {} nodes of {} GPUs; unit {} node(s), {} units, {} fit whole in a domain, {} straddle",
            self.world_size,
            self.node_hosts.len(),
            self.gpus_per_node,
            self.unit_nodes,
            self.units,
            self.whole_units.min(u64::from(self.units)),
            self.straddling_units
        )?;
        if let Some(s) = &self.shrunk {
            writeln!(
                f,
                "shrunk: dp {} -> {} (world {} -> {}) so that every unit fits whole",
                s.from_dp, s.dp, s.from_world_size, s.world_size
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "kind       groups  crossing a domain  (hosts in table order)"
        )?;
        for k in &self.kinds {
            writeln!(
                f,
                "{:<10} {:>6}  {:>17}  ({}){}",
                k.kind,
                k.groups,
                k.crossing.last().copied().unwrap_or(0),
                k.plain_crossing
                    .last()
                    .map_or("-".to_string(), usize::to_string),
                if k.must_fit { "  must fit" } else { "" }
            )?;
        }
        writeln!(f)?;
        writeln!(f, "node  host")?;
        for (n, h) in self.node_hosts.iter().enumerate() {
            writeln!(f, "{n:>4}  {h}")?;
        }
        if !self.idle.is_empty() {
            writeln!(f, "idle: {}", self.idle.join(" "))?;
        }
        if !self.unhealthy.is_empty() {
            writeln!(f, "not healthy: {}", self.unhealthy.join(" "))?;
        }
        for note in &self.notes {
            writeln!(f, "note: {note}")?;
        }
        writeln!(f)?;
        for l in &self.launchers {
            writeln!(f, "{}: {}", l.format, l.command)?;
        }
        Ok(())
    }
}
