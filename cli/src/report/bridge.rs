//! The report of `rank-layout bridge --modules FILE [--edge SRC:DST]`:
//! the bridge plan of every edge of a modules file (or of one): leaders,
//! their pairing,
//! the boundary broadcast groups, the cp reduce and gather groups, the
//! bridge group and, for colocated modules, the gather plan.

use std::fmt::{self, Write as _};

use rank_layout::modules::{Bridge, GroupList};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::format::{SHORT_LIST, count, join_ranks, thousands};

/// The plans of the edges asked for.
pub struct Plans {
    /// The plans.
    pub plans: Vec<Bridge>,
    /// Table format: every member and every group, not shortened.
    pub full: bool,
}

/// Groups listed first, and last, when a list has more than
/// [`MAX_GROUPS`] and the table is shortened.
const HEAD_GROUPS: usize = 8;
/// See [`HEAD_GROUPS`].
const TAIL_GROUPS: usize = 2;
/// Lists of more groups (or pairs) than this are shortened.
const MAX_GROUPS: usize = 12;
/// Members shown at each end of a long list that is no arithmetic run.
const ENDS: usize = 4;
/// Runs up to this long are written whole.
const SHORT_RUN: usize = 8;

/// Ranks as the CLI writes a group's members: whole when short; an
/// arithmetic run as `first..last step s (n ranks)`; else the ends and
/// the count.
fn members(ranks: &[u32], full: bool) -> String {
    let whole = || join_ranks(ranks, " ");
    let n = ranks.len();
    if full || n <= SHORT_RUN {
        return whole();
    }
    let total = thousands(n as u64);
    let step = match ranks {
        [a, b, ..] => b.checked_sub(*a).filter(|s| *s > 0),
        _ => None,
    };
    if let Some(step) = step {
        if ranks
            .windows(2)
            .all(|w| matches!(w, [a, b] if b.checked_sub(*a) == Some(step)))
        {
            let (first, last) = (
                ranks.first().copied().unwrap_or(0),
                ranks.last().copied().unwrap_or(0),
            );
            return if step == 1 {
                format!("{first}..{last} ({total} ranks)")
            } else {
                format!("{first}..{last} step {step} ({total} ranks)")
            };
        }
    }
    if n <= SHORT_LIST {
        return whole();
    }
    let ends = |part: &[u32]| join_ranks(part, " ");
    format!(
        "{} … {} ({total} ranks)",
        ends(ranks.get(..ENDS).unwrap_or_default()),
        ends(ranks.get(n - ENDS..).unwrap_or_default())
    )
}

/// Writes items, one per line after `label`, shortened past
/// [`MAX_GROUPS`] unless `full`.
fn write_list(
    f: &mut fmt::Formatter<'_>,
    label: &str,
    items: &[String],
    what: (&str, &str),
    full: bool,
) -> fmt::Result {
    let n = items.len();
    writeln!(f, "  {label}: {}", count(n as u64, what.0, what.1))?;
    let shown = |i: usize| full || n <= MAX_GROUPS || i < HEAD_GROUPS || i >= n - TAIL_GROUPS;
    for (i, item) in items.iter().enumerate() {
        if shown(i) {
            writeln!(f, "    {i:>3}  {item}")?;
        } else if i == HEAD_GROUPS {
            writeln!(
                f,
                "         … {} not shown (--full or --format json lists them)",
                count((n - HEAD_GROUPS - TAIL_GROUPS) as u64, what.0, what.1)
            )?;
        }
    }
    Ok(())
}

/// Each group of `groups` as members text.
fn group_lines(groups: &GroupList, full: bool) -> Vec<String> {
    groups.iter().map(|g| members(g, full)).collect()
}

impl fmt::Display for Plans {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.plans.is_empty() {
            return writeln!(f, "no edges: the modules file has no [[edges]]");
        }
        let full = self.full;
        for (i, b) in self.plans.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            writeln!(
                f,
                "{} -> {}: {}, scale {} ({}, {})",
                b.src,
                b.dst,
                b.direction,
                b.scale,
                lanes(b.src_leaders.len(), "source"),
                lanes(b.dst_leaders.len(), "destination")
            )?;
            let leader_plan = b
                .colocated
                .as_ref()
                .is_none_or(|c| c.mode == rank_layout::modules::ColocatedMode::P2p);
            if let Some(c) = &b.colocated {
                write!(f, "  colocated: {}", c.mode)?;
                match &c.reason {
                    Some(r) => writeln!(f, " ({r})")?,
                    None => writeln!(
                        f,
                        " (all-gathers on the side with more lanes; the leader plan below is not used)"
                    )?,
                }
            }
            writeln!(
                f,
                "  source leaders (last tp/cp/pp rank of each lane): {}",
                members(&b.src_leaders, full)
            )?;
            writeln!(
                f,
                "  destination leaders (first rank of each lane): {}",
                members(&b.dst_leaders, full)
            )?;
            let pairs: Vec<String> = b.pairs.iter().map(|(s, d)| format!("{s} -> {d}")).collect();
            write_list(
                f,
                "pairs (source leader -> destination leader)",
                &pairs,
                ("pair", "pairs"),
                full,
            )?;
            write_list(
                f,
                "source broadcast (each lane's last stage)",
                &group_lines(&b.src_broadcast, full),
                ("group", "groups"),
                full,
            )?;
            write_list(
                f,
                "destination broadcast (each lane's first stage)",
                &group_lines(&b.dst_broadcast, full),
                ("group", "groups"),
                full,
            )?;
            if let Some(g) = &b.dst_cp_reduce {
                write_list(
                    f,
                    "destination cp reduce",
                    &group_lines(g, full),
                    ("group", "groups"),
                    full,
                )?;
            }
            if let Some(g) = &b.src_cp_gather {
                write_list(
                    f,
                    "source cp gather",
                    &group_lines(g, full),
                    ("group", "groups"),
                    full,
                )?;
            }
            writeln!(
                f,
                "  bridge group (every leader): {}",
                members(&b.bridge_group, full)
            )?;
            if let Some(c) = b.colocated.as_ref().filter(|_| !leader_plan) {
                if !c.gather_groups.is_empty() {
                    write_list(
                        f,
                        "gather groups (one per position, the lanes of one block)",
                        &group_lines(&c.gather_groups, full),
                        ("group", "groups"),
                        full,
                    )?;
                }
                if let Some(g) = &c.src_cp_gather {
                    write_list(
                        f,
                        "colocated source cp gather",
                        &group_lines(g, full),
                        ("group", "groups"),
                        full,
                    )?;
                }
                if let Some(g) = &c.dst_cp_reduce {
                    write_list(
                        f,
                        "colocated destination cp reduce",
                        &group_lines(g, full),
                        ("group", "groups"),
                        full,
                    )?;
                }
                let mut slots = String::new();
                let _ = write!(slots, "{}", members(&c.slots, full));
                writeln!(
                    f,
                    "  slots (each rank's share of the batch, in rank order): {slots}"
                )?;
            }
        }
        Ok(())
    }
}

/// A plan's JSON object.
fn plan_json(b: &Bridge) -> Value {
    let mut o = Map::new();
    o.insert("src".into(), b.src.clone().into());
    o.insert("dst".into(), b.dst.clone().into());
    o.insert("direction".into(), b.direction.name().into());
    o.insert("scale".into(), b.scale.into());
    o.insert("src_leaders".into(), b.src_leaders.clone().into());
    o.insert("dst_leaders".into(), b.dst_leaders.clone().into());
    let pairs: Vec<[u32; 2]> = b.pairs.iter().map(|&(s, d)| [s, d]).collect();
    o.insert("pairs".into(), serde_json::json!(pairs));
    o.insert(
        "src_broadcast".into(),
        serde_json::json!(b.src_broadcast.to_vecs()),
    );
    o.insert(
        "dst_broadcast".into(),
        serde_json::json!(b.dst_broadcast.to_vecs()),
    );
    if let Some(g) = &b.dst_cp_reduce {
        o.insert("dst_cp_reduce".into(), serde_json::json!(g.to_vecs()));
    }
    if let Some(g) = &b.src_cp_gather {
        o.insert("src_cp_gather".into(), serde_json::json!(g.to_vecs()));
    }
    o.insert("bridge_group".into(), b.bridge_group.clone().into());
    if let Some(c) = &b.colocated {
        let mut co = serde_json::json!({
            "mode": c.mode.name(),
            "direction": b.direction.name(),
            "scale": b.scale,
            "gather_groups": c.gather_groups.to_vecs(),
            "slots": c.slots,
            "reason": c.reason,
        });
        // The gather plan's cp groups, as Python's dict has them.
        if let Some(map) = co.as_object_mut() {
            if let Some(g) = &c.src_cp_gather {
                map.insert("src_cp_gather".into(), serde_json::json!(g.to_vecs()));
            }
            if let Some(g) = &c.dst_cp_reduce {
                map.insert("dst_cp_reduce".into(), serde_json::json!(g.to_vecs()));
            }
        }
        o.insert("colocated".into(), co);
    }
    Value::Object(o)
}

impl Serialize for Plans {
    /// A list of plans: `{"src", "dst", "direction", "scale",
    /// "src_leaders", "dst_leaders", "pairs": [[src, dst]],
    /// "src_broadcast", "dst_broadcast", ("dst_cp_reduce" with destination
    /// cp > 1), ("src_cp_gather" with source cp > 1), "bridge_group",
    /// ("colocated": {"mode", "direction", "scale", "gather_groups",
    /// "slots", "reason", and "src_cp_gather" / "dst_cp_reduce" when the
    /// gather plan has them} for colocated modules)}`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.plans.iter().map(plan_json))
    }
}

/// `1 source lane`, `4 source lanes`.
fn lanes(n: usize, side: &str) -> String {
    format!("{n} {side} lane{}", if n == 1 { "" } else { "s" })
}
