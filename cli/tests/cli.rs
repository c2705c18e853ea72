//! The `rank-layout` binary: the shape of its JSON, table output, `--config`
//! files, and exit status 2 with a message on stderr for bad input.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use std::process::{Command, Output};

use serde_json::Value;

/// Runs the binary with `command` split on whitespace.
fn run(command: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rank-layout"))
        .args(command.split_whitespace())
        .output()
        .expect("the binary runs")
}

/// The JSON and the text printed by a command that must succeed.
fn json(args: &str) -> (Value, String) {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    let text = String::from_utf8(out.stdout).unwrap();
    (serde_json::from_str(&text).unwrap(), text)
}

/// Asserts exit status 2, an empty stdout and `needle` on stderr.
fn fails_with(args: &str, needle: &str) {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?} printed on stdout");
    assert!(
        stderr.contains(needle),
        "{args:?}: {stderr:?} lacks {needle:?}"
    );
}

#[test]
fn groups_json_has_the_documented_shape() {
    let (v, text) = json("groups --world-size 64 --tp 4 --cp 2 --pp 2 --format json");
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 3);
    assert_eq!(v["world_size"], 64);
    assert_eq!(v["config"]["dp"], 4);
    assert_eq!(v["config"]["order"], "tp-cp-ep-dp-pp");
    assert_eq!(v["groups"]["tp"][1], serde_json::json!([4, 5, 6, 7]));
    assert_eq!(v["groups"]["cp"][0], serde_json::json!([0, 4]));
    assert_eq!(v["groups"]["pp"][0], serde_json::json!([0, 32]));
    assert_eq!(v["groups"]["embd"][0], serde_json::json!([0, 32]));
    // Kinds in the library's listing order (`Layout::kinds`).
    let order = [
        "tp",
        "pp",
        "dp",
        "cp",
        "dp-cp",
        "tp-pp",
        "tp-cp",
        "tp-dp",
        "tp-dp-cp",
        "embd",
        "pos-embd",
        "ep",
        "etp",
        "etp-ep",
        "etp-ep-pp",
        "edp",
    ];
    let groups_text = &text[text.find("\"groups\"").unwrap()..];
    let pos: Vec<usize> = order
        .iter()
        .map(|k| {
            groups_text
                .find(&format!("\"{k}\":"))
                .unwrap_or_else(|| panic!("{k} missing"))
        })
        .collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn kind_flags_select_kinds_in_given_order() {
    let (v, _) = json(
        "groups --tp 2 --pp 4 --world-size 16 --order tp-dp-pp --kind pp --kind DP --format json",
    );
    let kinds: Vec<&String> = v["groups"].as_object().unwrap().keys().collect();
    assert_eq!(kinds.len(), 2);
    // The same kind twice, spelled two ways, is printed once.
    let (_, text) = json("groups --cp 2 --dp 2 --kind dp-cp --kind cp-dp --format json");
    assert_eq!(text.matches("\"dp-cp\"").count(), 1, "{text}");
    assert_eq!(
        v["groups"]["pp"],
        serde_json::json!([[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]])
    );
    assert_eq!(v["groups"]["dp"][0], serde_json::json!([0, 2]));
}

#[test]
fn encoder_decoder_json() {
    let (v, _) =
        json("groups --tp 4 --cp 2 --encoder-tp 2 --encoder-pp 1 --world-size 12 --format json");
    assert_eq!(v["config"]["encoder_world_size"], 4);
    assert_eq!(
        v["groups"]["pp"],
        serde_json::json!([
            [0, 4],
            [0, 5],
            [1, 6],
            [1, 7],
            [2, 8],
            [2, 9],
            [3, 10],
            [3, 11]
        ])
    );
}

#[test]
fn table_output_is_readable() {
    let out = run("groups --tp 2 --world-size 4 --kind tp");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("world_size 4"), "{text}");
    // A heading with the count and the size, a header naming the columns
    // and saying what index and key are.
    assert!(text.contains("tp (2 groups of 2 ranks)"), "{text}");
    assert!(text.contains("comm-split color"), "{text}");
    assert!(text.contains("comm-split key"), "{text}");
    assert!(text.contains("color  size  members"), "{text}");
    // Rows: index, size, members.
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .filter(|w: &Vec<&str>| w.len() == 4 && w[1] == "2")
        .collect();
    assert_eq!(
        rows,
        vec![vec!["0", "2", "0", "1"], vec!["1", "2", "2", "3"]]
    );
    // One group: singular.
    let out = run("groups --tp 4 --world-size 4 --kind tp");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("tp (1 group of 4 ranks)"), "{text}");
}

#[test]
fn rank_json_has_the_documented_shape() {
    let (v, _) = json("rank 5 --tp 4 --world-size 8 --format json");
    assert_eq!(v["rank"], 5);
    assert_eq!(v["coord"]["tp"], 1);
    assert_eq!(v["coord"]["dp"], 1);
    assert!(v["coord"].get("grid").is_none());
    assert_eq!(
        v["groups"]["tp"],
        serde_json::json!([{"color": 1, "key": 1, "members": [4, 5, 6, 7]}])
    );
    // pp = 1: every rank is its own embd group.
    assert_eq!(
        v["groups"]["embd"],
        serde_json::json!([{"color": 5, "key": 0, "members": [5]}])
    );
}

#[test]
fn rank_in_encoder_decoder_layout_fans_out() {
    let (v, _) =
        json("rank 0 --tp 4 --cp 2 --encoder-tp 2 --kind pp --kind pos-embd --format json");
    assert_eq!(v["coord"]["grid"], "encoder");
    assert_eq!(
        v["groups"]["pp"],
        serde_json::json!([
            {"color": 0, "key": 0, "members": [0, 4]},
            {"color": 1, "key": 0, "members": [0, 5]}
        ])
    );
    let (v, _) = json("rank 6 --tp 4 --cp 2 --encoder-tp 2 --kind embd --format json");
    assert_eq!(v["coord"]["grid"], "decoder");
    assert_eq!(
        v["groups"]["embd"],
        serde_json::json!([{"color": 2, "key": 1, "members": [1, 6]}])
    );
}

#[test]
fn rank_answers_for_two_to_the_31_ranks() {
    let (v, _) = json(
        "rank 2147483647 --world-size 2147483648 --tp 8 --pp 16 --kind tp --kind pp --format json",
    );
    assert_eq!(v["groups"]["tp"][0]["key"], 7);
    assert_eq!(v["groups"]["pp"][0]["key"], 15);
    assert_eq!(v["coord"]["dp"], (1u64 << 31) / 128 - 1);
}

#[test]
fn config_file_and_flag_override() {
    let dir = common::temp_dir("config-override");
    let path = dir.join("layout.json");
    std::fs::write(
        &path,
        r#"{"tp": 2, "pp": 4, "world_size": 16, "order": "tp-dp-pp"}"#,
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let (v, _) = json(&format!("groups --config {p} --kind pp --format json"));
    assert_eq!(v["groups"]["pp"][0], serde_json::json!([0, 4, 8, 12]));
    let (v, _) = json(&format!(
        "groups --config {p} --pp 2 --kind pp --format json"
    ));
    assert_eq!(v["config"]["dp"], 4);
    assert_eq!(v["groups"]["pp"][0], serde_json::json!([0, 8]));
    std::fs::write(&path, r#"{"tp": 2, "tensor": 4}"#).unwrap();
    fails_with(&format!("groups --config {p}"), "tensor");
    fails_with(
        "groups --config /nonexistent/rank-layout.json",
        "/nonexistent/rank-layout.json",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_exits_2_with_a_message() {
    fails_with(
        "groups --world-size 10 --tp 4",
        "world_size (10) is not divisible by tp*cp*pp = 4",
    );
    fails_with("groups --tp 0", "tp must be at least 1");
    fails_with("groups --order tp-xp-dp", "\"xp\"");
    fails_with("groups --order tp-tp", "tp appears twice");
    fails_with("groups --tp 2 --order dp-pp", "tp has size 2");
    fails_with(
        "groups --ep 2 --dp 3 --expert-layout nested",
        "dp (3) is not divisible by ep (2)",
    );
    fails_with(
        "groups --ep 2 --dp 3",
        "world_size (3) is not divisible by etp*ep*pp = 1*2*1",
    );
    fails_with(
        "groups --ep 2 --dp 2 --order tp-ep-cp-dp-pp --expert-layout nested",
        "adjacent",
    );
    fails_with("groups --dp 2 --world-size 6", "disagrees");
    fails_with("groups --tp 65536 --pp 65536", "overflows");
    fails_with("groups --kind tp-zz", "tp-zz");
    fails_with(
        "groups --kind etp --expert-layout nested",
        "not part of the nested layout",
    );
    fails_with("groups --kind dp-mod-ep", "not part of the folded layout");
    fails_with("groups --expert-layout sideways", "sideways");
    fails_with("groups --hierarchical-cp 2,x --cp 4", "2,x");
    fails_with("rank 8 --world-size 8", "rank 8 is outside");
    fails_with("rank 99999999999 --world-size 8", "99999999999");
    // Usage errors (clap) exit 2 too.
    let out = run("groups --tp many");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn readme_command_works() {
    let out = run("groups --world-size 64 --tp 4 --cp 2 --pp 2");
    assert!(out.status.success());
    assert!(String::from_utf8(out.stdout).unwrap().contains("etp-ep-pp"));
}

#[test]
fn rank_json_carries_everything_the_card_shows() {
    // The card of rank 17 (decoder, stage 1 of the joined pipeline [1, 17])
    // on NVL72 racks: 17 = 4*4 + 1, node 4, local GPU 1, domain 0.
    let args = "rank 17 --encoder-tp 1 --encoder-pp 1 --tp 8 --cp 2 --world-size 72 \
                --gpus-per-node 4 --nodes-per-domain 18";
    let (v, _) = json(&format!("{args} --format json"));
    assert_eq!(v["rank"], 17);
    assert_eq!(v["world_size"], 72);
    assert_eq!(
        (v["first_rank"].clone(), v["last_rank"].clone()),
        (0.into(), 71.into())
    );
    assert_eq!(v["order"], "tp-cp-ep-dp-pp");
    assert_eq!(v["sizes"]["tp"], 8);
    assert_eq!(v["sizes"]["dp"], 4);
    assert_eq!(v["coord"]["grid"], "decoder");
    assert_eq!(v["node"], 4);
    assert_eq!(v["local_gpu"], 1);
    assert_eq!(v["gpus_per_node"], 4);
    assert_eq!(v["domain"], 0);
    assert_eq!(v["nodes_per_domain"], 18);
    assert_eq!(
        v["pipeline"],
        serde_json::json!({"stage": 1, "stages": 2, "prev": [1], "next": []})
    );
    // The split rounds: pp is built in 8 rounds (encoder tp 1 fans out to
    // decoder tp 8); rank 17 is in round 1 only, color 9 key 1, the same
    // as its pp membership.
    let splits = v["splits"].as_array().unwrap();
    let pp: Vec<&Value> = splits.iter().filter(|s| s["kind"] == "pp").collect();
    assert_eq!(pp.len(), 8);
    assert!(pp.iter().all(|s| s["rounds"] == 8));
    assert_eq!(
        *pp[1],
        serde_json::json!({"kind": "pp", "round": 1, "rounds": 8, "color": 9, "key": 1})
    );
    assert!(pp[0]["color"].is_null() && pp[0]["key"].is_null());
    assert_eq!(v["groups"]["pp"][0]["color"], 9);
    // Every kind of the layout has a split, and tp's is one round.
    let tp: Vec<&Value> = splits.iter().filter(|s| s["kind"] == "tp").collect();
    assert_eq!(tp.len(), 1);
    assert_eq!(tp[0]["color"], 9);
    // Without domains there is no domain key.
    let (v, _) = json("rank 5 --tp 4 --world-size 8 --format json");
    assert!(v.get("domain").is_none());
    assert_eq!(v["node"], 0);
    assert_eq!(v["local_gpu"], 5);
    assert_eq!(
        v["pipeline"],
        serde_json::json!({"stage": 0, "stages": 1, "prev": [], "next": []})
    );
}

#[test]
fn describe_json_has_what_the_table_shows() {
    // Encoder tp 2 + decoder tp 4, cp 2 on 12 ranks: dp = 12 / ((2 + 4)*2)
    // = 1, the encoder is ranks 0..3, the decoder 4..11.
    let args = "describe --tp 4 --cp 2 --encoder-tp 2 --world-size 12";
    let (v, _) = json(&format!("{args} --format json"));
    assert_eq!(v["layout"], "encoder+decoder");
    assert_eq!(v["world_size"], 12);
    assert_eq!(
        (v["first_rank"].clone(), v["last_rank"].clone()),
        (0.into(), 11.into())
    );
    assert_eq!(v["sizes"]["tp"], 4);
    assert_eq!(v["sizes"]["dp"], 1);
    assert_eq!(v["encoder_sizes"]["tp"], 2);
    let why: Vec<&str> = v["why"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        why[0].starts_with("dp = world_size / ((encoder_tp*encoder_pp + tp*pp)*cp)"),
        "{why:?}"
    );
    assert!(
        why.iter().any(|l| l.contains("encoder: ranks 0..3")),
        "{why:?}"
    );
    assert_eq!(v["machine"]["summary"], "12 ranks on 2 nodes of 8 GPUs");
    assert_eq!(v["machine"]["gpus_per_node"], 8);
    assert!(v["machine"]["nodes_per_domain"].is_null());
    // tp: 2 encoder groups of 2 and 2 decoder groups of 4, 12 members.
    assert_eq!(
        v["kinds"]["tp"],
        serde_json::json!({"groups": 4, "members": 12, "sizes": [2, 4]})
    );
    // pp: 8 joined pipelines of 2 (each encoder rank feeds two).
    assert_eq!(
        v["kinds"]["pp"],
        serde_json::json!({"groups": 8, "members": 16, "sizes": [2]})
    );
    // The listing costs add up over the kinds, and the JSON estimate is
    // the table's.
    let kinds = v["kinds"].as_object().unwrap();
    let members: u64 = kinds.values().map(|k| k["members"].as_u64().unwrap()).sum();
    assert_eq!(v["listing"]["members"], members);
    assert_eq!(v["listing"]["kinds"], kinds.len());
    let out = run(args);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!(
            "listing everything: {members} members in {} groups",
            v["listing"]["groups"]
        )),
        "{text}"
    );
}
