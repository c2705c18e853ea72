#![allow(clippy::restriction)]
//! The host-table readers of `rank_layout::machine` on fixtures written
//! from each format's documentation (`tests/data/hosts/`): Slurm's
//! topology.conf(5) and topology.yaml(5) examples, `scontrol show topology`
//! lines in the form Slurm's topology plugins print, `SLURM_TOPOLOGY_ADDR`
//! as srun(1) describes it, `nvidia-smi -q` of GB200 hosts with the
//! `Fabric` block, and `kubectl get nodes -o json`.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.

use std::collections::BTreeMap;

use rank_layout::Error;
use rank_layout::machine::{Host, Hosts, KindGroups, PlaceOptions, place};

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/data/hosts/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn host<'a>(hosts: &'a Hosts, name: &str) -> &'a Host {
    hosts
        .iter()
        .find(|h| h.name == name)
        .unwrap_or_else(|| panic!("{name} not in the table"))
}

/// Hosts per innermost key (`None`: unknown).
fn by_domain(hosts: &Hosts) -> BTreeMap<Option<String>, usize> {
    let mut out = BTreeMap::new();
    for h in hosts {
        *out.entry(h.domain().map(str::to_string)).or_insert(0) += 1;
    }
    out
}

/// The error's line and bad text, failing when the reader accepted.
fn refused(result: Result<Hosts, Error>) -> (usize, String, String) {
    match result {
        Err(Error::BadHostTable {
            line,
            text,
            problem,
            ..
        }) => (line, text, problem),
        other => panic!("expected a host table error, got {other:?}"),
    }
}

const CLIQUE_5: &str = "3f2b9c1e-7a44-4d0b-9e61-2c8d5a0f4b17.5";
const CLIQUE_6: &str = "3f2b9c1e-7a44-4d0b-9e61-2c8d5a0f4b17.6";

#[test]
fn topology_conf_tree_gives_root_then_leaf() {
    let hosts = Hosts::parse_topology_conf(&fixture("topology_tree.conf")).unwrap();
    assert_eq!(hosts.len(), 18);
    assert_eq!(hosts.levels(), 2);
    for (name, leaf) in [
        ("dev0", "s0"),
        ("dev5", "s0"),
        ("dev6", "s1"),
        ("dev17", "s2"),
    ] {
        assert_eq!(host(&hosts, name).keys, ["s3", leaf], "{name}");
    }
    assert!(hosts.iter().all(|h| h.healthy && h.gpus.is_none()));
    // Six nodes per leaf switch.
    assert!(by_domain(&hosts).values().all(|&n| n == 6));
}

#[test]
fn topology_conf_blocks_are_domains() {
    let hosts = Hosts::parse_topology_conf(&fixture("topology_block.conf")).unwrap();
    assert_eq!(hosts.len(), 128);
    let domains = by_domain(&hosts);
    assert_eq!(domains.len(), 4);
    assert_eq!(domains[&Some("block3".to_string())], 32);
    assert_eq!(host(&hosts, "node65").domain(), Some("block3"));
    // BlockSizes=30,120: base blocks of 30 nodes (the planning size), and
    // blocks of 4 of them, which here hold all four.
    assert_eq!(hosts.levels(), 2);
    assert_eq!(host(&hosts, "node65").keys, ["block1..block4", "block3"]);
}

/// The same blocks as `scontrol show topology` prints them (with its
/// `AggregatedBlock=` lines) and as topology.conf gives them with
/// `BlockSizes=18,36`: the same table, the aggregated blocks as Slurm
/// forms them (pairs of consecutive blocks).
#[test]
fn topology_conf_block_sizes_make_scontrol_aggregated_blocks() {
    let conf = "BlockName=b1 Nodes=gb[001-018]\nBlockName=b2 Nodes=gb[019-036]\n\
                BlockName=b3 Nodes=gb[037-052]\nBlockName=b4 Nodes=gb[055-072]\n\
                BlockSizes=18,36\n";
    let from_conf = Hosts::parse_topology_conf(conf).unwrap();
    let from_scontrol = Hosts::parse_scontrol_topology(&fixture("scontrol_block.txt")).unwrap();
    assert_eq!(from_conf, from_scontrol);
    // scontrol prints an aggregated block's name as a hostlist.
    let ranged =
        fixture("scontrol_block.txt").replace("AggregatedBlock=b3,b4", "AggregatedBlock=b[3-4]");
    assert_eq!(
        Hosts::parse_scontrol_topology(&ranged).unwrap(),
        from_scontrol
    );
    // Without BlockSizes, the base blocks alone (Slurm's default levels
    // are not the machine's).
    let plain =
        Hosts::parse_topology_conf(conf.trim_end().trim_end_matches("BlockSizes=18,36")).unwrap();
    assert_eq!(plain.levels(), 1);
}

/// Slurm's last aggregated block of a level (block_record.c): a short one
/// is formed unless the level below already holds its blocks whole; a
/// block in none at a level keeps its key from the level below.
#[test]
fn topology_conf_short_aggregated_blocks() {
    let blocks = |n: usize| -> String {
        (1..=n)
            .map(|i| format!("BlockName=b{i} Nodes=n{i}\n"))
            .collect::<String>()
            + "BlockSizes=1,2,4\n"
    };
    let keys = |n: usize| -> Vec<Vec<String>> {
        let hosts = Hosts::parse_topology_conf(&blocks(n)).unwrap();
        (1..=n)
            .map(|i| host(&hosts, &format!("n{i}")).keys.clone())
            .collect()
    };
    // 5 blocks: b5 is alone at both levels.
    let five = keys(5);
    assert_eq!(five[0], ["b1..b4", "b1..b2", "b1"]);
    assert_eq!(five[4], ["b5", "b5", "b5"]);
    // 6: b5 and b6 pair at level 1; level 2 would hold only them.
    let six = keys(6);
    assert_eq!(six[5], ["b5..b6", "b5..b6", "b6"]);
    // 7: b7 is alone at level 1, and b5-b7 form a short block at level 2.
    let seven = keys(7);
    assert_eq!(seven[4], ["b5..b7", "b5..b6", "b5"]);
    assert_eq!(seven[6], ["b5..b7", "b7", "b7"]);
    // A level holding every block is the last taken.
    assert_eq!(keys(2)[0], ["b1..b2", "b1"]);
    // Sizes that are not the base block's times a power of two.
    for (text, value) in [
        ("BlockSizes=18,45\n", "45"),
        ("BlockSizes=18,54\n", "54"),
        ("BlockSizes=36,18\n", "18"),
    ] {
        let (line, got, problem) = refused(Hosts::parse_topology_conf(&format!(
            "BlockName=b1 Nodes=n1\n{text}"
        )));
        assert_eq!((line, got.as_str()), (2, value), "{problem}");
        assert!(problem.contains("power of two"), "{problem}");
    }
}

#[test]
fn topology_conf_errors_name_line_and_value() {
    for (text, line, value) in [
        (
            "SwitchName=s0 Nodes=a[1-2]\nSwitchName=s1 Nodes=a2\n",
            2,
            "a2",
        ),
        ("SwitchName=s0 Switches=s9\n", 1, "s9"),
        (
            "SwitchName=s0 Switches=s1\nSwitchName=s1 Switches=s0\n",
            1,
            "s0",
        ),
        (
            "BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[4-5]\n",
            2,
            "n4",
        ),
        ("BlockName=b1 Nodes=n[3-1]\n", 1, "n[3-1]"),
        ("BlockName=b1 Nodes=n1 Speed=4\n", 1, "speed"),
        ("BlockSizes=18,x\n", 1, "x"),
        ("BlockName=b1 Nodes=n1\nSwitchName=s1 Nodes=n2\n", 1, "b1"),
        ("RingName=ring0 Nodes=n[1-8]\n", 1, "ring0"),
        ("Nodes\n", 1, "Nodes"),
    ] {
        let (got_line, got_value, problem) = refused(Hosts::parse_topology_conf(text));
        assert_eq!(
            (got_line, got_value.as_str()),
            (line, value),
            "{text}: {problem}"
        );
    }
    // A cycle is named (the switch that starts it).
    let (_, _, problem) = refused(Hosts::parse_topology_conf(
        "SwitchName=s0 Switches=s1\nSwitchName=s1 Switches=s2\nSwitchName=s2 Switches=s0\n",
    ));
    assert!(problem.contains("cycle"), "{problem}");
    assert!(Hosts::parse_topology_conf("# nothing\n").is_err());
}

#[test]
fn topology_yaml_reads_the_chosen_topology() {
    let text = fixture("topology.yaml");
    // The cluster default: the tree topo1.
    let tree = Hosts::parse_topology_yaml(&text, None).unwrap();
    assert_eq!(tree.len(), 4);
    assert_eq!(host(&tree, "node03").keys, ["sw_root", "s2"]);
    let blocks = Hosts::parse_topology_yaml(&text, Some("topo2")).unwrap();
    assert_eq!(blocks.len(), 16);
    assert_eq!(by_domain(&blocks).len(), 4);
    assert_eq!(host(&blocks, "node09").domain(), Some("b3"));
    // block_sizes 4, 16: blocks of 4 base blocks, which hold all four.
    assert_eq!(host(&blocks, "node09").keys, ["b1..b4", "b3"]);
    // The same blocks as topology.conf lines give the same table.
    let conf = "BlockName=b1 Nodes=node[01-04]\nBlockName=b2 Nodes=node[05-08]\n\
                BlockName=b3 Nodes=node[09-12]\nBlockName=b4 Nodes=node[13-16]\nBlockSizes=4,16\n";
    assert_eq!(Hosts::parse_topology_conf(conf).unwrap(), blocks);
    // Flat and ring topologies have no domains; a missing one is named.
    for (name, word) in [("topo3", "flat"), ("topo4", "ring"), ("topo9", "topo9")] {
        let (_, value, problem) = refused(Hosts::parse_topology_yaml(&text, Some(name)));
        assert_eq!(value, word, "{problem}");
    }
}

#[test]
fn topology_yaml_refuses_outside_its_subset_with_the_line() {
    for (text, line) in [
        (
            "- topology: t\n  block:\n    blocks:\n      - block: &a b1\n",
            4,
        ),
        ("- topology: t\n  block:\n    blocks: {block: b1}\n", 3),
        (
            "- topology: t\n  tree:\n    switches:\n      - switch: s\n        nodes: n1\n        speed: 3\n",
            6,
        ),
        (
            "- topology: t\n  block:\n    block_sizes: [18, zero]\n    blocks: []\n",
            3,
        ),
        ("- topology: t\n\tblock:\n", 2),
    ] {
        let (got, value, problem) = refused(Hosts::parse_topology_yaml(text, None));
        assert_eq!(got, line, "{text}: {value:?} {problem}");
    }
}

#[test]
fn scontrol_tree_takes_the_deepest_switch() {
    // The upper switch lists every node below it, as scontrol prints.
    let hosts = Hosts::parse_scontrol_topology(&fixture("scontrol_tree.txt")).unwrap();
    let conf = Hosts::parse_topology_conf(&fixture("topology_tree.conf")).unwrap();
    assert_eq!(hosts, conf);
}

#[test]
fn scontrol_blocks_with_aggregated_outer_keys() {
    let hosts = Hosts::parse_scontrol_topology(&fixture("scontrol_block.txt")).unwrap();
    assert_eq!(hosts.len(), 70);
    assert_eq!(host(&hosts, "gb001").keys, ["b1..b2", "b1"]);
    assert_eq!(host(&hosts, "gb060").keys, ["b3..b4", "b4"]);
    assert_eq!(by_domain(&hosts)[&Some("b3".to_string())], 16);
    // topology.conf's parameters are not scontrol's.
    let (line, value, _) = refused(Hosts::parse_scontrol_topology("BlockSizes=18\n"));
    assert_eq!((line, value.as_str()), (1, "BlockSizes=18"));
}

#[test]
fn slurm_topology_addr_lines() {
    let hosts = Hosts::parse_slurm_topology_addr(&fixture("slurm_topology_addr.txt")).unwrap();
    let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["dev4", "dev7", "dev12", "dev20"]);
    assert_eq!(host(&hosts, "dev7").keys, ["s3", "s1"]);
    // dev20 is under no switch: unknown.
    assert_eq!(host(&hosts, "dev20").domain(), None);
    for (text, line, value) in [
        (
            "SLURM_TOPOLOGY_ADDR=s0.n1\nSLURM_TOPOLOGY_ADDR=s1.n1\n",
            2,
            "s1.n1",
        ),
        (
            "SLURM_TOPOLOGY_ADDR=s0.n1\nSLURM_TOPOLOGY_ADDR_PATTERN=switch.switch.node\n",
            2,
            "switch.switch.node",
        ),
        ("SLURM_TOPOLOGY_ADDR_PATTERN=node\n", 1, "node"),
        ("SLURM_TOPOLOGY_ADDR=s0.\n", 1, "s0."),
        ("nothing here\n", 0, ""),
    ] {
        let (got_line, got_value, problem) = refused(Hosts::parse_slurm_topology_addr(text));
        assert_eq!(
            (got_line, got_value.as_str()),
            (line, value),
            "{text}: {problem}"
        );
    }
}

#[test]
fn nvidia_smi_fabric_block() {
    let hosts = Hosts::parse_nvidia_smi(&fixture("nvidia_smi.txt")).unwrap();
    assert_eq!(hosts.len(), 7);
    assert!(hosts.iter().all(|h| h.gpus == Some(4)));
    for name in ["gb01", "gb02", "gb03"] {
        assert_eq!(host(&hosts, name).domain(), Some(CLIQUE_5), "{name}");
    }
    assert_eq!(host(&hosts, "gb04").domain(), Some(CLIQUE_6));
    // N/A (fabric not supported) and an all-zero cluster UUID: unknown.
    assert_eq!(host(&hosts, "gb05").domain(), None);
    assert_eq!(host(&hosts, "gb06").domain(), None);
    assert!(host(&hosts, "gb05").healthy);
    // One GPU's fabric health summary is Unhealthy: the host is not used.
    assert!(!host(&hosts, "gb07").healthy);
    assert_eq!(host(&hosts, "gb07").domain(), Some(CLIQUE_5));
    // The same outputs as (host, text) pairs give the same table.
    let text = fixture("nvidia_smi.txt");
    let mut pairs = Vec::new();
    for section in text.split("==> nvidia-smi/").skip(1) {
        let (name, body) = section.split_once(".txt <==\n").unwrap();
        pairs.push((name, body));
    }
    assert_eq!(Hosts::from_nvidia_smi(&pairs).unwrap(), hosts);
}

#[test]
fn nvidia_smi_gpus_that_disagree_are_an_error() {
    let text = fixture("nvidia_smi_disagree.txt");
    let (line, value, problem) = refused(Hosts::from_nvidia_smi(&[("gb09", &text)]));
    assert_eq!(value, CLIQUE_6);
    assert!(
        problem.contains("gb09") && problem.contains(CLIQUE_5),
        "{problem}"
    );
    // The line is the third GPU's Fabric block.
    assert_eq!(text.lines().nth(line - 1).map(str::trim), Some("Fabric"));
    let before = text
        .lines()
        .take(line)
        .filter(|l| l.starts_with("GPU "))
        .count();
    assert_eq!(before, 3);
    // Text before the first section header.
    let (line, value, _) = refused(Hosts::parse_nvidia_smi("GPU 0000:01:00.0\n==> gb01 <==\n"));
    assert_eq!((line, value.as_str()), (1, "GPU 0000:01:00.0"));
}

#[cfg(feature = "serde")]
#[test]
fn kubectl_nodes_with_the_clique_label() {
    use rank_layout::machine::DEFAULT_CLIQUE_LABEL;
    let json = fixture("kubectl_nodes.json");
    let hosts = Hosts::parse_kubectl_nodes(&json, DEFAULT_CLIQUE_LABEL).unwrap();
    assert_eq!(hosts.len(), 7);
    assert_eq!(host(&hosts, "gb01").domain(), Some(CLIQUE_5));
    assert_eq!(host(&hosts, "gb03").domain(), Some(CLIQUE_6));
    assert_eq!(host(&hosts, "gb06").domain(), None);
    assert_eq!(host(&hosts, "gb01").gpus, Some(4));
    let healthy: Vec<&str> = hosts
        .iter()
        .filter(|h| h.healthy)
        .map(|h| h.name.as_str())
        .collect();
    // gb04 is cordoned, gb05 not Ready, cpu01 has no GPU.
    assert_eq!(healthy, ["gb01", "gb02", "gb03", "gb06"]);
    assert_eq!(host(&hosts, "cpu01").gpus, None);
    // Another label: every domain unknown.
    let other = Hosts::parse_kubectl_nodes(&json, "example.com/rack").unwrap();
    assert!(other.iter().all(|h| h.domain().is_none()));
    // Errors name the bad value.
    let (line, _, _) = refused(Hosts::parse_kubectl_nodes("{\n  \"items\": [\n", "x"));
    assert_eq!(line, 3);
    let bad_gpus = json.replacen(
        "\"nvidia.com/gpu\": \"4\"",
        "\"nvidia.com/gpu\": \"four\"",
        1,
    );
    let (_, value, problem) = refused(Hosts::parse_kubectl_nodes(&bad_gpus, DEFAULT_CLIQUE_LABEL));
    assert_eq!(value, "four", "{problem}");
    let (_, value, _) = refused(Hosts::parse_kubectl_nodes("{\"kind\": \"Pod\"}", "x"));
    assert_eq!(value, "Pod");
}

#[test]
fn restrict_to_the_job_nodelist() {
    let cluster = Hosts::parse_topology_conf(&fixture("topology_block.conf")).unwrap();
    let job = cluster.restrict_to("node[30-35],spare1").unwrap();
    assert_eq!(job.len(), 7);
    assert_eq!(host(&job, "node32").domain(), Some("block1"));
    assert_eq!(host(&job, "node33").domain(), Some("block2"));
    assert_eq!(host(&job, "spare1").domain(), None);
    let (_, value, _) = refused(cluster.restrict_to("node[5-1]"));
    assert_eq!(value, "node[5-1]");
}

/// A table read from a topology places a job: the nvidia-smi hosts of one
/// clique hold tp 8 groups (2 nodes each) without crossing, and the
/// unhealthy host is never placed.
#[test]
fn a_read_table_places_a_job() {
    let hosts = Hosts::parse_nvidia_smi(&fixture("nvidia_smi.txt")).unwrap();
    let tp = KindGroups::new("tp", (0..2).map(|g| (8 * g..8 * g + 8).collect()).collect());
    let plan = place(
        16,
        std::slice::from_ref(&tp),
        &[],
        &hosts,
        &PlaceOptions::default(),
    )
    .unwrap();
    assert_eq!(plan.crossing(&hosts, &tp).domain_crossing(), 1);
    assert!(
        plan.node_hosts
            .iter()
            .all(|&h| hosts.get(h).unwrap().healthy)
    );
    assert!(!plan.node_hosts.contains(&hosts.index_of("gb07").unwrap()));
}
