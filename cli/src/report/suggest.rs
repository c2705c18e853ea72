//! `rank-layout suggest`: every order of the layout's axes (the mesh's
//! dims) ranked by how well it keeps bandwidth-hungry groups inside nodes
//! and domains (the ranking is [`crate::ranking`]'s), then the check of the
//! best.

use std::fmt;

use rank_layout::Topology;
use serde::ser::SerializeMap;

use crate::error::Failure;
use crate::format::{count, experts, thousands};
use crate::ranking::{Candidate, Priority, Ranking, rank_orders};
use crate::report::Entries;
use crate::report::check::CheckReport;
use crate::spread::{KindSpread, SpreadOut, machine_line};
use crate::target::Target;

/// How one kind's groups fall, in a few words: `tp 1 node`, `cp 2 nodes
/// (64/64 groups cross)`, `; 2 domains (8/64)`.
fn summary(k: &KindSpread) -> String {
    let s = k.spread;
    let mut out = format!(
        "{} {}",
        k.kind,
        count(s.max_nodes_per_group.into(), "node", "nodes")
    );
    if s.cross_node_groups > 0 {
        out.push_str(&format!(
            " ({}/{} cross)",
            thousands(s.cross_node_groups.into()),
            thousands(s.groups.into())
        ));
    }
    if let (Some(c), Some(m)) = (s.cross_domain_groups, s.max_domains_per_group) {
        if c > 0 {
            out.push_str(&format!(
                ", {} ({}/{} cross)",
                count(m.into(), "domain", "domains"),
                thousands(c.into()),
                thousands(s.groups.into())
            ));
        }
    }
    out
}

/// The `suggest` report: the ranked orders, then the check of the best.
pub struct SuggestReport<'a> {
    target: &'a Target,
    topology: Topology,
    ranking: Ranking,
    top: Option<usize>,
    best: Option<CheckReport>,
}

impl<'a> SuggestReport<'a> {
    /// Ranks the orders of `target` on `topology` by `priority` (default
    /// when `None`) and checks the best; prints the best `top` (all when
    /// `None`).
    ///
    /// # Errors
    /// [`Failure::Input`] for a priority that does not parse.
    pub fn new(
        target: &'a Target,
        topology: Topology,
        priority: Option<&str>,
        top: Option<usize>,
    ) -> Result<SuggestReport<'a>, Failure> {
        let priority = match priority {
            Some(text) => Priority::parse(text, target)?,
            None => Priority::default_for(target),
        };
        let ranking = rank_orders(target, &topology, &priority)?;
        let best = match ranking.candidates.first() {
            Some(c) => Some(CheckReport::new(&c.target, topology, &[], &[])?),
            None => None,
        };
        Ok(SuggestReport {
            target,
            topology,
            ranking,
            top,
            best,
        })
    }

    /// The candidates to print.
    fn shown(&self) -> &[Candidate] {
        let all = &self.ranking.candidates;
        let n = self.top.map_or(all.len(), |t| t.min(all.len()));
        all.get(..n).unwrap_or(all)
    }
}

impl fmt::Display for SuggestReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = self.shown();
        let all = self.ranking.candidates.len();
        let what = match self.target {
            Target::Layout { layout, .. } => experts(layout.config().expert_layout).to_owned(),
            Target::Mesh(_) => format!("{} (given)", self.target.title()),
        };
        writeln!(
            f,
            "{}, best first, {}, {what}\n",
            count(all as u64, "order", "orders"),
            machine_line(self.target, &self.topology),
        )?;
        let width = shown.iter().map(|c| c.order.len()).max().unwrap_or(0);
        for c in shown {
            let kinds: Vec<String> = c.spreads.iter().map(summary).collect();
            let mark = if c.given { "  (given)" } else { "" };
            writeln!(f, "{:<width$}  {}{mark}", c.order, kinds.join("; "))?;
        }
        if shown.len() < all || self.ranking.invalid_reason.is_some() {
            writeln!(f)?;
        }
        if shown.len() < all {
            writeln!(
                f,
                "{} not shown (--top)",
                count((all - shown.len()) as u64, "order", "orders")
            )?;
        }
        if let Some(reason) = &self.ranking.invalid_reason {
            let rejects = if self.target.is_mesh() {
                "skipped: a view or flatten no longer builds"
            } else {
                "this layout rejects"
            };
            writeln!(
                f,
                "{} {rejects}, e.g. {reason}",
                count(self.ranking.invalid as u64, "order", "orders")
            )?;
        }
        match (self.ranking.candidates.first(), &self.best) {
            (Some(best), Some(check)) => {
                writeln!(f, "\nbest: {}\n", best.flag)?;
                write!(f, "{check}")
            }
            _ => writeln!(f, "no order of these sizes makes a valid layout"),
        }
    }
}

/// The JSON of one ranked order: `{"order", "given", "kinds": {KIND:
/// spread}}`; for a mesh `{"order", "flag", "given", "dim_sets": {SET:
/// spread}}`.
struct CandidateOut<'a> {
    candidate: &'a Candidate,
    mesh: bool,
}

impl serde::Serialize for CandidateOut<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c = self.candidate;
        let kinds: Vec<(String, SpreadOut)> = c
            .spreads
            .iter()
            .map(|k| (k.kind.to_string(), k.into()))
            .collect();
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("order", &c.order)?;
        if self.mesh {
            map.serialize_entry("flag", &c.flag)?;
        }
        map.serialize_entry("given", &c.given)?;
        let key = if self.mesh { "dim_sets" } else { "kinds" };
        map.serialize_entry(key, &Entries(&kinds))?;
        map.end()
    }
}

impl serde::Serialize for SuggestReport<'_> {
    /// `{"orders": [{"order", "given", "kinds": {KIND: spread}}], "invalid": N}`
    /// (for a mesh, each order's `"flag"` and `"dim_sets"`).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mesh = self.target.is_mesh();
        let orders: Vec<CandidateOut<'_>> = self
            .shown()
            .iter()
            .map(|candidate| CandidateOut { candidate, mesh })
            .collect();
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("orders", &orders)?;
        map.serialize_entry("invalid", &self.ranking.invalid)?;
        map.end()
    }
}
