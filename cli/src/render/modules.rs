//! The picture of a `--modules` file: each module drawn as a mesh (the
//! mesh picture, nodes as rows), the pictures stacked top to bottom as
//! bands, each under a label naming the module, its ranks and stages; an
//! SVG picture or an HTML page. Inference shards are drawn alike, a band
//! per shard (its layout's picture) under its heading.

use std::io::Write;

use rank_layout::Topology;

use super::html::{write_page_end, write_page_head};
use super::svg::write_svg;
use super::{Picture, escape};
use crate::error::Failure;
use crate::modules_target::{ModulesTarget, heading};
use crate::shards_target::{self, ShardsTarget};
use crate::target::DimSet;

/// The `width` and `height` of an SVG document's root element.
fn svg_size(svg: &str) -> (f64, f64) {
    let attr = |name: &str| {
        svg.find("<svg ")
            .and_then(|start| {
                let tag = svg.get(start..)?;
                let tag = tag.get(..tag.find('>')?)?;
                let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
                let rest = tag.get(at..)?;
                rest.get(..rest.find('"')?)?.parse::<f64>().ok()
            })
            .unwrap_or(0.0)
    };
    (attr("width"), attr("height"))
}

/// The style of the modules' page.
const MODULES_STYLE: &str = "body { font-family: system-ui, sans-serif; margin: 1.5em; color: #111; } .module { overflow: auto; }";

/// Height of a module's band label.
const BAND_H: f64 = 28.0;

/// Writes the picture of the modules of `m` to `out`: an HTML page when
/// `html`, else an SVG picture (each module's picture computed before
/// anything is written).
///
/// # Errors
/// The errors of each module's picture; [`Failure::Output`] when `out`
/// cannot be written.
pub fn write_modules(
    out: &mut impl Write,
    m: &ModulesTarget,
    topology: Topology,
    sets: &[Vec<DimSet>],
    max_ranks: u32,
    html: bool,
) -> Result<(), Failure> {
    let mut bands = Vec::with_capacity(m.parts.len());
    for ((name, target), sets) in m.parts.iter().zip(sets) {
        let picture = Picture::new(target, topology, sets, max_ranks)?;
        let mut svg = Vec::new();
        write_svg(&mut svg, &picture, false)?;
        let svg = String::from_utf8_lossy(&svg).into_owned();
        let (first, last) = m.stages(name, target);
        let label = format!("{}, stages {first}..{last}", heading(name, target));
        bands.push((name.clone(), label, svg));
    }
    write_bands(out, &m.title(), &bands, html)
}

/// Writes the picture of the inference shards of `st` to `out`, a band
/// per shard (its layout's picture of `sets`), as [`write_modules`] does.
///
/// # Errors
/// As [`write_modules`].
pub fn write_shards(
    out: &mut impl Write,
    st: &ShardsTarget,
    topology: Topology,
    sets: &[DimSet],
    max_ranks: u32,
    html: bool,
) -> Result<(), Failure> {
    let mut bands = Vec::with_capacity(st.parts.len());
    for (shard, target) in st.each() {
        let picture = Picture::new(target, topology, sets, max_ranks)?;
        let mut svg = Vec::new();
        write_svg(&mut svg, &picture, false)?;
        let svg = String::from_utf8_lossy(&svg).into_owned();
        let name = format!("shard{}", shard.index());
        bands.push((name, shards_target::heading(shard), svg));
    }
    write_bands(out, &st.title(), &bands, html)
}

/// Writes the bands (name, label, SVG picture), stacked under `title`.
fn write_bands(
    out: &mut impl Write,
    title: &str,
    bands: &[(String, String, String)],
    html: bool,
) -> Result<(), Failure> {
    let width = bands
        .iter()
        .map(|(_, _, svg)| svg_size(svg).0)
        .fold(640.0, f64::max);
    let height: f64 = 40.0
        + bands
            .iter()
            .map(|(_, _, svg)| svg_size(svg).1 + BAND_H)
            .sum::<f64>();
    let escaped = escape(title);
    if html {
        write_page_head(out, title, MODULES_STYLE)?;
        for (name, label, svg) in bands {
            writeln!(
                out,
                r#"<section class="module" data-module="{}"><h2>{}</h2>"#,
                escape(name),
                escape(label)
            )?;
            out.write_all(svg.as_bytes())?;
            writeln!(out, "</section>")?;
        }
        write_page_end(out)?;
    } else {
        writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
        writeln!(
            out,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="11">
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="16" y="26" font-size="15" font-weight="bold" fill="#111">{escaped}</text>"##
        )?;
        let mut y = 40.0;
        for (name, label, svg) in bands {
            let (_, h) = svg_size(svg);
            writeln!(
                out,
                r##"<g class="module" data-module="{}" transform="translate(0,{y:.1})">
<rect class="band" x="0" y="0" width="{width:.0}" height="{:.1}" fill="#e8eef6"/>
<text class="band-label" x="16" y="19" font-size="14" font-weight="bold" fill="#1a4f8b">{}</text>
<g transform="translate(0,{BAND_H})">"##,
                escape(name),
                BAND_H - 4.0,
                escape(label)
            )?;
            out.write_all(svg.as_bytes())?;
            writeln!(out, "</g>\n</g>")?;
            y += h + BAND_H;
        }
        writeln!(out, "</svg>")?;
    }
    Ok(())
}
