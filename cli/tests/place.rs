//! `rank-layout place`: the documented interface (`node_hosts`, `idle`,
//! `unit_nodes`, `crossing`, `--must-fit`, `--on-shortfall`, `--emit`), the
//! worked GB200 cases, and each launcher file read back into the same
//! rank -> host map as `groups` gives members.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{fails_with_args, run_args, stdout_args, temp_dir};
use serde_json::Value;

/// A host table of racks of `sizes` nodes of 4 GPUs, one host per line in
/// rack order, or interleaved host by host.
fn racks(name: &str, sizes: &[usize], interleave: bool) -> PathBuf {
    let mut lines = Vec::new();
    let deepest = sizes.iter().copied().max().unwrap_or(0);
    let mut n = 0;
    if interleave {
        for i in 0..deepest {
            for (r, &size) in sizes.iter().enumerate() {
                if i < size {
                    lines.push(format!("gb{n:04} nvl72-{r:02} 4"));
                    n += 1;
                }
            }
        }
    } else {
        for (r, &size) in sizes.iter().enumerate() {
            for _ in 0..size {
                lines.push(format!("gb{n:04} nvl72-{r:02} 4"));
                n += 1;
            }
        }
    }
    let path = temp_dir(name).join("hosts.txt");
    std::fs::write(&path, format!("# host domain gpus\n{}\n", lines.join("\n"))).unwrap();
    path
}

fn place(hosts: &Path, flags: &str) -> Value {
    let mut args = vec![
        "place",
        "--hosts",
        hosts.to_str().unwrap(),
        "--format",
        "json",
    ];
    args.extend(flags.split_whitespace());
    serde_json::from_str(&stdout_args(&args)).unwrap()
}

/// The report's `node_hosts`.
fn node_hosts(v: &Value) -> Vec<String> {
    v["node_hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

fn crossing(v: &Value) -> BTreeMap<String, u64> {
    v["crossing"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, n)| (k.clone(), n.as_u64().unwrap()))
        .collect()
}

#[test]
fn sixteen_full_racks() {
    let hosts = racks("full", &[18; 16], false);
    let v = place(&hosts, "--tp 8 --pp 4 --ep 16 --etp 1 --world-size 1152");
    assert_eq!(v["unit_nodes"], 4);
    assert_eq!(v["node_hosts"].as_array().unwrap().len(), 288);
    assert!(v["idle"].as_array().unwrap().is_empty());
    let c = crossing(&v);
    assert_eq!((c["tp"], c["etp-ep"]), (0, 8));
}

#[test]
fn a_short_rack_straddles_shrinks_or_fails() {
    let mut sizes = vec![18; 16];
    sizes[0] = 16;
    let hosts = racks("short", &sizes, false);
    let v = place(&hosts, "--tp 8 --pp 4 --ep 16 --etp 1 --dp 34");
    assert_eq!(crossing(&v)["etp-ep"], 4);
    assert_eq!(v["plain_crossing"]["etp-ep"], 7);
    assert_eq!(v["idle"].as_array().unwrap().len(), 14);
    let shrunk = place(
        &hosts,
        "--tp 8 --pp 4 --ep 16 --etp 1 --dp 34 --on-shortfall shrink",
    );
    assert_eq!(shrunk["shrunk"]["dp"], 32);
    assert_eq!(crossing(&shrunk)["etp-ep"], 0);
    let h = hosts.to_str().unwrap();
    fails_with_args(
        &[
            "place",
            "--hosts",
            h,
            "--tp",
            "8",
            "--pp",
            "4",
            "--ep",
            "16",
            "--etp",
            "1",
            "--dp",
            "34",
            "--on-shortfall",
            "fail",
        ],
        "4 would straddle domains",
    );
}

#[test]
fn no_placement_for_a_group_larger_than_a_rack() {
    let hosts = racks("large", &[18; 16], false);
    let h = hosts.to_str().unwrap();
    fails_with_args(
        &[
            "place",
            "--hosts",
            h,
            "--tp",
            "8",
            "--pp",
            "4",
            "--ep",
            "16",
            "--etp",
            "8",
            "--world-size",
            "1024",
        ],
        "etp-ep groups are 128 GPUs",
    );
}

#[test]
fn interleaved_racks_and_must_fit() {
    let hosts = racks("interleaved", &[18; 16], true);
    let v = place(&hosts, "--tp 8 --pp 4 --ep 16 --etp 1 --world-size 1152");
    assert_eq!(v["plain_crossing"]["tp"], 144);
    assert_eq!(v["plain_crossing"]["etp-ep"], 72);
    assert_eq!((crossing(&v)["tp"], crossing(&v)["etp-ep"]), (0, 8));
    // Only tp must fit: units of 2 nodes, 9 per rack, none straddles.
    let tp = place(
        &hosts,
        "--tp 8 --pp 4 --ep 16 --etp 1 --world-size 1152 --must-fit tp",
    );
    assert_eq!(tp["unit_nodes"], 2);
    assert_eq!(crossing(&tp).keys().collect::<Vec<_>>(), ["tp"]);
    assert_eq!(crossing(&tp)["tp"], 0);
}

#[test]
fn the_same_table_in_any_row_order_gives_the_same_bytes() {
    let hosts = racks("order", &[18, 17, 18, 5], false);
    let text = std::fs::read_to_string(&hosts).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.reverse();
    let reversed = temp_dir("order-rev").join("hosts.txt");
    std::fs::write(&reversed, lines.join("\n")).unwrap();
    let out = |table: &Path, flags: &str| {
        let table = table.to_str().unwrap();
        let mut args = vec![
            "place",
            "--hosts",
            table,
            "--tp",
            "8",
            "--ep",
            "4",
            "--world-size",
            "192",
        ];
        args.extend(flags.split_whitespace());
        stdout_args(&args)
    };
    for flags in ["--format json", "--emit rankfile", "--emit slurm-hostfile"] {
        let (a, b) = (out(&hosts, flags), out(&reversed, flags));
        assert_eq!(a, b, "{flags}");
    }
}

#[test]
fn launcher_files_read_back() {
    let hosts = racks("files", &[6, 6, 6], true);
    let h = hosts.to_str().unwrap();
    let flags = ["--tp", "8", "--ep", "4", "--etp", "1", "--world-size", "64"];
    let v = place(&hosts, &flags.join(" "));
    let node_hosts = node_hosts(&v);
    let emit = |what: &str| {
        stdout_args(&[&["place", "--hosts", h, "--emit", what][..], &flags[..]].concat())
    };
    // Slurm: a host per task, in rank order.
    let slurm: Vec<String> = emit("slurm-hostfile").lines().map(str::to_string).collect();
    assert_eq!(slurm.len(), 64);
    for (r, host) in slurm.iter().enumerate() {
        assert_eq!(host, &node_hosts[r / 4]);
    }
    // Open MPI: rank r=host slot=local.
    for line in emit("rankfile").lines() {
        let (rank, rest) = line.strip_prefix("rank ").unwrap().split_once('=').unwrap();
        let (host, slot) = rest.split_once(" slot=").unwrap();
        let r: usize = rank.parse().unwrap();
        assert_eq!(
            (host, slot.parse::<usize>().unwrap()),
            (node_hosts[r / 4].as_str(), r % 4)
        );
    }
    // torchrun: host node_rank.
    for line in emit("torchrun").lines() {
        let (host, n) = line.split_once(' ').unwrap();
        assert_eq!(host, node_hosts[n.parse::<usize>().unwrap()]);
    }
    // dlrover: {host: domain} of the used hosts.
    let dl: BTreeMap<String, String> = serde_json::from_str(&emit("dlrover")).unwrap();
    assert_eq!(dl.len(), 16);
    // The tp groups of `groups`, on those hosts: one rack each.
    let groups: Value = serde_json::from_str(&stdout_args(
        &[
            &["groups", "--kind", "tp", "--format", "json"][..],
            &flags[..],
        ]
        .concat(),
    ))
    .unwrap();
    let tp = groups["groups"]["tp"]
        .as_array()
        .or_else(|| groups["kinds"]["tp"].as_array());
    if let Some(tp) = tp {
        for group in tp {
            let racks: std::collections::BTreeSet<&String> = group
                .as_array()
                .unwrap()
                .iter()
                .map(|r| &dl[&slurm[r.as_u64().unwrap() as usize]])
                .collect();
            assert_eq!(racks.len(), 1, "{group}");
        }
    } else {
        panic!("no tp groups in {groups}");
    }
    // The command line goes to stderr.
    let out = run_args(
        &[
            &["place", "--hosts", h, "--emit", "rankfile"][..],
            &flags[..],
        ]
        .concat(),
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("mpirun --rankfile"));
}

#[test]
fn bad_tables_are_errors_naming_the_line() {
    let dir = temp_dir("bad-tables");
    for (text, needle) in [
        ("a r1 4\na r2 4\n", "listed twice"),
        ("a r1 four\n", "\"four\""),
        ("a\n", "line 1"),
        ("[{\"host\": \"a\", \"gpus\": 0}]", "gpus = 0"),
        ("[{\"host\": \"a\", \"rack\": 1}]", "unknown key \"rack\""),
        ("a r1 4\n", "not a whole number of nodes"),
    ] {
        let path = dir.join("t.txt");
        std::fs::write(&path, text).unwrap();
        fails_with_args(
            &[
                "place",
                "--hosts",
                path.to_str().unwrap(),
                "--tp",
                "2",
                "--world-size",
                "6",
            ],
            needle,
        );
    }
    fails_with_args(
        &["place", "--hosts", "/nonexistent/hosts", "--tp", "2"],
        "/nonexistent/hosts",
    );
}

#[test]
fn json_tables_with_levels_and_health() {
    let path = temp_dir("json-table").join("hosts.json");
    std::fs::write(
        &path,
        r#"{"hosts": [
          {"host": "n1", "keys": ["c1", "r1"], "gpus": 4},
          {"host": "n2", "keys": ["c1", "r2"], "gpus": 4},
          {"host": "n3", "keys": ["c1", "r1"], "gpus": 4},
          {"host": "n4", "domain": "c1/r2", "gpus": 4, "healthy": false},
          {"host": "n5", "domain": "c1/r2", "gpus": 4}
        ]}"#,
    )
    .unwrap();
    let v = place(&path, "--tp 8 --world-size 16");
    assert_eq!(v["unhealthy"], serde_json::json!(["n4"]));
    assert_eq!(crossing(&v)["tp"], 0);
    let tp = v["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kind"] == "tp")
        .unwrap();
    assert_eq!(tp["crossing"], serde_json::json!([0, 0]));
}

#[test]
fn slurm_hostlists_in_the_plain_table() {
    // 4 racks of 18 written as hostlists: the same bytes as one host a line.
    let dir = temp_dir("hostlists");
    let (short, long) = (dir.join("short.txt"), dir.join("long.txt"));
    let mut text = String::new();
    for r in 0..4 {
        text.push_str(&format!(
            "gb[{:04}-{:04}] nvl72-{r:02} 4\n",
            r * 18,
            r * 18 + 17
        ));
    }
    std::fs::write(&short, text).unwrap();
    let long_path = racks("hostlists-long", &[18; 4], false);
    std::fs::copy(&long_path, &long).unwrap();
    let flags = "--tp 8 --ep 16 --etp 1 --world-size 256";
    assert_eq!(place(&short, flags), place(&long, flags));
    let bad = dir.join("bad.txt");
    std::fs::write(&bad, "gb[3-1] r1 4\n").unwrap();
    fails_with_args(
        &["place", "--hosts", bad.to_str().unwrap(), "--tp", "8"],
        "decreases",
    );
}

#[test]
fn device_mesh_rank_map_reads_back() {
    let hosts = racks("device-mesh", &[6, 6, 6], true);
    let h = hosts.to_str().unwrap();
    let flags = ["--tp", "8", "--ep", "4", "--etp", "1", "--world-size", "64"];
    let v = place(&hosts, &flags.join(" "));
    let node_hosts = node_hosts(&v);
    let args = [
        &["place", "--hosts", h, "--emit", "device-mesh"][..],
        &flags[..],
    ]
    .concat();
    let map: Vec<usize> = serde_json::from_str(&stdout_args(&args)).unwrap();
    // A permutation of the launched ranks.
    let mut sorted = map.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..64).collect::<Vec<_>>());
    // Launched ranks: the used hosts in name order, 4 per host; the rank
    // that plays logical rank r runs on r's planned host and GPU.
    let mut launched = node_hosts.clone();
    launched.sort();
    for (r, &q) in map.iter().enumerate() {
        assert_eq!(
            (&launched[q / 4], q % 4),
            (&node_hosts[r / 4], r % 4),
            "{r}"
        );
    }
    // The plan is not the name order here, so the map is not the identity.
    assert_ne!(map, sorted);
    let out = run_args(&args);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("torch sorts each group's members by rank")
    );
}

/// Every kind placed, by level: on NVIDIA topograph's simulated tree (a
/// core, 6 spines, 12 leaves of 8 hosts), the mesh of tp 8, dp 16, pp 2
/// (the worked case of semantics 10: dp crosses no spine, 16 leaves, as in
/// the table's order) reports tp as must fit, then dp and pp placed as the
/// others, each at every level, placed and in the table's order, and that
/// the node order is the placement's.
#[test]
fn every_kind_placed_by_level() {
    let conf = format!(
        "{}/../tests/data/hosts/topograph_slinky_oci_sim_tree.conf",
        env!("CARGO_MANIFEST_DIR")
    );
    let flags = "--hosts-format topology-conf --gpus-per-node 8 --mesh tp=8,dp=16,pp=2";
    let v = place(Path::new(&conf), flags);
    let kinds = v["kinds"].as_array().unwrap();
    let row = |k: &Value| {
        (
            k["kind"].as_str().unwrap().to_string(),
            k["must_fit"].as_bool().unwrap(),
            k["crossing"].clone(),
            k["plain_crossing"].clone(),
        )
    };
    let rows: Vec<_> = kinds.iter().map(row).collect();
    assert_eq!(
        rows[0],
        ("tp".into(), true, [0, 0, 0].into(), [0, 0, 0].into())
    );
    assert_eq!(
        rows[1],
        ("dp".into(), false, [0, 0, 16].into(), [0, 0, 16].into())
    );
    assert_eq!((rows[2].0.as_str(), rows[2].1), ("pp", false));
    assert_eq!(rows.len(), 3);
    assert_eq!(v["table_order"], false);
    let mut args = vec!["place", "--hosts", &conf];
    args.extend(flags.split_whitespace());
    let text = stdout_args(&args);
    assert!(text.contains("by level, outermost first"), "{text}");
    let dp = text.lines().find(|l| l.starts_with("dp ")).unwrap();
    assert!(dp.ends_with("0/0/16 (0/0/16)"), "{dp}");
}
