//! The report of `rank-layout place`: the node order, the hosts left idle,
//! the unit, and how every kind's groups fall on the topology, against the
//! plain host order.

use std::collections::BTreeMap;
use std::fmt;

use rank_layout::machine::{KindCrossing, Launcher, Placed, Shrunk};
use serde::Serialize;

use crate::error::Failure;
use crate::target::Target;

/// A smaller job (`--on-shortfall shrink`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ShrunkOut {
    /// Its data-parallel size.
    dp: u32,
    /// Its world size.
    world_size: u32,
    /// The data-parallel size asked.
    from_dp: u32,
    /// The world size asked.
    from_world_size: u32,
}

impl From<Shrunk> for ShrunkOut {
    fn from(s: Shrunk) -> ShrunkOut {
        ShrunkOut {
            dp: s.dp,
            world_size: s.world_size,
            from_dp: s.from_dp,
            from_world_size: s.from_world_size,
        }
    }
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

impl From<KindCrossing> for KindOut {
    fn from(k: KindCrossing) -> KindOut {
        KindOut {
            kind: k.placed.name,
            must_fit: k.must_fit,
            groups: k.placed.groups,
            crossing: k.placed.crossing,
            widest: k.placed.widest,
            plain_crossing: k.plain.map(|p| p.crossing).unwrap_or_default(),
        }
    }
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
    /// Every kind placed (the must-fit kinds, then the others in the order
    /// the placement compared them with the table's order), then the
    /// target's other kinds.
    kinds: Vec<KindOut>,
    /// Whether the node order is the table's: it crossed fewer groups where
    /// the two first differ.
    table_order: bool,
    shrunk: Option<ShrunkOut>,
    notes: Vec<String>,
    launchers: Vec<LauncherOut>,
}

impl PlaceReport {
    /// The report of `placed`, the job of `target` (the layout placed when
    /// it shrank): every kind placed as the placement compared it with the
    /// table's order ([`Placed::kinds`]), then every other kind.
    ///
    /// # Errors
    /// A kind the target cannot list.
    pub fn new(target: &Target, placed: &Placed) -> Result<PlaceReport, Failure> {
        let shrunk_target = placed.placed_layout().map(|layout| Target::Layout {
            layout: layout.clone(),
            given: layout.config().clone(),
        });
        let target = shrunk_target.as_ref().unwrap_or(target);
        let mut kinds: Vec<KindOut> = placed.kinds().iter().cloned().map(KindOut::from).collect();
        let mut crossing = BTreeMap::new();
        let mut plain_crossing = BTreeMap::new();
        for k in kinds.iter().filter(|k| k.must_fit) {
            crossing.insert(k.kind.clone(), k.crossing.last().copied().unwrap_or(0));
            if let Some(&p) = k.plain_crossing.last() {
                plain_crossing.insert(k.kind.clone(), p);
            }
        }
        for set in target.all_sets() {
            let name = set.to_string();
            if kinds.iter().any(|k| k.kind == name) {
                continue;
            }
            kinds.push(placed.crossing(&target.kind_groups(&set)?).into());
        }
        let plan = placed.plan();
        let names = |v: Vec<&str>| v.into_iter().map(str::to_string).collect();
        Ok(PlaceReport {
            world_size: placed.world_size(),
            gpus_per_node: placed.gpus_per_node(),
            node_hosts: names(placed.node_hosts()),
            idle: names(placed.idle_hosts()),
            unhealthy: names(placed.unhealthy_hosts()),
            unit_nodes: plan.unit_nodes,
            units: plan.units,
            whole_units: plan.whole_units,
            straddling_units: plan.straddling_units,
            crossing,
            plain_crossing,
            kinds,
            table_order: plan.table_order,
            shrunk: placed.shrunk().map(ShrunkOut::from),
            notes: plan.notes.clone(),
            launchers: Launcher::ALL
                .into_iter()
                .map(|l| LauncherOut {
                    format: l.name(),
                    command: placed.command(l, &format!("{}.txt", l.name())),
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
        // Every level, outermost first, where the topology has more than
        // the domain.
        let levels = self.kinds.iter().any(|k| k.crossing.len() > 1);
        writeln!(
            f,
            "kind       groups  crossing a domain  (hosts in table order){}",
            if levels {
                "  by level, outermost first"
            } else {
                ""
            }
        )?;
        let by_level = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join("/");
        for k in &self.kinds {
            let plain = k
                .plain_crossing
                .last()
                .map_or("-".to_string(), usize::to_string);
            let plain = format!("({plain})");
            let plain = if levels {
                let table = if k.plain_crossing.is_empty() {
                    "-".to_string()
                } else {
                    by_level(&k.plain_crossing)
                };
                format!("{plain:<22}  {} ({table})", by_level(&k.crossing))
            } else {
                plain
            };
            writeln!(
                f,
                "{:<10} {:>6}  {:>17}  {plain}{}",
                k.kind,
                k.groups,
                k.crossing.last().copied().unwrap_or(0),
                if k.must_fit { "  must fit" } else { "" }
            )?;
        }
        if self.table_order {
            writeln!(f, "the node order is the table's (see the note)")?;
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
