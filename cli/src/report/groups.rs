//! `rank-layout groups`: every group of some kinds of a layout (or dim
//! sets of a mesh).

use std::fmt;

use rank_layout::{Config, ExpertLayout, Group, Groups, Layout};
use serde::ser::{Serialize, SerializeMap, Serializer};

use super::Entries;
use super::mesh::MeshOut;
use crate::format::{Shorten, count, experts, gtp_sizes, thousands, write_members};
use crate::target::{DimSet, MeshTarget, Target};

/// Kinds with more groups than this list only the first [`HEAD_ROWS`] and
/// the last [`TAIL_ROWS`] in the table format (unless `--full`).
const MAX_ROWS: usize = 64;
/// Groups listed first when a kind has more than [`MAX_ROWS`].
const HEAD_ROWS: usize = 32;
/// Groups listed last when a kind has more than [`MAX_ROWS`].
const TAIL_ROWS: usize = 4;

/// The groups of some kinds of a layout (dim sets of a mesh).
///
/// Groups are computed while printing or serializing, never stored.
#[derive(Debug, Clone)]
pub struct GroupsReport<'a> {
    target: &'a Target,
    kinds: Vec<DimSet>,
    full: bool,
}

impl<'a> GroupsReport<'a> {
    /// A report of `kinds` (sets of `target`, checked by the caller); the
    /// table lists every member and group when `full`.
    pub fn new(target: &'a Target, kinds: Vec<DimSet>, full: bool) -> GroupsReport<'a> {
        GroupsReport {
            target,
            kinds,
            full,
        }
    }
}

/// Writes the lines that name a mesh: its dims (and ranks), its views and
/// flattens.
pub fn write_mesh_header(f: &mut impl fmt::Write, m: &MeshTarget) -> fmt::Result {
    for (i, line) in m.header().into_iter().enumerate() {
        if i == 0 {
            writeln!(
                f,
                "{line}, {} {}..{}",
                count(u64::from(m.mesh.world_size()), "rank", "ranks"),
                m.mesh.rank_offset(),
                m.mesh.rank_end().saturating_sub(1)
            )?;
        } else {
            writeln!(f, "{line}")?;
        }
    }
    Ok(())
}

/// Writes the lines that name a layout or a mesh.
pub fn write_header(f: &mut impl fmt::Write, target: &Target) -> fmt::Result {
    match target {
        Target::Layout { layout, .. } => write_layout_header(f, layout),
        Target::Mesh(m) => write_mesh_header(f, m),
    }
}

/// Writes the two lines that name a layout: world, order, offset, expert
/// layout, sizes.
pub fn write_layout_header(f: &mut impl fmt::Write, l: &Layout) -> fmt::Result {
    let c = l.config();
    write!(
        f,
        "world_size {}  order {}  rank_offset {}  {}\ntp={} cp={} ep={} dp={} pp={}",
        l.world_size(),
        c.order,
        c.rank_offset,
        experts(c.expert_layout),
        c.tp,
        c.cp,
        c.ep,
        c.dp.unwrap_or(1),
        c.pp
    )?;
    let (gtp, egtp) = gtp_sizes(l.sizes());
    write!(f, "{gtp}")?;
    if c.expert_layout == ExpertLayout::Folded {
        write!(f, " etp={} edp={}{egtp}", l.sizes().etp, l.sizes().edp)?;
    }
    if let (Some(etp), Some(epp)) = (c.encoder_tp, c.encoder_pp) {
        write!(
            f,
            " encoder_tp={etp} encoder_pp={epp} (encoder ranks {}..{})",
            l.rank_offset(),
            u64::from(l.rank_offset()) + u64::from(l.encoder_world_size()) - 1
        )?;
    }
    if !l.hierarchical_cp().is_empty() {
        let levels: Vec<String> = l.hierarchical_cp().iter().map(u32::to_string).collect();
        write!(f, " hierarchical_cp={}", levels.join(","))?;
    }
    if l.dist_opt_instances() > 1 {
        write!(f, " dist_opt_instances={}", l.dist_opt_instances())?;
    }
    writeln!(f)
}

/// `"16 groups of 4 ranks"`, or `"of 1 or 2 ranks"` when the encoder's
/// groups and the decoder's differ in size (their groups come in at most
/// two runs, so the first and last group give the sizes).
pub fn groups_heading(groups: &Groups<'_>) -> String {
    let n = groups.len() as u64;
    let (small, large) = group_sizes(groups);
    let sizes = if small == large {
        count(small as u64, "rank", "ranks")
    } else {
        format!("{small} or {}", count(large as u64, "rank", "ranks"))
    };
    format!("{} of {sizes}", count(n, "group", "groups"))
}

/// The smallest and the largest group size (the encoder's groups and the
/// decoder's come in at most two runs, so the first and the last group
/// give them).
pub fn group_sizes(groups: &Groups<'_>) -> (usize, usize) {
    let mut ends = groups.clone();
    let first = ends.next().map_or(0, |g| g.len());
    let last = ends.next_back().map_or(first, |g| g.len());
    (first.min(last), first.max(last))
}

/// One table row: color, size, members.
fn write_row(
    f: &mut fmt::Formatter<'_>,
    color: usize,
    group: &Group,
    widths: (usize, usize),
    how: Shorten,
) -> fmt::Result {
    write!(
        f,
        "  {color:>iw$}  {:>sw$}  ",
        group.len(),
        iw = widths.0,
        sw = widths.1
    )?;
    write_members(f, group, how)?;
    writeln!(f)
}

impl fmt::Display for GroupsReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = self.target;
        write_header(f, l)?;
        writeln!(
            f,
            "color = the group's number among its kind's groups (comm-split color); key = a rank's position in the member list (comm-split key)"
        )?;
        let how = Shorten::new(self.full);
        for kind in &self.kinds {
            let Ok(groups) = l.groups(kind) else {
                continue;
            };
            writeln!(f, "\n{kind} ({})", groups_heading(&groups))?;
            let n = groups.len();
            let widths = (
                "color".len().max(n.saturating_sub(1).to_string().len()),
                "size".len().max(l.world_size().to_string().len().min(10)),
            );
            writeln!(
                f,
                "  {:>iw$}  {:>sw$}  members",
                "color",
                "size",
                iw = widths.0,
                sw = widths.1
            )?;
            if self.full || n <= MAX_ROWS {
                for (i, group) in groups.enumerate() {
                    write_row(f, i, &group, widths, how)?;
                }
                continue;
            }
            for (i, group) in groups.clone().take(HEAD_ROWS).enumerate() {
                write_row(f, i, &group, widths, how)?;
            }
            let hidden = n - HEAD_ROWS - TAIL_ROWS;
            writeln!(
                f,
                "  {:>iw$}  … {} not shown (colors {HEAD_ROWS}..{}; --full lists them, `rank R` shows one rank's)",
                "",
                count(hidden as u64, "group", "groups"),
                n - TAIL_ROWS - 1,
                iw = widths.0
            )?;
            for (i, group) in groups.enumerate().skip(n - TAIL_ROWS) {
                write_row(f, i, &group, widths, how)?;
            }
        }
        if !self.full && self.kinds.iter().any(|k| is_shortened(l, k)) {
            writeln!(
                f,
                "\n(long lists shortened: first..last step s (n ranks) is an arithmetic run, both ends included; --full or --format json lists every member of the {} ranks)",
                thousands(u64::from(l.world_size()))
            )?;
        }
        Ok(())
    }
}

/// Whether the table of `kind` shortens something: more groups than it
/// lists, or a group longer than a short list.
fn is_shortened(target: &Target, kind: &DimSet) -> bool {
    target.groups(kind).is_ok_and(|groups| {
        let mut ends = groups.clone();
        let longest = ends
            .next()
            .map_or(0, |g| g.len())
            .max(ends.next_back().map_or(0, |g| g.len()));
        groups.len() > MAX_ROWS || longest > crate::format::SHORT_LIST
    })
}

/// The members of a group, as a JSON array.
struct AllGroups<'a>(Groups<'a>);

impl Serialize for AllGroups<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.clone().map(|g| g.to_vec()))
    }
}

/// The resolved configuration, with the derived expert and encoder sizes.
#[derive(serde::Serialize)]
struct ConfigOut<'a> {
    #[serde(flatten)]
    config: &'a Config,
    #[serde(skip_serializing_if = "Option::is_none")]
    edp: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    encoder_world_size: Option<u32>,
}

impl Serialize for GroupsReport<'_> {
    /// `{"world_size": .., "config": {..}, "groups": {kind: [[rank, ..], ..]}}`;
    /// for a mesh `{"world_size": .., "mesh": {..}, "groups": {set: [[rank,
    /// ..], ..]}}`.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = self.target;
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("world_size", &t.world_size())?;
        match t {
            Target::Layout { layout: l, .. } => {
                let config = l.config();
                map.serialize_entry(
                    "config",
                    &ConfigOut {
                        config,
                        edp: config.etp.map(|_| l.sizes().edp),
                        encoder_world_size: l.has_encoder().then(|| l.encoder_world_size()),
                    },
                )?;
            }
            Target::Mesh(m) => map.serialize_entry("mesh", &MeshOut::new(m))?,
        }
        let groups: Vec<(String, AllGroups<'_>)> = self
            .kinds
            .iter()
            .filter_map(|k| Some((k.to_string(), AllGroups(t.groups(k).ok()?))))
            .collect();
        map.serialize_entry("groups", &Entries(&groups))?;
        map.end()
    }
}
