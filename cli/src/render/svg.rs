//! The SVG text of a [`Picture`], written as it is computed.
//!
//! Each panel is a `<g class="panel" data-kind="tp">`; each drawn rank a
//! `<g class="cell" data-rank="R" data-group="I">` holding its rectangle and
//! its label (the rank); GPUs outside the layout on a drawn node are
//! `<rect class="unused">`.

use std::io::{self, Write};

use super::{Picture, Row, color, escape};

/// Cell height.
const CELL_H: f64 = 20.0;
/// Space between two node rows.
const ROW_GAP: f64 = 5.0;
/// Extra space before the first node of a new domain.
const DOMAIN_GAP: f64 = 14.0;
/// Width of the node labels.
const LABEL_W: f64 = 82.0;
/// Outer margin.
const MARGIN: f64 = 16.0;
/// Space between panels.
const PANEL_GAP: f64 = 28.0;
/// Height of a panel's heading.
const HEADING_H: f64 = 36.0;
/// Height of a title line.
const LINE_H: f64 = 18.0;
/// Panels go side by side up to this width, then wrap.
const MAX_WIDTH: f64 = 2400.0;
/// The width of a character of the title (14px bold monospace) and of the
/// other header lines (11px), to keep them inside the picture.
const TITLE_CHAR_W: f64 = 8.8;
/// See [`TITLE_CHAR_W`].
const LINE_CHAR_W: f64 = 7.0;

/// Sizes of the drawing, computed once.
struct Geometry {
    cell_w: f64,
    side_w: f64,
    panel_w: f64,
    panel_h: f64,
    header_h: f64,
    per_line: usize,
    width: f64,
    height: f64,
}

impl Geometry {
    /// The geometry of `p`.
    fn new(p: &Picture) -> Geometry {
        let digits = p.end.saturating_sub(1).to_string().len() as f64;
        let cell_w = (7.0 * digits + 10.0).max(26.0);
        let side_w = if p.encoder_end.is_some() { 70.0 } else { 10.0 };
        let panel_w = LABEL_W + f64::from(p.gpus_per_node) * cell_w + side_w;
        let panel_h = HEADING_H + rows_height(p) + 8.0;
        let lines = 2.0 + if p.note.is_some() { 1.0 } else { 0.0 };
        let header_h = MARGIN + lines * LINE_H + 8.0;
        let n = p.panels.len().max(1);
        let fit = ((MAX_WIDTH - 2.0 * MARGIN + PANEL_GAP) / (panel_w + PANEL_GAP)).floor();
        let per_line = (fit.max(1.0) as usize).min(n);
        let panel_lines = n.div_ceil(per_line);
        let panels_w = 2.0 * MARGIN + per_line as f64 * (panel_w + PANEL_GAP) - PANEL_GAP;
        // At least as wide as the header's text.
        let chars = |s: &str| s.chars().count() as f64;
        let text_w = 2.0 * MARGIN
            + (chars(&p.title) * TITLE_CHAR_W)
                .max(chars(&p.machine) * LINE_CHAR_W)
                .max(p.note.as_deref().map_or(0.0, |n| chars(n) * LINE_CHAR_W));
        let width = panels_w.max(text_w).ceil();
        let height = header_h + panel_lines as f64 * (panel_h + PANEL_GAP) - PANEL_GAP + MARGIN;
        Geometry {
            cell_w,
            side_w,
            panel_w,
            panel_h,
            header_h,
            per_line,
            width: width.max(640.0),
            height,
        }
    }
}

/// The height of the rows of a panel.
fn rows_height(p: &Picture) -> f64 {
    let mut y = 0.0;
    let mut domain = None;
    for row in p.rows() {
        if let Row::Node {
            domain: Some(d), ..
        } = row
        {
            if domain.is_some_and(|prev| prev != d) {
                y += DOMAIN_GAP;
            }
            domain = Some(d);
        }
        y += CELL_H + ROW_GAP;
    }
    y
}

/// Writes the picture as an SVG document (with the XML declaration when
/// `standalone`, for a `.svg` file; without, to embed in HTML).
///
/// # Errors
/// When `out` cannot be written.
pub fn write_svg(out: &mut impl Write, p: &Picture, standalone: bool) -> io::Result<()> {
    let geo = &Geometry::new(p);
    if standalone {
        writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    }
    writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0}" height="{h:.0}" viewBox="0 0 {w:.0} {h:.0}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="11">"#,
        w = geo.width,
        h = geo.height
    )?;
    writeln!(
        out,
        r##"<style>
.cell text {{ text-anchor: middle; fill: #111; }}
.nogroup text {{ fill: #999; }}
.node-label {{ text-anchor: end; fill: #333; }}
.side {{ fill: #555; font-size: 10px; }}
.heading {{ font-size: 13px; font-weight: bold; fill: #222; }}
.title {{ font-size: 14px; font-weight: bold; fill: #111; }}
.sub {{ fill: #333; }}
.note {{ fill: #b00020; font-weight: bold; }}
.gap {{ fill: #666; font-style: italic; }}
</style>
<defs><pattern id="enc-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="2" height="6" fill="#000" fill-opacity="0.22"/></pattern></defs>
<rect width="100%" height="100%" fill="#ffffff"/>"##
    )?;
    let mut y = MARGIN + 12.0;
    writeln!(
        out,
        r#"<text class="title" x="{MARGIN}" y="{y}">{}</text>"#,
        escape(&p.title)
    )?;
    y += LINE_H;
    writeln!(
        out,
        r#"<text class="sub" x="{MARGIN}" y="{y}">{}</text>"#,
        escape(&p.machine)
    )?;
    if let Some(note) = &p.note {
        y += LINE_H;
        writeln!(
            out,
            r#"<text class="note" id="summary-note" x="{MARGIN}" y="{y}">{}</text>"#,
            escape(note)
        )?;
    }
    for i in 0..p.panels.len() {
        let x = MARGIN + (i % geo.per_line) as f64 * (geo.panel_w + PANEL_GAP);
        let y = geo.header_h + (i / geo.per_line) as f64 * (geo.panel_h + PANEL_GAP);
        write_panel(out, p, geo, i, x, y)?;
    }
    writeln!(out, "</svg>")
}

/// Writes panel `index` with its top-left corner at `(x, y)`.
fn write_panel(
    out: &mut impl Write,
    p: &Picture,
    geo: &Geometry,
    index: usize,
    x: f64,
    y: f64,
) -> io::Result<()> {
    let Some(panel) = p.panels.get(index) else {
        return Ok(());
    };
    let kind = panel.kind.to_string();
    writeln!(
        out,
        r#"<g class="panel" data-kind="{}" transform="translate({x:.1},{y:.1})">"#,
        escape(&kind)
    )?;
    writeln!(
        out,
        r#"<text class="heading" x="0" y="16">{}: {}</text>"#,
        escape(&kind),
        escape(&panel.heading)
    )?;
    let g = u64::from(p.gpus_per_node);
    let cw = geo.cell_w;
    let row_w = g as f64 * cw;
    let mut top = HEADING_H;
    let mut domain = None;
    for row in p.rows() {
        match row {
            Row::Node { node, domain: d } => {
                if let Some(d) = d {
                    if domain.is_some_and(|prev| prev != d) {
                        top += DOMAIN_GAP;
                        let line_y = top - ROW_GAP - DOMAIN_GAP / 2.0;
                        writeln!(
                            out,
                            r##"<line x1="0" y1="{line_y:.1}" x2="{:.1}" y2="{line_y:.1}" stroke="#1a4f8b" stroke-width="2" stroke-dasharray="6 3"/><text class="side" x="2" y="{:.1}">domain {d}</text>"##,
                            LABEL_W + row_w + geo.side_w,
                            line_y - 2.0
                        )?;
                    } else if domain.is_none() {
                        writeln!(
                            out,
                            r#"<text class="side" x="2" y="{:.1}">domain {d}</text>"#,
                            top - 4.0
                        )?;
                    }
                    domain = Some(d);
                }
                write_node(out, p, panel, geo, node, top)?;
            }
            Row::Gap { nodes, ranks } => {
                writeln!(
                    out,
                    r#"<text class="gap" x="{:.1}" y="{:.1}">⋮ {} not drawn (ranks {}..{})</text>"#,
                    LABEL_W,
                    top + CELL_H * 0.7,
                    crate::format::count(nodes, "node", "nodes"),
                    ranks.0,
                    ranks.1
                )?;
            }
        }
        top += CELL_H + ROW_GAP;
    }
    writeln!(out, "</g>")
}

/// Writes one node row at height `top`, each cell's group asked of the
/// layout.
fn write_node(
    out: &mut impl Write,
    p: &Picture,
    panel: &super::Panel,
    geo: &Geometry,
    node: u32,
    top: f64,
) -> io::Result<()> {
    let g = u64::from(p.gpus_per_node);
    let cw = geo.cell_w;
    let row_w = g as f64 * cw;
    let base = u64::from(node) * g;
    writeln!(
        out,
        r#"<text class="node-label" x="{:.1}" y="{:.1}">node {node}</text>"#,
        LABEL_W - 8.0,
        top + CELL_H * 0.7
    )?;
    writeln!(
        out,
        r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" rx="3" fill="none" stroke="#333" stroke-width="1.5"/>"##,
        LABEL_W - 2.0,
        top - 2.0,
        row_w + 4.0,
        CELL_H + 4.0
    )?;
    for local in 0..g {
        let rank = base + local;
        let cx = LABEL_W + local as f64 * cw;
        if rank < p.first || rank >= p.end {
            writeln!(
                out,
                r##"<rect class="unused" x="{cx:.1}" y="{top:.1}" width="{:.1}" height="{CELL_H}" fill="#f2f2f2" stroke="#dddddd"/>"##,
                cw
            )?;
            continue;
        }
        let slot = u32::try_from(rank).ok().map(|r| p.slot(panel.kind, r));
        let (class, fill, group) = match slot.and_then(|s| s.index) {
            Some(i) => ("cell", color(i), i.to_string()),
            None => ("cell nogroup", "#ffffff".to_string(), "none".to_string()),
        };
        write!(
            out,
            r##"<g class="{class}" data-rank="{rank}" data-group="{group}"><rect x="{cx:.1}" y="{top:.1}" width="{cw:.1}" height="{CELL_H}" fill="{fill}" stroke="#ffffff"/>"##
        )?;
        if p.is_encoder(rank) {
            write!(
                out,
                r##"<rect x="{cx:.1}" y="{top:.1}" width="{cw:.1}" height="{CELL_H}" fill="url(#enc-hatch)" stroke="#7a1f1f" stroke-dasharray="3 2"/>"##
            )?;
        }
        if slot.is_some_and(|s| s.groups > 1) {
            write!(
                out,
                r##"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="#222"/>"##,
                cx + cw - 4.0,
                top + 4.0
            )?;
        }
        writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}">{rank}</text></g>"#,
            cx + cw / 2.0,
            top + CELL_H * 0.7
        )?;
    }
    if let Some(e) = p.encoder_end {
        let side_x = LABEL_W + row_w + 8.0;
        let label = if e <= base.max(p.first) {
            "decoder"
        } else if e >= (base + g).min(p.end) {
            "encoder"
        } else {
            "enc | dec"
        };
        writeln!(
            out,
            r#"<text class="side" x="{side_x:.1}" y="{:.1}">{label}</text>"#,
            top + CELL_H * 0.7
        )?;
        if e > base && e < base + g && e < p.end {
            let x = LABEL_W + (e - base) as f64 * cw;
            writeln!(
                out,
                r##"<line class="encoder-end" x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#b00020" stroke-width="3"/>"##,
                top - 4.0,
                top + CELL_H + 4.0
            )?;
        } else if e == base && e > p.first {
            writeln!(
                out,
                r##"<line class="encoder-end" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#b00020" stroke-width="3"/>"##,
                LABEL_W - 4.0,
                top - ROW_GAP / 2.0 - 1.0,
                LABEL_W + row_w + 4.0,
                top - ROW_GAP / 2.0 - 1.0
            )?;
        }
    }
    Ok(())
}
