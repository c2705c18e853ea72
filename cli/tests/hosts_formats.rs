#![allow(clippy::restriction)]
//! `rank-layout place --hosts FILE --hosts-format FORMAT`: each reader of
//! the library through the command, on the fixtures of
//! `tests/data/hosts/` (written from each format's documentation), with
//! `--nodelist`, `--clique-label` and `--topology`, and the errors (exit 2,
//! the message on stderr).
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.

mod common;

use std::collections::BTreeSet;

use common::{fails_with_args, stdout_args, temp_dir};
use serde_json::Value;

fn fixture(name: &str) -> String {
    format!("{}/../tests/data/hosts/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `place` of `hosts` read as `format` with `flags`, as JSON.
fn place(hosts: &str, format: &str, flags: &str) -> Value {
    let mut args = vec![
        "place",
        "--hosts",
        hosts,
        "--hosts-format",
        format,
        "--format",
        "json",
    ];
    args.extend(flags.split_whitespace());
    serde_json::from_str(&stdout_args(&args)).unwrap()
}

fn names(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} in {v}"))
        .iter()
        .map(|h| h.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn topology_conf_blocks_with_the_job_nodelist() {
    // Two whole blocks of 32 nodes and 8 nodes of a third: tp 8 (2 nodes)
    // fits whole in blocks, and only the listed nodes are used.
    let v = place(
        &fixture("topology_block.conf"),
        "topology-conf",
        "--nodelist node[1-72] --tp 8 --world-size 288 --gpus-per-node 4",
    );
    let used = names(&v, "node_hosts");
    assert_eq!(used.len(), 72);
    let listed: BTreeSet<String> = (1..=72).map(|i| format!("node{i}")).collect();
    assert_eq!(used.iter().cloned().collect::<BTreeSet<_>>(), listed);
    assert_eq!(v["crossing"]["tp"], 0);
    assert_eq!(v["unit_nodes"], 2);
}

#[test]
fn topology_yaml_picks_a_topology() {
    // topo2's blocks of 4 nodes hold tp 16 whole; the default tree
    // topology (topo1) has 4 nodes in all.
    let v = place(
        &fixture("topology.yaml"),
        "topology-yaml",
        "--topology topo2 --tp 16 --world-size 64 --gpus-per-node 4",
    );
    assert_eq!(names(&v, "node_hosts").len(), 16);
    assert_eq!(v["crossing"]["tp"], 0);
    let v = place(
        &fixture("topology.yaml"),
        "topology-yaml",
        "--tp 8 --world-size 16 --gpus-per-node 4",
    );
    assert_eq!(names(&v, "node_hosts").len(), 4);
    assert_eq!(v["crossing"]["tp"], 0);
}

#[test]
fn scontrol_switch_tree() {
    // A tp group of 6 nodes (24 GPUs) per leaf switch of 6 nodes.
    let v = place(
        &fixture("scontrol_tree.txt"),
        "scontrol",
        "--tp 24 --world-size 72 --gpus-per-node 4",
    );
    assert_eq!(v["crossing"]["tp"], 0);
    assert_eq!(v["unit_nodes"], 6);
    let v = place(
        &fixture("scontrol_block.txt"),
        "scontrol",
        "--nodelist gb[001-036] --tp 72 --world-size 144 --gpus-per-node 4",
    );
    assert_eq!(v["crossing"]["tp"], 0);
}

#[test]
fn slurm_topology_addr_names_the_hosts() {
    let v = place(
        &fixture("slurm_topology_addr.txt"),
        "slurm-topology-addr",
        "--tp 4 --world-size 16 --gpus-per-node 4",
    );
    let used: BTreeSet<String> = names(&v, "node_hosts").into_iter().collect();
    let want: BTreeSet<String> = ["dev4", "dev7", "dev12", "dev20"]
        .map(String::from)
        .into_iter()
        .collect();
    assert_eq!(used, want);
}

#[test]
fn nvidia_smi_file_and_directory_agree() {
    let file = fixture("nvidia_smi.txt");
    let text = std::fs::read_to_string(&file).unwrap();
    let dir = temp_dir("nvidia-smi-dir").join("smi");
    std::fs::create_dir_all(&dir).unwrap();
    for section in text.split("==> nvidia-smi/").skip(1) {
        let (name, body) = section.split_once(" <==\n").unwrap();
        std::fs::write(dir.join(name), body).unwrap();
    }
    let flags = "--tp 8 --world-size 16";
    let from_file = place(&file, "nvidia-smi", flags);
    let from_dir = place(dir.to_str().unwrap(), "nvidia-smi", flags);
    assert_eq!(from_file, from_dir);
    // GPUs per node from the output (4), the unhealthy host not placed.
    assert_eq!(names(&from_file, "node_hosts").len(), 4);
    assert_eq!(names(&from_file, "unhealthy"), ["gb07"]);
}

#[test]
fn kubectl_nodes_and_the_clique_label() {
    let v = place(
        &fixture("kubectl_nodes.json"),
        "kubectl",
        "--tp 8 --world-size 16",
    );
    assert_eq!(names(&v, "unhealthy"), ["cpu01", "gb04", "gb05"]);
    // The four healthy nodes are used; gb01 and gb02 share a clique and
    // hold one tp group of 2 nodes, the other (gb03 of another clique, gb06
    // of none) crosses: the lower bound.
    let used: BTreeSet<String> = names(&v, "node_hosts").into_iter().collect();
    let want: BTreeSet<String> = ["gb01", "gb02", "gb03", "gb06"]
        .map(String::from)
        .into_iter()
        .collect();
    assert_eq!(used, want);
    assert_eq!(v["crossing"]["tp"], 1);
    // With a label no node has, no domain is known: no domain holds a
    // tp group of 2 nodes.
    let file = fixture("kubectl_nodes.json");
    fails_with_args(
        &[
            "place",
            "--hosts",
            &file,
            "--hosts-format",
            "kubectl",
            "--clique-label",
            "example.com/rack",
            "--tp",
            "8",
            "--world-size",
            "16",
        ],
        "the largest domain holds 1 node(s)",
    );
}

#[test]
fn errors_exit_2_with_the_message() {
    let plain = fixture("topology_tree.conf");
    fails_with_args(
        &[
            "place",
            "--hosts",
            &plain,
            "--clique-label",
            "x",
            "--tp",
            "4",
        ],
        "--clique-label applies to --hosts-format kubectl",
    );
    fails_with_args(
        &[
            "place",
            "--hosts",
            &fixture("topology.yaml"),
            "--hosts-format",
            "topology-yaml",
            "--topology",
            "topo4",
            "--tp",
            "4",
        ],
        "\"topo4\" is ring",
    );
    let disagree = temp_dir("nvidia-smi-disagree").join("gb09.txt");
    std::fs::copy(fixture("nvidia_smi_disagree.txt"), &disagree).unwrap();
    let dir = disagree.parent().unwrap().to_str().unwrap().to_string();
    fails_with_args(
        &[
            "place",
            "--hosts",
            &dir,
            "--hosts-format",
            "nvidia-smi",
            "--tp",
            "4",
        ],
        "host \"gb09\": its GPUs disagree",
    );
    fails_with_args(
        &[
            "place",
            "--hosts",
            &plain,
            "--hosts-format",
            "topology-conf",
            "--nodelist",
            "dev[9-1]",
            "--tp",
            "4",
        ],
        "--nodelist dev[9-1]",
    );
}
