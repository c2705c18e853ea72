//! Table output that scales: shortened member lists and rows unless
//! `--full`, the rank card, a rank beyond the layout, `describe`, `--help`
//! and a closed pipe. Expected values are worked out by hand in comments.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{fails_with, json, run, stdout};

/// The members column of the row of group `index` in the table of `kind`.
fn row<'a>(text: &'a str, kind: &str, index: usize) -> &'a str {
    let section = text
        .split("\n\n")
        .find(|s| s.starts_with(&format!("{kind} (")))
        .unwrap_or_else(|| panic!("no {kind} section in {text}"));
    let prefix = format!("{index} ");
    section
        .lines()
        .skip(2)
        .find(|l| l.trim_start().starts_with(&prefix))
        .map(|l| {
            // index, size, then the members.
            let rest = l.trim_start();
            let rest = rest[prefix.len()..].trim_start();
            rest.split_once("  ").map_or(rest, |(_, m)| m)
        })
        .unwrap_or_else(|| panic!("no row {index} of {kind} in {section}"))
}

#[test]
fn arithmetic_runs_are_shortened() {
    // tp=8 on 8192 ranks: dp = 1024, dp group 0 = 0, 8, ..., 8 * 1023 = 8184.
    let text = stdout("groups --world-size 8192 --tp 8 --kind dp");
    assert!(text.contains("dp (8 groups of 1,024 ranks)"), "{text}");
    assert_eq!(row(&text, "dp", 0), "0..8184 step 8 (1,024 ranks)");
    assert_eq!(row(&text, "dp", 7), "7..8191 step 8 (1,024 ranks)");
    // Unit step: the tp-dp group is every rank 0..8191.
    let text = stdout("groups --world-size 8192 --tp 8 --kind tp-dp");
    assert_eq!(row(&text, "tp-dp", 0), "0..8191 (8,192 ranks)");
    assert!(text.contains("tp-dp (1 group of 8,192 ranks)"), "{text}");
}

#[test]
fn other_long_lists_show_their_ends_and_count() {
    // tp=2, pp=16, 64 ranks: dp = 2, the pp stride is tp*dp = 4, so tp-pp
    // group 0 is {0, 1} + 4k for k < 16: 0 1 4 5 ... 56 57 60 61 (32 ranks).
    let text = stdout("groups --world-size 64 --tp 2 --pp 16 --kind tp-pp");
    assert_eq!(row(&text, "tp-pp", 0), "0 1 4 5 … 56 57 60 61 (32 ranks)");
    // Group 1 is the other dp slice: {2, 3} + 4k.
    assert_eq!(row(&text, "tp-pp", 1), "2 3 6 7 … 58 59 62 63 (32 ranks)");
    // Up to 16 members that are no run are printed whole: tp-pp with tp=2,
    // pp=8 on 32 ranks is {0, 1} + 4k for k < 8.
    let text = stdout("groups --world-size 32 --tp 2 --pp 8 --kind tp-pp");
    assert_eq!(
        row(&text, "tp-pp", 0),
        "0 1 4 5 8 9 12 13 16 17 20 21 24 25 28 29"
    );
    // And up to 8 members that are a run too: pp with stride 4.
    let text = stdout("groups --world-size 32 --tp 2 --pp 8 --kind pp");
    assert_eq!(row(&text, "pp", 0), "0 4 8 12 16 20 24 28");
}

#[test]
fn full_lists_every_member_and_group() {
    let text = stdout("groups --world-size 8192 --tp 8 --kind dp --full");
    let members: Vec<u32> = row(&text, "dp", 0)
        .split(' ')
        .map(|r| r.parse().unwrap())
        .collect();
    assert_eq!(members, (0..1024).map(|i| i * 8).collect::<Vec<_>>());
    // 1,024 tp groups: by default the first 32 and the last 4, with a line
    // saying how many are left out; --full lists all of them.
    let short = stdout("groups --world-size 8192 --tp 8 --kind tp");
    assert!(short.contains("988 groups not shown"), "{short}");
    assert_eq!(row(&short, "tp", 31), "248 249 250 251 252 253 254 255");
    assert_eq!(
        row(&short, "tp", 1023),
        "8184 8185 8186 8187 8188 8189 8190 8191"
    );
    assert!(!short.contains("\n     32     8"), "{short}");
    let full = stdout("groups --world-size 8192 --tp 8 --kind tp --full");
    assert_eq!(
        row(&full, "tp", 500),
        "4000 4001 4002 4003 4004 4005 4006 4007"
    );
    assert!(!full.contains("not shown"));
    // JSON is never shortened.
    let v = json("groups --world-size 8192 --tp 8 --kind dp --format json");
    assert_eq!(v["groups"]["dp"][0].as_array().unwrap().len(), 1024);
}

#[test]
fn rank_card() {
    // 16,384 ranks, tp=8 pp=16 ep=8: dp = 128; rank 4711 = 7 + 8*588, so
    // tp = 7, node 588 (8 GPUs per node), local GPU 7; the pp stride is
    // tp*dp = 1024, 4711 = 615 + 4*1024: stage 4, previous 3687, next
    // 5735; dp = 588 mod 128 = 76, the dp group 4103..5119 step 8.
    let text = stdout("rank 4711 --world-size 16384 --tp 8 --pp 16 --ep 8");
    assert!(text.contains("rank 4711 of 16,384"), "{text}");
    assert!(text.contains("coord     tp=7 cp=0 dp=76 pp=4"), "{text}");
    assert!(
        text.contains("node      588, local GPU 7 (8 GPUs per node)"),
        "{text}"
    );
    assert!(
        text.contains("stage 4 of 16: previous 3687; next 5735"),
        "{text}"
    );
    assert!(
        text.contains("grid      tp=8 cp=1 ep=8 dp=128 pp=16"),
        "{text}"
    );
    let line = |kind: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(kind))
            .unwrap_or_else(|| panic!("no {kind} line in {text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    // kind, color, key, size, members.
    assert_eq!(line("tp")[..4], ["tp", "588", "7", "8"]);
    assert_eq!(
        line("tp")[4..],
        [
            "4704", "4705", "4706", "4707", "4708", "4709", "4710", "4711"
        ]
    );
    assert_eq!(
        line("dp")[1..],
        [
            "39",
            "76",
            "128",
            "4103..5119",
            "step",
            "8",
            "(128",
            "ranks)"
        ]
    );
    assert_eq!(line("pp")[1..4], ["615", "4", "16"]);
    // 18 lines of 1,024-rank rows before; now a short card.
    assert!(text.len() < 2500, "{} bytes", text.len());
    // Domains: 9 nodes per domain, node 588 is in domain 65.
    let text = stdout("rank 4711 --world-size 16384 --tp 8 --pp 16 --nodes-per-domain 9 --kind tp");
    assert!(text.contains("domain 65 (9 nodes per domain)"), "{text}");
    // GB200 NVL72 racks, 18 nodes of 4 GPUs: 4711 = 4*1177 + 3, node 1177
    // = 18*65 + 7 is in domain 65.
    let text = stdout(
        "rank 4711 --world-size 16384 --tp 8 --pp 16 --gpus-per-node 4 --nodes-per-domain 18 --kind tp",
    );
    assert!(
        text.contains(
            "node      1,177, local GPU 3 (4 GPUs per node), domain 65 (18 nodes per domain)"
        ),
        "{text}"
    );
    // The first stage has no previous rank, the last no next.
    let text = stdout("rank 7 --world-size 16 --tp 8 --pp 2 --kind pp");
    assert!(
        text.contains("previous none (first stage); next 15"),
        "{text}"
    );
}

#[test]
fn rank_beyond_the_layout_hints_at_world_size() {
    // 128 ranks per replica (tp*pp) and dp a multiple of ep = 8: rank 20000
    // needs 20,001 ranks, 157 replicas, rounded up to 160 = 20,480.
    let err = fails_with(
        "rank 20000 --world-size 16384 --tp 8 --pp 16 --ep 8",
        "rank 20000 is outside",
    );
    assert!(err.contains("--world-size 20480"), "{err}");
    let err = fails_with("rank 8 --world-size 8", "rank 8 is outside");
    assert!(err.contains("--world-size 9"), "{err}");
    fails_with("rank 2 --world-size 8 --rank-offset 4", "--rank-offset 4");
}

#[test]
fn describe_explains_derived_sizes_and_costs() {
    let text = stdout("describe --world-size 16384 --tp 8 --pp 16 --ep 8 --expert-layout nested");
    assert!(
        text.contains("dp = world_size / (tp*cp*pp) = 16384 / (8*1*16) = 128"),
        "{text}"
    );
    assert!(text.contains("edp = dp / ep = 128 / 8 = 16"), "{text}");
    assert!(
        text.contains("16,384 ranks on 2,048 nodes of 8 GPUs"),
        "{text}"
    );
    assert!(text.contains("2,048 groups of 8 ranks"), "{text}");
    // The JSON estimate is close to the real size of `groups --format json`.
    for args in [
        "--world-size 16384 --tp 8 --pp 16 --ep 8",
        "--world-size 96 --tp 2 --cp 3 --pp 2",
        "--tp 4 --cp 2 --encoder-tp 2 --world-size 120",
    ] {
        let text = stdout(&format!("describe {args}"));
        let estimate = text
            .lines()
            .find(|l| l.contains("groups --format json"))
            .unwrap()
            .split("about ")
            .nth(1)
            .unwrap()
            .to_owned();
        let (value, unit) = estimate.split_once(' ').unwrap();
        let scale = match unit {
            "B" => 1.0,
            "KB" => 1e3,
            "MB" => 1e6,
            other => panic!("unit {other}"),
        };
        let estimate = value.parse::<f64>().unwrap() * scale;
        let real = stdout(&format!("groups {args} --format json")).len() as f64;
        assert!(
            (estimate - real).abs() / real < 0.2,
            "{args}: estimate {estimate}, real {real}"
        );
    }
    let text = stdout("describe --tp 4 --cp 2 --encoder-tp 2 --world-size 12");
    assert!(text.contains("encoder: ranks 0..3"), "{text}");
    assert!(text.contains("decoder: ranks 4..11"), "{text}");
}

#[test]
fn help_lists_the_kinds_of_each_layout() {
    for args in ["--help", "groups --help", "rank --help", "render --help"] {
        let text = stdout(args);
        assert!(
            text.contains("folded (default):  tp pp dp cp"),
            "{args}: {text}"
        );
        let folded = text
            .lines()
            .find(|l| l.contains("folded (default):"))
            .unwrap();
        assert!(folded.contains(" etp-ep-pp"), "{folded}");
        assert!(!folded.contains("dp-mod-ep"), "{folded}");
        let nested = text.lines().find(|l| l.contains("nested:")).unwrap();
        assert!(nested.contains(" dp-mod-ep"), "{nested}");
        assert!(text.contains("encoder+decoder:"), "{text}");
        assert!(text.contains("hcp-0"), "{text}");
        assert!(text.contains("dist-opt-instance"), "{text}");
    }
    // The machine flags: an NVL72 rack is 18 nodes of 4 GPUs.
    let text = stdout("check --help");
    assert!(
        text.contains("18 nodes of 4 GPUs: --gpus-per-node 4 --nodes-per-domain 18"),
        "{text}"
    );
    assert!(!text.contains("9 nodes of 8"), "{text}");
}

#[test]
fn a_closed_pipe_is_not_an_error() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rank-layout"))
        .args(["groups", "--world-size", "1048576", "--tp", "8", "--full"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("world_size 1048576"), "{first}");
    // The reader is dropped: the pipe is closed mid-output.
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty());
}

#[test]
fn usage_errors_print_nothing_on_stdout() {
    let out = run("check --tp");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

/// Every `A..B` in `text`, as numbers.
fn ranges(text: &str) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("..") {
        let before = &text[..i];
        let start = before
            .rfind(|c: char| !c.is_ascii_digit())
            .map_or(0, |j| j + 1);
        let after = &text[i + 2..];
        let len = after
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(after.len());
        if let (Ok(a), Ok(b)) = (before[start..].parse(), after[..len].parse()) {
            out.push((a, b));
        }
    }
    out
}

#[test]
fn rank_ranges_are_inclusive_everywhere() {
    // An encoder + decoder layout of 12 ranks (encoder ranks 0..3: encoder
    // tp 2 * cp 2 * dp 1) and a layout of ranks 4..11: every range any
    // output writes ends at the last rank at most (an exclusive end would
    // be 12), and the layout's and the encoder's ranges read first..last.
    for (args, last, expected) in [
        (
            "--tp 4 --cp 2 --encoder-tp 2 --world-size 12",
            11,
            &["ranks 0..3", "ranks 0..11"][..],
        ),
        (
            "--tp 2 --world-size 8 --rank-offset 4",
            11,
            &["ranks 4..11"][..],
        ),
    ] {
        let mut all = String::new();
        for command in [
            "groups",
            "groups --full",
            "rank 5",
            "rank 5 --format json",
            "describe",
            "check",
            "suggest",
            "render",
            "render --format html",
        ] {
            all.push_str(&stdout(&format!("{command} {args}")));
        }
        all.push_str(&fails_with(
            &format!("rank 12 {args}"),
            "rank 12 is outside",
        ));
        for (a, b) in ranges(&all) {
            assert!(a <= b && b <= last, "{args}: {a}..{b} in\n{all}");
        }
        for e in expected {
            assert!(all.contains(e), "{args}: no {e:?} in\n{all}");
        }
    }
    // The error and the card agree: ranks 0..63.
    let err = fails_with("rank 64 --world-size 64", "(ranks 0..63, both included)");
    assert!(!err.contains("0..64"), "{err}");
    let text = stdout("rank 63 --world-size 64 --kind tp");
    assert!(text.contains("(ranks 0..63, both included)"), "{text}");
    let text = stdout("groups --tp 4 --cp 2 --encoder-tp 2 --world-size 12 --kind tp");
    assert!(text.contains("(encoder ranks 0..3)"), "{text}");
}

#[test]
fn rank_card_counts_stages_over_the_joined_pipeline() {
    // Encoder tp 1, pp 1 before a decoder tp 8, cp 2: (1 + 8) * 2 * dp =
    // 72, dp = 4; the encoder is ranks 0..7 (1*2*4*1). Decoder rank 17 is
    // the second stage of pipeline [1, 17]: stage 1 of 2 (was "stage 0 of
    // 1", the decoder's own pp).
    let text = stdout("rank 17 --encoder-tp 1 --encoder-pp 1 --tp 8 --cp 2 --world-size 72");
    assert!(
        text.contains("pipeline  stage 1 of 2: previous 1; next none (last stage)"),
        "{text}"
    );
    // Encoder rank 1 (cp 1, dp 0) is stage 0 of the same pipeline and of
    // the seven others it feeds: decoder ranks 16..23 (cp 1, dp 0).
    let text = stdout("rank 1 --encoder-tp 1 --encoder-pp 1 --tp 8 --cp 2 --world-size 72");
    assert!(
        text.contains(
            "pipeline  stage 0 of 2: previous none (first stage); next 16, 17, 18, 19, 20, 21, 22, 23"
        ),
        "{text}"
    );
    // Encoder pp 2, decoder pp 3: five stages. dp = 104 / ((1*2 + 8*3)*2)
    // = 2, the encoder is 8 ranks with pp stride 4: rank 7 is encoder
    // stage 1, the decoder's first stage is joined stage 2.
    let args = "--encoder-tp 1 --encoder-pp 2 --tp 8 --cp 2 --pp 3 --world-size 104";
    let text = stdout(&format!("rank 7 {args}"));
    assert!(
        text.contains("pipeline  stage 1 of 5: previous 3"),
        "{text}"
    );
    // A plain layout: the stage is the pp coordinate, of pp.
    let text = stdout("rank 7 --world-size 16 --tp 8 --pp 2 --kind pp");
    assert!(text.contains("stage 0 of 2"), "{text}");
}

#[test]
fn every_text_output_names_the_expert_layout_in_its_header() {
    for (args, words) in [
        (
            "--world-size 16 --tp 2 --ep 2 --expert-layout nested",
            "experts nested (Megatron-LM 2024)",
        ),
        (
            "--world-size 16 --tp 2 --ep 2",
            "experts folded (Megatron-Core)",
        ),
    ] {
        // The header: the first line (the title of a picture).
        for command in ["groups", "rank 3", "check", "suggest", "describe"] {
            let text = stdout(&format!("{command} {args}"));
            let header: String = text.lines().take(2).collect::<Vec<_>>().join("\n");
            assert!(header.contains(words), "{command} {args}:\n{header}");
        }
        let svg = stdout(&format!("render {args}"));
        let title = svg.lines().find(|l| l.contains("class=\"title\"")).unwrap();
        assert!(title.contains(words), "{title}");
        let html = stdout(&format!("render {args} --format html"));
        let h1 = html.lines().find(|l| l.starts_with("<h1>")).unwrap();
        assert!(h1.contains(words), "{h1}");
    }
    // describe says which Megatron-LM version each choice matches.
    let text = stdout("describe --world-size 16 --tp 2 --ep 2 --expert-layout nested");
    assert!(
        text.contains("Megatron-LM's 2024 RankGenerator, commit 4ff9e66"),
        "{text}"
    );
    let text = stdout("describe --world-size 16 --tp 2 --ep 2");
    assert!(
        text.contains("Megatron-Core's MoE parallel folding, today's default"),
        "{text}"
    );
    let text = stdout("describe --tp 4 --cp 2 --encoder-tp 2 --world-size 12");
    assert!(
        text.contains("by coordinates")
            && text.contains("zip(cycle()) of 4ff9e66")
            && text.contains("block map of 5a3b6bcf1f"),
        "{text}"
    );
    let v = json("describe --tp 4 --cp 2 --encoder-tp 2 --world-size 12 --format json");
    assert_eq!(v["expert_layout"], "folded");
    assert_eq!(v["matches"].as_array().unwrap().len(), 2);
}
