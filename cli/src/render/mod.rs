//! `rank-layout render`: a picture of a layout (or mesh) on its machine.
//!
//! Nodes are rows, GPUs are cells labelled with their rank, one panel per
//! kind (dim set), each group its own colour; node (and domain) boundaries are drawn
//! and an encoder's cells are hatched and fenced off from the decoder's.
//! Past `--max-ranks` only the first nodes, the nodes where the encoder
//! ends and the last node are drawn, and the picture says so.
//!
//! The picture is written as it is computed: a cell's group, and a rank's
//! tooltip, are asked of the layout when the cell is written, so memory
//! stays the same however many ranks are drawn.
//!
//! - [`Picture`]: what to draw, from the layout (this file);
//! - [`svg`]: the SVG text;
//! - [`html`]: the SVG wrapped in a page with a legend and tooltips;
//! - [`modules`]: a `--modules` file's modules, one band each.

pub mod html;
pub mod modules;
pub mod svg;

use rank_layout::{ExpertLayout, Kind, Layout, Part, Topology};

use crate::error::Failure;
use crate::format::{Shorten, count, experts, gtp_sizes, thousands};
use crate::report::groups::groups_heading;
use crate::spread::machine_line;
use crate::target::{DimSet, MeshTarget, Target};

/// The kinds of a layout drawn when none is given (a mesh's: every dim
/// set, as `groups` lists them).
pub const DEFAULT_KINDS: [Kind; 4] = [Kind::TP, Kind::CP, Kind::PP, Kind::DP];

/// Member lists in tooltips and the legend are not scanned past this many
/// members (a long list shows its ends instead of a proven step).
const TOOLTIP_SCAN: usize = 4096;

/// One row of the picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    /// A node: its GPUs as cells.
    Node {
        /// The node's number.
        node: u32,
        /// Its domain, with domains.
        domain: Option<u32>,
    },
    /// Nodes left out of a summarised picture.
    Gap {
        /// How many nodes are left out.
        nodes: u64,
        /// The first and last rank left out.
        ranks: (u64, u64),
    },
}

/// Where one rank is in one kind's groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// The index (comm-split color) of its first group, `None` when it is in
    /// no group of the kind.
    pub index: Option<u32>,
    /// How many groups of the kind hold it (several where groups overlap).
    pub groups: usize,
}

/// One kind's panel.
#[derive(Debug, Clone)]
pub struct Panel {
    /// The kind (dim set).
    pub kind: DimSet,
    /// `"8 groups of 4 ranks"`.
    pub heading: String,
    /// The legend's lines: colour index and text, for the first groups.
    pub legend: Vec<(u32, String)>,
    /// Groups the legend leaves out.
    pub legend_more: u64,
}

/// Everything to draw: the rows are a few spans of nodes and each cell is
/// asked of the layout when it is written.
#[derive(Debug, Clone)]
pub struct Picture<'a> {
    target: &'a Target,
    topology: Topology,
    /// The title line.
    pub title: String,
    /// The machine line.
    pub machine: String,
    /// Set when the picture is summarised: what it leaves out.
    pub note: Option<String>,
    /// GPUs per node: cells per row.
    pub gpus_per_node: u32,
    /// The layout's ranks: `[first, end)`.
    pub first: u64,
    /// One past the last rank.
    pub end: u64,
    /// One past the last encoder rank, with an encoder.
    pub encoder_end: Option<u64>,
    /// The nodes drawn: ascending, disjoint, inclusive spans.
    spans: Vec<(u64, u64)>,
    /// The panels, left to right.
    pub panels: Vec<Panel>,
}

/// Legend lines listed per kind at most.
const LEGEND_GROUPS: u64 = 48;

impl<'a> Picture<'a> {
    /// The picture of `kinds` of `target` (a layout's default four, a
    /// mesh's every dim set, when empty) on `topology`, drawing every rank
    /// up to `max_ranks`.
    ///
    /// # Errors
    /// [`Failure::Input`] for a kind `target` does not have;
    /// [`Failure::Message`] when one node has more GPUs than `max_ranks`.
    pub fn new(
        target: &'a Target,
        topology: Topology,
        kinds: &[DimSet],
        max_ranks: u32,
    ) -> Result<Picture<'a>, Failure> {
        let kinds = match target {
            _ if !kinds.is_empty() => kinds.to_vec(),
            Target::Layout { .. } => DEFAULT_KINDS.iter().copied().map(DimSet::Kind).collect(),
            Target::Mesh(_) => target.all_sets(),
        };
        let g = topology.gpus_per_node();
        let first = u64::from(target.rank_offset());
        let end = target.rank_end();
        let last = end.saturating_sub(1);
        let node_of = |r: u64| r / u64::from(g);
        let encoder_end = match target {
            Target::Layout { layout, .. } => layout
                .has_encoder()
                .then(|| first + u64::from(layout.encoder_world_size())),
            Target::Mesh(_) => None,
        };
        if g > max_ranks {
            return Err(Failure::Message(format!(
                "one node of {g} GPUs is more than --max-ranks {max_ranks} cells: raise --max-ranks or give fewer --gpus-per-node"
            )));
        }
        let (first_node, last_node) = (node_of(first), node_of(last));
        let all_nodes = last_node - first_node + 1;

        // The nodes to draw: all, or the first ones, those around the
        // encoder's end and the last.
        let mut spans: Vec<(u64, u64)> = if end - first <= u64::from(max_ranks) {
            vec![(first_node, last_node)]
        } else {
            let head = (u64::from(max_ranks) / 2 / u64::from(g)).max(1);
            let mut spans = vec![(first_node, (first_node + head - 1).min(last_node))];
            if let Some(e) = encoder_end {
                for node in [node_of(e.saturating_sub(1)), node_of(e.min(last))] {
                    spans.push((node, node));
                }
            }
            spans.push((last_node, last_node));
            spans
        };
        spans.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
        for (a, b) in spans {
            match merged.last_mut() {
                Some(m) if a <= m.1 + 1 => m.1 = m.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        let drawn: u64 = merged.iter().map(|(a, b)| b - a + 1).sum();

        let note = (drawn != all_nodes).then(|| {
            format!(
                "summarised: {} ranks are more than --max-ranks {}; drawing {} of the {} nodes (the first ones{} and the last)",
                thousands(end - first),
                thousands(u64::from(max_ranks)),
                thousands(drawn),
                thousands(all_nodes),
                if encoder_end.is_some() {
                    ", those where the encoder ends"
                } else {
                    ""
                }
            )
        });

        let panels = kinds
            .iter()
            .map(|kind| panel(target, kind))
            .collect::<Result<Vec<_>, _>>()?;
        let title = match target {
            Target::Layout { layout, .. } => layout_title(layout, first, end, encoder_end),
            Target::Mesh(_) => format!(
                "{}: {}",
                count(end - first, "rank", "ranks"),
                target.title()
            ),
        };
        Ok(Picture {
            target,
            topology,
            title,
            machine: format!(
                "{}; a row per node, a cell per GPU labelled with its rank, a colour per group",
                machine_line(target, &topology)
            ),
            note,
            gpus_per_node: g,
            first,
            end,
            encoder_end,
            spans: merged,
            panels,
        })
    }

    /// Whether `rank` is an encoder rank.
    pub fn is_encoder(&self, rank: u64) -> bool {
        self.encoder_end.is_some_and(|e| rank < e)
    }

    /// The rows, top to bottom: the drawn nodes, and a gap where nodes are
    /// left out.
    pub fn rows(&self) -> impl Iterator<Item = Row> + '_ {
        let g = u64::from(self.gpus_per_node);
        let mut previous: Option<u64> = None;
        self.spans.iter().flat_map(move |&(a, b)| {
            let gap = previous.filter(|p| a > p + 1).map(|p| Row::Gap {
                nodes: a - p - 1,
                ranks: ((p + 1) * g, a * g - 1),
            });
            previous = Some(b);
            gap.into_iter().chain((a..=b).map(move |node| {
                let node = u32::try_from(node).unwrap_or(u32::MAX);
                Row::Node {
                    node,
                    domain: self.topology.domain(node.saturating_mul(g as u32)),
                }
            }))
        })
    }

    /// The layout's ranks on `node`, ascending.
    pub fn ranks_of(&self, node: u32) -> std::ops::Range<u64> {
        let g = u64::from(self.gpus_per_node);
        let lo = (u64::from(node) * g).max(self.first);
        let hi = ((u64::from(node) + 1) * g).min(self.end);
        lo..hi.max(lo)
    }

    /// Every drawn rank, ascending.
    pub fn ranks(&self) -> impl Iterator<Item = u32> + '_ {
        self.rows()
            .filter_map(|row| match row {
                Row::Node { node, .. } => Some(self.ranks_of(node)),
                Row::Gap { .. } => None,
            })
            .flatten()
            .filter_map(|r| u32::try_from(r).ok())
    }

    /// Where `rank` is among the groups of `kind`.
    pub fn slot(&self, kind: &DimSet, rank: u32) -> Slot {
        let none = Slot {
            index: None,
            groups: 0,
        };
        match (self.target, kind) {
            (Target::Layout { layout, .. }, DimSet::Kind(kind)) => {
                match layout.memberships(rank, *kind) {
                    Ok(m) => Slot {
                        index: m.first().map(|m| m.color),
                        groups: m.len(),
                    },
                    Err(_) => none,
                }
            }
            (Target::Mesh(m), DimSet::Mesh(name)) => match m.mesh.split(rank, name) {
                Ok(split) => Slot {
                    index: Some(split.color),
                    groups: 1,
                },
                Err(_) => none,
            },
            _ => none,
        }
    }

    /// The tooltip of `rank`: node, coordinates and its groups of the
    /// panels' kinds.
    pub fn tooltip(&self, rank: u32) -> String {
        let layout = match self.target {
            Target::Layout { layout, .. } => layout,
            Target::Mesh(m) => return self.mesh_tooltip(m, rank),
        };
        let topology = &self.topology;
        let Ok(p) = layout.placement(rank) else {
            return format!("rank {rank}");
        };
        let mut text = format!(
            "rank {rank}: node {}, GPU {}",
            topology.node(rank),
            topology.local(rank)
        );
        if let Some(d) = topology.domain(rank) {
            text.push_str(&format!(", domain {d}"));
        }
        if layout.has_encoder() {
            text.push_str(&format!(" ({})", p.part));
        }
        text.push_str(&format!(
            "\ntp={} cp={} dp={} pp={}  expert: etp={} ep={} edp={}",
            p.coord.tp, p.coord.cp, p.coord.dp, p.coord.pp, p.expert.etp, p.expert.ep, p.expert.edp
        ));
        let s = layout.sizes();
        if s.gtp_remat > 1 || s.egtp_remat > 1 {
            text.push_str(&format!(
                " gtp_remat={} egtp_remat={}",
                p.gtp_remat, p.expert.egtp_remat
            ));
        }
        let how = Shorten {
            full: false,
            scan_limit: TOOLTIP_SCAN,
        };
        for panel in &self.panels {
            let DimSet::Kind(kind) = panel.kind else {
                continue;
            };
            let memberships = layout.memberships(rank, kind).unwrap_or_default();
            if memberships.is_empty() {
                text.push_str(&format!("\n{kind}: in no group"));
            }
            for m in memberships {
                text.push_str(&format!(
                    "\n{kind}: group {} (key {}): {}",
                    m.color,
                    m.key,
                    how.members(&m.group)
                ));
            }
        }
        if p.part == Part::Encoder {
            text.push_str("\n(encoder grid)");
        }
        text
    }

    /// The tooltip of `rank` in a mesh: node, coordinates in the mesh and
    /// each view, and its group of each panel's dim set.
    fn mesh_tooltip(&self, m: &MeshTarget, rank: u32) -> String {
        let topology = &self.topology;
        let mut text = format!(
            "rank {rank}: node {}, GPU {}",
            topology.node(rank),
            topology.local(rank)
        );
        if let Some(d) = topology.domain(rank) {
            text.push_str(&format!(", domain {d}"));
        }
        let coords = |c: rank_layout::MeshCoord<'_>| {
            c.iter()
                .map(|(n, v)| format!("{n}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        if let Ok(c) = m.mesh.placement(rank) {
            text.push_str(&format!("\n{}", coords(c)));
        }
        for view in m.mesh.views() {
            if let Ok(c) = m.mesh.placement_in(rank, view) {
                text.push_str(&format!("\n{view}: {}", coords(c)));
            }
        }
        let how = Shorten {
            full: false,
            scan_limit: TOOLTIP_SCAN,
        };
        for panel in &self.panels {
            let name = panel.kind.to_string();
            let Ok(split) = m.mesh.split(rank, &name) else {
                continue;
            };
            let group = m
                .mesh
                .groups(&name)
                .ok()
                .and_then(|mut g| g.nth(split.color as usize));
            if let Some(group) = group {
                text.push_str(&format!(
                    "\n{name}: group {} (key {}): {}",
                    split.color,
                    split.key,
                    how.members(&group)
                ));
            }
        }
        text
    }
}

/// The title of a layout's picture: sizes, order, encoder, experts.
fn layout_title(layout: &Layout, first: u64, end: u64, encoder_end: Option<u64>) -> String {
    let s = layout.sizes();
    let mut title = format!(
        "{}: tp={} cp={} ep={} dp={} pp={}, order {}",
        count(end - first, "rank", "ranks"),
        s.tp,
        s.cp,
        s.ep,
        s.dp,
        s.pp,
        layout.config().order
    );
    if let Some(e) = layout.encoder_sizes() {
        title.push_str(&format!(
            "; encoder tp={} pp={} on ranks {first}..{}",
            e.tp,
            e.pp,
            encoder_end.unwrap_or(first).saturating_sub(1)
        ));
    }
    title.push_str(&format!(", {}", experts(layout.config().expert_layout)));
    let (gtp, egtp) = gtp_sizes(s);
    title.push_str(&gtp);
    if layout.config().expert_layout == ExpertLayout::Folded {
        title.push_str(&format!(": etp={} edp={}{egtp}", s.etp, s.edp));
    }
    title
}

/// The panel of `kind`: its heading and legend.
fn panel(target: &Target, kind: &DimSet) -> Result<Panel, Failure> {
    let groups = target.groups(kind)?;
    let heading = groups_heading(&groups);
    let how = Shorten {
        full: false,
        scan_limit: TOOLTIP_SCAN,
    };
    let total = groups.len() as u64;
    let legend = groups
        .take(LEGEND_GROUPS as usize)
        .enumerate()
        .map(|(i, group)| (i as u32, how.members(&group)))
        .collect();
    Ok(Panel {
        kind: kind.clone(),
        heading,
        legend,
        legend_more: total.saturating_sub(LEGEND_GROUPS),
    })
}

/// The fill colour of group `index` as `#rrggbb`: hues a golden angle
/// apart, so that neighbouring groups differ, light enough for a dark
/// label.
pub fn color(index: u32) -> String {
    let hue = (f64::from(index) * 137.507_764) % 360.0;
    let light = match index % 3 {
        0 => 0.82,
        1 => 0.72,
        _ => 0.90,
    };
    let sat = match (index / 3) % 3 {
        0 => 0.70,
        1 => 0.60,
        _ => 0.80,
    };
    let [r, g, b] = hsl_to_rgb(hue, sat, light);
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// An HSL colour (hue in degrees, saturation and lightness in 0..=1) as
/// 8-bit RGB.
fn hsl_to_rgb(hue: f64, sat: f64, light: f64) -> [u8; 3] {
    let c = (1.0 - (2.0 * light - 1.0).abs()) * sat;
    let h = hue / 60.0;
    let x = c * (1.0 - (h % 2.0 - 1.0).abs());
    let (r, g, b) = match h as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = light - c / 2.0;
    let byte = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    [byte(r), byte(g), byte(b)]
}

/// `s` with the five XML special characters escaped.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours() {
        assert_eq!(hsl_to_rgb(0.0, 1.0, 0.5), [255, 0, 0]);
        assert_eq!(hsl_to_rgb(120.0, 1.0, 0.5), [0, 255, 0]);
        assert_eq!(hsl_to_rgb(240.0, 1.0, 0.5), [0, 0, 255]);
        assert_eq!(hsl_to_rgb(0.0, 0.0, 1.0), [255, 255, 255]);
        assert_ne!(color(0), color(1));
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
