//! `render`: an SVG that parses as XML with one labelled cell per rank per
//! panel, group colours, node rows, the encoder set apart, a summary past
//! `--max-ranks`, and the HTML page's legend and tooltips.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use roxmltree::{Document, Node};

use common::{fails_with, stdout};

/// A drawn cell: its rank, label, fill, row (y) and whether it is hatched
/// as an encoder rank.
#[derive(Debug)]
struct Cell {
    rank: u64,
    label: String,
    fill: String,
    y: String,
    encoder: bool,
}

/// The cells of each panel, by kind.
fn panels(doc: &Document<'_>) -> BTreeMap<String, Vec<Cell>> {
    let mut out = BTreeMap::new();
    for panel in doc
        .descendants()
        .filter(|n| n.has_tag_name("g") && n.attribute("class") == Some("panel"))
    {
        let kind = panel.attribute("data-kind").unwrap().to_owned();
        let cells = panel
            .descendants()
            .filter(|n| {
                n.has_tag_name("g")
                    && n.attribute("class")
                        .is_some_and(|c| c.split(' ').any(|w| w == "cell"))
            })
            .map(|n| cell(&n))
            .collect();
        out.insert(kind, cells);
    }
    out
}

/// The cell drawn by the `<g class="cell">` element `n`.
fn cell(n: &Node<'_, '_>) -> Cell {
    let rects: Vec<Node<'_, '_>> = n.children().filter(|c| c.has_tag_name("rect")).collect();
    let text = n.children().find(|c| c.has_tag_name("text")).unwrap();
    Cell {
        rank: n.attribute("data-rank").unwrap().parse().unwrap(),
        label: text.text().unwrap_or_default().to_owned(),
        fill: rects[0].attribute("fill").unwrap().to_owned(),
        y: rects[0].attribute("y").unwrap().to_owned(),
        encoder: rects
            .iter()
            .any(|r| r.attribute("fill") == Some("url(#enc-hatch)")),
    }
}

#[test]
fn svg_has_one_labelled_cell_per_rank_per_panel() {
    // 32 ranks, tp=4 cp=2 pp=2 (dp=2) on 8-GPU nodes: 4 rows of 8 cells.
    let text = stdout("render --world-size 32 --tp 4 --cp 2 --pp 2");
    let doc = Document::parse(&text).expect("the SVG is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    assert_eq!(
        doc.root_element().tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    let panels = panels(&doc);
    let kinds: BTreeSet<&str> = panels.keys().map(String::as_str).collect();
    assert_eq!(kinds, BTreeSet::from(["cp", "dp", "pp", "tp"]));
    for (kind, cells) in &panels {
        let ranks: Vec<u64> = cells.iter().map(|c| c.rank).collect();
        assert_eq!(ranks, (0..32).collect::<Vec<_>>(), "{kind}");
        for c in cells {
            assert_eq!(c.label, c.rank.to_string(), "{kind}");
        }
        // A row per node: ranks 8n..8n+7 share a row, rows differ.
        let rows: Vec<&str> = (0..4).map(|n| cells[n * 8].y.as_str()).collect();
        for c in cells {
            assert_eq!(c.y, rows[(c.rank / 8) as usize], "{kind} rank {}", c.rank);
        }
        assert_eq!(rows.iter().collect::<BTreeSet<_>>().len(), 4);
    }
    // Groups by colour: tp groups 0..3, 4..7; cp groups {0, 4}, {1, 5};
    // pp groups {0, 16}: the pp stride is tp*cp*dp = 16.
    let fill = |kind: &str, r: usize| panels[kind][r].fill.as_str();
    assert_eq!(fill("tp", 0), fill("tp", 3));
    assert_ne!(fill("tp", 3), fill("tp", 4));
    assert_eq!(fill("cp", 1), fill("cp", 5));
    assert_ne!(fill("cp", 0), fill("cp", 1));
    assert_eq!(fill("pp", 0), fill("pp", 16));
    assert_ne!(fill("pp", 0), fill("pp", 8));
    // dp groups {0, 8}: the dp stride is tp*cp = 8.
    assert_eq!(fill("dp", 0), fill("dp", 8));
    // No encoder: nothing hatched.
    assert!(panels.values().flatten().all(|c| !c.encoder));
}

#[test]
fn svg_sets_the_encoder_apart() {
    // Encoder tp=2 and decoder tp=4, cp=2, 24 ranks: (2 + 4) * 2 * dp = 24,
    // dp = 2, the encoder is ranks 0..7 (2*2*2).
    let text = stdout("render --tp 4 --cp 2 --encoder-tp 2 --world-size 24 --kind tp --kind pp");
    let doc = Document::parse(&text).unwrap();
    let panels = panels(&doc);
    for cells in panels.values() {
        assert_eq!(cells.len(), 24);
        for c in cells {
            assert_eq!(c.encoder, c.rank < 8, "rank {}", c.rank);
        }
    }
    // The line where the decoder starts, once per panel.
    let lines = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("encoder-end"))
        .count();
    assert_eq!(lines, 2);
    assert!(text.contains(">encoder</text>") && text.contains(">decoder</text>"));
}

#[test]
fn big_layouts_are_summarised_and_say_so() {
    let text = stdout("render --world-size 16384 --tp 8 --pp 16 --kind tp");
    let doc = Document::parse(&text).unwrap();
    let note = doc
        .descendants()
        .find(|n| n.attribute("id") == Some("summary-note"))
        .expect("a note saying the picture is summarised");
    assert!(
        note.text().unwrap().contains("summarised"),
        "{:?}",
        note.text()
    );
    let cells = &panels(&doc)["tp"];
    // The first 256 nodes (half of --max-ranks 4096) and the last node.
    assert_eq!(cells.len(), 256 * 8 + 8);
    assert_eq!(cells.last().unwrap().rank, 16383);
    assert!(text.contains("nodes not drawn"));
    // Up to --max-ranks every rank is drawn, and no note.
    let text = stdout("render --world-size 4096 --tp 8 --kind tp");
    let doc = Document::parse(&text).unwrap();
    assert_eq!(panels(&doc)["tp"].len(), 4096);
    assert!(!text.contains("summary-note"));
}

#[test]
fn html_wraps_the_svg_with_a_legend_and_tooltips() {
    let text = stdout("render --world-size 32 --tp 4 --cp 2 --pp 2 --format html");
    assert!(text.starts_with("<!DOCTYPE html>"));
    assert_eq!(text.matches("<svg").count(), 1);
    assert!(text.contains("class=\"legend\""));
    // The legend lists each tp group with its members.
    assert!(text.contains("group 1: 4 5 6 7</li>"), "legend");
    // A tooltip per rank: node, GPU, coordinates and groups. Rank 13 =
    // 1 + 4*1 + 8*1 (tp fastest, then cp, then dp): tp=1 cp=1 dp=1, node 1,
    // GPU 5; tp group 13 / 4 = 3 is 12..15, with rank 13 at key 1.
    let start = text.find("const TIPS = ").unwrap() + "const TIPS = ".len();
    let end = start + text[start..].find(";\n").unwrap();
    let tips: serde_json::Value = serde_json::from_str(&text[start..end]).unwrap();
    assert_eq!(tips.as_object().unwrap().len(), 32);
    let tip = tips["13"].as_str().unwrap();
    assert!(tip.starts_with("rank 13: node 1, GPU 5"), "{tip}");
    assert!(tip.contains("tp=1 cp=1 dp=1 pp=0"), "{tip}");
    assert!(tip.contains("tp: group 3 (key 1): 12 13 14 15"), "{tip}");
}

#[test]
fn render_rejects_bad_kinds() {
    fails_with("render --tp 2 --kind etp --expert-layout nested", "etp");
    fails_with("render --tp 2 --kind dp-mod-ep", "dp-mod-ep");
}

/// The peak resident memory of process `pid`, in KB (Linux).
#[cfg(target_os = "linux")]
fn peak_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[cfg(target_os = "linux")]
#[test]
fn render_streams_in_bounded_memory() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    // 65,536 ranks drawn with tooltips: a 74 MB page, which used to be
    // built whole in memory (~150 MB at this size, 2.5 GB at 1,048,576
    // ranks) before the first byte was written. Now the page is written
    // as it is computed: sample the peak while the writer is blocked on
    // the pipe, then at the end.
    let mut child = Command::new(env!("CARGO_BIN_EXE_rank-layout"))
        .args([
            "render",
            "--max-ranks",
            "65536",
            "--world-size",
            "65536",
            "--tp",
            "8",
            "--format",
            "html",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdout = child.stdout.take().unwrap();
    let mut buffer = vec![0u8; 1 << 20];
    let mut total = 0usize;
    let mut peak = 0u64;
    let mut samples = 0;
    loop {
        let n = stdout.read(&mut buffer).unwrap();
        if n == 0 {
            break;
        }
        total += n;
        // Every 8 MB read, while the child waits for the pipe.
        if total / (8 << 20) > samples {
            samples = total / (8 << 20);
            peak = peak.max(peak_kb(pid));
        }
    }
    assert!(child.wait().unwrap().success());
    assert!(total > 50_000_000, "{total} bytes");
    assert!(samples >= 6, "{samples} samples");
    assert!(
        peak < 48 * 1024,
        "peak {peak} KB while writing {total} bytes"
    );
}

#[test]
fn svg_is_as_wide_as_its_title() {
    // The title of a folded encoder-free layout is long; the picture of 8
    // ranks is narrow. 14px bold monospace: at least 0.6 em a character.
    for args in [
        "render --world-size 8 --tp 2 --ep 2 --expert-layout folded --gpus-per-node 2",
        "render --tp 2 --cp 2 --encoder-tp 1 --encoder-pp 1 --world-size 12 --gpus-per-node 2",
        "render --world-size 32 --tp 4 --cp 2 --pp 2",
    ] {
        let text = stdout(args);
        let doc = Document::parse(&text).unwrap();
        let width: f64 = doc
            .root_element()
            .attribute("width")
            .unwrap()
            .parse()
            .unwrap();
        let title = doc
            .descendants()
            .find(|n| n.attribute("class") == Some("title"))
            .unwrap();
        let x: f64 = title.attribute("x").unwrap().parse().unwrap();
        let chars = title.text().unwrap().chars().count() as f64;
        assert!(
            width >= x + chars * 14.0 * 0.6,
            "{args}: width {width} for a title of {chars} characters"
        );
    }
}
