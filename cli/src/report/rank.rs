//! `rank-layout rank R`: one rank's card (table) or its JSON, in a layout
//! or a mesh.

use std::fmt;

use rank_layout::{
    Axis, ExpertLayout, Group, Kind, Layout, Membership, Part, Placement, Sizes, SplitRound,
    Topology,
};
use serde::ser::{Serialize, SerializeMap, Serializer};

use super::mesh::MeshOut;
use super::{Entries, SizesOut};
use crate::error::{Failure, rank_outside};
use crate::format::{Shorten, experts, gtp_sizes, join_ranks, thousands, write_members};
use crate::target::{DimSet, MeshTarget, Target};

/// One rank's card, in a layout or a mesh.
#[derive(Debug, Clone)]
pub enum RankReport {
    /// In a layout.
    Layout(Box<LayoutCard>),
    /// In a mesh.
    Mesh(Box<MeshCard>),
}

impl RankReport {
    /// The card of `rank` for `kinds` (sets of `target`, checked by the
    /// caller) on `topology`; it lists every member when `full`.
    ///
    /// # Errors
    /// [`Failure::Input`] for a rank outside the layout (with a hint at
    /// `--world-size`), [`Failure::Message`] for one outside the mesh.
    pub fn new(
        target: &Target,
        rank: u64,
        kinds: &[DimSet],
        topology: Topology,
        full: bool,
    ) -> Result<RankReport, Failure> {
        match target {
            Target::Layout { layout, .. } => {
                let kinds: Vec<Kind> = kinds
                    .iter()
                    .filter_map(|k| match k {
                        DimSet::Kind(kind) => Some(*kind),
                        DimSet::Mesh(_) => None,
                    })
                    .collect();
                Ok(RankReport::Layout(Box::new(LayoutCard::new(
                    layout, rank, &kinds, topology, full,
                )?)))
            }
            Target::Mesh(m) => Ok(RankReport::Mesh(Box::new(MeshCard::new(
                m, rank, kinds, topology, full,
            )?))),
        }
    }
}

impl fmt::Display for RankReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RankReport::Layout(card) => card.fmt(f),
            RankReport::Mesh(card) => card.fmt(f),
        }
    }
}

impl Serialize for RankReport {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RankReport::Layout(card) => card.serialize(s),
            RankReport::Mesh(card) => card.serialize(s),
        }
    }
}

/// One rank's view: where it sits, on which node, its groups of some kinds
/// and its pipeline neighbours.
#[derive(Debug, Clone)]
pub struct LayoutCard {
    has_encoder: bool,
    placement: Placement,
    /// The sizes of the rank's grid.
    sizes: Sizes,
    order: String,
    expert_layout: ExpertLayout,
    world_size: u32,
    first: u32,
    topology: Topology,
    /// The rank's stage in its (joined) pipeline and the pipeline's stages.
    stage: (u32, u32),
    prev: Vec<u32>,
    next: Vec<u32>,
    groups: Vec<(Kind, Vec<Membership>)>,
    /// Every split round of the kinds, for the JSON.
    splits: Vec<SplitRound>,
    how: Shorten,
}

impl LayoutCard {
    /// The view of `rank` for `kinds` (kinds of `layout`, checked by the
    /// caller) on `topology`; the card lists every member when `full`.
    ///
    /// # Errors
    /// [`Failure::Input`] for a rank outside the layout (with a hint at
    /// `--world-size`).
    pub fn new(
        layout: &Layout,
        rank: u64,
        kinds: &[Kind],
        topology: Topology,
        full: bool,
    ) -> Result<LayoutCard, Failure> {
        let outside = || rank_outside(layout, rank);
        let rank = u32::try_from(rank).map_err(|_| outside())?;
        let placement = layout.placement(rank).map_err(|_| outside())?;
        let groups = kinds
            .iter()
            .map(|kind| Ok((*kind, layout.memberships(rank, *kind)?)))
            .collect::<Result<_, Failure>>()?;
        // The stage counts over the joined encoder + decoder pipeline: the
        // rank's position in its pp group, of the group's length.
        let stage = match layout.memberships(rank, Kind::PP)?.first() {
            Some(m) => (m.key, m.group.len() as u32),
            None => (placement.coord.pp, layout.sizes().pp),
        };
        let sizes = match placement.part {
            Part::Encoder => layout.encoder_sizes().unwrap_or_else(|| layout.sizes()),
            Part::Decoder => layout.sizes(),
        };
        Ok(LayoutCard {
            has_encoder: layout.has_encoder(),
            placement,
            sizes,
            order: layout.config().order.to_string(),
            expert_layout: layout.config().expert_layout,
            world_size: layout.world_size(),
            first: layout.rank_offset(),
            topology,
            stage,
            prev: layout.pipeline_prev(rank)?,
            next: layout.pipeline_next(rank)?,
            groups,
            splits: layout.splits_of(rank, kinds)?.collect(),
            how: Shorten::new(full),
        })
    }
}

/// Ranks joined by `, `, or `none (why)`.
fn neighbours(ranks: &[u32], none: &str) -> String {
    if ranks.is_empty() {
        return format!("none ({none})");
    }
    join_ranks(ranks, ", ")
}

impl fmt::Display for LayoutCard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.placement;
        let s = &self.sizes;
        let end = u64::from(self.first) + u64::from(self.world_size) - 1;
        writeln!(
            f,
            "rank {} of {} (ranks {}..{end}, both included), order {}, {}",
            p.rank,
            thousands(u64::from(self.world_size)),
            self.first,
            self.order,
            experts(self.expert_layout)
        )?;
        let grid = if self.has_encoder {
            format!("{} grid ", p.part)
        } else {
            String::new()
        };
        let (gtp, egtp) = gtp_sizes(*s);
        writeln!(
            f,
            "grid      {grid}tp={} cp={} ep={} dp={} pp={}{gtp}  expert: etp={} edp={}{egtp}",
            s.tp, s.cp, s.ep, s.dp, s.pp, s.etp, s.edp
        )?;
        let gtp_coord = |on: &str, name: &str, c: u32| {
            if on.is_empty() {
                String::new()
            } else {
                format!(" {name}={c}")
            }
        };
        writeln!(
            f,
            "coord     tp={} cp={} dp={} pp={}{}  expert: etp={} ep={} edp={}{}",
            p.coord.tp,
            p.coord.cp,
            p.coord.dp,
            p.coord.pp,
            gtp_coord(&gtp, "gtp_remat", p.gtp_remat),
            p.expert.etp,
            p.expert.ep,
            p.expert.edp,
            gtp_coord(&egtp, "egtp_remat", p.expert.egtp_remat)
        )?;
        let t = &self.topology;
        write!(
            f,
            "node      {}, local GPU {} ({} GPUs per node)",
            thousands(u64::from(t.node(p.rank))),
            t.local(p.rank),
            t.gpus_per_node()
        )?;
        if let (Some(domain), Some(m)) = (t.domain(p.rank), t.nodes_per_domain()) {
            write!(f, ", domain {domain} ({m} nodes per domain)")?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "pipeline  stage {} of {}: previous {}; next {}",
            self.stage.0,
            self.stage.1,
            neighbours(&self.prev, "first stage"),
            neighbours(&self.next, "last stage")
        )?;
        writeln!(
            f,
            "\ncolor = the group's index among its kind's groups (comm-split color); key = this rank's position in it"
        )?;
        let width = self
            .groups
            .iter()
            .map(|(k, _)| k.to_string().len())
            .max()
            .unwrap_or(4)
            .max(4);
        let number = thousands(u64::from(self.world_size)).len().max(5);
        writeln!(
            f,
            "{:<width$}  {:>number$}  {:>number$}  {:>number$}  members",
            "kind", "color", "key", "size"
        )?;
        for (kind, memberships) in &self.groups {
            if memberships.is_empty() {
                writeln!(
                    f,
                    "{kind:<width$}  {:>number$}  (in no group of this kind)",
                    "-"
                )?;
            }
            for m in memberships {
                write!(
                    f,
                    "{kind:<width$}  {:>number$}  {:>number$}  {:>number$}  ",
                    m.color,
                    m.key,
                    m.group.len()
                )?;
                write_members(f, &m.group, self.how)?;
                writeln!(f)?;
            }
        }
        Ok(())
    }
}

/// A group's members as a JSON array.
struct Ranks<'a>(&'a rank_layout::Group);

impl Serialize for Ranks<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter())
    }
}

/// `{"color", "key", "members"}`.
struct MembershipOut<'a>(&'a Membership);

impl Serialize for MembershipOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("color", &self.0.color)?;
        map.serialize_entry("key", &self.0.key)?;
        map.serialize_entry("members", &Ranks(&self.0.group))?;
        map.end()
    }
}

/// A list of memberships.
struct MembershipsOut<'a>(&'a [Membership]);

impl Serialize for MembershipsOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(MembershipOut))
    }
}

/// `{"kind", "round", "rounds", "color", "key"}` (color and key `null`
/// when the rank is in no group of the round).
struct SplitOut<'a>(&'a SplitRound);

impl Serialize for SplitOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        let mut map = s.serialize_map(Some(5))?;
        map.serialize_entry("kind", &r.kind.to_string())?;
        map.serialize_entry("round", &r.round)?;
        map.serialize_entry("rounds", &r.rounds)?;
        map.serialize_entry("color", &r.split.map(|x| x.color))?;
        map.serialize_entry("key", &r.split.map(|x| x.key))?;
        map.end()
    }
}

/// `{"stage", "stages", "prev", "next"}`.
#[derive(serde::Serialize)]
struct PipelineOut<'a> {
    stage: u32,
    stages: u32,
    prev: &'a [u32],
    next: &'a [u32],
}

impl Serialize for LayoutCard {
    /// Everything the card shows: `{"rank", "world_size", "first_rank",
    /// "last_rank", "order", "expert_layout", "sizes": {..}, "coord": {..},
    /// "node", "local_gpu", "gpus_per_node", ("domain", "nodes_per_domain"
    /// with domains), "pipeline": {"stage", "stages", "prev", "next"},
    /// "groups": {kind: [{"color", "key", "members"}]}, "splits": [{"kind",
    /// "round", "rounds", "color", "key"}]}`.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = &self.placement;
        let t = &self.topology;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("rank", &p.rank)?;
        map.serialize_entry("world_size", &self.world_size)?;
        map.serialize_entry("first_rank", &self.first)?;
        map.serialize_entry(
            "last_rank",
            &(u64::from(self.first) + u64::from(self.world_size) - 1),
        )?;
        map.serialize_entry("order", &self.order)?;
        map.serialize_entry("expert_layout", &self.expert_layout.to_string())?;
        map.serialize_entry("sizes", &SizesOut::from(self.sizes))?;
        let mut coord: Vec<(String, serde_json::Value)> = Vec::new();
        if self.has_encoder {
            coord.push(("grid".into(), p.part.name().into()));
        }
        let shown = |axis: Axis| match axis {
            Axis::GtpRemat => self.sizes.gtp_remat > 1,
            Axis::EgtpRemat => self.sizes.egtp_remat > 1,
            _ => true,
        };
        for (axis, value) in p.named_with_gtp() {
            if shown(axis) {
                coord.push((axis.name().into(), value.into()));
            }
        }
        map.serialize_entry("coord", &Entries(&coord))?;
        map.serialize_entry("node", &t.node(p.rank))?;
        map.serialize_entry("local_gpu", &t.local(p.rank))?;
        map.serialize_entry("gpus_per_node", &t.gpus_per_node())?;
        if let (Some(domain), Some(m)) = (t.domain(p.rank), t.nodes_per_domain()) {
            map.serialize_entry("domain", &domain)?;
            map.serialize_entry("nodes_per_domain", &m)?;
        }
        map.serialize_entry(
            "pipeline",
            &PipelineOut {
                stage: self.stage.0,
                stages: self.stage.1,
                prev: &self.prev,
                next: &self.next,
            },
        )?;
        let groups: Vec<(String, MembershipsOut<'_>)> = self
            .groups
            .iter()
            .map(|(k, m)| (k.to_string(), MembershipsOut(m)))
            .collect();
        map.serialize_entry("groups", &Entries(&groups))?;
        let splits: Vec<SplitOut<'_>> = self.splits.iter().map(SplitOut).collect();
        map.serialize_entry("splits", &splits)?;
        map.end()
    }
}

/// One rank in a mesh: its coordinates in the mesh and each view, its
/// node, and its color, key and group in each dim set.
#[derive(Debug, Clone)]
pub struct MeshCard {
    rank: u32,
    mesh: MeshOut,
    /// The lines that name the mesh.
    header: Vec<String>,
    /// The coordinates in the mesh, then in each view.
    coords: Vec<Coords>,
    topology: Topology,
    /// Each dim set's color, key and group.
    groups: Vec<(DimSet, u32, u32, Group)>,
    how: Shorten,
}

impl MeshCard {
    /// The card of `rank` in `m`, for `sets` (the mesh's, checked by the
    /// caller).
    ///
    /// # Errors
    /// [`Failure::Message`] for a rank outside the mesh.
    pub fn new(
        m: &MeshTarget,
        rank: u64,
        sets: &[DimSet],
        topology: Topology,
        full: bool,
    ) -> Result<MeshCard, Failure> {
        let mesh = &m.mesh;
        let outside = || {
            Failure::Message(format!(
                "rank {rank} is outside the mesh (ranks {}..{}, both included)",
                mesh.rank_offset(),
                mesh.rank_end().saturating_sub(1)
            ))
        };
        let rank = u32::try_from(rank).map_err(|_| outside())?;
        let base = mesh.placement(rank).map_err(|_| outside())?;
        let mut coords = vec![(None, named(base.iter()))];
        for view in mesh.views() {
            let c = mesh.placement_in(rank, view)?;
            coords.push((Some(view.to_owned()), named(c.iter())));
        }
        let names: Vec<String> = sets.iter().map(DimSet::to_string).collect();
        let specs: Vec<&str> = names.iter().map(String::as_str).collect();
        let plan = mesh.split_plan(&specs)?;
        let mut groups = Vec::with_capacity(sets.len());
        for (set, split) in sets.iter().zip(plan.splits(rank)?) {
            let group = mesh
                .groups(&set.to_string())?
                .nth(split.color as usize)
                .ok_or_else(outside)?;
            groups.push((set.clone(), split.color, split.key, group));
        }
        Ok(MeshCard {
            rank,
            mesh: MeshOut::new(m),
            header: m.header(),
            coords,
            topology,
            groups,
            how: Shorten::new(full),
        })
    }
}

/// A rank's coordinates in the mesh (`None`) or a view, by dim name.
type Coords = (Option<String>, Vec<(String, u32)>);

/// Coordinates as owned pairs.
fn named<'a>(coords: impl Iterator<Item = (&'a str, u32)>) -> Vec<(String, u32)> {
    coords.map(|(n, v)| (n.to_owned(), v)).collect()
}

impl fmt::Display for MeshCard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &self.mesh;
        let last = u64::from(m.rank_offset) + u64::from(m.world_size) - 1;
        for (i, line) in self.header.iter().enumerate() {
            if i == 0 {
                writeln!(
                    f,
                    "rank {} of {} (ranks {}..{last}, both included), {line}",
                    self.rank,
                    thousands(u64::from(m.world_size)),
                    m.rank_offset
                )?;
            } else {
                writeln!(f, "{line}")?;
            }
        }
        for (view, coords) in &self.coords {
            let text: Vec<String> = coords.iter().map(|(n, v)| format!("{n}={v}")).collect();
            match view {
                None => writeln!(f, "coord     {}", text.join(" "))?,
                Some(view) => writeln!(f, "          {view}: {}", text.join(" "))?,
            }
        }
        let t = &self.topology;
        write!(
            f,
            "node      {}, local GPU {} ({} GPUs per node)",
            thousands(u64::from(t.node(self.rank))),
            t.local(self.rank),
            t.gpus_per_node()
        )?;
        if let (Some(domain), Some(n)) = (t.domain(self.rank), t.nodes_per_domain()) {
            write!(f, ", domain {domain} ({n} nodes per domain)")?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "\ncolor = the group's index among its dim set's groups (comm-split color); key = this rank's position in it"
        )?;
        let width = self
            .groups
            .iter()
            .map(|(k, ..)| k.to_string().len())
            .max()
            .unwrap_or(7)
            .max(7);
        let number = thousands(u64::from(m.world_size)).len().max(5);
        writeln!(
            f,
            "{:<width$}  {:>number$}  {:>number$}  {:>number$}  members",
            "dim set", "color", "key", "size"
        )?;
        for (set, color, key, group) in &self.groups {
            write!(
                f,
                "{:<width$}  {color:>number$}  {key:>number$}  {:>number$}  ",
                set.to_string(),
                group.len()
            )?;
            write_members(f, group, self.how)?;
            writeln!(f)?;
        }
        Ok(())
    }
}

impl Serialize for MeshCard {
    /// `{"rank", "world_size", "first_rank", "last_rank", "mesh": {..},
    /// "coord": {DIM: i}, "view_coords": {VIEW: {DIM: i}}, "node",
    /// "local_gpu", "gpus_per_node", ("domain", "nodes_per_domain" with
    /// domains), "groups": {SET: [{"color", "key", "members"}]}}` (one
    /// group per dim set, in a list as a layout's kinds have).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = &self.mesh;
        let t = &self.topology;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("rank", &self.rank)?;
        map.serialize_entry("world_size", &m.world_size)?;
        map.serialize_entry("first_rank", &m.rank_offset)?;
        map.serialize_entry(
            "last_rank",
            &(u64::from(m.rank_offset) + u64::from(m.world_size) - 1),
        )?;
        map.serialize_entry("mesh", m)?;
        let views: Vec<(String, Entries<'_, u32>)> = self
            .coords
            .iter()
            .filter_map(|(v, c)| Some((v.clone()?, Entries(c))))
            .collect();
        if let Some((_, base)) = self.coords.iter().find(|(v, _)| v.is_none()) {
            map.serialize_entry("coord", &Entries(base))?;
        }
        map.serialize_entry("view_coords", &Entries(&views))?;
        map.serialize_entry("node", &t.node(self.rank))?;
        map.serialize_entry("local_gpu", &t.local(self.rank))?;
        map.serialize_entry("gpus_per_node", &t.gpus_per_node())?;
        if let (Some(domain), Some(n)) = (t.domain(self.rank), t.nodes_per_domain()) {
            map.serialize_entry("domain", &domain)?;
            map.serialize_entry("nodes_per_domain", &n)?;
        }
        let groups: Vec<(String, [GroupOut<'_>; 1])> = self
            .groups
            .iter()
            .map(|(set, color, key, group)| {
                (
                    set.to_string(),
                    [GroupOut {
                        color: *color,
                        key: *key,
                        group,
                    }],
                )
            })
            .collect();
        map.serialize_entry("groups", &Entries(&groups))?;
        map.end()
    }
}

/// `{"color", "key", "members"}` of a mesh's dim set.
struct GroupOut<'a> {
    color: u32,
    key: u32,
    group: &'a Group,
}

impl Serialize for GroupOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("color", &self.color)?;
        map.serialize_entry("key", &self.key)?;
        map.serialize_entry("members", &Ranks(self.group))?;
        map.end()
    }
}
