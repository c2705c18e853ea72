#![allow(clippy::restriction)]
//! The host-table readers of `rank_layout::machine` on fixtures written
//! from each format's documentation (`tests/data/hosts/`): Slurm's
//! topology.conf(5) and topology.yaml(5) examples, `scontrol show topology`
//! lines in the form Slurm's topology plugins print, `SLURM_TOPOLOGY_ADDR`
//! as srun(1) describes it, `nvidia-smi -q` of GB200 hosts with the
//! `Fabric` block (and pdsh's `HOST: line` form NVIDIA topograph reads),
//! `kubectl get nodes -o json` and the JSON table; the readers by format
//! name with a nodelist, the one GPU-count rule, and the bad input each
//! refuses (control bytes, numbers that are not, a nodelist the table
//! lacks, switches that list nothing, placeholder switches).
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.

use std::collections::BTreeMap;

use rank_layout::Error;
use rank_layout::machine::{
    Host, Hosts, HostsFormat, HostsReader, KindGroups, PlaceOptions, place,
};

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

// Bad input that was taken (issue 28, item 5), and the formats by name.

/// A host name or key with a control byte (NUL, ESC, a carriage return)
/// would be written as it is into the launcher files: every reader
/// refuses it, naming the line.
#[test]
fn control_bytes_in_names_are_refused_with_the_line() {
    for (text, line) in [
        ("a r0 4\nb\u{0}x r0 4\n", 2),
        ("a\u{1b}x r0 4\n", 1),
        ("a r0\u{7f} 4\n", 1),
    ] {
        let (got, _, problem) = refused(Hosts::parse_plain(text));
        assert_eq!(got, line, "{text:?}");
        assert!(problem.contains("control characters"), "{problem}");
    }
    let (line, value, _) = refused(Hosts::parse_topology_conf(
        "SwitchName=s0 Nodes=dev[0-1]\nSwitchName=s1 Nodes=dev\u{0}7\n",
    ));
    assert_eq!((line, value.as_str()), (2, "dev\u{0}7"));
    let (line, _, _) = refused(Hosts::parse_slurm_topology_addr(
        "SLURM_TOPOLOGY_ADDR=s0.s\u{8}1.tux1\n",
    ));
    assert_eq!(line, 1);
    assert!(Hosts::new(vec![Host::new("gb\r01", Some("r0"))]).is_err());
}

/// `--nodelist` hosts the table lacks are noted by name (they join with an
/// unknown domain); a nodelist none of whose hosts the table has is an
/// error (it was taken, and made a hostfile of unknown hosts).
#[test]
fn a_nodelist_the_table_lacks_is_noted_or_refused() {
    let conf = fixture("topology_block.conf");
    let reader = HostsReader::new(HostsFormat::TopologyConf);
    let read = reader
        .clone()
        .nodelist("node[30-31],spare[1-2]")
        .read(&conf)
        .unwrap();
    assert_eq!(read.hosts.len(), 4);
    assert_eq!(read.notes.len(), 1);
    assert!(
        read.notes[0].contains("2 host(s) not in the host table")
            && read.notes[0].contains("spare1, spare2"),
        "{:?}",
        read.notes
    );
    let err = reader.nodelist("gpu[1-4]").read(&conf).unwrap_err();
    assert!(
        err.to_string()
            .contains("no host of the nodelist is in the host table"),
        "{err}"
    );
    let cluster = Hosts::parse_topology_conf(&conf).unwrap();
    let (line, value, _) = refused(cluster.restrict_to("gpu[1-4]"));
    assert_eq!((line, value.as_str()), (1, "gpu[1-4]"));
}

/// `scontrol show topology`'s numbers are numbers: `BlockSize=four` was
/// read as if absent.
#[test]
fn scontrol_numbers_that_are_not_numbers_are_refused() {
    for (text, value) in [
        (
            "BlockName=b1 BlockIndex=0 Nodes=gb[01-02] BlockSize=four\n",
            "BlockSize=four",
        ),
        (
            "BlockName=b1 BlockIndex=x Nodes=gb[01-02] BlockSize=2\n",
            "BlockIndex=x",
        ),
        (
            "BlockName=b1 BlockIndex=0 Nodes=gb[01-02] BlockSize=0\n",
            "BlockSize=0",
        ),
        (
            "SwitchName=s0 Level=one LinkSpeed=1 Nodes=dev[0-1]\n",
            "Level=one",
        ),
        (
            "SwitchName=s0 Level=0 LinkSpeed=-1 Nodes=dev[0-1]\n",
            "LinkSpeed=-1",
        ),
    ] {
        let (line, got, problem) = refused(Hosts::parse_scontrol_topology(text));
        assert_eq!((line, got.as_str()), (1, value), "{problem}");
    }
    let (_, got, _) = refused(Hosts::parse_topology_conf(
        "SwitchName=s0 LinkSpeed=fast Nodes=dev[0-1]\n",
    ));
    assert_eq!(got, "LinkSpeed=fast");
}

/// A switch (or block) that lists no node is taken, as Slurm's
/// topology/tree plugin takes it (an empty leaf switch), with a note
/// naming it; a topology in which no unit lists a node is refused.
#[test]
fn a_switch_without_nodes_is_noted_and_a_topology_without_any_refused() {
    let (line, _, problem) = refused(Hosts::parse_scontrol_topology("SwitchName=s0\n"));
    assert_eq!(line, 1);
    assert!(problem.contains("no switch lists a node"), "{problem}");
    refused(Hosts::parse_topology_conf("BlockName=b1\nBlockName=b2\n"));
    let text = "SwitchName=s0 Nodes=dev[0-3]\nSwitchName=s1\nSwitchName=s2 Switches=s[0-1]\n";
    let read = HostsReader::new(HostsFormat::TopologyConf)
        .read(text)
        .unwrap();
    assert_eq!(read.hosts.len(), 4);
    assert_eq!(
        read.notes,
        ["line 2: switch \"s1\" lists no node and no switch: it holds no host"]
    );
    let yaml = "- topology: t\n  tree:\n    switches:\n      - switch: s0\n        nodes: dev[0-1]\n      - switch: s1\n";
    let read = HostsReader::new(HostsFormat::TopologyYaml)
        .read(yaml)
        .unwrap();
    assert_eq!((read.hosts.len(), read.notes.len()), (2, 1));
}

/// A switch or block named `unknown` (the place Slurm's tools give nodes
/// they cannot place) is no NVLink domain: its hosts have an unknown
/// domain, and a group over two of them crosses.
#[test]
// `PlaceOptions` is built field by field, as a `#[non_exhaustive]` struct
// is outside its crate.
#[allow(clippy::field_reassign_with_default)]
fn a_placeholder_switch_is_no_domain() {
    let text = "SwitchName=s0 Level=0 LinkSpeed=1 Nodes=dev[0-3]\n\
                SwitchName=unknown Level=0 LinkSpeed=1 Nodes=dev[4-7]\n";
    let hosts = Hosts::parse_scontrol_topology(text).unwrap();
    assert_eq!(host(&hosts, "dev0").domain(), Some("s0"));
    assert_eq!(host(&hosts, "dev5").domain(), None);
    assert!(host(&hosts, "dev5").keys.is_empty());
    let conf =
        Hosts::parse_topology_conf("BlockName=b1 Nodes=gb[1-2]\nBlockName=Unknown Nodes=gb[3-4]\n")
            .unwrap();
    assert_eq!(by_domain(&conf).get(&None), Some(&2));
    let addr = Hosts::parse_slurm_topology_addr("SLURM_TOPOLOGY_ADDR=root.unknown.tux3\n").unwrap();
    assert_eq!(host(&addr, "tux3").domain(), None);
    // Placed: a tp group of 2 nodes fits in s0, and one on the
    // placeholder's hosts crosses (the hosts stand alone).
    let tp = KindGroups::of_layout(
        &rank_layout::Layout::new(&rank_layout::Config::new().tp(8).world_size(32)).unwrap(),
        rank_layout::Kind::TP,
    )
    .unwrap();
    let options = PlaceOptions::default().gpus_per_node(4);
    let plan = place(32, std::slice::from_ref(&tp), &[], &hosts, &options).unwrap();
    assert_eq!(plan.crossing(&hosts, &tp).domain_crossing(), 2);
}

/// NVIDIA topograph's pdsh output of `nvidia-smi -q | grep
/// "ClusterUUID\|CliqueId" | sort -u` (its test input,
/// `pkg/providers/infiniband/bm_test.go` before c91d58f, without the node
/// it drops as ambiguous) reads to topograph's expected domains; so does
/// pdsh over the full output, and one host's output named by its file.
#[test]
fn nvidia_smi_pdsh_lines_and_one_headerless_host() {
    let pdsh = "node-10:         CliqueId                          : 4000000004\n\
                node-10:         ClusterUUID                       : 50000000-0000-0000-0000-000000000005\n\
                node-07:         CliqueId                          : 4000000005\n\
                node-07:         ClusterUUID                       : 50000000-0000-0000-0000-000000000004\n\
                node-08:         CliqueId                          : 4000000005\n\
                node-08:         ClusterUUID                       : 50000000-0000-0000-0000-000000000004\n\
                node-09:         CliqueId                          : 4000000005\n\
                node-09:         ClusterUUID                       : 50000000-0000-0000-0000-000000000005\n";
    let hosts = Hosts::parse_nvidia_smi(pdsh).unwrap();
    let domains: Vec<(&str, Option<&str>)> = hosts
        .iter()
        .map(|h| (h.name.as_str(), h.domain()))
        .collect();
    assert_eq!(
        domains,
        [
            (
                "node-07",
                Some("50000000-0000-0000-0000-000000000004.4000000005")
            ),
            (
                "node-08",
                Some("50000000-0000-0000-0000-000000000004.4000000005")
            ),
            (
                "node-09",
                Some("50000000-0000-0000-0000-000000000005.4000000005")
            ),
            (
                "node-10",
                Some("50000000-0000-0000-0000-000000000005.4000000004")
            ),
        ]
    );
    // topograph's ambiguous node: two values of each (one N/A).
    let ambiguous = "node-11:         CliqueId                          : 4000000003\n\
                     node-11:         CliqueId                          : N/A\n";
    let (line, value, problem) = refused(Hosts::parse_nvidia_smi(ambiguous));
    assert_eq!((line, value.as_str()), (2, "N/A"), "{problem}");
    // pdsh over the whole output of the sectioned fixture, lines
    // interleaved host by host, reads as the sections do.
    let sections = fixture("nvidia_smi.txt");
    let mut per_host: Vec<(String, Vec<String>)> = Vec::new();
    for line in sections.lines() {
        if let Some(path) = line
            .strip_prefix("==> nvidia-smi/")
            .and_then(|l| l.strip_suffix(".txt <=="))
        {
            per_host.push((path.to_string(), Vec::new()));
        } else if let Some((_, lines)) = per_host.last_mut() {
            lines.push(line.to_string());
        }
    }
    let longest = per_host.iter().map(|(_, l)| l.len()).max().unwrap();
    let mut interleaved = String::new();
    for i in 0..longest {
        for (host, lines) in &per_host {
            if let Some(line) = lines.get(i) {
                interleaved.push_str(&format!("{host}: {line}\n"));
            }
        }
    }
    assert_eq!(
        Hosts::parse_nvidia_smi(&interleaved).unwrap(),
        Hosts::parse_nvidia_smi(&sections).unwrap()
    );
    // One host's output with no header: refused alone, read with its file.
    let (_, body) = sections
        .split_once("==> nvidia-smi/gb01.txt <==\n")
        .unwrap();
    let one = body.split("==> ").next().unwrap();
    let (_, _, problem) = refused(Hosts::parse_nvidia_smi(one));
    assert!(problem.contains("names no host"), "{problem}");
    let read = HostsReader::new(HostsFormat::NvidiaSmi)
        .file_name("smi/gb01.txt")
        .read(one)
        .unwrap();
    let sectioned = Hosts::parse_nvidia_smi(&sections).unwrap();
    assert_eq!(read.hosts.get(0), sectioned.get(0));
    // A pdsh text with a line of no host is refused with it.
    let (line, _, _) = refused(Hosts::parse_nvidia_smi(
        "gb01: GPU 00000008:01:00.0\nstray line\n",
    ));
    assert_eq!(line, 2);
}

/// The GPUs per node: given, else the one count of the healthy hosts
/// (an unhealthy host's count does not count), else an error saying what
/// to give.
#[test]
fn one_gpu_count_rule() {
    let hosts = Hosts::parse_plain("a r0 4\nb r0 4\nc r1 8 down\nd r1\n").unwrap();
    assert_eq!(hosts.gpus_per_node(None).unwrap(), 4);
    assert_eq!(hosts.gpus_per_node(Some(2)).unwrap(), 2);
    assert!(hosts.gpus_per_node(Some(0)).is_err());
    let mixed = Hosts::parse_plain("a r0 4\nb r0 8\n").unwrap();
    let err = mixed.gpus_per_node(None).unwrap_err().to_string();
    assert!(err.contains("4 on 1 host(s), 8 on 1 host(s)"), "{err}");
    let none = Hosts::parse_topology_conf("BlockName=b1 Nodes=gb[1-2]\n").unwrap();
    assert!(
        none.gpus_per_node(None)
            .unwrap_err()
            .to_string()
            .contains("give PlaceOptions::gpus_per_node")
    );
}

/// Every format by its name, the names round-trip, and a bad one names
/// them all.
#[test]
fn formats_by_name() {
    for format in HostsFormat::ALL {
        assert_eq!(format.name().parse::<HostsFormat>().unwrap(), format);
        assert_eq!(format.to_string(), format.name());
    }
    let err = "yaml".parse::<HostsFormat>().unwrap_err().to_string();
    assert!(
        err.contains("\"yaml\"") && err.contains("slurm-topology-addr"),
        "{err}"
    );
    let conf = fixture("topology_block.conf");
    assert_eq!(
        Hosts::parse(&conf, HostsFormat::TopologyConf).unwrap(),
        Hosts::parse_topology_conf(&conf).unwrap()
    );
    // An option for a format that does not take it is an error.
    let err = HostsReader::new(HostsFormat::Plain)
        .clique_label("x")
        .read("a r0 4\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("kubectl"), "{err}");
}

/// The readers' files import no circle: Slurm's block levels stand on
/// the unit (`read/unit.rs`), not on `read/slurm.rs`, which stands on them.
#[test]
fn block_levels_and_slurm_import_no_circle() {
    let read = |file: &str| {
        std::fs::read_to_string(format!(
            "{}/src/machine/read/{file}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    };
    assert!(read("slurm.rs").contains("read::block_levels"));
    assert!(!read("block_levels.rs").contains("read::slurm"));
    assert!(read("block_levels.rs").contains("read::unit::Unit"));
}

/// A bad JSON table names the key and the value (it said only "data did
/// not match any variant of untagged enum Table").
#[cfg(feature = "serde")]
#[test]
fn json_table_errors_name_the_key_and_the_value() {
    for (text, line, value, problem) in [
        (
            r#"[{"host": "a", "rack": 1}]"#,
            0,
            "rack = 1",
            "unknown key \"rack\"",
        ),
        (
            r#"[{"host": "a", "gpus": "4"}]"#,
            0,
            "gpus = \"4\"",
            "host \"a\": gpus is a whole number",
        ),
        (
            r#"[{"host": "a", "gpus": 4.5}]"#,
            0,
            "gpus = 4.5",
            "gpus is a whole number",
        ),
        (
            r#"[{"host": "a", "gpus": 0}]"#,
            0,
            "gpus = 0",
            "gpus is a whole number",
        ),
        (
            r#"[{"host": "a", "healthy": "yes"}]"#,
            0,
            "healthy = \"yes\"",
            "true or false",
        ),
        (
            r#"[{"host": "a", "keys": "r1"}]"#,
            0,
            "keys = \"r1\"",
            "a list of strings",
        ),
        (r#"[{"host": 7}]"#, 0, "host = 7", "its name is a string"),
        (r#"{"hosts": [], "extra": 1}"#, 0, "extra", "unknown key"),
        (
            "[{\"host\": \"a\",\n \"gpus\": 4, \"gpus\": 8}]",
            2,
            "",
            "key \"gpus\" is given twice",
        ),
    ] {
        let (got_line, got, got_problem) = refused(Hosts::parse_json(text));
        assert_eq!(got_line, line, "{text}");
        assert!(got.contains(value), "{text}: {got:?}");
        assert!(
            got.contains(problem) || got_problem.contains(problem),
            "{text}: {got:?} {got_problem:?}"
        );
    }
    let hosts = Hosts::parse_json(
        r#"{"hosts": [{"name": "b", "domain": "c/r1", "gpus": 4}, {"host": "a", "domain": null}]}"#,
    )
    .unwrap();
    assert_eq!(hosts.get(1).unwrap().keys, ["c", "r1"]);
    assert_eq!(hosts.get(0).unwrap().domain(), None);
}
