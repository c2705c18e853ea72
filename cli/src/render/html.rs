//! The HTML page of a [`Picture`]: the SVG, a legend per panel (each
//! group's colour and members) and a tooltip per cell (the rank's node,
//! coordinates and groups).

use std::io::{self, Write};

use super::{Picture, color, escape, svg::write_svg};
use crate::format::thousands;

/// The style of a picture's page.
const PICTURE_STYLE: &str = "
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #111; }
#picture { overflow: auto; border: 1px solid #ccc; }
.cell { cursor: crosshair; }
.cell:hover rect { stroke: #000; stroke-width: 2; }
#tip { position: fixed; display: none; pointer-events: none; background: #fffff0; border: 1px solid #888;
  padding: 6px 8px; font: 12px monospace; white-space: pre; box-shadow: 2px 2px 6px rgba(0,0,0,.25); z-index: 10; }
.legend { display: flex; flex-wrap: wrap; gap: 2em; }
.legend section { min-width: 16em; }
.legend h2 { font-size: 1em; margin: 1em 0 .3em; }
.legend ul { list-style: none; padding: 0; margin: 0; font: 12px monospace; }
.swatch { display: inline-block; width: 1.2em; height: .9em; margin-right: .4em; vertical-align: middle; border: 1px solid #999; }
.hatch { background: repeating-linear-gradient(45deg, rgba(0,0,0,.25) 0 2px, transparent 2px 6px); border: 1px dashed #7a1f1f; }
";

/// Writes an HTML page's start, up to its heading: the document type,
/// the head with the title `rank-layout: TITLE` and `style`, and the
/// body's first line, `TITLE` as the heading (`title` is escaped here).
///
/// # Errors
/// When `out` cannot be written.
pub fn write_page_head(out: &mut impl Write, title: &str, style: &str) -> io::Result<()> {
    let title = escape(title);
    writeln!(
        out,
        r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>rank-layout: {title}</title>
<style>{style}</style>
</head>
<body>
<h1>{title}</h1>"#
    )
}

/// Writes an HTML page's end: the body's and the document's.
///
/// # Errors
/// When `out` cannot be written.
pub fn write_page_end(out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "</body>\n</html>")
}

/// Writes the page; the tooltips are computed as they are written.
///
/// # Errors
/// When `out` cannot be written.
pub fn write_html(out: &mut impl Write, p: &Picture) -> io::Result<()> {
    write_page_head(out, &p.title, PICTURE_STYLE)?;
    writeln!(out, "<p>{}</p>", escape(&p.machine))?;
    if let Some(note) = &p.note {
        writeln!(out, r#"<p><strong>{}</strong></p>"#, escape(note))?;
    }
    writeln!(
        out,
        "<p>Hover over a GPU to see its rank's node, coordinates and groups.</p>"
    )?;
    write!(out, r#"<div id="picture">"#)?;
    write_svg(out, p, false)?;
    writeln!(out, "</div>")?;
    writeln!(out, r#"<div class="legend">"#)?;
    writeln!(
        out,
        r#"<section><h2>Key</h2><ul>
<li>a row: one node ({} GPUs); a cell: one GPU, labelled with its rank</li>
<li>a colour: one group of the panel's kind</li>
<li><span class="swatch" style="background:#fff"></span>in no group of the kind</li>
<li><span class="swatch" style="background:#f2f2f2"></span>a GPU outside the layout</li>
<li>&#9679; a rank in several groups (overlapping pipelines)</li>"#,
        p.gpus_per_node
    )?;
    if p.encoder_end.is_some() {
        writeln!(
            out,
            r#"<li><span class="swatch hatch"></span>an encoder rank; the red line is where the decoder starts</li>"#
        )?;
    }
    writeln!(out, "</ul></section>")?;
    for panel in &p.panels {
        writeln!(
            out,
            "<section><h2>{}: {}</h2><ul>",
            escape(&panel.kind.to_string()),
            escape(&panel.heading)
        )?;
        for (index, members) in &panel.legend {
            writeln!(
                out,
                r#"<li><span class="swatch" style="background:{}"></span>group {index}: {}</li>"#,
                color(*index),
                escape(members)
            )?;
        }
        if panel.legend_more > 0 {
            writeln!(
                out,
                "<li>… {} more groups</li>",
                thousands(panel.legend_more)
            )?;
        }
        writeln!(out, "</ul></section>")?;
    }
    writeln!(out, "</div>")?;
    // The tooltips as one JSON object, rank by rank. `</` cannot end the
    // script early: JSON escapes nothing there, so break it up.
    writeln!(
        out,
        r#"<div id="tip"></div>
<script>"#
    )?;
    write!(out, "const TIPS = {{")?;
    for (i, rank) in p.ranks().enumerate() {
        let tip = serde_json::to_string(&p.tooltip(rank)).map_err(io::Error::from)?;
        if i > 0 {
            write!(out, ",")?;
        }
        write!(out, "\"{rank}\":{}", tip.replace("</", "<\\/"))?;
    }
    writeln!(out, "}};")?;
    writeln!(
        out,
        r#"const tip = document.getElementById("tip");
document.querySelectorAll(".cell").forEach(function (cell) {{
  cell.addEventListener("mousemove", function (e) {{
    tip.textContent = TIPS[cell.dataset.rank] || ("rank " + cell.dataset.rank);
    tip.style.display = "block";
    tip.style.left = (e.clientX + 14) + "px";
    tip.style.top = (e.clientY + 14) + "px";
  }});
  cell.addEventListener("mouseleave", function () {{ tip.style.display = "none"; }});
}});
</script>"#
    )?;
    write_page_end(out)
}
