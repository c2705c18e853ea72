//! The report of `rank-layout relayout`: one plan in full, or every
//! policy's side by side.

use std::collections::BTreeMap;
use std::fmt;

use rank_layout::Error;
use rank_layout::relayout::{Policy, Relayout};
use serde::Serialize;

/// One kind's counts.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Counts {
    kept: u32,
    shrunk: usize,
    new: usize,
    /// New groups of one process: no communicator to make.
    alone: usize,
    gone: usize,
}

/// A shrunk group: the old group's number, the new group's, and the
/// positions left out of the old group.
#[derive(Debug, Serialize)]
pub struct ShrinkOut {
    old: u32,
    new: u32,
    exclude: Vec<u32>,
}

/// One kind's changed groups.
#[derive(Debug, Serialize)]
pub struct ChangesOut {
    shrunk: Vec<ShrinkOut>,
    new: Vec<u32>,
    gone: Vec<u32>,
}

/// One plan.
#[derive(Debug, Serialize)]
pub struct PlanReport {
    policy: &'static str,
    world_size: u32,
    old_world_size: u32,
    layout: String,
    dp: u32,
    old_dp: u32,
    /// Every old rank's new rank, then every spare rank's (`null`: leaves
    /// or waits).
    new_rank: Vec<Option<u32>>,
    kinds: BTreeMap<String, Counts>,
    new_communicators: u64,
    shrinks: u64,
    kept: u64,
    moved: u32,
    lost_dp: u32,
    idle: u32,
    hash: String,
    changes: BTreeMap<String, ChangesOut>,
    notes: Vec<String>,
    /// With a host table: the spare processes' hosts, in spare order
    /// (spare `s` holds processes `old_world_size + s*G ..`).
    #[serde(skip_serializing_if = "Option::is_none")]
    spare_hosts: Option<Vec<String>>,
}

impl PlanReport {
    /// The report of `plan`.
    pub fn new(plan: &Relayout) -> PlanReport {
        let cost = plan.cost();
        let mut kinds = BTreeMap::new();
        let mut changes = BTreeMap::new();
        for c in plan.kinds() {
            kinds.insert(
                c.kind.to_string(),
                Counts {
                    kept: c.kept,
                    shrunk: c.shrunk.len(),
                    new: c.new.len(),
                    alone: c.alone.len(),
                    gone: c.gone.len(),
                },
            );
            changes.insert(
                c.kind.to_string(),
                ChangesOut {
                    shrunk: c
                        .shrunk
                        .iter()
                        .map(|s| ShrinkOut {
                            old: s.old_color,
                            new: s.new_color,
                            exclude: s.exclude.clone(),
                        })
                        .collect(),
                    new: c.new.clone(),
                    gone: c.gone.clone(),
                },
            );
        }
        PlanReport {
            policy: plan.policy().name(),
            world_size: plan.layout().world_size(),
            old_world_size: plan.old_layout().world_size(),
            layout: plan.layout().config().to_string(),
            dp: plan.layout().sizes().dp,
            old_dp: plan.old_layout().sizes().dp,
            new_rank: plan.rank_map().iter().collect(),
            kinds,
            new_communicators: cost.new_communicators,
            shrinks: cost.shrinks,
            kept: cost.kept,
            moved: cost.moved,
            lost_dp: cost.lost_dp,
            idle: cost.idle,
            hash: format!("{:016x}", plan.hash()),
            changes,
            notes: plan.notes().to_vec(),
            spare_hosts: None,
        }
    }

    /// With the spares' host names.
    #[must_use]
    pub fn spare_hosts(mut self, hosts: Option<Vec<String>>) -> PlanReport {
        self.spare_hosts = hosts;
        self
    }
}

impl fmt::Display for PlanReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} -> {} ranks (dp {} -> {}), {}",
            self.policy, self.old_world_size, self.world_size, self.old_dp, self.dp, self.layout
        )?;
        for n in &self.notes {
            writeln!(f, "  {n}")?;
        }
        writeln!(f)?;
        writeln!(f, "kind      kept  shrunk     new   alone    gone")?;
        for (kind, c) in &self.kinds {
            writeln!(
                f,
                "{kind:<8} {:>5} {:>7} {:>7} {:>7} {:>7}",
                c.kept, c.shrunk, c.new, c.alone, c.gone
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "new communicators {}, shrinks {}, kept {}; ranks that move {}, idle {}, dp lost {}",
            self.new_communicators, self.shrinks, self.kept, self.moved, self.idle, self.lost_dp
        )?;
        writeln!(f, "plan hash {}", self.hash)
    }
}

/// One policy's row of the comparison: its plan's figures, or why it
/// cannot go on.
#[derive(Debug, Serialize)]
pub struct Row {
    policy: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<PlanReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Every policy side by side.
#[derive(Debug, Serialize)]
pub struct Comparison {
    policies: Vec<Row>,
}

impl Comparison {
    /// The comparison of every policy's plan (or error).
    pub fn new(plans: &[(Policy, Result<Relayout, Error>)]) -> Comparison {
        Comparison {
            policies: plans
                .iter()
                .map(|(p, r)| match r {
                    Ok(plan) => Row {
                        policy: p.name(),
                        plan: Some(PlanReport::new(plan)),
                        error: None,
                    },
                    Err(e) => Row {
                        policy: p.name(),
                        plan: None,
                        error: Some(e.to_string()),
                    },
                })
                .collect(),
        }
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kinds: Vec<&String> = self
            .policies
            .iter()
            .find_map(|r| r.plan.as_ref())
            .map(|p| p.kinds.keys().collect())
            .unwrap_or_default();
        write!(f, "{:<13} {:>7} {:>4}", "policy", "world", "dp")?;
        for k in &kinds {
            write!(f, " {:>14}", format!("{k} new/shrunk"))?;
        }
        writeln!(f, " {:>8} {:>6} {:>5}", "new comm", "moved", "idle")?;
        for row in &self.policies {
            match (&row.plan, &row.error) {
                (Some(p), _) => {
                    write!(f, "{:<13} {:>7} {:>4}", row.policy, p.world_size, p.dp)?;
                    for k in &kinds {
                        let cell = p
                            .kinds
                            .get(*k)
                            .map_or("-".to_string(), |c| format!("{}/{}", c.new, c.shrunk));
                        write!(f, " {cell:>14}")?;
                    }
                    writeln!(
                        f,
                        " {:>8} {:>6} {:>5}",
                        p.new_communicators, p.moved, p.idle
                    )?;
                }
                (None, e) => writeln!(
                    f,
                    "{:<13} {}",
                    row.policy,
                    e.as_deref().unwrap_or("no plan")
                )?,
            }
        }
        Ok(())
    }
}
