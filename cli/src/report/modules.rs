//! Reports of a `--modules` file, module by module through each module's
//! mesh report, with what only modules have (the spans, the graph's
//! stages, a rank's role on every edge): `groups`, `rank`, `check` and
//! `describe` (`render`'s picture is `render::modules`).

use std::fmt::{self, Write as _};
use std::io;

use rank_layout::{Topology, modules::BridgeRole};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::args::Format;
use crate::error::Failure;
use crate::format::join_ranks;
use crate::modules_target::{ModulesTarget, heading, module_object, span};
use crate::report::check::CheckReport;
use crate::report::describe::DescribeReport;
use crate::report::groups::GroupsReport;
use crate::report::rank::RankReport;
use crate::report::{print, print_json};
use crate::target::DimSet;

/// A report as a JSON value.
fn to_value(value: &impl Serialize) -> Result<Value, Failure> {
    serde_json::to_value(value).map_err(|e| Failure::Output(io::Error::other(e)))
}

/// `groups --modules`: each module's groups, module by module.
pub fn groups(
    m: &ModulesTarget,
    sets: &[Vec<DimSet>],
    full: bool,
    format: Format,
) -> Result<(), Failure> {
    match format {
        Format::Table => {
            let mut text = String::new();
            let _ = writeln!(text, "{}", m.title());
            for ((name, target), sets) in m.parts.iter().zip(sets) {
                let _ = writeln!(text, "\n== {} ==", heading(name, target));
                let _ = write!(text, "{}", GroupsReport::new(target, sets.clone(), full));
            }
            print(&text)
        }
        Format::Json => {
            let mut modules = Vec::with_capacity(m.parts.len());
            for ((name, target), sets) in m.parts.iter().zip(sets) {
                let report = to_value(&GroupsReport::new(target, sets.clone(), false))?;
                let mut keep = Map::new();
                if let Value::Object(mut r) = report {
                    for key in ["mesh", "groups"] {
                        if let Some(v) = r.remove(key) {
                            keep.insert(key.into(), v);
                        }
                    }
                }
                modules.push(module_object(name, target, Value::Object(keep)));
            }
            print_json(&serde_json::json!({
                "world_size": m.modules.world_size(),
                "colocated": m.modules.is_colocated(),
                "modules": modules,
            }))
        }
    }
}

/// `rank R --modules`: the rank's module(s), its card in each, its stage
/// and its role on every edge.
pub struct RankCard {
    rank: u32,
    total_stages: u32,
    /// Name, stage, card, heading.
    modules: Vec<(String, u32, RankReport, String, Value)>,
    roles: Vec<BridgeRole>,
}

impl RankCard {
    /// Rank `rank`'s card in every module it is in, with its stage and
    /// its roles on the edges.
    ///
    /// # Errors
    /// [`Failure::Message`] for a rank outside the modules; the errors of
    /// each module's card.
    pub fn new(
        m: &ModulesTarget,
        rank: u64,
        sets: &[Vec<DimSet>],
        topology: Topology,
        full: bool,
    ) -> Result<RankCard, Failure> {
        let outside = || {
            Failure::Message(format!(
                "rank {rank} is outside the modules (ranks {}..{}, both included)",
                m.modules.rank_offset(),
                m.modules.rank_end().saturating_sub(1)
            ))
        };
        let r = u32::try_from(rank).map_err(|_| outside())?;
        if m.modules.modules_of(r).next().is_none() {
            return Err(outside());
        }
        let mut modules = Vec::new();
        for ((name, target), sets) in m.parts.iter().zip(sets) {
            if !m.modules.modules_of(r).any(|n| n == name) {
                continue;
            }
            let stage = m.modules.stage_in(r, name)?;
            let card = RankReport::new(target, rank, sets, topology, full)?;
            let json = module_object(name, target, to_value(&card)?);
            modules.push((name.clone(), stage, card, heading(name, target), json));
        }
        Ok(RankCard {
            rank: r,
            total_stages: m.modules.total_stages(),
            modules,
            roles: m.modules.roles(r)?,
        })
    }
}

/// `bridge color 0 key 4` or `bridge: not a member`.
fn splits_text(role: &BridgeRole) -> String {
    role.splits
        .iter()
        .map(|(kind, split)| match split {
            Some(s) => format!("{kind} color {} key {}", s.color, s.key),
            None => format!("{kind} none"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for RankCard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, stage, card, heading, _)) in self.modules.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            writeln!(
                f,
                "rank {} in {heading}; global stage {stage} of 0..{}",
                self.rank,
                self.total_stages.saturating_sub(1)
            )?;
            let _ = name;
            write!(f, "{card}")?;
        }
        if self.roles.is_empty() {
            return writeln!(f, "\nbridges: none (the modules have no edge)");
        }
        writeln!(
            f,
            "\nbridges (color = the group's number, key = the rank's position in it):"
        )?;
        for role in &self.roles {
            let mut parts = Vec::new();
            if role.src_leader {
                parts.push(format!(
                    "source leader, sends to {}",
                    join_ranks(&role.sends_to, " ")
                ));
            }
            if role.dst_leader {
                parts.push(format!(
                    "destination leader, receives from {}",
                    join_ranks(&role.receives_from, " ")
                ));
            }
            if let Some(slot) = role.slot {
                parts.push(format!("slot {slot}"));
            }
            if parts.is_empty() {
                parts.push("no leader".into());
            }
            writeln!(f, "  {} -> {}: {}", role.src, role.dst, parts.join("; "))?;
            writeln!(f, "    {}", splits_text(role))?;
        }
        Ok(())
    }
}

/// A role's JSON: `{"src", "dst", "src_leader", "dst_leader", "sends_to",
/// "receives_from", "slot", "splits": {KIND: {"color", "key"} | null}}`.
fn role_json(role: &BridgeRole) -> Value {
    let splits: Map<String, Value> = role
        .splits
        .iter()
        .map(|(kind, s)| {
            (
                kind.to_string(),
                s.map_or(
                    Value::Null,
                    |s| serde_json::json!({"color": s.color, "key": s.key}),
                ),
            )
        })
        .collect();
    serde_json::json!({
        "src": role.src,
        "dst": role.dst,
        "src_leader": role.src_leader,
        "dst_leader": role.dst_leader,
        "sends_to": role.sends_to,
        "receives_from": role.receives_from,
        "slot": role.slot,
        "splits": splits,
    })
}

impl Serialize for RankCard {
    /// `{"rank", "total_stages", "modules": [{"name", "first_rank",
    /// "last_rank", "stage", ..the mesh card}], "roles": [..]}`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let modules: Vec<Value> = self
            .modules
            .iter()
            .map(|(_, stage, _, _, json)| {
                let mut json = json.clone();
                if let Value::Object(o) = &mut json {
                    o.insert("stage".into(), (*stage).into());
                }
                json
            })
            .collect();
        serde_json::json!({
            "rank": self.rank,
            "total_stages": self.total_stages,
            "modules": modules,
            "roles": self.roles.iter().map(role_json).collect::<Vec<_>>(),
        })
        .serialize(s)
    }
}

/// `check --modules`: each module's check.
pub struct Checks<'a> {
    m: &'a ModulesTarget,
    reports: Vec<CheckReport>,
}

impl Checks<'_> {
    /// Each module's check of its sets of `kinds`, those of `require`
    /// staying inside a node.
    ///
    /// # Errors
    /// [`Failure::Message`] for a name that no module has; the errors of
    /// each module's check.
    pub fn new<'a>(
        m: &'a ModulesTarget,
        topology: Topology,
        kinds: &[String],
        require: &[String],
    ) -> Result<Checks<'a>, Failure> {
        let kinds = m.sets(kinds, false)?;
        let require = m.sets(require, false)?;
        let mut reports = Vec::with_capacity(m.parts.len());
        // The machine's last node or domain is the last span's: only
        // one module reports it (the last of separate spans, the first
        // of colocated ones).
        let keeps = if m.modules.is_colocated() {
            0
        } else {
            m.parts.len().saturating_sub(1)
        };
        for (i, ((_, target), (kinds, require))) in
            m.parts.iter().zip(kinds.iter().zip(&require)).enumerate()
        {
            let report = CheckReport::new(target, topology, kinds, require)?;
            reports.push(if i == keeps {
                report
            } else {
                report.without_machine_warnings()
            });
        }
        Ok(Checks { m, reports })
    }

    /// The sets that must stay inside a node and do not, each after its
    /// module's name: `llm tp`.
    pub fn failed(&self) -> Vec<String> {
        self.m
            .parts
            .iter()
            .zip(&self.reports)
            .flat_map(|((name, _), r)| r.failed().iter().map(move |k| format!("{name} {k}")))
            .collect()
    }
}

impl fmt::Display for Checks<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.m.title())?;
        for ((name, target), report) in self.m.parts.iter().zip(&self.reports) {
            writeln!(f, "\n== {} ==", heading(name, target))?;
            write!(f, "{report}")?;
        }
        Ok(())
    }
}

impl Serialize for Checks<'_> {
    /// `{"modules": [{"name", "first_rank", "last_rank", ..the mesh's
    /// check}]}`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut modules = Vec::with_capacity(self.reports.len());
        for ((name, target), report) in self.m.parts.iter().zip(&self.reports) {
            let value = serde_json::to_value(report).map_err(serde::ser::Error::custom)?;
            modules.push(module_object(name, target, value));
        }
        serde_json::json!({ "modules": modules }).serialize(s)
    }
}

/// `describe --modules`: the graph, every edge's plan in brief, and each
/// module described as a mesh.
pub struct Describe<'a> {
    /// The modules.
    pub m: &'a ModulesTarget,
    /// The machine.
    pub topology: Topology,
}

/// An edge in brief: direction, scale, mode and why.
struct EdgeBrief {
    src: String,
    dst: String,
    direction: String,
    scale: u32,
    mode: &'static str,
    reason: Option<String>,
}

impl Describe<'_> {
    fn edges(&self) -> Vec<EdgeBrief> {
        let m = &self.m.modules;
        m.edges()
            .filter_map(|(s, d)| m.edge_info(s, d).ok())
            .map(|e| EdgeBrief {
                src: e.src,
                dst: e.dst,
                direction: e.direction.to_string(),
                scale: e.scale,
                mode: e.mode.map_or("p2p", |m| m.name()),
                reason: e.reason,
            })
            .collect()
    }
}

impl fmt::Display for Describe<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.m;
        writeln!(f, "{}", m.title())?;
        writeln!(
            f,
            "\nmodules (stages: the longest path into the module, each module weighted by its pp):"
        )?;
        for (name, target) in &m.parts {
            let (first, last) = m.stages(name, target);
            let (a, b) = span(target);
            writeln!(f, "  {name}: ranks {a}..{b}, stages {first}..{last}")?;
        }
        let edges = self.edges();
        if edges.is_empty() {
            writeln!(f, "\nedges: none")?;
        } else {
            writeln!(
                f,
                "\nedges (direction: which side has more data lanes; scale: their ratio):"
            )?;
            for e in &edges {
                write!(
                    f,
                    "  {} -> {}: {}, scale {}, {}",
                    e.src,
                    e.dst,
                    e.direction,
                    e.scale,
                    match e.mode {
                        "collective" => "collective (all-gathers on the colocated ranks)",
                        _ => "p2p (leaders send to leaders, then broadcast)",
                    }
                )?;
                match &e.reason {
                    Some(r) => writeln!(f, ": {r}")?,
                    None => writeln!(f)?,
                }
            }
            writeln!(
                f,
                "  (`rank-layout bridge --modules FILE` lists every edge's groups)"
            )?;
        }
        for (name, target) in &m.parts {
            writeln!(f, "\n== {} ==", heading(name, target))?;
            write!(f, "{}", DescribeReport::new(target, self.topology))?;
        }
        Ok(())
    }
}

impl Serialize for Describe<'_> {
    /// `{"world_size", "rank_offset", "colocated", "total_stages",
    /// "modules": [{"name", "first_rank", "last_rank", "first_stage",
    /// "last_stage", ..the mesh's description}], "edges": [{"src", "dst",
    /// "direction", "scale", "mode", "reason"}]}`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.m;
        let mut modules = Vec::with_capacity(m.parts.len());
        for (name, target) in &m.parts {
            let value = serde_json::to_value(DescribeReport::new(target, self.topology))
                .map_err(serde::ser::Error::custom)?;
            let mut object = module_object(name, target, value);
            let (first, last) = m.stages(name, target);
            if let Value::Object(o) = &mut object {
                o.insert("first_stage".into(), first.into());
                o.insert("last_stage".into(), last.into());
            }
            modules.push(object);
        }
        let edges: Vec<Value> = self
            .edges()
            .into_iter()
            .map(|e| {
                serde_json::json!({
                    "src": e.src,
                    "dst": e.dst,
                    "direction": e.direction,
                    "scale": e.scale,
                    "mode": e.mode,
                    "reason": e.reason,
                })
            })
            .collect();
        serde_json::json!({
            "world_size": m.modules.world_size(),
            "rank_offset": m.modules.rank_offset(),
            "colocated": m.modules.is_colocated(),
            "total_stages": m.modules.total_stages(),
            "modules": modules,
            "edges": edges,
        })
        .serialize(s)
    }
}
