//! Reports of inference shards (`--inference-shards`), shard by shard
//! through each shard's layout report, with what only shards have (the
//! role, the rank offset, the spec, the colors of one comm-split of the
//! whole world): `groups`, `rank`, `check` and `describe` (`render`'s
//! picture is `render::modules`, `place`'s report `report::place`).

use std::fmt::{self, Write as _};

use rank_layout::{Kind, Split, Topology};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::args::Format;
use crate::error::Failure;
use crate::report::check::CheckReport;
use crate::report::describe::DescribeReport;
use crate::report::groups::GroupsReport;
use crate::report::hosts::HostsReport;
use crate::report::modules::to_value;
use crate::report::rank::RankReport;
use crate::report::{SizesOut, print, print_json};
use crate::shards_target::{ShardsTarget, heading, mapping_name, shard_object};
use crate::target::DimSet;

/// The line under the title: what a color is in the tables.
const COLORS: &str = "colors number each shard's groups from 0 (the shard's own comm-split); `rank R` also gives the colors of one comm-split of the whole world";

/// The keys every shards report starts with: the world size, the rank
/// order and whether a shard has a role.
fn top(st: &ShardsTarget) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("world_size".into(), st.shards.world_size().into());
    map.insert(
        "mapping".into(),
        st.shards.mapping().order().to_string().into(),
    );
    map.insert("has_roles".into(), st.shards.has_roles().into());
    map
}

/// `groups --inference-shards`: each shard's groups, shard after shard.
/// JSON: `{"world_size", "mapping", "has_roles", "shards": [{"shard",
/// "role", "rank_offset", "world_size", "spec", "config", "groups": {KIND:
/// [[rank, ...], ...]}}]}`, ranks of the world.
///
/// # Errors
/// [`Failure::Output`] when stdout cannot be written.
pub fn groups(
    st: &ShardsTarget,
    sets: &[DimSet],
    full: bool,
    format: Format,
) -> Result<(), Failure> {
    match format {
        Format::Table => {
            let mut text = String::new();
            let _ = writeln!(text, "{}\n{COLORS}", st.title());
            for (shard, target) in st.each() {
                let _ = writeln!(text, "\n== {} ==", heading(shard));
                let _ = write!(text, "{}", GroupsReport::new(target, sets.to_vec(), full));
            }
            print(&text)
        }
        Format::Json => {
            let mut shards = Vec::with_capacity(st.parts.len());
            for (shard, target) in st.each() {
                let report = to_value(&GroupsReport::new(target, sets.to_vec(), false))?;
                let mut keep = Map::new();
                if let Value::Object(mut r) = report {
                    for key in ["config", "groups"] {
                        if let Some(v) = r.remove(key) {
                            keep.insert(key.into(), v);
                        }
                    }
                }
                shards.push(shard_object(shard, Value::Object(keep)));
            }
            let mut map = top(st);
            map.insert("shards".into(), shards.into());
            print_json(&map)
        }
    }
}

/// `rank R --inference-shards`: the rank's shard (its role, rank offset
/// and spec), its card in the shard's layout, and its colors and keys in
/// one comm-split of the whole world per kind.
pub struct ShardCard {
    heading: String,
    card: RankReport,
    json: Value,
    world: Vec<(Kind, Option<Split>)>,
    hosts: Option<HostsReport>,
}

impl ShardCard {
    /// Rank `rank`'s card for `sets` (kinds of every shard, checked by
    /// the caller) on `topology`, with the job on `hosts` when given.
    ///
    /// # Errors
    /// [`Failure::Input`] for a rank outside the shards; the errors of the
    /// shard's card.
    pub fn new(
        st: &ShardsTarget,
        rank: u64,
        sets: &[DimSet],
        topology: Topology,
        full: bool,
        hosts: Option<HostsReport>,
    ) -> Result<ShardCard, Failure> {
        let outside = rank_layout::Error::RankOutOfRange {
            rank,
            first: 0,
            last: u64::from(st.shards.world_size().saturating_sub(1)),
        };
        let r = u32::try_from(rank).map_err(|_| outside)?;
        let shard = st.shards.shard_of(r)?;
        let target = st
            .parts
            .get(shard.index())
            .ok_or_else(|| Failure::Message(format!("no layout of shard {}", shard.index())))?;
        let card = RankReport::new(target, rank, sets, topology, full)?;
        let json = shard_object(shard, to_value(&card)?);
        let world = st
            .shards
            .splits(r)?
            .into_iter()
            .filter(|(kind, _)| sets.contains(&DimSet::Kind(*kind)))
            .collect();
        Ok(ShardCard {
            heading: heading(shard),
            card,
            json,
            world,
            hosts,
        })
    }
}

impl fmt::Display for ShardCard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "in {}", self.heading)?;
        write!(f, "{}", self.card)?;
        if !self.world.is_empty() {
            writeln!(
                f,
                "\none comm-split of the whole world per kind (colors number every shard's groups, shard after shard):"
            )?;
            for (kind, split) in &self.world {
                match split {
                    Some(s) => writeln!(f, "  {kind:<10} color {} key {}", s.color, s.key)?,
                    None => writeln!(f, "  {kind:<10} none (not a member)")?,
                }
            }
        }
        if let Some(hosts) = &self.hosts {
            write!(f, "{hosts}")?;
        }
        Ok(())
    }
}

impl Serialize for ShardCard {
    /// The shard's object (`shard`, `role`, `rank_offset`, `world_size`,
    /// `spec`) with the rank's card in the shard's layout, `world_splits`
    /// (`{KIND: {"color", "key"} | null}`, one comm-split of the world per
    /// kind) and `hosts` with `--hosts`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let splits: Map<String, Value> = self
            .world
            .iter()
            .map(|(kind, split)| {
                let value = split.map_or(
                    Value::Null,
                    |s| serde_json::json!({"color": s.color, "key": s.key}),
                );
                (kind.to_string(), value)
            })
            .collect();
        let mut json = self.json.clone();
        if let Value::Object(o) = &mut json {
            o.insert("world_splits".into(), Value::Object(splits));
            if let Some(hosts) = &self.hosts {
                let hosts = serde_json::to_value(hosts).map_err(serde::ser::Error::custom)?;
                o.insert("hosts".into(), hosts);
            }
        }
        json.serialize(s)
    }
}

/// `check --inference-shards`: each shard's check, the shards on the
/// machine node after node (from rank 0), and the job on `--hosts`.
pub struct ShardChecks<'a> {
    st: &'a ShardsTarget,
    reports: Vec<CheckReport>,
    hosts: Option<HostsReport>,
}

impl ShardChecks<'_> {
    /// Each shard's check of `sets` (every shard's kinds), those of
    /// `require` staying inside a node (default: each shard's tp, cp, ep
    /// and etp), on `topology`; with the job on `hosts` when given.
    ///
    /// # Errors
    /// The errors of each shard's check.
    pub fn new<'a>(
        st: &'a ShardsTarget,
        topology: Topology,
        sets: &[DimSet],
        require: &[DimSet],
        hosts: Option<HostsReport>,
    ) -> Result<ShardChecks<'a>, Failure> {
        let mut reports = Vec::with_capacity(st.parts.len());
        // The machine's last node or domain is the last shard's.
        let last = st.parts.len().saturating_sub(1);
        for (i, target) in st.parts.iter().enumerate() {
            let report = CheckReport::new(target, topology, sets, require)?;
            reports.push(if i == last {
                report
            } else {
                report.without_machine_warnings()
            });
        }
        Ok(ShardChecks { st, reports, hosts })
    }

    /// The kinds that must stay inside a node and do not, each after its
    /// shard: `shard1 tp`.
    pub fn failed(&self) -> Vec<String> {
        self.st
            .shards
            .shards()
            .iter()
            .zip(&self.reports)
            .flat_map(|(shard, r)| {
                r.failed()
                    .iter()
                    .map(move |k| format!("shard{} {k}", shard.index()))
            })
            .collect()
    }
}

impl fmt::Display for ShardChecks<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.st.title())?;
        writeln!(
            f,
            "the shards run node after node from rank 0 (a shard may share its first or last node with its neighbour)"
        )?;
        for (shard, report) in self.st.shards.shards().iter().zip(&self.reports) {
            writeln!(f, "\n== {} ==", heading(shard))?;
            write!(f, "{report}")?;
        }
        if let Some(hosts) = &self.hosts {
            write!(f, "{hosts}")?;
        }
        Ok(())
    }
}

impl Serialize for ShardChecks<'_> {
    /// `{"world_size", "mapping", "has_roles", "shards": [{"shard", "role",
    /// "rank_offset", "world_size", "spec", ..the layout's check}],
    /// "hosts"}` (`hosts` with `--hosts`, its kinds named `shard<i> KIND`).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut shards = Vec::with_capacity(self.reports.len());
        for (shard, report) in self.st.shards.shards().iter().zip(&self.reports) {
            let value = serde_json::to_value(report).map_err(serde::ser::Error::custom)?;
            shards.push(shard_object(shard, value));
        }
        let mut map = top(self.st);
        map.insert("shards".into(), shards.into());
        if let Some(hosts) = &self.hosts {
            let hosts = serde_json::to_value(hosts).map_err(serde::ser::Error::custom)?;
            map.insert("hosts".into(), hosts);
        }
        map.serialize(s)
    }
}

/// `describe --inference-shards`: the shards listed (role, ranks, sizes),
/// then each described as a layout.
pub struct ShardsDescribe<'a> {
    /// The shards.
    pub st: &'a ShardsTarget,
    /// The machine.
    pub topology: Topology,
}

impl fmt::Display for ShardsDescribe<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.st;
        writeln!(f, "{}", st.title())?;
        writeln!(
            f,
            "\nshards (each a layout of its own at its rank offset, cp 1, order {}):",
            mapping_name(st.shards.mapping())
        )?;
        for shard in st.shards.shards() {
            let s = shard.layout().sizes();
            let first = shard.rank_offset();
            let last = u64::from(first) + u64::from(shard.world_size()) - 1;
            writeln!(
                f,
                "  shard {}: role {}, ranks {first}..{last} (rank offset {first}, {} ranks), tp={} pp={} dp={} ep={} etp={} edp={}",
                shard.index(),
                shard.role().map_or("none", |r| r.name()),
                shard.world_size(),
                s.tp,
                s.pp,
                s.dp,
                s.ep,
                s.etp,
                s.edp
            )?;
        }
        for (shard, target) in st.each() {
            writeln!(f, "\n== {} ==", heading(shard))?;
            write!(f, "{}", DescribeReport::new(target, self.topology))?;
        }
        Ok(())
    }
}

impl Serialize for ShardsDescribe<'_> {
    /// `{"world_size", "mapping", "has_roles", "shards": [{"shard", "role",
    /// "rank_offset", "world_size", "spec", "sizes": {"tp", "cp", "ep",
    /// "dp", "pp", "etp", "edp"}, ..the layout's description}]}`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let st = self.st;
        let mut shards = Vec::with_capacity(st.parts.len());
        for (shard, target) in st.each() {
            let value = serde_json::to_value(DescribeReport::new(target, self.topology))
                .map_err(serde::ser::Error::custom)?;
            let mut object = shard_object(shard, value);
            if let Value::Object(o) = &mut object {
                let sizes = SizesOut::from(shard.layout().sizes());
                let sizes = serde_json::to_value(sizes).map_err(serde::ser::Error::custom)?;
                o.insert("sizes".into(), sizes);
            }
            shards.push(object);
        }
        let mut map = top(st);
        map.insert("shards".into(), shards.into());
        map.serialize(s)
    }
}
