//! Descriptions of a layout and of one rank, as the command line prints them:
//! a readable table (`Display`) and, with the `serde` feature, the JSON of
//! SPEC 5 (`Serialize`).

use std::fmt;

use rank_layout::{Kind, Layout, Membership, Placement, Result};

/// The groups of some kinds of a layout.
///
/// Groups are computed while printing or serializing, never stored.
///
/// ```
/// use rank_layout::{Config, Kind, Layout};
/// let layout = Layout::new(&Config { tp: 2, world_size: Some(4), ..Config::default() })?;
/// let report = layout.report(&[Kind::TP])?;
/// assert!(report.to_string().contains("0 1"));
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct LayoutReport<'a> {
    layout: &'a Layout,
    kinds: Vec<Kind>,
}

/// One rank's view: where it sits and its groups of some kinds.
#[derive(Debug, Clone)]
pub struct RankReport {
    has_encoder: bool,
    placement: Placement,
    groups: Vec<(Kind, Vec<Membership>)>,
}

impl<'a> LayoutReport<'a> {
    /// A report of `kinds` (every kind of the layout when empty; a kind given
    /// twice, even spelled differently like `cp-dp` and `dp-cp`, once).
    pub fn new(layout: &'a Layout, kinds: &[Kind]) -> Result<LayoutReport<'a>> {
        let kinds = kinds_or_all(layout, kinds);
        for kind in &kinds {
            let _ = layout.groups(*kind)?;
        }
        Ok(LayoutReport { layout, kinds })
    }
}

impl RankReport {
    /// The view of `rank` for `kinds` (every kind of the layout when empty,
    /// repeats once).
    pub fn new(layout: &Layout, rank: u32, kinds: &[Kind]) -> Result<RankReport> {
        let placement = layout.placement(rank)?;
        let kinds = kinds_or_all(layout, kinds);
        let groups = kinds
            .into_iter()
            .map(|kind| Ok((kind, layout.memberships(rank, kind)?)))
            .collect::<Result<_>>()?;
        Ok(RankReport {
            has_encoder: layout.has_encoder(),
            placement,
            groups,
        })
    }
}

/// `kinds` without repeats, or every kind of the layout when empty.
fn kinds_or_all(layout: &Layout, kinds: &[Kind]) -> Vec<Kind> {
    if kinds.is_empty() {
        return layout.kinds().to_vec();
    }
    let mut out: Vec<Kind> = Vec::with_capacity(kinds.len());
    for kind in kinds {
        if !out.contains(kind) {
            out.push(*kind);
        }
    }
    out
}

impl RankReport {
    /// Where the rank sits.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// Its groups, per kind.
    pub fn groups(&self) -> &[(Kind, Vec<Membership>)] {
        &self.groups
    }
}

fn write_ranks(f: &mut fmt::Formatter<'_>, ranks: impl Iterator<Item = u32>) -> fmt::Result {
    for (i, r) in ranks.enumerate() {
        if i > 0 {
            f.write_str(" ")?;
        }
        write!(f, "{r}")?;
    }
    Ok(())
}

impl fmt::Display for LayoutReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = self.layout;
        let c = l.config();
        write!(
            f,
            "world_size {}  order {}  rank_offset {}\ntp={} cp={} ep={} dp={} pp={}",
            l.world_size(),
            c.order,
            c.rank_offset,
            c.tp,
            c.cp,
            c.ep,
            c.dp.unwrap_or(1),
            c.pp
        )?;
        if let Some(etp) = c.etp {
            write!(f, " etp={etp} edp={} (folded)", l.sizes().edp)?;
        }
        if let (Some(etp), Some(epp)) = (c.encoder_tp, c.encoder_pp) {
            write!(
                f,
                " encoder_tp={etp} encoder_pp={epp} (encoder ranks {}..{})",
                l.rank_offset(),
                u64::from(l.rank_offset()) + u64::from(l.encoder_world_size())
            )?;
        }
        writeln!(f)?;
        for kind in &self.kinds {
            let Ok(groups) = l.groups(*kind) else {
                continue;
            };
            writeln!(f, "\n{kind} ({} groups)", groups.len())?;
            for (i, group) in groups.enumerate() {
                write!(f, "  {i:>4}: ")?;
                write_ranks(f, group.iter())?;
                writeln!(f)?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for RankReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.placement;
        write!(f, "rank {}", p.rank)?;
        if self.has_encoder {
            write!(f, " ({})", p.part)?;
        }
        writeln!(
            f,
            "\ncoord: tp={} cp={} dp={} pp={}  expert: etp={} ep={} edp={}",
            p.coord.tp, p.coord.cp, p.coord.dp, p.coord.pp, p.expert.etp, p.expert.ep, p.expert.edp
        )?;
        for (kind, memberships) in &self.groups {
            if memberships.is_empty() {
                writeln!(f, "{kind:<14} -")?;
            }
            for m in memberships {
                write!(
                    f,
                    "{kind:<14} index {:>5}  key {:>4}  members ",
                    m.index, m.key
                )?;
                write_ranks(f, m.group.iter())?;
                writeln!(f)?;
            }
        }
        Ok(())
    }
}

mod json {
    use serde::ser::{Serialize, SerializeMap, Serializer};

    use rank_layout::{Config, Group, Groups, Membership, Part};

    use super::{LayoutReport, RankReport};

    struct Ranks<'a>(&'a Group);
    impl Serialize for Ranks<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(self.0.iter())
        }
    }

    struct AllGroups<'a>(Groups<'a>);
    impl Serialize for AllGroups<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(self.0.clone().map(|g| g.to_vec()))
        }
    }

    #[derive(serde::Serialize)]
    struct ConfigOut<'a> {
        #[serde(flatten)]
        config: &'a Config,
        #[serde(skip_serializing_if = "Option::is_none")]
        edp: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        encoder_world_size: Option<u32>,
    }

    impl Serialize for LayoutReport<'_> {
        /// `{"world_size": .., "config": {..}, "groups": {kind: [[rank, ..], ..]}}`
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let l = self.layout;
            let config = l.config();
            let mut map = s.serialize_map(Some(3))?;
            map.serialize_entry("world_size", &l.world_size())?;
            map.serialize_entry(
                "config",
                &ConfigOut {
                    config,
                    edp: config.etp.map(|_| l.sizes().edp),
                    encoder_world_size: l.has_encoder().then(|| l.encoder_world_size()),
                },
            )?;
            let groups: Vec<(String, AllGroups<'_>)> = self
                .kinds
                .iter()
                .filter_map(|k| Some((k.to_string(), AllGroups(l.groups(*k).ok()?))))
                .collect();
            map.serialize_entry("groups", &Entries(&groups))?;
            map.end()
        }
    }

    struct Entries<'a, V>(&'a [(String, V)]);
    impl<V: Serialize> Serialize for Entries<'_, V> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
        }
    }

    struct MembershipOut<'a>(&'a Membership);
    impl Serialize for MembershipOut<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut map = s.serialize_map(Some(3))?;
            map.serialize_entry("index", &self.0.index)?;
            map.serialize_entry("key", &self.0.key)?;
            map.serialize_entry("members", &Ranks(&self.0.group))?;
            map.end()
        }
    }

    struct MembershipsOut<'a>(&'a [Membership]);
    impl Serialize for MembershipsOut<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(self.0.iter().map(MembershipOut))
        }
    }

    impl Serialize for RankReport {
        /// `{"rank": .., "coord": {..}, "groups": {kind: [{"index", "key", "members"}]}}`
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let p = &self.placement;
            let mut map = s.serialize_map(Some(3))?;
            map.serialize_entry("rank", &p.rank)?;
            let mut coord: Vec<(String, serde_json::Value)> = Vec::new();
            if self.has_encoder {
                let part = match p.part {
                    Part::Encoder => "encoder",
                    Part::Decoder => "decoder",
                };
                coord.push(("grid".into(), part.into()));
            }
            for (name, value) in [
                ("tp", p.coord.tp),
                ("cp", p.coord.cp),
                ("ep", p.expert.ep),
                ("dp", p.coord.dp),
                ("pp", p.coord.pp),
                ("etp", p.expert.etp),
                ("edp", p.expert.edp),
            ] {
                coord.push((name.into(), value.into()));
            }
            map.serialize_entry("coord", &Entries(&coord))?;
            let groups: Vec<(String, MembershipsOut<'_>)> = self
                .groups
                .iter()
                .map(|(k, m)| (k.to_string(), MembershipsOut(m)))
                .collect();
            map.serialize_entry("groups", &Entries(&groups))?;
            map.end()
        }
    }
}
