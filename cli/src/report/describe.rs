//! `rank-layout describe`: the derived sizes and why (a mesh: its dims,
//! strides, views and flattens), the groups of every kind (dim set), and
//! what listing everything would cost; a table or one JSON object.

use std::fmt::{self, Write};

use rank_layout::{Config, ExpertLayout, Layout, Topology};
use serde::Serialize;

use crate::format::{bytes, count, experts, gtp_sizes, thousands};
use crate::report::groups::{group_sizes, groups_heading};
use crate::report::mesh::{Factorisation, MeshOut};
use crate::report::{Entries, SizesOut};
use crate::spread::machine_line;
use crate::target::{DimSet, MeshTarget, Target};

/// Groups a kind lists at most in the shortened table (the head, the tail
/// and the line between them).
const SHORT_ROWS: u64 = 64;

/// A description of a layout or a mesh.
pub enum DescribeReport<'a> {
    /// Of a layout.
    Layout(LayoutDescription<'a>),
    /// Of a mesh.
    Mesh(MeshDescription<'a>),
}

impl<'a> DescribeReport<'a> {
    /// Describes `target` on `topology`.
    pub fn new(target: &'a Target, topology: Topology) -> DescribeReport<'a> {
        match target {
            Target::Layout { layout, given } => DescribeReport::Layout(LayoutDescription {
                target,
                layout,
                given,
                topology,
            }),
            Target::Mesh(mesh) => DescribeReport::Mesh(MeshDescription {
                target,
                mesh,
                topology,
            }),
        }
    }
}

impl fmt::Display for DescribeReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DescribeReport::Layout(d) => d.fmt(f),
            DescribeReport::Mesh(d) => d.fmt(f),
        }
    }
}

impl Serialize for DescribeReport<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            DescribeReport::Layout(d) => d.serialize(s),
            DescribeReport::Mesh(d) => d.serialize(s),
        }
    }
}

/// A description of a layout.
pub struct LayoutDescription<'a> {
    target: &'a Target,
    layout: &'a Layout,
    /// The configuration as given (to tell given sizes from derived ones).
    given: &'a Config,
    topology: Topology,
}

/// A description of a mesh.
pub struct MeshDescription<'a> {
    target: &'a Target,
    mesh: &'a MeshTarget,
    topology: Topology,
}

/// One kind's line: its groups, their sizes and their members.
struct KindLine {
    kind: DimSet,
    /// `"16 groups of 4 ranks"`.
    heading: String,
    groups: u64,
    /// The smallest and the largest group.
    sizes: (usize, usize),
    members: u64,
}

/// What listing every group would cost.
#[derive(Serialize)]
struct Costs {
    members: u64,
    groups: u64,
    kinds: u64,
    /// `groups --format json`, estimated.
    json_bytes: u64,
    /// `groups --full`, estimated.
    full_bytes: u64,
    full_lines: u64,
    /// `groups` (long lists shortened), at most.
    short_lines: u64,
}

/// Every set's line.
fn kind_lines(target: &Target) -> Vec<KindLine> {
    target
        .all_sets()
        .into_iter()
        .filter_map(|kind| {
            let g = target.groups(&kind).ok()?;
            Some(KindLine {
                heading: groups_heading(&g),
                groups: g.len() as u64,
                sizes: group_sizes(&g),
                members: g.member_count(),
                kind,
            })
        })
        .collect()
}

/// What listing the groups of `kinds` costs.
fn costs(target: &Target, kinds: &[KindLine]) -> Costs {
    let members: u64 = kinds.iter().map(|k| k.members).sum();
    let groups: u64 = kinds.iter().map(|k| k.groups).sum();
    let short_lines: u64 = kinds.iter().map(|k| k.groups.min(SHORT_ROWS + 1) + 3).sum();
    let kinds = kinds.len() as u64;
    let world = u64::from(target.world_size()).max(1);
    let digits = digits_in(u64::from(target.rank_offset()), target.rank_end());
    // Members times their mean width (+1 for the separator), brackets
    // per group, and a little per kind and for the header.
    // (The product may pass u64 at 2^31 ranks: computed in u128.)
    let widths = (u128::from(members) * u128::from(digits)).div_ceil(u128::from(world));
    let member_bytes = u64::try_from(widths).unwrap_or(u64::MAX) + members;
    let index_width = groups.to_string().len() as u64;
    Costs {
        members,
        groups,
        kinds,
        json_bytes: member_bytes + 2 * groups + 12 * kinds + 400,
        full_bytes: member_bytes + groups * (6 + 2 * index_width),
        full_lines: groups + 3 * kinds + 3,
        short_lines: short_lines + 4,
    }
}

/// Writes the per-set table and the listing costs, `label` naming the
/// first column.
fn write_sets_and_costs(f: &mut fmt::Formatter<'_>, target: &Target, label: &str) -> fmt::Result {
    let kinds = kind_lines(target);
    let width = kinds
        .iter()
        .map(|k| k.kind.to_string().len())
        .max()
        .unwrap_or(4)
        .max(label.len());
    writeln!(f, "\n{label:<width$}  {:>13}  groups", "members")?;
    for k in &kinds {
        writeln!(
            f,
            "{:<width$}  {:>13}  {}",
            k.kind.to_string(),
            thousands(k.members),
            k.heading
        )?;
    }
    let c = costs(target, &kinds);
    writeln!(
        f,
        "\nlisting everything: {} in {} of {}",
        count(c.members, "member", "members"),
        count(c.groups, "group", "groups"),
        if target.is_mesh() {
            count(c.kinds, "dim set", "dim sets")
        } else {
            count(c.kinds, "kind", "kinds")
        }
    )?;
    writeln!(f, "  groups --format json   about {}", bytes(c.json_bytes))?;
    writeln!(
        f,
        "  groups --full          about {} in {} lines",
        bytes(c.full_bytes),
        thousands(c.full_lines)
    )?;
    writeln!(
        f,
        "  groups                 at most {} lines (long lists shortened)",
        thousands(c.short_lines)
    )?;
    writeln!(
        f,
        "  rank R                 one rank's groups, computed arithmetically (instant at any size)"
    )
}

/// The JSON of every set: `{SET: {"groups", "members", "sizes"}}`.
fn kinds_out(kinds: &[KindLine]) -> Vec<(String, KindOut)> {
    kinds
        .iter()
        .map(|k| {
            let mut sizes = vec![k.sizes.0];
            if k.sizes.1 != k.sizes.0 {
                sizes.push(k.sizes.1);
            }
            (
                k.kind.to_string(),
                KindOut {
                    groups: k.groups,
                    members: k.members,
                    sizes,
                },
            )
        })
        .collect()
}

impl LayoutDescription<'_> {
    /// The lines that explain the derived sizes.
    fn why(&self) -> Result<Vec<String>, fmt::Error> {
        let l = self.layout;
        let s = l.sizes();
        let world = l.world_size();
        let mut lines = Vec::new();
        // The ranks of one data-parallel replica: its formula, its factors.
        let (what, factors) = match l.encoder_sizes() {
            Some(e) => (
                "(encoder_tp*encoder_pp + tp*pp)*cp",
                format!("({}*{} + {}*{})*{}", e.tp, e.pp, s.tp, s.pp, s.cp),
            ),
            None if s.gtp_remat > 1 => (
                "tp*cp*pp*gtp_remat",
                format!("{}*{}*{}*{}", s.tp, s.cp, s.pp, s.gtp_remat),
            ),
            None => ("tp*cp*pp", format!("{}*{}*{}", s.tp, s.cp, s.pp)),
        };
        let dp = s.dp;
        lines.push(match (self.given.dp, self.given.world_size) {
            (Some(_), Some(_)) => format!(
                "dp = {dp} (given), checked: world_size = {what}*dp = {factors}*{dp} = {world}"
            ),
            (Some(_), None) => format!(
                "dp = {dp} (given), so world_size = {what}*dp = {factors}*{dp} = {world}"
            ),
            (None, Some(_)) => format!(
                "dp = world_size / ({what}) = {world} / ({factors}) = {dp}"
            ),
            (None, None) => format!(
                "dp = 1 (neither --dp nor --world-size given), so world_size = {what} = {factors} = {world}"
            ),
        });
        match l.config().expert_layout {
            ExpertLayout::Nested => {
                lines.push(format!(
                    "edp = dp / ep = {} / {} = {} (nested experts: ep is carved out of dp; Megatron-LM's \"dp mod ep\")",
                    s.dp, s.ep, s.edp
                ));
                lines.push(format!("etp = tp = {} (nested experts)", s.etp));
            }
            _ if s.egtp_remat > 1 => {
                lines.push(format!(
                    "edp = world_size / (etp*ep*pp*expert_gtp_remat) = {world} / ({}*{}*{}*{}) = {} (folded: a second expert grid over the same ranks)",
                    s.etp, s.ep, s.pp, s.egtp_remat, s.edp
                ));
                let origin = if self.given.etp.is_some() {
                    "given"
                } else {
                    "default: tp"
                };
                lines.push(format!("etp = {} ({origin})", s.etp));
            }
            _ => {
                lines.push(format!(
                    "edp = world_size / (etp*ep*pp) = {world} / ({}*{}*{}) = {} (folded: a second expert grid over the same ranks)",
                    s.etp, s.ep, s.pp, s.edp
                ));
                let origin = if self.given.etp.is_some() {
                    "given"
                } else {
                    "default: tp"
                };
                lines.push(format!("etp = {} ({origin})", s.etp));
            }
        }
        if let Some(e) = l.encoder_sizes() {
            let first = l.rank_offset();
            let enc = l.encoder_world_size();
            let mut line = String::new();
            write!(
                line,
                "encoder: ranks {first}..{} ({enc} = encoder_tp*cp*dp*encoder_pp = {}*{}*{}*{}), ",
                u64::from(first) + u64::from(enc) - 1,
                e.tp,
                e.cp,
                e.dp,
                e.pp
            )?;
            write!(
                line,
                "decoder: ranks {}..{} ({} = tp*cp*dp*pp = {}*{}*{}*{})",
                u64::from(first) + u64::from(enc),
                l.rank_end() - 1,
                world - enc,
                s.tp,
                s.cp,
                s.dp,
                s.pp
            )?;
            lines.push(line);
        }
        if s.gtp_remat > 1 {
            lines.push(format!(
                "gtp_remat = {}: each dense weight in tp*gtp_remat = {} shards (Megatron-LM --tensor-parallel-num-weight-shards {}); dp = {} is the replicate degree, gtp_remat-dp (dp*gtp_remat = {} ranks) the data-distribution group",
                s.gtp_remat,
                s.tp * s.gtp_remat,
                s.tp * s.gtp_remat,
                s.dp,
                s.dp * s.gtp_remat
            ));
        }
        if s.egtp_remat > 1 {
            lines.push(format!(
                "expert_gtp_remat = {}: each expert weight in etp*expert_gtp_remat = {} shards (--expert-tensor-parallel-num-weight-shards {}); egtp_remat-edp (edp*expert_gtp_remat = {} ranks) the expert data-distribution group",
                s.egtp_remat,
                s.etp * s.egtp_remat,
                s.etp * s.egtp_remat,
                s.edp * s.egtp_remat
            ));
        }
        if !l.hierarchical_cp().is_empty() {
            let levels: Vec<String> = l.hierarchical_cp().iter().map(u32::to_string).collect();
            lines.push(format!(
                "cp = {} = {} in hierarchical levels, innermost first (hcp-0 .. hcp-{})",
                s.cp,
                levels.join("*"),
                levels.len() - 1
            ));
        }
        if l.dist_opt_instances() > 1 {
            lines.push(format!(
                "dist_opt_instances = {}: each dp-cp group cut into {} contiguous slices (dp-cp-intra), replicas across them in dp-cp-inter",
                l.dist_opt_instances(),
                l.dist_opt_instances()
            ));
        }
        Ok(lines)
    }
}

/// The sum of the decimal digits' counts of every rank in `[first, end)`.
fn digits_in(first: u64, end: u64) -> u64 {
    let mut total = 0;
    let mut low = 0u64;
    let mut high = 10u64;
    let mut digits = 1;
    while low < end {
        let (a, b) = (first.max(low), end.min(high));
        if a < b {
            total += (b - a) * digits;
        }
        low = high;
        high = high.saturating_mul(10);
        digits += 1;
    }
    total
}

/// Which Megatron-LM version each choice of `layout` matches: the expert
/// layout, and the join of an encoder's pipelines to the decoder's.
fn matches(layout: &Layout) -> Vec<String> {
    let mut lines = vec![if layout.config().expert_layout == ExpertLayout::Folded {
        format!(
            "{}: Megatron-Core's MoE parallel folding, today's default (a second expert grid of etp, ep, edp and pp over the same ranks)",
            experts(ExpertLayout::Folded)
        )
    } else {
        format!(
            "{}: Megatron-LM's 2024 RankGenerator, commit 4ff9e66 (ep carved out of dp); Megatron-Core today folds experts (--expert-layout folded)",
            experts(ExpertLayout::Nested)
        )
    }];
    let s = layout.sizes();
    if s.gtp_remat > 1 || s.egtp_remat > 1 {
        lines.push(
            "weight-shard (GTP) axes as Megatron-Core 0.19 and Megatron-LM main (from c5ff22b7f1, July 2026) place them: gtp_remat after tp, egtp_remat after ep; older versions have no such axis"
                .into(),
        );
    }
    if layout.has_encoder() {
        lines.push(
            "encoder pipelines joined to the decoder's by coordinates (each feeds the decoder pipelines of its cp and dp), not by Megatron-LM's zip(cycle()) of 4ff9e66 nor the block map of 5a3b6bcf1f"
                .into(),
        );
    }
    lines
}

/// The layout's shape in words.
fn shape_words(layout: &Layout) -> &'static str {
    match layout.shape().name() {
        "nested" => "nested (expert parallelism carved out of dp, Megatron-LM's RankGenerator)",
        "folded" => {
            "folded (a second expert grid over the same ranks, Megatron-Core's MoE parallel folding)"
        }
        _ => "encoder + decoder (an encoder grid with its own tp and pp, then the decoder grid)",
    }
}

impl fmt::Display for LayoutDescription<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = self.layout;
        let s = l.sizes();
        writeln!(f, "layout    {}", shape_words(l))?;
        for (i, line) in matches(l).into_iter().enumerate() {
            let label = if i == 0 { "matches" } else { "" };
            writeln!(f, "{label:<10}{line}")?;
        }
        writeln!(
            f,
            "ranks     {} ({}..{}), order {} (first axis fastest)",
            thousands(u64::from(l.world_size())),
            l.rank_offset(),
            l.rank_end() - 1,
            l.config().order
        )?;
        let (gtp, egtp) = gtp_sizes(s);
        writeln!(
            f,
            "sizes     tp={} cp={} ep={} dp={} pp={}{gtp}  expert: etp={} edp={}{egtp}",
            s.tp, s.cp, s.ep, s.dp, s.pp, s.etp, s.edp
        )?;
        for (i, line) in self.why()?.into_iter().enumerate() {
            let label = if i == 0 { "why" } else { "" };
            writeln!(f, "{label:<10}{line}")?;
        }
        writeln!(f, "machine   {}", machine_line(self.target, &self.topology))?;
        write_sets_and_costs(f, self.target, "kind")
    }
}

/// The JSON of one kind: `{"groups", "members", "sizes": [smallest,
/// largest] (one size when they are equal)}`.
#[derive(Serialize)]
struct KindOut {
    groups: u64,
    members: u64,
    sizes: Vec<usize>,
}

/// The JSON of the machine.
#[derive(Serialize)]
struct MachineOut {
    summary: String,
    gpus_per_node: u32,
    nodes_per_domain: Option<u32>,
}

impl Serialize for LayoutDescription<'_> {
    /// `{"layout", "expert_layout", "matches": [lines], "world_size", "first_rank",
    /// "last_rank", "order", "sizes": {..}, "encoder_sizes": {..} (with an
    /// encoder), "why": [lines], "machine": {"summary", "gpus_per_node",
    /// "nodes_per_domain"}, "kinds": {KIND: {"groups", "members",
    /// "sizes"}}, "listing": {"members", "groups", "kinds", "json_bytes",
    /// "full_bytes", "full_lines", "short_lines"}}`
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error as _, SerializeMap};
        let l = self.layout;
        let why = self
            .why()
            .map_err(|_| S::Error::custom("describing the layout"))?;
        let kinds = kind_lines(self.target);
        let costs = costs(self.target, &kinds);
        let kind_entries = kinds_out(&kinds);
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("layout", l.shape().name())?;
        map.serialize_entry("expert_layout", &l.config().expert_layout.to_string())?;
        map.serialize_entry("matches", &matches(l))?;
        map.serialize_entry("world_size", &l.world_size())?;
        map.serialize_entry("first_rank", &l.rank_offset())?;
        map.serialize_entry("last_rank", &(l.rank_end() - 1))?;
        map.serialize_entry("order", &l.config().order.to_string())?;
        map.serialize_entry("sizes", &SizesOut::from(l.sizes()))?;
        if let Some(e) = l.encoder_sizes() {
            map.serialize_entry("encoder_sizes", &SizesOut::from(e))?;
        }
        map.serialize_entry("why", &why)?;
        map.serialize_entry("machine", &self.machine())?;
        map.serialize_entry("kinds", &Entries(&kind_entries))?;
        map.serialize_entry("listing", &costs)?;
        map.end()
    }
}

impl LayoutDescription<'_> {
    /// The JSON of the machine.
    fn machine(&self) -> MachineOut {
        machine_out(self.target, &self.topology)
    }
}

/// The JSON of the machine a target occupies.
fn machine_out(target: &Target, topology: &Topology) -> MachineOut {
    MachineOut {
        summary: machine_line(target, topology),
        gpus_per_node: topology.gpus_per_node(),
        nodes_per_domain: topology.nodes_per_domain(),
    }
}

/// `tp=2 stride 1, cp=2 stride 2`: dims with sizes and strides.
fn dims_line(factors: &Factorisation) -> String {
    factors
        .dims
        .iter()
        .zip(&factors.strides)
        .map(|((n, size), (_, stride))| format!("{n}={size} stride {}", thousands(*stride)))
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for MeshDescription<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &self.mesh.mesh;
        let out = MeshOut::new(self.mesh);
        let header = self.mesh.header();
        if let Some(first) = header.first() {
            writeln!(f, "{first}")?;
        }
        writeln!(
            f,
            "ranks     {} ({}..{}): rank = {} + sum of coord x stride (first dim fastest)",
            thousands(u64::from(m.world_size())),
            m.rank_offset(),
            m.rank_end().saturating_sub(1),
            m.rank_offset()
        )?;
        writeln!(f, "dims      {}", dims_line(&out.factors))?;
        for view in &out.views {
            write!(f, "view      {}: {}", view.name, dims_line(&view.factors))?;
            if view.shared.is_empty() {
                writeln!(f, " (shares no dim with the mesh)")?;
            } else {
                writeln!(
                    f,
                    " (shares {} with the mesh: the same groups, proven from sizes and strides)",
                    view.shared.join(", ")
                )?;
            }
        }
        for (name, dims) in &out.flattens {
            writeln!(
                f,
                "flatten   {name} = {dims} (its groups are those of the dim set {dims})"
            )?;
        }
        writeln!(f, "machine   {}", machine_line(self.target, &self.topology))?;
        write_sets_and_costs(f, self.target, "dim set")
    }
}

impl Serialize for MeshDescription<'_> {
    /// `{"mesh": {..}, "world_size", "first_rank", "last_rank", "machine":
    /// {"summary", "gpus_per_node", "nodes_per_domain"}, "dim_sets": {SET:
    /// {"groups", "members", "sizes"}}, "listing": {"members", "groups",
    /// "dim_sets", "json_bytes", "full_bytes", "full_lines", "short_lines"}}`
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error as _, SerializeMap};
        let m = &self.mesh.mesh;
        let kinds = kind_lines(self.target);
        let costs = costs(self.target, &kinds);
        let entries = kinds_out(&kinds);
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("mesh", &MeshOut::new(self.mesh))?;
        map.serialize_entry("world_size", &m.world_size())?;
        map.serialize_entry("first_rank", &m.rank_offset())?;
        map.serialize_entry("last_rank", &m.rank_end().saturating_sub(1))?;
        map.serialize_entry("machine", &machine_out(self.target, &self.topology))?;
        map.serialize_entry("dim_sets", &Entries(&entries))?;
        // The count of dim sets is "dim_sets", as the key above.
        let mut listing = serde_json::to_value(&costs).map_err(S::Error::custom)?;
        if let Some(map) = listing.as_object_mut() {
            if let Some(n) = map.remove("kinds") {
                map.insert("dim_sets".into(), n);
            }
        }
        map.serialize_entry("listing", &listing)?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::digits_in;

    #[test]
    fn digit_counts() {
        assert_eq!(digits_in(0, 10), 10);
        assert_eq!(digits_in(0, 11), 12);
        assert_eq!(digits_in(8, 12), 1 + 1 + 2 + 2);
        assert_eq!(digits_in(0, 1000), 10 + 180 + 2700);
    }
}
