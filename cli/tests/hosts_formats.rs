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
        "clique label \"x\": applies to the kubectl format only",
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
        "(\"dev[9-1]\"): the nodelist: the range \"9-1\" decreases",
    );
}

/// `place` of `args`, which must fail with status 2 naming `needle`, for a
/// table written to a file of its own.
fn fails_on(text: &[u8], file: &str, args: &[&str], needle: &str) -> String {
    let path = temp_dir("bad-input").join(file);
    std::fs::write(&path, text).unwrap();
    let mut all = vec!["place", "--hosts", path.to_str().unwrap()];
    all.extend_from_slice(args);
    fails_with_args(&all, needle)
}

/// A host name with a NUL or another control byte was taken and written
/// into the launcher files: refused, naming the line (plain, JSON, and a
/// Slurm topology).
#[test]
fn control_bytes_in_host_names_are_refused() {
    let job = ["--tp", "4", "--world-size", "8", "--emit", "slurm-hostfile"];
    fails_on(
        b"a r0 4\nb\0c r0 4\n",
        "hosts.txt",
        &job,
        "line 2 (\"b\\0c\"): a host name has no control characters",
    );
    fails_on(
        b"[{\"host\": \"a\\u0000\", \"gpus\": 4}, {\"host\": \"b\", \"gpus\": 4}]",
        "hosts.json",
        &job,
        "control characters",
    );
    let mut args = vec!["--hosts-format", "topology-conf", "--gpus-per-node", "4"];
    args.extend(job);
    fails_on(
        b"SwitchName=s0 Nodes=gb\x1b1,gb2\n",
        "topology.conf",
        &args,
        "line 1",
    );
}

/// A `--nodelist` host the table lacks is a warning naming it (it joins
/// with an unknown domain); a nodelist none of whose hosts the table has
/// exits 2 (it was taken, and emitted a hostfile of unknown hosts).
#[test]
fn nodelist_hosts_missing_from_the_table() {
    let conf = fixture("topology_block.conf");
    let base = [
        "place",
        "--hosts",
        conf.as_str(),
        "--hosts-format",
        "topology-conf",
        "--tp",
        "4",
        "--world-size",
        "16",
        "--gpus-per-node",
        "4",
    ];
    let mut args = base.to_vec();
    args.extend(["--nodelist", "node[1-3],gpu7", "--emit", "slurm-hostfile"]);
    let out = common::run_args(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: ")
            && stderr.contains("1 host(s) not in the host table")
            && stderr.contains("gpu7"),
        "{stderr}"
    );
    let mut args = base.to_vec();
    args.extend(["--nodelist", "gpu[1-4]", "--emit", "slurm-hostfile"]);
    fails_with_args(&args, "no host of the nodelist is in the host table");
}

/// `scontrol show topology` with `BlockSize=four` was read as if the size
/// were absent; a switch with neither nodes nor switches is a warning
/// (Slurm takes such an empty leaf), and a topology of nothing but such
/// switches exits 2.
#[test]
fn scontrol_bad_numbers_and_empty_switches() {
    let job = [
        "--hosts-format",
        "scontrol",
        "--tp",
        "4",
        "--world-size",
        "8",
        "--gpus-per-node",
        "4",
    ];
    fails_on(
        b"BlockName=b1 BlockIndex=0 Nodes=gb[01-02] BlockSize=four\n",
        "scontrol.txt",
        &job,
        "BlockSize=four",
    );
    fails_on(
        b"SwitchName=s0\n",
        "scontrol.txt",
        &job,
        "no switch lists a node",
    );
    let path = temp_dir("empty-switch").join("scontrol.txt");
    std::fs::write(
        &path,
        "SwitchName=s0 Level=0 LinkSpeed=1 Nodes=dev[0-1]\nSwitchName=s9 Level=0 LinkSpeed=1\n",
    )
    .unwrap();
    let mut args = vec!["place", "--hosts", path.to_str().unwrap()];
    args.extend(job);
    let out = common::run_args(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("line 2: switch \"s9\" lists no node and no switch"),
        "{stderr}"
    );
}

/// A bad JSON host table said only "data did not match any variant of
/// untagged enum Table": now the key and the value.
#[test]
fn bad_json_tables_name_the_key_and_the_value() {
    let job = ["--tp", "4", "--world-size", "8"];
    for (text, needle) in [
        (r#"[{"host": "a", "gpu": 4}]"#, "unknown key \"gpu\""),
        (r#"[{"host": "a", "gpus": "4"}]"#, r#"gpus = \"4\""#),
        (r#"[{"host": "a", "gpus": 4.5}]"#, "gpus = 4.5"),
        (
            "[{\"host\": \"a\", \"gpus\": 4,\n  \"gpus\": 8}]",
            "key \"gpus\" is given twice",
        ),
    ] {
        let stderr = fails_on(text.as_bytes(), "hosts.json", &job, needle);
        assert!(!stderr.contains("untagged enum"), "{stderr}");
    }
}

/// A switch named `unknown` (the place Slurm's tools give nodes they
/// cannot place) was taken as an NVLink domain: its hosts have an unknown
/// domain, so a tp group of two of them crosses.
#[test]
fn a_placeholder_switch_is_no_domain() {
    let path = temp_dir("placeholder").join("scontrol.txt");
    std::fs::write(
        &path,
        "SwitchName=s0 Level=0 LinkSpeed=1 Nodes=dev[0-1]\n\
         SwitchName=unknown Level=0 LinkSpeed=1 Nodes=dev[2-5]\n",
    )
    .unwrap();
    // Groups of 2 nodes: one fits in s0, the other two straddle the hosts
    // of no known domain (read as a domain of 4, none would).
    let v = place(
        path.to_str().unwrap(),
        "scontrol",
        "--tp 4 --world-size 12 --gpus-per-node 2",
    );
    assert_eq!(
        (v["whole_units"].as_u64(), v["straddling_units"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(v["crossing"]["tp"], 2);
}

/// `nvidia-smi -q` of one host without a `==> host <==` line was refused:
/// read as the host its file is named after. pdsh's `host: line` output,
/// which NVIDIA topograph reads, is read too.
#[test]
fn nvidia_smi_of_one_host_and_of_pdsh() {
    let text = std::fs::read_to_string(fixture("nvidia_smi.txt")).unwrap();
    let dir = temp_dir("nvidia-smi-one");
    let mut pdsh = String::new();
    let mut files = Vec::new();
    for section in text.split("==> nvidia-smi/").skip(1) {
        let (name, body) = section.split_once(" <==\n").unwrap();
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        files.push(path);
        let host = name.trim_end_matches(".txt");
        for line in body.lines() {
            pdsh.push_str(&format!("{host}: {line}\n"));
        }
    }
    let one = place(
        files[0].to_str().unwrap(),
        "nvidia-smi",
        "--tp 4 --world-size 4",
    );
    assert_eq!(names(&one, "node_hosts"), ["gb01"]);
    let pdsh_path = dir.join("pdsh.out");
    std::fs::write(&pdsh_path, pdsh).unwrap();
    let flags = "--tp 8 --world-size 16";
    assert_eq!(
        place(pdsh_path.to_str().unwrap(), "nvidia-smi", flags),
        place(&fixture("nvidia_smi.txt"), "nvidia-smi", flags)
    );
}
