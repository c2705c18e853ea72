//! `rank-layout check`: per kind, how many groups cross a node (domain)
//! boundary and the most nodes (domains) one spans, with warnings in plain
//! words and a concrete fix when a kind that needs a node's bandwidth
//! leaves it.

use std::fmt;

use rank_layout::{Spread, Topology};
use serde::Serialize;
use serde::ser::SerializeMap;

use crate::error::Failure;
use crate::format::{count, thousands};
use crate::ranking::{Priority, Ranking, rank_orders};
use crate::report::Entries;
use crate::report::mesh::MeshOut;
use crate::spread::{KindSpread, SpreadOut, SpreadTable, machine_line, spreads, traffic};
use crate::target::{DimSet, Target};

/// The check of a layout (or mesh) on a machine.
#[derive(Debug, Clone)]
pub struct CheckReport {
    /// The machine in words.
    machine: String,
    /// The layout's order and experts, or the mesh, in words.
    title: String,
    /// The mesh's JSON description, for a mesh.
    mesh: Option<MeshOut>,
    /// The kinds of the table.
    rows: Vec<KindSpread>,
    /// The kinds that must stay inside a node.
    required: Vec<DimSet>,
    /// Those of them that do not.
    failed: Vec<DimSet>,
    /// Plain-word warnings, each with a fix.
    warnings: Vec<String>,
    /// Warnings about the machine: a last node or domain the layout only
    /// partly fills.
    machine_warnings: Vec<String>,
}

impl CheckReport {
    /// Checks `kinds` of `target` on `topology` (every kind when empty),
    /// warning about `required` kinds (the default tp, cp, ep, etp when
    /// empty) that leave a node or a domain.
    ///
    /// # Errors
    /// [`Failure::Input`] for a kind `target` does not have.
    pub fn new(
        target: &Target,
        topology: Topology,
        kinds: &[DimSet],
        required: &[DimSet],
    ) -> Result<CheckReport, Failure> {
        let kinds = target.sets_or_all(kinds)?;
        let rows = spreads(target, &kinds, &topology)?;
        let required = if required.is_empty() {
            target.critical()
        } else {
            required.to_vec()
        };
        let mut advisor = Advisor {
            target,
            topology,
            ranking: None,
        };
        let mut warnings = Vec::new();
        let mut failed = Vec::new();
        for kind in &required {
            let spread = target.spread(kind, &topology)?;
            if spread.cross_node_groups > 0 {
                failed.push(kind.clone());
                warnings.push(advisor.node_warning(kind, spread)?);
            }
            if spread.cross_domain_groups.is_some_and(|c| c > 0) {
                warnings.push(advisor.domain_warning(kind, spread)?);
            }
        }
        Ok(CheckReport {
            machine: machine_line(target, &topology),
            title: target.title(),
            mesh: match target {
                Target::Mesh(m) => Some(MeshOut::new(m)),
                Target::Layout { .. } => None,
            },
            rows,
            required,
            failed,
            warnings,
            machine_warnings: partly_filled(target, &topology),
        })
    }

    /// The same report without its machine warnings (for a module whose
    /// span another module's follows: the machine's last node is not its).
    pub fn without_machine_warnings(mut self) -> CheckReport {
        self.machine_warnings.clear();
        self
    }

    /// The kinds that must stay inside a node and do not (`--strict` fails
    /// when there is one).
    pub fn failed(&self) -> &[DimSet] {
        &self.failed
    }
}

/// The warnings about a last node, and a last domain, that the layout's
/// ranks only partly fill: its last rank (`rank_offset + world_size - 1`)
/// is not the last GPU of its node (domain).
fn partly_filled(target: &Target, topology: &Topology) -> Vec<String> {
    let whose = if target.is_mesh() { "mesh" } else { "layout" };
    let first = u64::from(target.rank_offset());
    let end = target.rank_end();
    let total = if first == 0 {
        format!("world_size {end}")
    } else {
        format!(
            "rank_offset + world_size = {first} + {} = {end}",
            end - first
        )
    };
    let g = u64::from(topology.gpus_per_node());
    let mut out = Vec::new();
    if end % g != 0 {
        let node = (end - 1) / g;
        let used = end - first.max(node * g);
        out.push(format!(
            "the last node, node {}, is partly used: the {whose}'s ranks fill {} of its {g} GPUs ({total} is not a multiple of {g} GPUs per node)",
            thousands(node),
            used
        ));
    }
    if let (Some(d), Some(m)) = (topology.gpus_per_domain(), topology.nodes_per_domain()) {
        let d = u64::from(d);
        if end % d != 0 {
            let domain = (end - 1) / d;
            let start = first.max(domain * d);
            let nodes = (end - 1) / g - start / g + 1;
            out.push(format!(
                "the last domain, domain {}, is partly used: the {whose}'s ranks fill {} of its {m} nodes ({} of its {d} GPUs; {total} is not a multiple of {d} GPUs per domain)",
                thousands(domain),
                nodes,
                end - start
            ));
        }
    }
    out
}

/// Finds fixes for the warnings: the ranking of orders is computed once,
/// when the first warning needs it.
struct Advisor<'a> {
    target: &'a Target,
    topology: Topology,
    ranking: Option<Ranking>,
}

/// `"2 nodes"`, or `"up to 3 nodes"` when the groups that cross may span
/// fewer than the most.
fn span(most: u32, unit: &str, units: &str) -> String {
    if most <= 2 {
        count(most.into(), unit, units)
    } else {
        format!("up to {}", count(most.into(), unit, units))
    }
}

/// `"tp groups"` or `"8 of 16 tp groups"`.
fn which(kind: &DimSet, crossing: u32, groups: u32) -> String {
    if crossing == groups {
        format!("{kind} groups")
    } else {
        format!("{crossing} of {groups} {kind} groups")
    }
}

/// A size that keeps a single-axis (single-dim) `kind`'s groups inside
/// `unit` ranks: with its members `stride` apart (read from the first
/// group), at most `unit / stride` members fit; `use tp <= 8`, or `make tp
/// a divisor of 8` when the size fits but straddles.
fn size_fix(target: &Target, kind: &DimSet, size: usize, unit: u32) -> Option<String> {
    target.single_dim(kind)?;
    let group = target.groups(kind).ok()?.next()?;
    let stride = group.get(1)?.checked_sub(group.first()?)?;
    if stride == 0 || stride > unit || unit % stride != 0 {
        return None;
    }
    let fit = unit / stride;
    let size = u32::try_from(size).unwrap_or(u32::MAX);
    if size > fit && fit >= 2 {
        Some(format!("use {kind} <= {fit}"))
    } else if size <= fit && fit % size.max(1) != 0 {
        Some(format!("make {kind} a divisor of {fit}"))
    } else {
        None
    }
}

impl Advisor<'_> {
    /// `("tp*cp", 16)`: the product of the sizes of single-axis `kinds`.
    fn product(&self, kinds: &[DimSet]) -> Option<(String, u64)> {
        let mut names = Vec::new();
        let mut value = 1u64;
        for kind in kinds {
            let (name, size) = self.target.single_dim(kind)?;
            names.push(name);
            value *= u64::from(size);
        }
        Some((names.join("*"), value))
    }

    /// The ranking of every order of the layout, computed once.
    fn ranking(&mut self) -> Result<&Ranking, Failure> {
        let ranking = match self.ranking.take() {
            Some(ranking) => ranking,
            None => rank_orders(
                self.target,
                &self.topology,
                &Priority::default_for(self.target),
            )?,
        };
        Ok(self.ranking.insert(ranking))
    }

    /// The best order that ranks no worse than the given one and in which
    /// `measure` of `kind` is smaller than `now`: its flag, its fastest
    /// axis and that measure.
    fn better_order(
        &mut self,
        kind: &DimSet,
        now: u32,
        measure: fn(&Spread) -> u32,
    ) -> Result<Option<(String, Option<String>, u32)>, Failure> {
        let topology = self.topology;
        let ranking = self.ranking()?;
        let given = ranking
            .candidates
            .iter()
            .find(|c| c.given)
            .map(|c| &c.score);
        for c in &ranking.candidates {
            if c.given || given.is_some_and(|g| c.score > *g) {
                continue;
            }
            if let Ok(s) = c.target.spread(kind, &topology) {
                if measure(&s) < now {
                    return Ok(Some((c.flag.clone(), c.fastest.clone(), measure(&s))));
                }
            }
        }
        Ok(None)
    }

    /// The first order (whatever its rank) that keeps `kind` inside nodes,
    /// and the prioritised kinds it moves to more nodes than now.
    fn trade_off(&mut self, kind: &DimSet) -> Result<Option<(String, Vec<DimSet>)>, Failure> {
        let (target, topology) = (self.target, self.topology);
        let ranking = self.ranking()?;
        for c in &ranking.candidates {
            if c.target
                .spread(kind, &topology)
                .is_ok_and(|s| s.cross_node_groups == 0)
            {
                let worse = c
                    .spreads
                    .iter()
                    .filter(|k| {
                        target
                            .spread(&k.kind, &topology)
                            .is_ok_and(|now| k.spread.max_nodes_per_group > now.max_nodes_per_group)
                    })
                    .map(|k| k.kind.clone())
                    .collect();
                return Ok(Some((c.flag.clone(), worse)));
            }
        }
        Ok(None)
    }

    /// The warning for `kind`, whose groups cross nodes.
    fn node_warning(&mut self, kind: &DimSet, s: Spread) -> Result<String, Failure> {
        let g = self.topology.gpus_per_node();
        let leaves = if self.topology.nodes_per_domain().is_some() {
            "leaves the node"
        } else {
            "leaves NVLink"
        };
        let mut fixes = Vec::new();
        if let Some((flag, fastest, nodes)) =
            self.better_order(kind, s.max_nodes_per_group, |s| s.max_nodes_per_group)?
        {
            let given_first = self.target.fastest();
            match self.target.single_dim(kind) {
                Some((dim, _))
                    if fastest.as_ref() == Some(&dim) && given_first != Some(dim.clone()) =>
                {
                    fixes.push(format!(
                        "put {dim} {} ({flag})",
                        self.target.fastest_place()
                    ));
                }
                _ => fixes.push(format!(
                    "use {flag} ({kind} groups then span {})",
                    count(nodes.into(), "node", "nodes")
                )),
            }
        }
        if let Some(fix) = size_fix(self.target, kind, s.size, g) {
            fixes.push(fix);
        }
        if self.target.rank_offset() % g != 0 {
            fixes.push(format!(
                "start at a --rank-offset that is a multiple of {g}"
            ));
        }
        if fixes.is_empty() {
            fixes.push(match self.trade_off(kind)? {
                Some((flag, worse)) if !worse.is_empty() => {
                    let mut all = worse.clone();
                    all.push(kind.clone());
                    let names: Vec<String> = worse.iter().map(DimSet::to_string).collect();
                    let product = self.product(&all);
                    format!(
                        "no order keeps {} and {kind} inside a node{}: shrink them, or use {flag} to keep {kind} inside nodes instead of {}",
                        names.join(", "),
                        product
                            .map(|(text, value)| format!(" ({text} = {value} > {g})"))
                            .unwrap_or_default(),
                        names.join(", ")
                    )
                }
                Some((flag, _)) => format!("use {flag}"),
                None => format!(
                    "no order of these sizes keeps {kind} inside a node: shrink it or the {} before it",
                    self.target.dims_word()
                ),
            });
        }
        Ok(format!(
            "{} span {}: {} {leaves}; {}",
            which(kind, s.cross_node_groups, s.groups),
            span(s.max_nodes_per_group, "node", "nodes"),
            traffic(self.target, kind),
            fixes.join(" or ")
        ))
    }

    /// The warning for `kind`, whose groups cross domains.
    fn domain_warning(&mut self, kind: &DimSet, s: Spread) -> Result<String, Failure> {
        let crossing = s.cross_domain_groups.unwrap_or(0);
        let most = s.max_domains_per_group.unwrap_or(1);
        let mut fixes = Vec::new();
        if let Some((flag, _, domains)) =
            self.better_order(kind, most, |s| s.max_domains_per_group.unwrap_or(1))?
        {
            fixes.push(format!(
                "use {flag} ({kind} groups then span {})",
                count(domains.into(), "domain", "domains")
            ));
        }
        if let Some(gpus) = self.topology.gpus_per_domain() {
            if let Some(fix) = size_fix(self.target, kind, s.size, gpus) {
                fixes.push(format!("{fix} ({gpus} GPUs per domain)"));
            }
        }
        if fixes.is_empty() {
            fixes.push(format!(
                "no order of these sizes keeps {kind} inside a domain"
            ));
        }
        Ok(format!(
            "{} span {}: {} leaves its NVLink domain; {}",
            which(kind, crossing, s.groups),
            span(most, "domain", "domains"),
            traffic(self.target, kind),
            fixes.join(" or ")
        ))
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}, {}\n", self.machine, self.title)?;
        write!(f, "{}", SpreadTable(&self.rows))?;
        let names: Vec<String> = self.required.iter().map(DimSet::to_string).collect();
        if self.warnings.is_empty() {
            writeln!(f, "\nok: {} groups stay inside a node", names.join(", "))?;
        } else {
            writeln!(
                f,
                "\nwarnings ({} that should stay inside a node: {}):",
                if self.mesh.is_some() {
                    "dim sets"
                } else {
                    "kinds"
                },
                names.join(", ")
            )?;
            for w in &self.warnings {
                writeln!(f, "  - {w}")?;
            }
        }
        if !self.machine_warnings.is_empty() {
            writeln!(f, "\nwarnings (the machine):")?;
            for w in &self.machine_warnings {
                writeln!(f, "  - {w}")?;
            }
        }
        Ok(())
    }
}

impl Serialize for CheckReport {
    /// `{"kinds": {KIND: {"groups", "size", "cross_node_groups",
    /// "max_nodes_per_group", "cross_domain_groups",
    /// "max_domains_per_group"}}, "warnings": [..]}` (the kinds' warnings,
    /// then the machine's); for a mesh `{"mesh": {..}, "dim_sets": {SET:
    /// ..}, "warnings": [..]}`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let kinds: Vec<(String, SpreadOut)> = self
            .rows
            .iter()
            .map(|k| (k.kind.to_string(), k.into()))
            .collect();
        let mut map = s.serialize_map(None)?;
        match &self.mesh {
            Some(mesh) => {
                map.serialize_entry("mesh", mesh)?;
                map.serialize_entry("dim_sets", &Entries(&kinds))?;
            }
            None => map.serialize_entry("kinds", &Entries(&kinds))?,
        }
        let warnings: Vec<&String> = self.warnings.iter().chain(&self.machine_warnings).collect();
        map.serialize_entry("warnings", &warnings)?;
        map.end()
    }
}
