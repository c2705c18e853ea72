//! `rank-layout audit --megatron 2024|2025`: Megatron-LM's encoder +
//! decoder joins against rank-layout's, as a table and as JSON, and its
//! input errors (exit status 2).
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use common::{fails_with, json, stdout};
use serde_json::json as j;

/// semantics.md, section 3.3: tp=4, cp=2, encoder_tp=2.
const DOCS: &str = "--tp 4 --cp 2 --encoder-tp 2";

#[test]
fn json_shape_and_counts() {
    let text = stdout(&format!("audit --megatron 2024 {DOCS} --format json"));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "examples",
            "megatron",
            "mixing",
            "other_tp_pairing",
            "pipelines"
        ]
    );
    // In this order, on one line.
    assert!(
        text.starts_with(r#"{"megatron":"4ff9e66ec870e6e45d765531318d50bd47c85d0f","pipelines":8,"mixing":4,"other_tp_pairing":2,"examples":[{"#),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1);
    assert_eq!(v["megatron"], "4ff9e66ec870e6e45d765531318d50bd47c85d0f");
    assert_eq!(
        (&v["pipelines"], &v["mixing"], &v["other_tp_pairing"]),
        (&j!(8), &j!(4), &j!(2))
    );
    let examples = v["examples"].as_array().unwrap();
    assert_eq!(examples.len(), 6);
    // Encoder rank 2 (cp slice 1) feeds decoder rank 6 (cp slice 0).
    assert_eq!(
        examples[0],
        j!({
            "class": "mixing",
            "megatron": [2, 6],
            "rank_layout": [1, 6],
            "encoder": {"rank": 2, "tp": 0, "cp": 1, "dp": 0, "pp": 0},
            "decoder": {"rank": 6, "tp": 2, "cp": 0, "dp": 0, "pp": 0},
        })
    );
    let classes: Vec<&str> = examples
        .iter()
        .map(|e| e["class"].as_str().unwrap())
        .collect();
    assert_eq!(
        classes,
        [
            "mixing",
            "mixing",
            "mixing",
            "mixing",
            "other_tp_pairing",
            "other_tp_pairing"
        ]
    );
    assert_eq!(examples[4]["megatron"], j!([1, 5]));
    assert_eq!(examples[4]["rank_layout"], j!([0, 5]));

    // Every spelling of a commit is the same audit.
    for spelling in [
        "2025",
        "5a3b6bcf1f",
        "5a3b6bcf1f131bee73afbb96ee35e244a4ab674f",
    ] {
        let v = json(&format!("audit --megatron {spelling} {DOCS} --format json"));
        assert_eq!(
            v,
            j!({
                "megatron": "5a3b6bcf1f131bee73afbb96ee35e244a4ab674f",
                "pipelines": 8, "mixing": 0, "other_tp_pairing": 0, "examples": [],
            })
        );
    }
}

#[test]
fn json_counts_of_2025_with_cp_before_tp_and_uneven_blocks() {
    let v = json(&format!(
        "audit --megatron 2025 {DOCS} --order cp-tp-dp-pp --format json"
    ));
    assert_eq!((&v["mixing"], &v["other_tp_pairing"]), (&j!(4), &j!(0)));
    let v = json("audit --megatron 2025 --tp 3 --dp 2 --encoder-tp 2 --format json");
    assert_eq!(
        (&v["pipelines"], &v["mixing"], &v["other_tp_pairing"]),
        (&j!(6), &j!(1), &j!(0))
    );
    assert_eq!(v["examples"][0]["megatron"], j!([1, 7]));
    assert_eq!(v["examples"][0]["decoder"]["dp"], j!(1));
}

#[test]
fn table_output() {
    let text = stdout(&format!("audit --megatron 2024 {DOCS}"));
    for needle in [
        "Megatron-LM 2024, commit 4ff9e66ec870e6e45d765531318d50bd47c85d0f\nlayout: encoder+decoder, 12 ranks (encoder ranks 0..3), experts folded (Megatron-Core)\n",
        "zip(cycle(encoder pp groups), decoder pp groups)",
        "joined pipelines:                 8",
        "mixing cp slices or dp replicas:  4",
        "pairing other tp ranks:           2",
        "first 4 of 4:",
        "Megatron-LM [2, 6]  rank-layout [1, 6]",
        "encoder rank 2 (tp 0, cp 1, dp 0) -> decoder rank 6 (tp 2, cp 0, dp 0)",
        "Megatron-LM [1, 5]  rank-layout [0, 5]",
        "verdict: 6 of 8 joined pipelines differ from rank-layout's join by coordinates (4 mix cp slices or dp replicas, 2 pair other tp ranks)",
    ] {
        assert!(text.contains(needle), "{text} lacks {needle:?}");
    }
    assert_eq!(
        text.lines().filter(|l| l.starts_with("verdict:")).count(),
        1
    );

    let text = stdout(&format!("audit --megatron 2025 {DOCS}"));
    assert!(
        text.contains("Megatron-LM 2025, commit 5a3b6bcf1f"),
        "{text}"
    );
    assert!(
        text.contains("verdict: all 8 joined pipelines are rank-layout's join by coordinates"),
        "{text}"
    );
    assert!(!text.contains("first "), "{text}");

    // Long pipelines are shortened; counts get separators; 8 examples at most.
    let text =
        stdout("audit --megatron 2024 --tp 2 --pp 12 --encoder-tp 1 --encoder-pp 2 --dp 1024");
    assert!(
        text.contains("joined pipelines:                 2,048"),
        "{text}"
    );
    assert!(text.contains("... (14 ranks) ..."), "{text}");
    assert!(text.contains("first 8 of 2,046:"), "{text}");
}

#[test]
fn a_decoder_only_layout_exits_2() {
    fails_with(
        "audit --megatron 2024 --tp 4 --cp 2",
        "this layout has no encoder",
    );
    fails_with(
        "audit --megatron 2025 --tp 4 --cp 2 --format json",
        "no encoder",
    );
}

#[test]
fn a_bad_megatron_value_exits_2() {
    fails_with(
        &format!("audit --megatron 2026 {DOCS}"),
        "invalid value '2026' for '--megatron <COMMIT>'",
    );
    fails_with(
        &format!("audit --megatron zip {DOCS}"),
        "2024 (4ff9e66) or 2025 (5a3b6bcf1f)",
    );
    // --megatron is required.
    fails_with(&format!("audit {DOCS}"), "--megatron <COMMIT>");
}

#[test]
fn layouts_megatron_refuses_exit_2() {
    // Fan-in: both commits assert encoder_tp <= tp.
    fails_with(
        "audit --megatron 2025 --tp 2 --encoder-tp 4",
        "We do not support encoders with more TP than the decoder.",
    );
    // 2024 nests experts in dp; the folded layout refuses this order...
    fails_with(
        "audit --megatron 2024 --tp 4 --cp 2 --pp 2 --dp 3 --order tp-cp-pp-dp --encoder-tp 4",
        "give --expert-layout nested",
    );
    // ... which Megatron-LM 4ff9e66 builds, its joins rank-layout's.
    let v = json(
        "audit --megatron 2024 --tp 4 --cp 2 --pp 2 --dp 3 --order tp-cp-pp-dp --encoder-tp 4 --expert-layout nested --format json",
    );
    assert_eq!((&v["pipelines"], &v["mixing"]), (&j!(24), &j!(0)));
    // A mesh has no pipelines to join.
    fails_with("audit --megatron 2025 --mesh tp=2,dp=2", "not a mesh");
}
