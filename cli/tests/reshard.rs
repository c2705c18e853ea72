//! `rank-layout reshard`: the interface of issue 30 (`--from A --to B
//! --tensors T [--gpus-per-node N] [--nodes-per-domain M] [--rank R]
//! --format json`), its JSON keys, one rank's rows equal to the whole
//! plan's, a refit from Megatron-LM's model arguments, a plan after a
//! failure, and bad input (exit 2, the value named).
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::{fails_with_args, stdout_args, temp_dir};
use serde_json::Value;

/// The tensors of the issue's example.
const TENSORS: &str = r#"{"num_layers": 4, "num_experts": 8, "tensors": [
  {"name": "l0.qkv", "shape": [144, 48], "element_bytes": 2, "layer": 0, "tp_dim": 0, "tp_stride": 3},
  {"name": "l0.norm", "shape": [48], "layer": 0},
  {"name": "embedding", "shape": [96, 48], "layer": "first", "tp_dim": 0},
  {"name": "l1.e5.fc1", "shape": [48, 48], "layer": 1, "expert": 5, "tp_dim": 0, "tp_stride": 2},
  {"name": "l1.experts", "shape": [8, 48, 48], "layer": 1, "ep_dim": 0, "tp_dim": 1},
  {"name": "kv", "shape": [4, 8, 64], "pp_dim": 0, "tp_dim": 1}]}"#;

fn file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Training tp 2 pp 2 ep 2 on ranks 0-7; inference tp 4 ep 4 etp 1 on
/// ranks 8-15; the issue's tensors.
fn setup(name: &str) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    let dir = temp_dir(name);
    let a = file(
        &dir,
        "a.json",
        r#"{"tp": 2, "pp": 2, "ep": 2, "world_size": 8}"#,
    );
    let b = file(
        &dir,
        "b.json",
        r#"{"tp": 4, "ep": 4, "etp": 1, "world_size": 8, "rank_offset": 8}"#,
    );
    let t = file(&dir, "t.json", TENSORS);
    (dir, a, b, t)
}

fn plan(args: &[&str]) -> Value {
    let mut all = vec!["reshard"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json"]);
    serde_json::from_str(&stdout_args(&all)).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The JSON keys of the issue, each transfer's fields, the totals adding
/// up, and `--rank R` giving exactly R's rows with the same ids.
#[test]
fn the_issue_s_interface() {
    let (_dir, a, b, t) = setup("interface");
    let flags = [
        "--from",
        s(&a),
        "--to",
        s(&b),
        "--tensors",
        s(&t),
        "--gpus-per-node",
        "4",
        "--nodes-per-domain",
        "2",
    ];
    let whole = plan(&flags);
    for key in [
        "transfers",
        "bytes",
        "local_bytes",
        "cross_node_bytes",
        "cross_domain_bytes",
        "max_send_bytes",
        "max_recv_bytes",
        "messages",
    ] {
        assert!(whole.get(key).is_some(), "{key}");
    }
    let transfers = whole["transfers"].as_array().unwrap();
    let mut bytes = 0;
    for x in transfers {
        for key in ["id", "tensor", "src", "dst", "box", "bytes"] {
            assert!(x.get(key).is_some(), "{key}");
        }
        assert_ne!(x["src"], x["dst"]); // disjoint sides: nothing local
        bytes += x["bytes"].as_u64().unwrap();
    }
    assert_eq!(whole["bytes"].as_u64(), Some(bytes));
    assert_eq!(whole["local_bytes"].as_u64(), Some(0));
    assert_eq!(whole["messages"].as_u64(), Some(transfers.len() as u64));
    // Each tensor arrives whole once per inference replica (dp 2), the
    // norm (no tp_dim: replicated over tp too) once per rank (8).
    let split: u64 = 144 * 48 * 2 + 96 * 48 * 2 + 48 * 48 * 2 + 8 * 48 * 48 * 2 + 4 * 8 * 64 * 2;
    assert_eq!(bytes, 2 * split + 8 * 48 * 2);
    // Rank 9 (tp 1 of 4): l0.qkv's 144 rows in 12 segments of 12 (tp 4 x
    // stride 3), tp rank 1 holding segments 1, 5, 9: rows 12-24, 60-72,
    // 108-120 (Megatron's partition_stride).
    let one = plan(&[&flags[..], &["--rank", "9"]].concat());
    let qkv: Vec<Value> = one["transfers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["tensor"] == "l0.qkv" && x["dst"] == 9)
        .map(|x| x["box"][0].clone())
        .collect();
    assert_eq!(
        qkv,
        [
            serde_json::json!([12, 24]),
            serde_json::json!([60, 72]),
            serde_json::json!([108, 120])
        ]
    );
    // R's rows of the whole plan, the same ids.
    let mine: BTreeSet<u64> = one["transfers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["id"].as_u64().unwrap())
        .collect();
    let rows: BTreeSet<u64> = transfers
        .iter()
        .filter(|x| x["src"] == 9 || x["dst"] == 9)
        .map(|x| x["id"].as_u64().unwrap())
        .collect();
    assert_eq!(mine, rows);
    assert_eq!(one["rank"], 9);
    // The text format prints the cost.
    let text = stdout_args(&[
        "reshard",
        "--from",
        s(&a),
        "--to",
        s(&b),
        "--tensors",
        s(&t),
        "--rank",
        "0",
    ]);
    assert!(text.contains("max_send_bytes"), "{text}");
}

/// Collocated on the same layout: every piece is a local copy.
#[test]
fn the_same_layout_copies_locally() {
    let (_dir, a, _b, t) = setup("collocated");
    let p = plan(&["--from", s(&a), "--to", s(&a), "--tensors", s(&t)]);
    assert_eq!(p["bytes"], 0);
    assert_eq!(p["messages"], 0);
    assert!(
        p["transfers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["src"] == x["dst"])
    );
}

/// A refit planned from Megatron-LM's model arguments: training tp 2 pp 2
/// to inference tp 1 on other ranks; the names are Megatron-Core's.
#[test]
fn a_refit_from_megatron_arguments() {
    let dir = temp_dir("model-args");
    let a = file(
        &dir,
        "train.json",
        r#"{"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2, "world_size": 4}"#,
    );
    let b = file(&dir, "infer.json", r#"{"world_size": 2, "rank_offset": 4}"#);
    let args = "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --vocab-size 1000 --max-position-embeddings 32 --swiglu --disable-bias-linear";
    let p = plan(&[
        "--from",
        s(&a),
        "--to",
        s(&b),
        "--model-args",
        args,
        "--from-layers",
        "--decoder-first-pipeline-num-layers 1",
    ]);
    let names: BTreeSet<&str> = p["transfers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["tensor"].as_str().unwrap())
        .collect();
    assert!(
        names.contains("decoder.layers.3.mlp.linear_fc1.weight"),
        "{names:?}"
    );
    assert!(names.contains("embedding.word_embeddings.weight"));
    assert!(
        !names.iter().any(|n| n.ends_with("linear_proj.bias")),
        "--disable-bias-linear"
    );
    // Layer 0 is alone on stage 0 (ranks 0, 1): its fc1 comes from there.
    assert!(
        p["transfers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| x["tensor"] == "decoder.layers.0.mlp.linear_fc1.weight")
            .all(|x| x["src"].as_u64().unwrap() < 2)
    );
    assert!(
        p["transfers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| x["tensor"] == "decoder.layers.1.mlp.linear_fc1.weight")
            .all(|x| x["src"].as_u64().unwrap() >= 2)
    );
}

/// After a failure: the re-layout of --from, then a reshard onto it.
#[test]
fn after_a_failure() {
    let (dir, _a, _b, t) = setup("failure");
    let a = file(&dir, "dense.json", r#"{"tp": 2, "pp": 2, "world_size": 8}"#);
    let p = plan(&[
        "--from",
        s(&a),
        "--tensors",
        s(&t),
        "--failed-ranks",
        "5",
        "--policy",
        "drop-replica",
    ]);
    let transfers = p["transfers"].as_array().unwrap();
    assert!(!transfers.is_empty());
    assert!(transfers.iter().all(|x| x["src"] != 5 && x["dst"] != 5));
    // Dropping a replica moves nothing.
    assert_eq!(p["bytes"], 0);
}

/// Bad input exits 2 naming the value.
#[test]
fn bad_input_is_named() {
    let (dir, a, b, t) = setup("errors");
    let run = |to: &Path, tensors: &Path, extra: &[&str], needle: &str| {
        let mut args = vec![
            "reshard",
            "--from",
            s(&a),
            "--to",
            s(to),
            "--tensors",
            s(tensors),
        ];
        args.extend_from_slice(extra);
        fails_with_args(&args, needle);
    };
    let tp3 = file(&dir, "tp3.json", r#"{"tp": 3, "world_size": 3}"#);
    run(
        &tp3,
        &t,
        &[],
        "tensor kv: dim 1 (8) is not divisible by 3 (tp 3) on the to side",
    );
    let strided = file(
        &dir,
        "strided.json",
        r#"{"num_layers": 4, "tensors": [{"name": "q", "shape": [12, 4], "tp_dim": 0, "tp_stride": 3}]}"#,
    );
    run(
        &tp3,
        &strided,
        &[],
        "tensor q: dim 0 (12) is not divisible by 9 (tp 3 x stride 3) on the to side",
    );
    let pp3 = file(&dir, "pp3.json", r#"{"pp": 3, "world_size": 3}"#);
    run(
        &pp3,
        &t,
        &[],
        "num_layers (4) is not divisible by pp = 3 for the even split",
    );
    let bad = |name: &str, text: &str| file(&dir, name, text);
    run(
        &b,
        &bad(
            "layer.json",
            r#"{"num_layers": 4, "tensors": [{"name": "x", "shape": [4], "layer": 4}]}"#,
        ),
        &[],
        "tensor x: layer 4 is out of range (the model has 4 layers)",
    );
    run(
        &b,
        &bad(
            "expert.json",
            r#"{"num_layers": 4, "num_experts": 8, "tensors": [{"name": "x", "shape": [4], "expert": 9}]}"#,
        ),
        &[],
        "tensor x: expert 9 is out of range (the model has 8 experts)",
    );
    run(
        &b,
        &bad(
            "zero.json",
            r#"{"num_layers": 4, "tensors": [{"name": "x", "shape": [4, 0]}]}"#,
        ),
        &[],
        "tensor x: dim 1 has size 0",
    );
    run(
        &b,
        &bad(
            "missing.json",
            r#"{"num_layers": 4, "tensors": [{"name": "x"}]}"#,
        ),
        &[],
        "tensors[0] (x): missing key \"shape\"",
    );
    run(&b, &t, &["--rank", "99"], "process 99 is in neither layout");
    fails_with_args(
        &[
            "reshard",
            "--from",
            s(&a),
            "--to",
            s(&b),
            "--model-args",
            "--hidden-size 8",
        ],
        "model argument num_layers: missing",
    );
}

/// `--hosts` reads every host table format, as `place` does: the same
/// racks as a plain table, as Slurm's `topology.conf` blocks (no GPU
/// counts: `--gpus-per-node` sizes the nodes) and as `--nodes-per-domain`
/// give the same plan and costs; a file that is not the format named is
/// refused naming the file.
#[test]
fn hosts_in_every_format() {
    let (dir, a, b, t) = setup("hosts-formats");
    let plain = file(&dir, "hosts.txt", "n0 r0 4\nn1 r0 4\nn2 r1 4\nn3 r1 4\n");
    let blocks = file(
        &dir,
        "topology.conf",
        "BlockName=r0 Nodes=n[0-1]\nBlockName=r1 Nodes=n[2-3]\n",
    );
    let (a, b, t, plain, blocks) = (s(&a), s(&b), s(&t), s(&plain), s(&blocks));
    let base = [
        "--from",
        a,
        "--to",
        b,
        "--tensors",
        t,
        "--gpus-per-node",
        "4",
    ];
    let with = |extra: &[&str]| plan(&[&base[..], extra].concat());
    let by_domains = with(&["--nodes-per-domain", "2"]);
    assert!(by_domains["cross_domain_bytes"].as_u64().unwrap() > 0);
    assert_eq!(with(&["--hosts", plain]), by_domains);
    let conf = ["--hosts", blocks, "--hosts-format", "topology-conf"];
    assert_eq!(with(&conf), by_domains);
    let wrong = ["--hosts", plain, "--hosts-format", "topology-conf"];
    let args = [&["reshard"][..], &base[..], &wrong[..]].concat();
    fails_with_args(&args, &format!("--hosts {plain}"));
}
