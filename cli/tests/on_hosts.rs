//! `check --hosts` and `rank --hosts`: the job on the hosts it got, in the
//! table's order or in `place`'s (`--placed`), on the worked GB200 case of
//! racks listed interleaved host by host (the semantics, section 10); the
//! GPUs per node of the merged setup (flags over `--config`) or of the
//! table's healthy hosts. Each test writes its files in a directory of its
//! own (`temp_dir`), so the tests of this file may run at once.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use std::path::PathBuf;

use common::{fails_with_args, stdout_args, temp_dir};
use serde_json::Value;

/// 16 GB200 racks of 18 nodes of 4 GPUs, listed host by host across racks.
fn interleaved() -> PathBuf {
    let mut lines = String::new();
    for i in 0..288 {
        lines.push_str(&format!("gb{i:04} nvl72-{:02} 4\n", i % 16));
    }
    let path = temp_dir("on-hosts").join("hosts.txt");
    std::fs::write(&path, lines).unwrap();
    path
}

const JOB: [&str; 8] = ["--tp", "8", "--pp", "4", "--ep", "16", "--etp", "1"];

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&stdout_args(args)).unwrap()
}

fn crossing(v: &Value, kind: &str) -> u64 {
    let k = v["hosts"]["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kind"] == kind)
        .unwrap();
    k["crossing"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .as_u64()
        .unwrap()
}

#[test]
fn check_on_the_hosts_in_table_and_placed_order() {
    let path = interleaved();
    let hosts = path.to_str().unwrap();
    let mut args = vec!["check"];
    args.extend(JOB);
    args.extend([
        "--world-size",
        "1152",
        "--hosts",
        hosts,
        "--kind",
        "tp",
        "--kind",
        "etp-ep",
        "--format",
        "json",
    ]);
    // In the table's order every tp and every etp-ep group crosses racks.
    let table = json(&args);
    assert_eq!(table["hosts"]["order"], "table");
    assert_eq!(
        (crossing(&table, "tp"), crossing(&table, "etp-ep")),
        (144, 72)
    );
    // check's own keys are still there.
    assert!(!table["kinds"].is_null() && !table["warnings"].is_null());
    // In place's order: no tp group, the lower bound of 8 etp-ep groups.
    args.push("--placed");
    let placed = json(&args);
    assert_eq!(
        (crossing(&placed, "tp"), crossing(&placed, "etp-ep")),
        (0, 8)
    );
    // The node order is place's.
    let mut place = vec!["place"];
    place.extend(JOB);
    place.extend(["--world-size", "1152", "--hosts", hosts, "--format", "json"]);
    assert_eq!(placed["hosts"]["node_hosts"], json(&place)["node_hosts"]);
}

#[test]
fn rank_on_the_hosts() {
    let path = interleaved();
    let hosts = path.to_str().unwrap();
    for (order, extra) in [("table", None), ("placed", Some("--placed"))] {
        let mut args = vec!["rank", "13"];
        args.extend(JOB);
        args.extend(["--world-size", "1152", "--hosts", hosts, "--format", "json"]);
        args.extend(extra);
        let v = json(&args);
        let r = &v["hosts"]["rank"];
        assert_eq!(v["hosts"]["order"], order);
        // Rank 13 is node 3 (4 GPUs per node), on that node's host.
        assert_eq!(r["node"], 3);
        assert_eq!(r["host"], v["hosts"]["node_hosts"][3]);
        let crossing: Vec<&str> = r["crossing_kinds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        // tp groups are 2 nodes: split over two racks in the table's
        // order, inside one in place's.
        assert_eq!(
            crossing.contains(&"tp"),
            order == "table",
            "{order}: {crossing:?}"
        );
    }
    let text = stdout_args(&[
        "rank",
        "13",
        "--tp",
        "8",
        "--world-size",
        "1152",
        "--hosts",
        hosts,
    ]);
    assert!(
        text.contains("rank 13 runs on node 3, host gb0003 (nvl72-03)"),
        "{text}"
    );
}

#[test]
fn hosts_refusals() {
    let path = interleaved();
    let hosts = path.to_str().unwrap();
    fails_with_args(
        &[
            "check",
            "--tp",
            "8",
            "--world-size",
            "2048",
            "--hosts",
            hosts,
        ],
        "512 nodes",
    );
    fails_with_args(
        &["check", "--tp", "8", "--world-size", "16", "--placed"],
        "--hosts",
    );
}

/// A mesh is placed by `--placed` as `place` places it (it was refused).
#[test]
fn a_mesh_in_place_s_order() {
    let path = interleaved();
    let hosts = path.to_str().unwrap();
    let mesh = ["--mesh", "tp=8,dp=144"];
    let mut args = vec!["check"];
    args.extend(mesh);
    args.extend([
        "--hosts", hosts, "--placed", "--kind", "tp", "--format", "json",
    ]);
    let v = json(&args);
    assert_eq!(crossing(&v, "tp"), 0);
    let mut place = vec!["place"];
    place.extend(mesh);
    place.extend(["--hosts", hosts, "--format", "json"]);
    assert_eq!(v["hosts"]["node_hosts"], json(&place)["node_hosts"]);
}

/// The GPUs per node come from the merged setup: `gpus_per_node` in a
/// `--config` file is used by `check --hosts`, `rank --hosts`, `place`
/// and `relayout --hosts` (it was ignored: the raw flag was read, and
/// each refused the table as one without GPU counts); without it, the count
/// of the table's healthy hosts (an unhealthy host of another count no
/// longer makes the table's count unknown).
#[test]
fn gpus_per_node_of_the_config_and_of_the_healthy_hosts() {
    let dir = temp_dir("on-hosts-gpus");
    let table = dir.join("hosts.txt");
    // No GPU counts: 8 hosts in 2 racks.
    let mut text = String::new();
    for i in 0..8 {
        text.push_str(&format!("n{i} r{} \n", i / 4));
    }
    std::fs::write(&table, &text).unwrap();
    let config = dir.join("machine.toml");
    std::fs::write(&config, "gpus_per_node = 2\n").unwrap();
    let (t, c) = (table.to_str().unwrap(), config.to_str().unwrap());
    for command in [
        vec!["check", "--tp", "4", "--world-size", "16"],
        vec!["rank", "5", "--tp", "4", "--world-size", "16"],
        vec!["place", "--tp", "4", "--world-size", "16"],
    ] {
        let mut args = command.clone();
        args.extend(["--hosts", t, "--format", "json"]);
        let mut with_config = args.clone();
        with_config.extend(["--config", c]);
        let v = json(&with_config);
        let hosts = if command[0] == "place" {
            &v
        } else {
            &v["hosts"]
        };
        assert_eq!(
            hosts["node_hosts"].as_array().unwrap().len(),
            8,
            "{command:?}"
        );
        // Without a count anywhere: refused, naming the command's flag and
        // key (not the library's field).
        let stderr = fails_with_args(&args, "--gpus-per-node (or gpus_per_node in --config)");
        assert!(!stderr.contains("PlaceOptions"), "{stderr}");
    }
    // relayout --hosts too: host n3's node is 2 ranks (of 16), so dropping
    // its tp-4 replica leaves 12.
    let mut relayout = vec![
        "relayout",
        "--tp",
        "4",
        "--world-size",
        "16",
        "--hosts",
        t,
        "--failed-hosts",
        "n3",
        "--policy",
        "drop-replica",
        "--format",
        "json",
    ];
    fails_with_args(&relayout, "--gpus-per-node (or gpus_per_node in --config)");
    relayout.extend(["--config", c]);
    let v = json(&relayout);
    assert_eq!(
        (v["old_world_size"].as_u64(), v["world_size"].as_u64()),
        (Some(16), Some(12))
    );
    let check = |extra: &[&str]| {
        let mut args = vec!["check", "--tp", "4", "--world-size", "16", "--hosts", t];
        args.extend(extra);
        args.extend(["--format", "json"]);
        json(&args)
    };
    // check's own table uses the hosts' GPUs per node too: tp groups of 4
    // span 2 nodes of 2 GPUs (inside one node of the default 8).
    let v = check(&["--config", c]);
    assert_eq!(v["kinds"]["tp"]["cross_node_groups"], 4, "{v}");
    // Healthy hosts of different counts: refused, naming the flag.
    std::fs::write(&table, "a r0 2\nb r0 4\n").unwrap();
    for command in ["check", "place"] {
        let args = [command, "--tp", "2", "--world-size", "4", "--hosts", t];
        let stderr = fails_with_args(&args, "--gpus-per-node");
        assert!(
            stderr.contains("2 on 1 host(s), 4 on 1 host(s)"),
            "{stderr}"
        );
    }
    // A table whose healthy hosts give 4 GPUs and a down host 8.
    std::fs::write(&table, "a r0 4\nb r0 4\nc r1 4\nd r1 4\ne r1 8 down\n").unwrap();
    let v = check(&["--kind", "tp"]);
    assert_eq!(crossing(&v, "tp"), 0);
}

/// README.md says when `--gpus-per-node`'s default does not apply: with a
/// host table, the table's count, so a table without counts needs the
/// flag (it said only "default 8", and `place` refused such a table; the
/// test above shows the refusal).
#[test]
fn the_readme_says_when_a_host_table_needs_gpus_per_node() {
    let readme = std::fs::read_to_string(format!(
        "{}/../docs/commands.md",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let text = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let (_, rest) = text
        .split_once("`--gpus-per-node N` (")
        .expect("docs/commands.md documents --gpus-per-node N");
    let said = rest.split_once(')').unwrap().0;
    assert!(
        said.starts_with("default 8") && said.contains("`--hosts`") && said.contains("needs it"),
        "{said}"
    );
}
