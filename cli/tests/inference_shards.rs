//! `--inference-shards SPEC` (Megatron-Core 0.19's inference shards) on
//! the command line: the JSON of `groups` (the shape the checks of the
//! issue read, the 15 kinds), each shard equal to the layout of its sizes
//! moved to its rank offset, the refusals (exit 2 naming the shard), the
//! same shards from `--megatron-args` and from `--config`, and every
//! command taking them. `python/tests/test_cli_inference_shards_megatron_core.py`
//! compares the groups with megatron-core 0.19.2's own.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use std::path::PathBuf;

use common::{fails_with_args, run_args, stdout_args, temp_dir};
use serde_json::Value;

/// The kinds of a shard, in the order of the interface (the fields of
/// Megatron-Core's `ProcessGroupCollection`, section 3.6).
const KINDS: [&str; 15] = [
    "tp",
    "cp",
    "pp",
    "dp",
    "tp-pp",
    "tp-cp",
    "dp-cp",
    "tp-dp-cp",
    "ep",
    "etp",
    "edp",
    "etp-ep",
    "etp-ep-pp",
    "embd",
    "pos-embd",
];

/// The worked example of docs/semantics.md section 3.6.
const WORKED: &str = "tp=2,pp=2,role=prefill + dp=2,ep=2,expt_tp=1,role=decode";

/// The JSON printed by `args`, which must succeed.
fn json_args(args: &[&str]) -> Value {
    serde_json::from_str(&stdout_args(args)).expect("one JSON value")
}

/// `groups --inference-shards SPEC --format json` with `more` flags.
fn shards_json(spec: &str, more: &[&str]) -> Value {
    let mut args = vec!["groups", "--inference-shards", spec, "--format", "json"];
    args.extend_from_slice(more);
    json_args(&args)
}

/// The groups of kind `kind` of shard `shard`.
fn groups_of(v: &Value, shard: usize, kind: &str) -> Vec<Vec<u64>> {
    serde_json::from_value(v["shards"][shard]["groups"][kind].clone()).unwrap()
}

/// Writes `text` to `name` in a directory of the test `test`.
fn file(test: &str, name: &str, text: &str) -> PathBuf {
    let path = temp_dir(test).join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn groups_json_has_the_shape_and_the_kinds_of_the_interface() {
    let v = shards_json(WORKED, &["--world-size", "6"]);
    let shards = v["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 2);
    assert_eq!(v["world_size"], 6);
    assert_eq!(v["mapping"], "tp-cp-ep-dp-pp");
    for (shard, (role, offset, world)) in shards.iter().zip([("prefill", 0, 4), ("decode", 4, 2)]) {
        assert_eq!(shard["role"], role);
        assert_eq!(shard["rank_offset"], offset);
        assert_eq!(shard["world_size"], world);
        let kinds: Vec<&str> = shard["groups"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(kinds, KINDS, "exactly the 15 kinds, in order");
    }
    // The documented example's groups (docs/semantics.md section 3.6).
    assert_eq!(groups_of(&v, 0, "tp"), [[0, 1], [2, 3]]);
    assert_eq!(groups_of(&v, 0, "pp"), [[0, 2], [1, 3]]);
    assert_eq!(groups_of(&v, 0, "embd"), [[0, 2], [1, 3]]);
    assert_eq!(groups_of(&v, 1, "dp"), [[4, 5]]);
    assert_eq!(groups_of(&v, 1, "ep"), [[4, 5]]);
    assert_eq!(groups_of(&v, 1, "edp"), [[4], [5]]);
    // A shard without a role is null.
    let v = shards_json("tp=2;dp=2", &[]);
    assert_eq!(v["shards"][0]["role"], Value::Null);
    assert_eq!(v["has_roles"], false);
}

#[test]
fn every_partitioning_kind_partitions_its_shard() {
    let spec = "tp=2,pp=2,dp=2,ep=2,expt_tp=1 + tp=1,pp=3,dp=2,role=decode + tp=4,ep=4,expt_tp=1";
    for mapping in [&[][..], &["--use-tp-pp-dp-mapping"][..]] {
        let v = shards_json(spec, mapping);
        for (i, shard) in v["shards"].as_array().unwrap().iter().enumerate() {
            let first = shard["rank_offset"].as_u64().unwrap();
            let n = shard["world_size"].as_u64().unwrap();
            // embd and pos-embd hold only the pipelines' ends.
            for kind in &KINDS[..13] {
                let mut ranks: Vec<u64> = groups_of(&v, i, kind).concat();
                ranks.sort_unstable();
                let want: Vec<u64> = (first..first + n).collect();
                assert_eq!(ranks, want, "shard {i} {kind} {mapping:?}");
            }
        }
    }
}

/// The `groups` JSON of the layout of `flags` (one layout, offset 0).
fn layout_groups(flags: &[&str]) -> Value {
    let mut args = vec!["groups", "--format", "json"];
    args.extend_from_slice(flags);
    json_args(&args)["groups"].clone()
}

#[test]
fn a_shard_is_the_layout_of_its_sizes_at_its_rank_offset() {
    // Each shard against the folded layout of its sizes at offset 0 (the
    // one-layout path of the command), its ranks moved by the offset.
    let spec = "tp=2,pp=2,role=prefill + tp=1,dp=4,ep=2,expt_tp=1,role=decode + tp=2,pp=3,dp=2,ep=2,expt_tp=1";
    let sizes: [[&str; 5]; 3] = [
        ["2", "2", "1", "1", "2"],
        ["1", "1", "4", "2", "1"],
        ["2", "3", "2", "2", "1"],
    ];
    let mappings = [
        (None, "tp-cp-ep-dp-pp"),
        (Some("--use-tp-pp-dp-mapping"), "tp-cp-ep-pp-dp"),
    ];
    for (flag, order) in mappings {
        let more: Vec<&str> = flag.into_iter().collect();
        let v = shards_json(spec, &more);
        assert_eq!(v["mapping"], order);
        for (i, [tp, pp, dp, ep, etp]) in sizes.iter().enumerate() {
            let offset = v["shards"][i]["rank_offset"].as_u64().unwrap();
            let layout = layout_groups(&[
                "--tp", tp, "--pp", pp, "--dp", dp, "--ep", ep, "--etp", etp, "--order", order,
            ]);
            for kind in KINDS {
                let want: Vec<Vec<u64>> =
                    serde_json::from_value::<Vec<Vec<u64>>>(layout[kind].clone())
                        .unwrap()
                        .into_iter()
                        .map(|g| g.into_iter().map(|r| r + offset).collect())
                        .collect();
                assert_eq!(groups_of(&v, i, kind), want, "shard {i} {kind} {order}");
            }
        }
    }
}

#[test]
fn refusals_exit_2_naming_the_shard_and_the_reason() {
    for (spec, needle) in [
        ("tp=2;tp=1,cp=2", "inference shard 1: cp = 2"),
        ("tp=2,pp=2 + tp=2,ep=3", "inference shard 1"),
        (
            "tp=2,role=verifier",
            "inference shard 0: unknown role \"verifier\"",
        ),
        ("tp=2,foo=1", "inference shard 0"),
        ("tp", "inference shard 0"),
        ("tp=0", "inference shard 0"),
        (" ; + ", "no"),
    ] {
        let stderr = fails_with_args(&["groups", "--inference-shards", spec], needle);
        assert!(stderr.contains("--inference-shards"), "{stderr}");
    }
    // With the tp-pp-dp mapping, the two grids' pipelines must agree.
    fails_with_args(
        &[
            "groups",
            "--inference-shards",
            "tp=2,pp=2,ep=1,expt_tp=1,dp=2",
            "--use-tp-pp-dp-mapping",
        ],
        "inference shard 0",
    );
    // The shards must hold the world exactly.
    fails_with_args(
        &["groups", "--inference-shards", WORKED, "--world-size", "8"],
        "4 + 2 = 6 ranks",
    );
    // The same refusals from a pasted command line name it.
    fails_with_args(
        &[
            "groups",
            "--megatron-args",
            "--inference-shards 'tp=2;cp=2'",
        ],
        "--megatron-args: inference shard 1: cp = 2",
    );
}

#[test]
fn layout_keys_beside_the_shards_are_refused_naming_both() {
    for (flag, value) in [
        ("--tp", "2"),
        ("--dp", "2"),
        ("--order", "tp-cp-ep-pp-dp"),
        ("--rank-offset", "4"),
        ("--mesh", "tp=2,dp=3"),
        ("--etp", "1"),
    ] {
        let stderr = fails_with_args(
            &["groups", "--inference-shards", WORKED, flag, value],
            "cannot be given together",
        );
        assert!(stderr.contains(&format!("{flag} {value}")), "{stderr}");
        assert!(
            stderr.contains(&format!("--inference-shards {WORKED}")),
            "{stderr}"
        );
    }
    let dir = temp_dir("shards-modules");
    let modules = dir.join("m.toml");
    std::fs::write(&modules, "[[modules]]\nname = \"a\"\nmesh = \"tp=2\"\n").unwrap();
    fails_with_args(
        &[
            "groups",
            "--modules",
            modules.to_str().unwrap(),
            "--inference-shards",
            "tp=2",
        ],
        "--modules and --inference-shards cannot be given together",
    );
}

#[test]
fn megatron_args_give_the_same_shards_as_the_flags() {
    let pasted = format!(
        "torchrun --nproc-per-node 3 --nnodes 2 serve.py --tensor-model-parallel-size 4 --inference-shards '{WORKED}' --use-tp-pp-dp-mapping"
    );
    let out = run_args(&["groups", "--megatron-args", &pasted, "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let from_args: Value = serde_json::from_slice(&out.stdout).unwrap();
    let from_flags = shards_json(WORKED, &["--use-tp-pp-dp-mapping", "--world-size", "6"]);
    assert_eq!(from_args, from_flags);
    assert_eq!(from_args["mapping"], "tp-cp-ep-pp-dp");
    // The training size is the training layout's: ignored, and said so.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ignored the training layout's --tensor-model-parallel-size 4"),
        "{stderr}"
    );
    // torchrun's world must be the shards'.
    let pasted = format!("torchrun --nproc-per-node 8 serve.py --inference-shards '{WORKED}'");
    fails_with_args(
        &["groups", "--megatron-args", &pasted],
        "but the world has 8",
    );
    // Megatron-LM's mapping flag given as a flag of ours is the same.
    let flagged = json_args(&[
        "groups",
        "--megatron-args",
        &format!("--inference-shards '{WORKED}'"),
        "--use-tp-pp-dp-mapping",
        "--format",
        "json",
    ]);
    assert_eq!(flagged, from_flags);
    // Our flag overrides the pasted spec.
    let over = json_args(&[
        "groups",
        "--megatron-args",
        "--inference-shards 'tp=8'",
        "--inference-shards",
        WORKED,
        "--format",
        "json",
    ]);
    assert_eq!(over, shards_json(WORKED, &[]));
}

#[test]
fn config_file_keys_give_the_same_shards_as_the_flags() {
    let toml = file(
        "shards-config",
        "serve.toml",
        &format!(
            "inference_shards = \"{WORKED}\"\nuse_tp_pp_dp_mapping = true\nworld_size = 6\ngpus_per_node = 4\n"
        ),
    );
    let json = file(
        "shards-config",
        "serve.json",
        &format!("{{\"inference_shards\": \"{WORKED}\", \"use_tp_pp_dp_mapping\": true}}"),
    );
    let want = shards_json(WORKED, &["--use-tp-pp-dp-mapping"]);
    for path in [&toml, &json] {
        let got = json_args(&[
            "groups",
            "--config",
            path.to_str().unwrap(),
            "--format",
            "json",
        ]);
        assert_eq!(got, want, "{}", path.display());
    }
    // The flag over the file's key.
    let over = json_args(&[
        "groups",
        "--config",
        json.to_str().unwrap(),
        "--inference-shards",
        "tp=2,dp=2",
        "--format",
        "json",
    ]);
    assert_eq!(over, shards_json("tp=2,dp=2", &["--use-tp-pp-dp-mapping"]));
    // A layout key of the file beside the shards names both.
    let both = file(
        "shards-config",
        "both.toml",
        &format!("inference_shards = \"{WORKED}\"\ntp = 2\n"),
    );
    let stderr = fails_with_args(
        &["groups", "--config", both.to_str().unwrap()],
        "cannot be given together",
    );
    assert!(
        stderr.contains("tp = 2 (in ") && stderr.contains("inference_shards = "),
        "{stderr}"
    );
    let bad = file("shards-config", "bad.toml", "inference_shards = 3\n");
    fails_with_args(
        &["groups", "--config", bad.to_str().unwrap()],
        "inference_shards = 3 is not a string",
    );
}

#[test]
fn rank_names_its_shard_and_its_colors_in_the_world() {
    let spec = "tp=2,pp=2,role=prefill + tp=1,dp=2,ep=2,expt_tp=1,role=decode";
    let all = shards_json(spec, &[]);
    for rank in 0..6u64 {
        let card = json_args(&[
            "rank",
            &rank.to_string(),
            "--inference-shards",
            spec,
            "--format",
            "json",
        ]);
        let shard = usize::from(rank >= 4);
        assert_eq!(card["shard"], shard as u64);
        assert_eq!(card["role"], ["prefill", "decode"][shard]);
        assert_eq!(card["rank_offset"], [0, 4][shard]);
        for kind in KINDS {
            // The world's colors count every shard's groups, shard after
            // shard: color c is the c-th of all groups, key the position.
            let world: Vec<Vec<u64>> = (0..2).flat_map(|s| groups_of(&all, s, kind)).collect();
            match &card["world_splits"][kind] {
                Value::Null => assert!(world.iter().all(|g| !g.contains(&rank)), "{rank} {kind}"),
                split => {
                    let group = &world[split["color"].as_u64().unwrap() as usize];
                    assert_eq!(
                        group[split["key"].as_u64().unwrap() as usize],
                        rank,
                        "{kind}"
                    );
                }
            }
        }
    }
    let table = stdout_args(&["rank", "5", "--inference-shards", spec]);
    assert!(table.contains("in shard 1: ranks 4..5"), "{table}");
    assert!(table.contains("role=decode"), "{table}");
    fails_with_args(&["rank", "6", "--inference-shards", spec], "rank 6");
}

#[test]
fn every_command_takes_the_shards() {
    let spec = "tp=4,pp=2,role=prefill + tp=2,dp=2,ep=2,expt_tp=1,role=decode";
    let hosts = file(
        "shards-commands",
        "hosts.txt",
        "n0 rackA 4\nn1 rackB 4\nn2 rackA 4\nn3 rackB 4\n",
    );
    let hosts = hosts.to_str().unwrap();
    let groups = stdout_args(&["groups", "--inference-shards", spec]);
    assert!(
        groups.contains("== shard 1: ranks 8..11 (4 ranks)"),
        "{groups}"
    );
    let describe = json_args(&["describe", "--inference-shards", spec, "--format", "json"]);
    assert_eq!(describe["shards"][1]["sizes"]["ep"], 2);
    assert_eq!(describe["shards"][0]["role"], "prefill");
    let check = json_args(&[
        "check",
        "--inference-shards",
        spec,
        "--format",
        "json",
        "--gpus-per-node",
        "4",
    ]);
    assert_eq!(check["shards"].as_array().unwrap().len(), 2);
    let on_hosts = json_args(&[
        "check",
        "--inference-shards",
        spec,
        "--hosts",
        hosts,
        "--kind",
        "tp",
        "--format",
        "json",
    ]);
    let names: Vec<&str> = on_hosts["hosts"]["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kind"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["shard0 tp", "shard1 tp"]);
    // rank 9 on the hosts in the table's order: the third host, n2.
    let card = json_args(&[
        "rank",
        "9",
        "--inference-shards",
        spec,
        "--hosts",
        hosts,
        "--format",
        "json",
    ]);
    assert_eq!(card["hosts"]["rank"]["host"], "n2");
    assert_eq!(card["hosts"]["rank"]["node"], 2);
    assert_eq!(card["shard"], 1);
    // tp 4 on nodes of 2 GPUs leaves a node: --strict fails naming it.
    let out = run_args(&[
        "check",
        "--inference-shards",
        spec,
        "--gpus-per-node",
        "2",
        "--strict",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("shard0 tp"));
    let svg = stdout_args(&["render", "--inference-shards", spec]);
    assert!(svg.contains("data-module=\"shard1\""), "a band per shard");
    let html = stdout_args(&["render", "--inference-shards", spec, "--format", "html"]);
    assert!(html.contains("<html") && html.contains("shard 0: ranks 0..7"));
    // place: the whole world, every shard's tp inside a domain (two racks
    // of two 4-GPU nodes: each tp group fits one node).
    let place = json_args(&[
        "place",
        "--inference-shards",
        spec,
        "--hosts",
        hosts,
        "--format",
        "json",
    ]);
    assert_eq!(place["world_size"], 12);
    assert_eq!(place["crossing"]["tp"], 0);
    assert_eq!(place["crossing"]["etp-ep"], 0);
    let kinds: Vec<&str> = place["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kind"].as_str().unwrap())
        .collect();
    for kind in KINDS {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    let emitted = stdout_args(&[
        "place",
        "--inference-shards",
        spec,
        "--hosts",
        hosts,
        "--emit",
        "torchrun",
    ]);
    assert!(!emitted.is_empty());
    fails_with_args(
        &[
            "place",
            "--inference-shards",
            spec,
            "--hosts",
            hosts,
            "--on-shortfall",
            "shrink",
        ],
        "the sizes of inference shards are their spec's",
    );
    fails_with_args(
        &["suggest", "--inference-shards", spec],
        "suggest does not take inference shards",
    );
}

#[test]
fn without_a_world_size_the_world_is_what_the_shards_hold() {
    let v = shards_json("tp=8 + tp=2,dp=4 ; pp=4", &[]);
    assert_eq!(v["world_size"], 20);
    let offsets: Vec<u64> = v["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["rank_offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, [0, 8, 16]);
    assert_eq!(
        shards_json("tp=8 + tp=2,dp=4 ; pp=4", &["--world-size", "20"]),
        v
    );
}

/// `text` split into words as a shell splits them, double quotes kept
/// together (the guide's commands quote nothing else).
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in text.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

#[test]
fn the_guide_s_example_is_what_the_command_prints() {
    let guide = std::fs::read_to_string(format!(
        "{}/../docs/commands.md",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let section = guide
        .split("## Inference shards")
        .nth(1)
        .expect("docs/commands.md has the inference shards section");
    let block = section
        .split("```text\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the section has an example");
    let mut lines = block.lines();
    let command = lines
        .next()
        .unwrap()
        .strip_prefix("$ rank-layout ")
        .unwrap();
    let args = words(command);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let printed = stdout_args(&args);
    let printed: Vec<&str> = printed.lines().collect();
    let shown: Vec<&str> = lines.filter(|l| *l != "...").collect();
    assert!(shown.len() > 5);
    for line in shown {
        assert!(
            printed.contains(&line),
            "docs/commands.md's {line:?} is not printed: {printed:#?}"
        );
    }
}
