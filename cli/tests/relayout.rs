//! `rank-layout relayout`: the documented interface (`world_size`,
//! `new_rank`, `kinds`, `new_communicators`, `--policy`, `--spare-nodes`,
//! `--failed-ranks LIST`), the worked case's table, the comparison of every
//! policy, and bad input (exit 2, the value named).
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use std::collections::BTreeMap;

use common::{fails_with_args, stdout_args};
use serde_json::Value;

const WORKED: [&str; 10] = [
    "relayout",
    "--tp",
    "8",
    "--pp",
    "4",
    "--dp",
    "36",
    "--order",
    "tp-dp-pp",
    "--gpus-per-node",
];

fn plan(extra: &[&str]) -> Value {
    let mut args: Vec<&str> = WORKED.to_vec();
    args.push("4");
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--format", "json"]);
    serde_json::from_str(&stdout_args(&args)).unwrap()
}

/// The worked case's plan when ranks 200-203 fail, under the spare policy
/// with one spare node given by `flag`.
fn spare(flag: &str) -> Value {
    plan(&["--failed-ranks", "200-203", "--policy", "spare", flag, "1"])
}

/// The report's `spare_hosts`.
fn spare_hosts(v: &Value) -> Vec<&str> {
    v["spare_hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect()
}

fn new_of(v: &Value, kind: &str) -> u64 {
    v["kinds"][kind]["new"].as_u64().unwrap()
}

/// The semantics' table: Megatron order tp-dp-pp, tp 8, pp 4, dp 36 on
/// 1,152 GPUs (4 per node), ranks 200-203 lost.
#[test]
fn worked_case_through_the_command() {
    let rows = [
        ("shift-ranks", "0", 1120, [115, 32, 280], 427),
        ("fill-gaps", "0", 1120, [1, 32, 280], 313),
        ("drop-replica", "0", 1120, [0, 0, 0], 0),
        ("spare", "1", 1152, [1, 4, 4], 9),
    ];
    for (policy, spares, world, [tp, dp, pp], total) in rows {
        let v = plan(&[
            "--failed-ranks",
            "200-203",
            "--policy",
            policy,
            "--spare-nodes",
            spares,
        ]);
        assert_eq!(v["world_size"], world, "{policy}");
        assert_eq!(
            [new_of(&v, "tp"), new_of(&v, "dp"), new_of(&v, "pp")],
            [tp, dp, pp],
            "{policy}"
        );
        assert_eq!(v["new_communicators"], total, "{policy}");
        let sum: u64 = v["kinds"]
            .as_object()
            .unwrap()
            .values()
            .map(|k| k["new"].as_u64().unwrap())
            .sum();
        assert_eq!(v["new_communicators"], sum);
        // new_rank: every old rank, then every spare rank; failed ranks null,
        // the new ranks each once.
        let new_rank = v["new_rank"].as_array().unwrap();
        assert_eq!(new_rank.len(), 1152 + 4 * spares.parse::<usize>().unwrap());
        assert!(new_rank[200..204].iter().all(Value::is_null));
        let mut ranks: Vec<u64> = new_rank.iter().filter_map(Value::as_u64).collect();
        ranks.sort_unstable();
        assert_eq!(ranks, (0..world).collect::<Vec<u64>>(), "{policy}");
    }
    // Dropping the replica: dp groups shrink, nothing else changes.
    let v = plan(&["--failed-ranks", "200-203", "--policy", "drop-replica"]);
    assert_eq!(v["kinds"]["dp"]["shrunk"], 32);
    assert_eq!(v["kinds"]["tp"]["kept"], 140);
    assert_eq!(v["kinds"]["pp"]["kept"], 280);
    // The spare takes ranks 200-203 in order.
    let v = spare("--spare-nodes");
    let new_rank = v["new_rank"].as_array().unwrap();
    assert_eq!(
        new_rank[1152..]
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect::<Vec<_>>(),
        [200, 201, 202, 203]
    );
}

/// Without --policy every policy is compared; one that cannot go on says
/// why in its row.
#[test]
fn compares_every_policy() {
    let v = plan(&["--failed-ranks", "200-203,517"]);
    let rows = v["policies"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["policy"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "drop-replica",
            "spare",
            "next-grid",
            "shift-ranks",
            "fill-gaps"
        ]
    );
    assert!(
        rows[1]["error"]
            .as_str()
            .unwrap()
            .contains("2 node(s) failed and there are 0 spare")
    );
    assert_eq!(rows[0]["plan"]["world_size"], 1088);
    let table = {
        let mut args: Vec<&str> = WORKED.to_vec();
        args.extend_from_slice(&["4", "--failed-ranks", "200-203"]);
        stdout_args(&args)
    };
    assert!(
        table.lines().next().unwrap().starts_with("policy"),
        "{table}"
    );
    assert!(table.contains("drop-replica"), "{table}");
}

/// Bad input: exit 2 and the value named on stderr.
#[test]
fn bad_input_names_the_value() {
    let cases: [(&[&str], &str); 5] = [
        (&["--failed-ranks", "203-200"], "\"203-200\""),
        (&["--failed-ranks", "x"], "\"x\""),
        (&["--failed-ranks", "1152"], "failed rank 1152"),
        (&["--failed-ranks", "1", "--policy", "sideways"], "sideways"),
        (&["--failed-ranks", "1", "--kind", "tp-xx"], "tp-xx"),
    ];
    for (extra, needle) in cases {
        let mut args: Vec<&str> = WORKED.to_vec();
        args.push("4");
        args.extend_from_slice(extra);
        fails_with_args(&args, needle);
    }
}

/// With the host table the job was placed on: the failed host's node is
/// replaced by the idle host of its own rack, so the tp group stays in one.
#[test]
fn spare_of_the_same_rack_from_the_host_table() {
    let dir = common::temp_dir("relayout-hosts");
    let path = dir.join("hosts.txt");
    // Racks r0 and r1 of 3 hosts; tp 8 over 2 nodes: one unit per rack,
    // one idle host per rack (a2, b2), listed in that order as spares.
    std::fs::write(
        &path,
        "a0 r0 4\nb0 r1 4\na1 r0 4\nb1 r1 4\na2 r0 4\nb2 r1 4\n",
    )
    .unwrap();
    let hosts = path.to_str().unwrap();
    let args = |failed: &'static str| -> Vec<String> {
        let fixed = [
            "relayout",
            "--hosts",
            hosts,
            "--tp",
            "8",
            "--dp",
            "2",
            "--policy",
            "spare",
            "--failed-hosts",
            failed,
        ];
        fixed.iter().map(|a| a.to_string()).collect()
    };
    for (failed, spare) in [("a1", "a2"), ("b0", "b2")] {
        let mut a = args(failed);
        a.extend(["--format".to_string(), "json".to_string()]);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let v: Value = serde_json::from_str(&stdout_args(&a)).unwrap();
        let spares = spare_hosts(&v);
        assert_eq!(spares, ["a2", "b2"]);
        let s = spares.iter().position(|h| *h == spare).unwrap();
        // The spare's 4 processes (after the 16 ranks) took the failed
        // node's ranks; the other spare waits.
        let new_rank = v["new_rank"].as_array().unwrap();
        assert!(
            new_rank[16 + 4 * s..20 + 4 * s].iter().all(|r| r.is_u64()),
            "{failed}: {v}"
        );
        assert!(
            new_rank[16 + 4 * (1 - s)..20 + 4 * (1 - s)]
                .iter()
                .all(Value::is_null)
        );
        assert_eq!(v["kinds"]["tp"]["new"], 1);
    }
    let bad = args("zz");
    let bad: Vec<&str> = bad.iter().map(String::as_str).collect();
    fails_with_args(&bad, "\"zz\"");
}

/// `--spare-nodes` is the library's and Python's word (`spare_nodes`);
/// `--spare-hosts`, its old name, gives the same plan.
#[test]
fn spare_nodes_and_its_old_name() {
    let new = spare("--spare-nodes");
    let old = spare("--spare-hosts");
    assert_eq!(new, old);
    assert_eq!(new["world_size"], 1152);
}

/// Without `--policy`, when every policy is refused (every rank dead), the
/// comparison says why for each and the command exits 1, as `check
/// --strict` does when it fails (it exited 0).
#[test]
fn every_policy_refused_exits_1() {
    let run = |failed: &str| {
        common::run_args(&[
            "relayout",
            "--tp",
            "2",
            "--dp",
            "2",
            "--failed-ranks",
            failed,
        ])
    };
    let out = run("0-3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert_eq!(stdout.matches("no re-layout").count(), 5, "{stdout}");
    assert!(stderr.contains("no policy can go on"), "{stderr}");
    // One policy that can go on: exit 0.
    assert_eq!(run("0-1").status.code(), Some(0));
}

/// `relayout --hosts` reads the table as `place` does: `--hosts-format`
/// (it was ignored, and a topology file read as a plain table), the job's
/// `--nodelist`, and `gpus_per_node` of a `--config` file (the raw flag
/// was read).
#[test]
fn relayout_on_hosts_reads_the_format_and_the_config() {
    let conf = format!(
        "{}/../tests/data/hosts/topology_block.conf",
        env!("CARGO_MANIFEST_DIR")
    );
    let dir = common::temp_dir("relayout-format");
    let config = dir.join("machine.json");
    std::fs::write(
        &config,
        r#"{"gpus_per_node": 4, "tp": 8, "world_size": 64}"#,
    )
    .unwrap();
    let args = [
        "relayout",
        "--config",
        config.to_str().unwrap(),
        "--hosts",
        &conf,
        "--hosts-format",
        "topology-conf",
        "--nodelist",
        "node[1-20]",
        "--failed-hosts",
        "node3",
        "--policy",
        "spare",
        "--format",
        "json",
    ];
    let v: Value = serde_json::from_str(&stdout_args(&args)).unwrap();
    // 16 nodes of 4 GPUs on node1..node16 (block1), 4 spares; node3's node
    // is taken by the first spare of block1.
    let spares = spare_hosts(&v);
    assert_eq!(spares, ["node17", "node18", "node19", "node20"]);
    let new_rank = v["new_rank"].as_array().unwrap();
    assert_eq!(new_rank.len(), 64 + 16);
    assert_eq!(new_rank[64].as_u64(), Some(8), "{v}");
    assert_eq!(v["kinds"]["tp"]["new"], 1);
}

/// The figures README.md gives beside its commands are what those
/// commands print: the README's first re-layout command (with its spare
/// node) gives the spare policy's count and ShiftRanks' and FillGaps'
/// beside it, and the same command without the spare node the counts the
/// README gives for that case. The README put 427 and 313 (the counts
/// without a spare) beside the command with `--spare-hosts 1`, which
/// prints 343 and 9.
#[test]
fn the_readme_figures_are_what_its_commands_print() {
    let readme = std::fs::read_to_string(format!(
        "{}/../docs/commands.md",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let section = readme
        .split("## After a failure: relayout")
        .nth(1)
        .expect("docs/commands.md has the re-layout section");
    let block = section.split("```sh\n").nth(1).unwrap();
    let (block, after) = block.split_once("```").unwrap();
    let first = block.lines().next().unwrap();
    let words: Vec<&str> = first
        .strip_prefix("cargo run --release -- ")
        .unwrap_or_else(|| panic!("{first}"))
        .split_whitespace()
        .collect();
    // The spare flag (either name) and its value.
    let spare = words
        .iter()
        .position(|w| *w == "--spare-nodes" || *w == "--spare-hosts")
        .unwrap_or_else(|| panic!("the first command gives no spare node: {first}"));
    let counts = |words: &[&str]| -> BTreeMap<String, u64> {
        let mut args = words.to_vec();
        args.extend(["--format", "json"]);
        let v: Value = serde_json::from_str(&stdout_args(&args)).unwrap();
        v["policies"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| {
                let n = r["plan"]["new_communicators"].as_u64()?;
                Some((r["policy"].as_str().unwrap().to_string(), n))
            })
            .collect()
    };
    let with = counts(&words);
    let without: Vec<&str> = words
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != spare && *i != spare + 1)
        .map(|(_, w)| *w)
        .collect();
    let without = counts(&without);
    let text = after
        .split("\n\n")
        .find(|p| !p.trim().is_empty())
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    // The spare policy's count, then, after each mention of `FillGaps`,
    // the first "N and M": ShiftRanks' and FillGaps' counts, first with
    // the command's spare node, then without.
    let number = |w: &str| w.trim_end_matches([',', '.', ';']).parse::<u64>().ok();
    assert!(
        text.split("creates ").skip(1).any(|after| after
            .split_whitespace()
            .next()
            .and_then(number)
            == Some(with["spare"])),
        "README lacks the spare policy's {}: {text}",
        with["spare"]
    );
    let pairs: Vec<(u64, u64)> = text
        .split("`FillGaps`")
        .skip(1)
        .filter_map(|after| {
            let words: Vec<&str> = after.split_whitespace().collect();
            words
                .windows(3)
                .find_map(|w| match (number(w[0]), w[1], number(w[2])) {
                    (Some(a), "and", Some(b)) => Some((a, b)),
                    _ => None,
                })
        })
        .collect();
    assert_eq!(
        pairs,
        [
            (with["shift-ranks"], with["fill-gaps"]),
            (without["shift-ranks"], without["fill-gaps"])
        ],
        "README's ShiftRanks and FillGaps counts (with the first command's spare node, then without) are not what the commands print: {text}"
    );
    assert_eq!(with["drop-replica"], 0);
    assert!(text.contains("creating no communicator"), "{text}");
    // The figures themselves, as of this writing.
    assert_eq!(
        ["spare", "shift-ranks", "fill-gaps"].map(|p| with[p]),
        [9, 343, 9]
    );
    assert_eq!(["shift-ranks", "fill-gaps"].map(|p| without[p]), [427, 313]);
}
