//! The planner: `check` (its JSON, its warnings, `--strict`), checked by
//! hand and against a brute-force count over the listed groups, and
//! `suggest`'s ranking.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use serde_json::{Value, json as j};

use common::{fails_with, json, run, stdout};

#[test]
fn check_json_shape_for_tp_16_on_8_gpu_nodes() {
    // tp=16 on 64 ranks, 8 GPUs per node: 4 tp groups of 16, each two whole
    // nodes.
    let v = json("check --world-size 64 --tp 16 --format json --expert-layout nested");
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["kinds", "warnings"]);
    assert_eq!(
        v["kinds"]["tp"],
        j!({"groups": 4, "size": 16, "cross_node_groups": 4, "max_nodes_per_group": 2,
            "cross_domain_groups": null, "max_domains_per_group": null})
    );
    // dp = 4, dp groups {r, r+16, r+32, r+48}: 16 groups over 4 nodes each.
    assert_eq!(v["kinds"]["dp"]["groups"], 16);
    assert_eq!(v["kinds"]["dp"]["cross_node_groups"], 16);
    assert_eq!(v["kinds"]["dp"]["max_nodes_per_group"], 4);
    // Every kind of the layout, in listing order (tp, pp, dp, cp, ...).
    assert_eq!(v["kinds"].as_object().unwrap().len(), 16);
    let text = stdout("check --world-size 64 --tp 16 --format json --expert-layout nested");
    let at = |k: &str| text.find(&format!("\"{k}\":{{")).unwrap();
    assert!(at("tp") < at("pp") && at("pp") < at("dp") && at("dp") < at("cp"));
    let warnings = v["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let w = warnings[0].as_str().unwrap();
    assert!(
        w.starts_with("tp groups span 2 nodes: tensor-parallel traffic leaves NVLink"),
        "{w}"
    );
    assert!(w.contains("use tp <= 8"), "{w}");
}

#[test]
fn dp_first_order_makes_tp_cross_nodes() {
    // 32 ranks, tp=4, order dp-tp: dp = 8 is fastest, so tp group g is
    // {g, g+8, g+16, g+24}: each of the 8 groups on 4 nodes.
    let v = json(
        "check --world-size 32 --tp 4 --order dp-tp --kind tp --format json --expert-layout nested",
    );
    assert_eq!(v["kinds"]["tp"]["cross_node_groups"], 8);
    assert_eq!(v["kinds"]["tp"]["max_nodes_per_group"], 4);
    let w = v["warnings"][0].as_str().unwrap();
    assert!(
        w.contains("put tp first in the order (--order tp-dp)"),
        "{w}"
    );
    // Domains of 2 nodes (16 GPUs): {g, g+8} and {g+16, g+24}, 2 domains.
    let v = json(
        "check --world-size 32 --tp 4 --order dp-tp --kind tp --nodes-per-domain 2 --format json --expert-layout nested",
    );
    assert_eq!(v["kinds"]["tp"]["cross_domain_groups"], 8);
    assert_eq!(v["kinds"]["tp"]["max_domains_per_group"], 2);
    assert_eq!(v["warnings"].as_array().unwrap().len(), 2);
    // The default order keeps tp inside a node: no warning.
    let v = json("check --world-size 32 --tp 4 --format json --expert-layout nested");
    assert_eq!(v["kinds"]["tp"]["cross_node_groups"], 0);
    assert_eq!(v["kinds"]["tp"]["max_nodes_per_group"], 1);
    assert_eq!(v["warnings"], j!([]));
}

#[test]
fn groups_that_straddle_nodes() {
    // tp=3 on 48 ranks: group k is 3k..3k+2 and crosses a node boundary
    // when 3k mod 8 is 6 or 7: k = 2, 5, 10, 13.
    let v = json("check --world-size 48 --tp 3 --kind tp --format json");
    assert_eq!(v["kinds"]["tp"]["cross_node_groups"], 4);
    assert_eq!(v["kinds"]["tp"]["max_nodes_per_group"], 2);
    let w = v["warnings"][0].as_str().unwrap();
    assert!(w.starts_with("4 of 16 tp groups span 2 nodes"), "{w}");
    assert!(w.contains("make tp a divisor of 8"), "{w}");
    // A rank offset of 4 shifts every tp=8 group over two nodes.
    let v = json("check --world-size 64 --tp 8 --rank-offset 4 --kind tp --format json");
    assert_eq!(v["kinds"]["tp"]["cross_node_groups"], 8);
    let w = v["warnings"][0].as_str().unwrap();
    assert!(w.contains("--rank-offset that is a multiple of 8"), "{w}");
    // --gpus-per-node 4: tp=8 groups are two nodes of 4.
    let v = json("check --world-size 64 --tp 8 --gpus-per-node 4 --kind tp --format json");
    assert_eq!(v["kinds"]["tp"]["max_nodes_per_group"], 2);
    assert_eq!(v["kinds"]["tp"]["cross_node_groups"], 8);
}

#[test]
fn strict_exit_codes() {
    // tp=8 inside 8-GPU nodes: passes.
    let out = run("check --world-size 64 --tp 8 --pp 2 --strict");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // tp=16 leaves the node: exit 1, the report still on stdout.
    let out = run("check --world-size 64 --tp 16 --strict --format json");
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kinds"]["tp"]["cross_node_groups"], 4);
    assert!(String::from_utf8_lossy(&out.stderr).contains("tp"));
    // Without --strict the same layout exits 0.
    assert_eq!(run("check --world-size 64 --tp 16").status.code(), Some(0));
    // pp crosses nodes, but is not required to stay inside one by default...
    assert_eq!(
        run("check --world-size 16 --tp 8 --pp 2 --strict")
            .status
            .code(),
        Some(0)
    );
    // ...unless asked.
    assert_eq!(
        run("check --world-size 16 --tp 8 --pp 2 --strict --require-intra-node pp")
            .status
            .code(),
        Some(1)
    );
    assert_eq!(
        run("check --world-size 16 --tp 8 --pp 2 --strict --require-intra-node tp")
            .status
            .code(),
        Some(0)
    );
    // ep crossing nodes fails too: tp=4, ep=4 nested, ep stride 4 spans 16
    // ranks.
    assert_eq!(
        run("check --world-size 64 --tp 4 --ep 4 --strict")
            .status
            .code(),
        Some(1)
    );
    // Bad input is still 2.
    fails_with("check --world-size 10 --tp 4 --strict", "not divisible");
    fails_with("check --tp 2 --require-intra-node xp --strict", "xp");
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        items[(self.0 % items.len() as u64) as usize]
    }
}

#[test]
fn check_agrees_with_a_brute_force_count_over_the_listed_groups() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let orders = [
        "tp-cp-dp-pp",
        "dp-tp-cp-pp",
        "pp-dp-cp-tp",
        "cp-pp-tp-dp",
        "tp-pp-dp-cp",
    ];
    for _ in 0..24 {
        let (tp, cp, pp, dp) = (
            rng.pick(&[1, 2, 3, 4]),
            rng.pick(&[1, 2, 3]),
            rng.pick(&[1, 2, 4]),
            rng.pick(&[1, 2, 3]),
        );
        let order = rng.pick(&orders);
        let g = rng.pick(&[2u64, 3, 4, 8]);
        let offset = rng.pick(&[0u64, 3, 5]);
        let domain = rng.pick(&[None, Some(2u64), Some(3)]);
        let mut args = format!(
            "--tp {tp} --cp {cp} --pp {pp} --dp {dp} --order {order} --rank-offset {offset} --gpus-per-node {g}"
        );
        if let Some(m) = domain {
            args.push_str(&format!(" --nodes-per-domain {m}"));
        }
        let groups = json(&format!(
            "groups {args} --format json --expert-layout nested"
        ));
        let check = json(&format!(
            "check {args} --format json --expert-layout nested"
        ));
        for (kind, listed) in groups["groups"].as_object().unwrap() {
            let listed = listed.as_array().unwrap();
            let spans = |unit: u64| {
                let mut crossing = 0u64;
                let mut most = 0u64;
                for group in listed {
                    let mut units: Vec<u64> = group
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|r| r.as_u64().unwrap() / unit)
                        .collect();
                    units.sort_unstable();
                    units.dedup();
                    crossing += u64::from(units.len() > 1);
                    most = most.max(units.len() as u64);
                }
                (crossing, most)
            };
            let got = &check["kinds"][kind];
            let (crossing, most) = spans(g);
            let context = format!("{args} kind {kind}: {got}");
            assert_eq!(got["groups"], listed.len(), "{context}");
            assert_eq!(got["cross_node_groups"], crossing, "{context}");
            assert_eq!(got["max_nodes_per_group"], most, "{context}");
            match domain {
                Some(m) => {
                    let (crossing, most) = spans(g * m);
                    assert_eq!(got["cross_domain_groups"], crossing, "{context}");
                    assert_eq!(got["max_domains_per_group"], most, "{context}");
                }
                None => assert!(got["cross_domain_groups"].is_null(), "{context}"),
            }
        }
    }
}

/// The order strings of `suggest`, best first (after the header line and
/// a blank line).
fn ranked(args: &str) -> Vec<String> {
    stdout(&format!("suggest {args} --expert-layout nested"))
        .lines()
        .skip(2)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().next().unwrap().to_owned())
        .collect()
}

#[test]
fn suggest_ranks_tp_cp_pp_dp_above_dp_first_orders() {
    // tp=8, cp=2, pp=16 on 8-GPU nodes (4096 ranks, dp = 16): every order
    // of the four axes is valid.
    let orders = ranked("--world-size 4096 --tp 8 --cp 2 --pp 16");
    assert_eq!(orders.len(), 24, "{orders:?}");
    let position = |o: &str| orders.iter().position(|x| x == o).unwrap();
    let good = position("tp-cp-pp-dp");
    for (i, order) in orders.iter().enumerate() {
        if order.starts_with("dp-") {
            assert!(
                good < i,
                "tp-cp-pp-dp ({good}) below {order} ({i}): {orders:?}"
            );
        }
    }
    // tp fills a node: the orders that keep it there come first.
    assert!(
        orders[..6].iter().all(|o| o.starts_with("tp-")),
        "{orders:?}"
    );
    // The report ends with the check table of the best order.
    let text = stdout("suggest --world-size 4096 --tp 8 --cp 2 --pp 16 --expert-layout nested");
    assert!(
        text.contains(&format!("best: --order {}", orders[0])),
        "{text}"
    );
    assert!(text.contains("cross-node  max nodes"), "{text}");
    // --top keeps the best ones, the same.
    assert_eq!(
        ranked("--world-size 4096 --tp 8 --cp 2 --pp 16 --top 3"),
        orders[..3].to_vec()
    );
}

#[test]
fn suggest_respects_layout_rules_and_priorities() {
    // Nested experts: ep must be next to dp, so of the 24 orders of tp, ep,
    // dp, pp only the 12 with ep and dp adjacent are valid.
    let v =
        json("suggest --world-size 64 --tp 2 --ep 4 --pp 2 --format json --expert-layout nested");
    assert_eq!(v["invalid"], 12);
    let orders = v["orders"].as_array().unwrap();
    assert_eq!(orders.len(), 12);
    for o in orders {
        let order = o["order"].as_str().unwrap();
        assert!(
            order.contains("ep-dp") || order.contains("dp-ep"),
            "{order}"
        );
    }
    // The given order is marked.
    assert_eq!(orders.iter().filter(|o| o["given"] == true).count(), 1);
    // tp=8, pp=4: only one of them fits an 8-GPU node. By default tp wins;
    // with pp first in priority the best order is pp first, pp groups of 4
    // consecutive ranks, and tp then crosses nodes (stride 4: 4 nodes).
    let v = json("suggest --world-size 64 --tp 8 --pp 4 --format json");
    let best = &v["orders"][0];
    assert!(best["order"].as_str().unwrap().starts_with("tp-"), "{best}");
    assert_eq!(best["kinds"]["tp"]["cross_node_groups"], 0, "{best}");
    let v = json("suggest --world-size 64 --tp 8 --pp 4 --priority pp,tp,dp --format json");
    let best = &v["orders"][0];
    assert!(
        best["order"].as_str().unwrap().starts_with("pp-tp"),
        "{best}"
    );
    assert_eq!(best["kinds"]["pp"]["cross_node_groups"], 0, "{best}");
    assert_eq!(best["kinds"]["tp"]["max_nodes_per_group"], 4, "{best}");
    fails_with("suggest --tp 2 --priority tp,zz", "zz");
}

#[test]
fn check_shows_encoder_and_decoder_group_sizes() {
    // Encoder tp 2 + decoder tp 4, cp 2 on 12 ranks: tp groups of 2 in the
    // encoder (ranks 0..3), of 4 in the decoder (4..11); tp-cp groups of 4
    // and 8; pp groups are joined pipelines of 2 either way.
    let args = "--tp 4 --cp 2 --encoder-tp 2 --world-size 12";
    let text = stdout(&format!("check {args}"));
    let size = |kind: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(kind))
            .unwrap_or_else(|| panic!("no {kind} row in {text}"))
            .split_whitespace()
            .nth(2)
            .unwrap()
            .to_owned()
    };
    assert_eq!(size("tp"), "2/4", "{text}");
    assert_eq!(size("tp-cp"), "4/8", "{text}");
    assert_eq!(size("pp"), "2", "{text}");
    let v = json(&format!("check {args} --format json"));
    assert_eq!(v["kinds"]["tp"]["encoder_size"], 2);
    assert_eq!(v["kinds"]["tp"]["decoder_size"], 4);
    assert_eq!(v["kinds"]["tp"]["size"], 4);
    // Without an encoder, no encoder or decoder sizes.
    let v = json("check --world-size 16 --tp 4 --format json");
    assert!(v["kinds"]["tp"].get("encoder_size").is_none());
}

#[test]
fn check_warns_about_a_partly_filled_last_node_or_domain() {
    // 12 ranks on 8-GPU nodes: node 1 holds ranks 8..11, 4 of its 8 GPUs.
    let v = json("check --world-size 12 --tp 4 --format json");
    let warnings: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(
        warnings,
        [
            "the last node, node 1, is partly used: the layout's ranks fill 4 of its 8 GPUs (world_size 12 is not a multiple of 8 GPUs per node)"
        ]
    );
    let text = stdout("check --world-size 12 --tp 4");
    assert!(text.contains("warnings (the machine):"), "{text}");
    // The rank offset counts: 60 ranks from rank 4 end at rank 63, the last
    // GPU of node 7, so the last node is full...
    let v = json("check --world-size 60 --tp 4 --rank-offset 4 --format json");
    assert_eq!(v["warnings"], j!([]));
    // ...but on NVL72 racks (18 nodes of 4 GPUs, 72 GPUs) the last domain,
    // domain 0, holds ranks 4..63 on nodes 1..15: 15 of its 18 nodes.
    let v = json(
        "check --world-size 60 --tp 4 --rank-offset 4 --gpus-per-node 4 --nodes-per-domain 18 --format json",
    );
    let warnings = v["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let w = warnings[0].as_str().unwrap();
    assert!(
        w.starts_with("the last domain, domain 0, is partly used: the layout's ranks fill 15 of its 18 nodes (60 of its 72 GPUs; rank_offset + world_size = 4 + 60 = 64"),
        "{w}"
    );
    // A multiple of the node and the domain: nothing.
    let v =
        json("check --world-size 144 --tp 4 --gpus-per-node 4 --nodes-per-domain 18 --format json");
    assert_eq!(v["warnings"], j!([]));
}

/// Runs `args`, killing it after `seconds`; its stdout, or a failure
/// naming the time.
fn within(seconds: u64, args: &str) -> String {
    use std::io::Read;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let mut child = Command::new(env!("CARGO_BIN_EXE_rank-layout"))
        .args(args.split_whitespace())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        out.read_to_string(&mut text).unwrap();
        text
    });
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{args}");
            return reader.join().unwrap();
        }
        if start.elapsed() > Duration::from_secs(seconds) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{args}: still running after {seconds} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn suggest_and_check_answer_at_two_to_the_31_ranks() {
    // Every order's spread at 2^31 ranks comes from strides: this took
    // 17 s (debug build) when the residues of each digit were walked step
    // by step, and `check --order dp-tp` listed a dp group of 2^30 ranks
    // (8 GB). Now each takes milliseconds; 10 s leaves room for a slow
    // machine and a debug build.
    let text = within(
        10,
        "suggest --world-size 2147483648 --tp 8 --pp 16 --cp 2 --ep 8 --expert-layout nested",
    );
    assert!(text.contains("48 orders, best first"), "{text}");
    assert!(text.contains("best: --order tp-cp-ep-dp-pp"), "{text}");
    within(
        10,
        "suggest --world-size 2147483648 --tp 8 --pp 16 --cp 2 --ep 8 --gpus-per-node 4 --nodes-per-domain 18 --expert-layout nested",
    );
    within(
        10,
        "suggest --world-size 2147483648 --tp 8 --pp 8 --cp 4 --ep 4 --expert-layout folded --etp 2",
    );
    // dp first: the dp groups are runs of 2^30 consecutive ranks, each on
    // 2^27 nodes.
    let text = within(
        10,
        "check --world-size 2147483648 --tp 2 --order dp-tp --kind dp --format json",
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["kinds"]["dp"]["max_nodes_per_group"], 1u64 << 27);
    assert_eq!(v["kinds"]["dp"]["cross_node_groups"], 2);
}

/// Asserts that `big`'s kinds (a `check` or `suggest` JSON object of
/// kinds) are `small`'s with `k` times the data-parallel replicas: a kind
/// with `k` times the groups has `k` times the crossing ones, of the same
/// size and spread; a kind whose groups hold the dp axis has as many groups,
/// all crossing in both.
fn scaled(small: &Value, big: &Value, k: u64, context: &str) {
    let (small, big) = (small.as_object().unwrap(), big.as_object().unwrap());
    assert_eq!(
        small.keys().collect::<Vec<_>>(),
        big.keys().collect::<Vec<_>>(),
        "{context}"
    );
    let n = |v: &Value, key: &str| v[key].as_u64().unwrap();
    for (kind, s) in small {
        let b = &big[kind];
        let context = format!("{context} {kind}: {s} -> {b}");
        if n(b, "groups") == n(s, "groups") * k {
            assert_eq!(
                n(b, "cross_node_groups"),
                n(s, "cross_node_groups") * k,
                "{context}"
            );
            assert_eq!(b["size"], s["size"], "{context}");
            assert_eq!(
                b["max_nodes_per_group"], s["max_nodes_per_group"],
                "{context}"
            );
        } else {
            assert_eq!(b["groups"], s["groups"], "{context}");
            assert_eq!(b["cross_node_groups"], s["groups"], "{context}");
            assert_eq!(s["cross_node_groups"], s["groups"], "{context}");
        }
    }
}

#[test]
fn check_and_suggest_an_encoder_decoder_layout_of_2147483520_ranks() {
    // Encoder tp 2 pp 1 + decoder tp 4 pp 2, cp 2: world = (2*1 + 4*2) * 2
    // * dp, so dp = 107,374,176 at 2,147,483,520 ranks. The joined kinds
    // (pp, embd, pos-embd, tp-pp) are counted from the strides and the
    // join, not listed (that took minutes at this size). Against the same
    // layout with dp = 32: both dp sizes are multiples of 8 and so is the
    // encoder's size (4 * dp), so every node-boundary pattern repeats whole
    // and the counts scale by k = 107,374,176 / 32.
    let layout = "--tp 4 --cp 2 --encoder-tp 2 --encoder-pp 1 --pp 2";
    let (dp, k) = (107_374_176u64, 3_355_443u64);
    let big = json(&format!(
        "check {layout} --world-size 2147483520 --format json"
    ));
    let small = json(&format!("check {layout} --world-size 640 --format json"));
    scaled(&small["kinds"], &big["kinds"], k, "check");
    assert_eq!(big["kinds"].as_object().unwrap().len(), 16);
    assert_eq!(big["warnings"], j!([]));
    // By hand: a joined pipeline is an encoder rank e + 2c + 4d (encoder
    // ranks 0..4dp) then decoder ranks 4dp + t + 4c + 8d and 8dp more, so
    // it spans 3 nodes; there are 8 per (c, d) (tp 4, two pp stages).
    let kind = |name: &str| {
        let v = &big["kinds"][name];
        ["groups", "size", "cross_node_groups", "max_nodes_per_group"]
            .map(|key| v[key].as_u64().unwrap())
    };
    assert_eq!(kind("pp"), [8 * dp, 3, 8 * dp, 3]);
    assert_eq!(kind("embd"), [8 * dp, 2, 8 * dp, 2]);
    assert_eq!(kind("pos-embd"), [4 * dp, 1, 0, 1]);
    // tp-pp: the encoder's 2 ranks of (c, d) and the decoder's 8, on 3 nodes.
    assert_eq!(kind("tp-pp"), [2 * dp, 10, 2 * dp, 3]);

    // suggest: the same orders in the same ranking, each with its kinds
    // scaled, and the check of the best one.
    let big = json(&format!(
        "suggest {layout} --world-size 2147483520 --format json"
    ));
    let small = json(&format!("suggest {layout} --world-size 640 --format json"));
    assert_eq!(big["invalid"], small["invalid"]);
    let orders = |v: &Value| -> Vec<(String, bool)> {
        v["orders"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (o["order"].as_str().unwrap().to_owned(), o["given"] == true))
            .collect()
    };
    assert_eq!(orders(&big), orders(&small));
    assert_eq!(orders(&big).len(), 6);
    for (b, s) in big["orders"]
        .as_array()
        .unwrap()
        .iter()
        .zip(small["orders"].as_array().unwrap())
    {
        scaled(&s["kinds"], &b["kinds"], k, b["order"].as_str().unwrap());
    }
    let text = stdout(&format!("suggest {layout} --world-size 2147483520"));
    assert!(text.contains("best: --order tp-cp-dp-pp"), "{text}");
    let row = |kind: &str| {
        text.lines()
            .rev()
            .find(|l| l.split_whitespace().next() == Some(kind))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
    };
    assert_eq!(
        row("pp"),
        Some(vec!["pp", "858,993,408", "3", "858,993,408", "3"]),
        "{text}"
    );
}
