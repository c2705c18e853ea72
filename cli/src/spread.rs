//! Where each kind's (or dim set's) groups fall on the machine: the
//! library's [`Spread`] per set, what travels in each, and the table both
//! `check` and `suggest` print.

use std::fmt;

use rank_layout::{Kind, Spread, Topology};
use serde::Serialize;

use crate::error::Failure;
use crate::format::{count, thousands};
use crate::target::{DimSet, Target};

/// One kind (or dim set) and how its groups fall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindSpread {
    /// The kind or dim set.
    pub kind: DimSet,
    /// How its groups fall on nodes and domains.
    pub spread: Spread,
    /// In an encoder + decoder layout, the size of the encoder's groups and
    /// of the decoder's (the first group and the last), which may differ.
    pub sizes: Option<(u32, u32)>,
}

/// The sizes of the first and the last group of `kind`: the encoder's and
/// the decoder's in an encoder + decoder layout (`None` in the others).
fn part_sizes(target: &Target, kind: &DimSet) -> Option<(u32, u32)> {
    match target {
        Target::Layout { layout, .. } if layout.has_encoder() => {}
        _ => return None,
    }
    let mut groups = target.groups(kind).ok()?;
    let first = groups.next()?.len();
    let last = groups.next_back().map_or(first, |g| g.len());
    Some((
        u32::try_from(first).unwrap_or(u32::MAX),
        u32::try_from(last).unwrap_or(u32::MAX),
    ))
}

/// The spread of every kind of `kinds` on `topology`, computed from the
/// grid's strides (no group is listed for the grid kinds).
///
/// # Errors
/// [`Failure::Input`] for a kind `target` does not have.
pub fn spreads(
    target: &Target,
    kinds: &[DimSet],
    topology: &Topology,
) -> Result<Vec<KindSpread>, Failure> {
    kinds
        .iter()
        .map(|kind| {
            Ok(KindSpread {
                kind: kind.clone(),
                spread: target.spread(kind, topology)?,
                sizes: part_sizes(target, kind),
            })
        })
        .collect()
}

/// What travels in groups of `kind` (of a mesh: by its dim's name), for
/// warnings.
pub fn traffic(target: &Target, kind: &DimSet) -> String {
    match kind {
        DimSet::Kind(kind) => kind_traffic(*kind),
        DimSet::Mesh(name) => {
            let dim = target.single_dim(kind).map(|(d, _)| d);
            match dim.as_deref().and_then(|d| d.parse::<Kind>().ok()) {
                Some(k) if k.hcp_level().is_none() => kind_traffic(k),
                _ => format!("{name} traffic"),
            }
        }
    }
}

/// What travels in groups of a layout's `kind`.
fn kind_traffic(kind: Kind) -> String {
    match kind {
        k if k == Kind::TP => "tensor-parallel traffic".into(),
        k if k == Kind::CP => "context-parallel traffic".into(),
        k if k == Kind::EP => "the expert-parallel all-to-all".into(),
        k if k == Kind::ETP => "expert tensor-parallel traffic".into(),
        k if k == Kind::GTP_REMAT => {
            "the weight-shard all-gathers (every forward and backward)".into()
        }
        k if k == Kind::EGTP_REMAT => {
            "the expert weight-shard all-gathers (every forward and backward)".into()
        }
        k if k == Kind::DP => "data-parallel gradient reduction".into(),
        k if k == Kind::PP => "pipeline traffic".into(),
        other => match other.hcp_level() {
            Some(level) => format!("context-parallel traffic (level {level})"),
            None => format!("{other} traffic"),
        },
    }
}

/// The JSON of one spread: `{"groups", "size", "cross_node_groups",
/// "max_nodes_per_group", "cross_domain_groups", "max_domains_per_group"}`
/// (the domain counts are `null` without `--nodes-per-domain`; `size` is
/// the largest group's), and in an encoder + decoder layout
/// `"encoder_size", "decoder_size"`.
#[derive(Debug, Serialize)]
pub struct SpreadOut {
    groups: u32,
    size: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    encoder_size: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    decoder_size: Option<u32>,
    cross_node_groups: u32,
    max_nodes_per_group: u32,
    cross_domain_groups: Option<u32>,
    max_domains_per_group: Option<u32>,
}

impl From<&KindSpread> for SpreadOut {
    fn from(k: &KindSpread) -> SpreadOut {
        let s = k.spread;
        SpreadOut {
            groups: s.groups,
            size: u32::try_from(s.size).unwrap_or(u32::MAX),
            encoder_size: k.sizes.map(|(e, _)| e),
            decoder_size: k.sizes.map(|(_, d)| d),
            cross_node_groups: s.cross_node_groups,
            max_nodes_per_group: s.max_nodes_per_group,
            cross_domain_groups: s.cross_domain_groups,
            max_domains_per_group: s.max_domains_per_group,
        }
    }
}

/// The machine a layout (or mesh) occupies, in words: `64 ranks on 8
/// nodes of 8 GPUs (2 domains of 4 nodes)`.
pub fn machine_line(target: &Target, topology: &Topology) -> String {
    let first = target.rank_offset();
    let last = u32::try_from(target.rank_end().saturating_sub(1)).unwrap_or(u32::MAX);
    let nodes = topology.node(last) - topology.node(first) + 1;
    let mut line = format!(
        "{} on {} of {} GPUs",
        count(u64::from(target.world_size()), "rank", "ranks"),
        count(u64::from(nodes), "node", "nodes"),
        topology.gpus_per_node()
    );
    if let (Some(a), Some(b), Some(m)) = (
        topology.domain(first),
        topology.domain(last),
        topology.nodes_per_domain(),
    ) {
        line.push_str(&format!(
            " in {} of {m} nodes",
            count(u64::from(b - a + 1), "domain", "domains")
        ));
    }
    if first % topology.gpus_per_node() != 0 {
        line.push_str(&format!(
            " (rank_offset {first} starts mid-node, at local GPU {})",
            topology.local(first)
        ));
    }
    line
}

/// The per-kind (or per-dim-set) table of `check` and `suggest`; in an
/// encoder + decoder layout a size reads `encoder/decoder` (`2/4`) when the
/// encoder's groups and the decoder's differ.
pub struct SpreadTable<'a>(pub &'a [KindSpread]);

impl fmt::Display for SpreadTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let domains = self
            .0
            .iter()
            .any(|k| k.spread.cross_domain_groups.is_some());
        let number = |n: u32| thousands(u64::from(n));
        let first = if self.0.iter().any(|k| matches!(k.kind, DimSet::Mesh(_))) {
            "dim set"
        } else {
            "kind"
        };
        let mut header = vec![first, "groups", "size", "cross-node", "max nodes"];
        if domains {
            header.extend(["cross-domain", "max domains"]);
        }
        let rows: Vec<Vec<String>> = self
            .0
            .iter()
            .map(
                |KindSpread {
                     kind,
                     spread: s,
                     sizes,
                 }| {
                    // Encoder/decoder when their groups differ in size.
                    let size = match sizes {
                        Some((e, d)) if e != d => format!("{}/{}", number(*e), number(*d)),
                        _ => number(u32::try_from(s.size).unwrap_or(u32::MAX)),
                    };
                    let mut row = vec![
                        kind.to_string(),
                        number(s.groups),
                        size,
                        number(s.cross_node_groups),
                        number(s.max_nodes_per_group),
                    ];
                    if let (Some(c), Some(m)) = (s.cross_domain_groups, s.max_domains_per_group) {
                        row.extend([number(c), number(m)]);
                    } else if domains {
                        row.extend(["-".to_owned(), "-".to_owned()]);
                    }
                    row
                },
            )
            .collect();
        // Each column as wide as its widest cell: the kind left-aligned,
        // the numbers right-aligned.
        let widths: Vec<usize> = header
            .iter()
            .enumerate()
            .map(|(i, h)| {
                rows.iter()
                    .filter_map(|r| r.get(i))
                    .map(String::len)
                    .chain([h.len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |f: &mut fmt::Formatter<'_>, cells: &[&str]| -> fmt::Result {
            for (i, (cell, width)) in cells.iter().zip(&widths).enumerate() {
                if i == 0 {
                    write!(f, "{cell:<width$}")?;
                } else {
                    write!(f, "  {cell:>width$}")?;
                }
            }
            writeln!(f)
        };
        line(f, &header)?;
        for row in &rows {
            let cells: Vec<&str> = row.iter().map(String::as_str).collect();
            line(f, &cells)?;
        }
        Ok(())
    }
}
