//! `--modules FILE` (groups, rank, check, describe, render) and the
//! `bridge` command: TOML and JSON alike, the bridge plan of a worked
//! example, a leader's role, and every malformed file an error (exit 2).
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use std::path::PathBuf;

use common::{fails_with_args, run_args, stdout_args, temp_dir};
use serde_json::{Value, json};

/// vision tp 2 x dp 4 (ranks 0-7) -> llm tp 4 x dp 2 (ranks 8-15).
const WORKED_TOML: &str = r#"
[[modules]]
name = "vision"
mesh = "tp=2,dp=4"

[[modules]]
name = "llm"
mesh = "tp=4,dp=2"

[[edges]]
src = "vision"
dst = "llm"
"#;

const WORKED_JSON: &str = r#"{
  "modules": [
    {"name": "vision", "mesh": "tp=2,dp=4"},
    {"name": "llm", "mesh": "tp=4,dp=2"}
  ],
  "edges": [{"src": "vision", "dst": "llm"}]
}"#;

/// Writes `text` to `name` in a directory of the test `test`.
fn file(test: &str, name: &str, text: &str) -> PathBuf {
    let path = temp_dir(test).join(name);
    std::fs::write(&path, text).expect("the file is written");
    path
}

fn s(path: &std::path::Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

fn json_out(args: &[&str]) -> Value {
    serde_json::from_str(&stdout_args(args)).expect("one JSON value")
}

#[test]
fn toml_and_json_files_give_the_same_output() {
    let t = file("same", "m.toml", WORKED_TOML);
    let j = file("same", "m.json", WORKED_JSON);
    let commands: [&[&str]; 8] = [
        &["groups"],
        &["groups", "--format", "json"],
        &["rank", "9"],
        &["rank", "9", "--format", "json"],
        &["check", "--format", "json"],
        &["describe"],
        &["describe", "--format", "json"],
        &["render"],
    ];
    for command in commands {
        let with = |p: &PathBuf| {
            let mut args: Vec<&str> = command.to_vec();
            args.extend(["--modules", s(p)]);
            stdout_args(&args)
        };
        // The table titles name the file: compare them without it.
        let (a, b) = (with(&t), with(&j));
        assert_eq!(
            a.replace(s(&t), "FILE"),
            b.replace(s(&j), "FILE"),
            "{command:?}"
        );
    }
    let bridge = |p: &PathBuf| stdout_args(&["bridge", "--modules", s(p), "--format", "json"]);
    assert_eq!(bridge(&t), bridge(&j));
}

#[test]
fn bridge_json_of_the_worked_example() {
    let t = file("bridge", "m.toml", WORKED_TOML);
    let out = json_out(&["bridge", "--modules", s(&t), "--format", "json"]);
    let plans = out.as_array().expect("a list");
    assert_eq!(plans.len(), 1);
    let plan = plans[0].as_object().expect("an object");
    let mut keys: Vec<&str> = plan.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "bridge_group",
            "direction",
            "dst",
            "dst_broadcast",
            "dst_leaders",
            "pairs",
            "scale",
            "src",
            "src_broadcast",
            "src_leaders"
        ]
    );
    assert_eq!(plan["src"], "vision");
    assert_eq!(plan["dst"], "llm");
    assert_eq!(plan["src_leaders"], json!([1, 3, 5, 7]));
    assert_eq!(plan["dst_leaders"], json!([8, 12]));
    assert_eq!(plan["pairs"], json!([[1, 8], [3, 8], [5, 12], [7, 12]]));
    assert_eq!(plan["direction"], "fan_in");
    assert_eq!(plan["scale"], 2);
    assert_eq!(plan["bridge_group"], json!([1, 3, 5, 7, 8, 12]));
    assert_eq!(
        plan["src_broadcast"],
        json!([[0, 1], [2, 3], [4, 5], [6, 7]])
    );
    assert_eq!(
        plan["dst_broadcast"],
        json!([[8, 9, 10, 11], [12, 13, 14, 15]])
    );
    // --edge picks the same plan; the table names the leaders.
    let one = json_out(&[
        "bridge",
        "--modules",
        s(&t),
        "--edge",
        "vision:llm",
        "--format",
        "json",
    ]);
    assert_eq!(one, out);
    let table = stdout_args(&["bridge", "--modules", s(&t)]);
    assert!(table.contains("vision -> llm: fan_in, scale 2"), "{table}");
    assert!(table.contains("1 3 5 7"), "{table}");
    fails_with_args(
        &["bridge", "--modules", s(&t), "--edge", "llm:vision"],
        "llm -> vision",
    );
    fails_with_args(&["bridge", "--modules", s(&t), "--edge", "llm"], "SRC:DST");
}

#[test]
fn bridge_json_with_cp_and_colocated() {
    let cp = file(
        "bridge-cp",
        "m.json",
        r#"{"modules": [{"name": "a", "mesh": "tp=2,cp=2,dp=2"}, {"name": "b", "mesh": "cp=2,dp=4"}],
            "edges": [{"src": "a", "dst": "b"}]}"#,
    );
    let out = json_out(&["bridge", "--modules", s(&cp), "--format", "json"]);
    assert!(out[0].get("dst_cp_reduce").is_some());
    assert!(out[0].get("src_cp_gather").is_some());
    assert!(out[0].get("colocated").is_none());
    let colocated = file(
        "bridge-colocated",
        "m.toml",
        "colocated = true\n[[modules]]\nname = \"enc\"\nmesh = \"dp=8\"\n[[modules]]\nname = \"llm\"\nmesh = \"tp=2,dp=4\"\n[[edges]]\nsrc = \"enc\"\ndst = \"llm\"\n",
    );
    let out = json_out(&["bridge", "--modules", s(&colocated), "--format", "json"]);
    let c = out[0]["colocated"].as_object().expect("a colocated plan");
    let mut keys: Vec<&str> = c.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "direction",
            "gather_groups",
            "mode",
            "reason",
            "scale",
            "slots"
        ]
    );
    assert_eq!(c["mode"], "collective");
    assert_eq!(c["direction"], "fan_in");
    assert_eq!(c["slots"].as_array().map(Vec::len), Some(8));
    assert!(stdout_args(&["bridge", "--modules", s(&colocated)]).contains("colocated: collective"));
    // With cp on the destination, the gather plan's cp reduce groups too.
    let with_cp = file(
        "bridge-colocated-cp",
        "m.toml",
        "colocated = true\n[[modules]]\nname = \"enc\"\nmesh = \"dp=8\"\n[[modules]]\nname = \"llm\"\nmesh = \"cp=2,dp=4\"\n[[edges]]\nsrc = \"enc\"\ndst = \"llm\"\n",
    );
    let out = json_out(&["bridge", "--modules", s(&with_cp), "--format", "json"]);
    let c = out[0]["colocated"].as_object().expect("a colocated plan");
    assert_eq!(c["mode"], "collective");
    assert_eq!(
        c["dst_cp_reduce"],
        serde_json::json!([[0, 1], [2, 3], [4, 5], [6, 7]])
    );
    assert!(c.get("src_cp_gather").is_none());
}

#[test]
fn rank_json_of_a_leader() {
    let t = file("rank", "m.toml", WORKED_TOML);
    let out = json_out(&["rank", "3", "--modules", s(&t), "--format", "json"]);
    assert_eq!(out["rank"], 3);
    assert_eq!(out["total_stages"], 2);
    let module = &out["modules"][0];
    assert_eq!(module["name"], "vision");
    assert_eq!(module["first_rank"], 0);
    assert_eq!(module["last_rank"], 7);
    assert_eq!(module["stage"], 0);
    assert_eq!(module["coord"], json!({"tp": 1, "dp": 1}));
    let role = &out["roles"][0];
    assert_eq!(role["src"], "vision");
    assert_eq!(role["dst"], "llm");
    assert_eq!(role["src_leader"], true);
    assert_eq!(role["dst_leader"], false);
    assert_eq!(role["sends_to"], json!([8]));
    assert_eq!(role["receives_from"], json!([]));
    assert_eq!(role["slot"], Value::Null);
    assert_eq!(role["splits"]["bridge"], json!({"color": 0, "key": 1}));
    assert_eq!(
        role["splits"]["src_broadcast"],
        json!({"color": 1, "key": 1})
    );
    assert_eq!(role["splits"]["dst_broadcast"], Value::Null);
    // The destination leader of lane 1.
    let out = json_out(&["rank", "12", "--modules", s(&t), "--format", "json"]);
    assert_eq!(out["modules"][0]["stage"], 1);
    assert_eq!(out["roles"][0]["receives_from"], json!([5, 7]));
    let table = stdout_args(&["rank", "3", "--modules", s(&t)]);
    assert!(table.contains("source leader, sends to 8"), "{table}");
    fails_with_args(&["rank", "16", "--modules", s(&t)], "outside the modules");
}

#[test]
fn groups_check_describe_render_per_module() {
    let t = file("per-module", "m.toml", WORKED_TOML);
    let out = json_out(&["groups", "--modules", s(&t), "--format", "json"]);
    let modules = out["modules"].as_array().expect("modules");
    assert_eq!(modules.len(), 2);
    assert_eq!(modules[1]["name"], "llm");
    assert_eq!(modules[1]["first_rank"], 8);
    assert_eq!(modules[1]["last_rank"], 15);
    assert_eq!(
        modules[1]["groups"]["tp"],
        json!([[8, 9, 10, 11], [12, 13, 14, 15]])
    );
    let table = stdout_args(&["groups", "--modules", s(&t), "--kind", "tp"]);
    assert!(table.contains("module vision: ranks 0..7"), "{table}");
    assert!(table.contains("module llm: ranks 8..15"), "{table}");
    fails_with_args(&["groups", "--modules", s(&t), "--kind", "zz"], "--kind zz");
    let check = json_out(&["check", "--modules", s(&t), "--format", "json"]);
    assert_eq!(check["modules"].as_array().map(Vec::len), Some(2));
    let describe = json_out(&["describe", "--modules", s(&t), "--format", "json"]);
    assert_eq!(describe["total_stages"], 2);
    assert_eq!(describe["modules"][1]["first_stage"], 1);
    assert_eq!(
        describe["edges"],
        json!([{"src": "vision", "dst": "llm", "direction": "fan_in", "scale": 2, "mode": "p2p", "reason": null}])
    );
    let svg = stdout_args(&["render", "--modules", s(&t)]);
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    let bands: Vec<&str> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("module"))
        .filter_map(|n| n.attribute("data-module"))
        .collect();
    assert_eq!(bands, ["vision", "llm"]);
    let cells = doc
        .descendants()
        .filter(|n| n.attribute("data-rank").is_some())
        .count();
    assert!(cells >= 16, "{cells} cells");
    let html = stdout_args(&["render", "--modules", s(&t), "--format", "html"]);
    assert!(html.contains(r#"data-module="llm""#));
}

#[test]
fn malformed_files_are_errors_naming_the_problem() {
    let cases: [(&str, &str, &str); 14] = [
        (
            "unknown.toml",
            "[[modules]]\nname = \"a\"\nmesh = \"tp=2\"\nsize = 3\n",
            "unknown field `size`",
        ),
        (
            "unknown-top.json",
            r#"{"modules": [{"name": "a", "mesh": "tp=2"}], "colocate": true}"#,
            "unknown field `colocate`",
        ),
        (
            "noname.toml",
            "[[modules]]\nmesh = \"tp=2\"\n",
            "missing field `name`",
        ),
        (
            "both.toml",
            "[[modules]]\nname = \"a\"\nmesh = \"tp=2\"\nmegatron = { tp = 2 }\n",
            "module a: give one of mesh, dims, the dim keys",
        ),
        (
            "cycle.toml",
            "[[modules]]\nname = \"a\"\nmesh = \"tp=2\"\n[[modules]]\nname = \"b\"\nmesh = \"tp=2\"\n[[edges]]\nsrc = \"a\"\ndst = \"b\"\n[[edges]]\nsrc = \"b\"\ndst = \"a\"\n",
            "cycle",
        ),
        (
            "unknown-module.json",
            r#"{"modules": [{"name": "a", "mesh": "tp=2"}], "edges": [{"src": "a", "dst": "llm"}]}"#,
            "llm",
        ),
        (
            "lanes.json",
            r#"{"modules": [{"name": "a", "mesh": "dp=2"}, {"name": "b", "mesh": "dp=3"}], "edges": [{"src": "a", "dst": "b"}]}"#,
            "lanes",
        ),
        (
            "ep.toml",
            "[[modules]]\nname = \"a\"\nmesh = \"tp=2,ep=2\"\n",
            "ep",
        ),
        (
            "sizes.toml",
            "colocated = true\n[[modules]]\nname = \"a\"\nmesh = \"dp=4\"\n[[modules]]\nname = \"b\"\nmesh = \"dp=8\"\n",
            "module b",
        ),
        ("bad.toml", "[[modules]\nname = 1\n", "invalid modules TOML"),
        ("bad.json", "{\"modules\": [", "invalid modules JSON"),
        // A file that is no table says what it must be and what it is.
        (
            "array.json",
            "[1, 2, 3]",
            "a modules file must be a table with `modules` (and optionally `edges`",
        ),
        ("empty-array.json", "[]", "; found an array"),
        ("number.json", "5", "; found the number 5"),
    ];
    for (name, text, needle) in cases {
        let path = file("malformed", name, text);
        let stderr = fails_with_args(&["groups", "--modules", s(&path)], needle);
        assert!(
            stderr.contains(s(&path)),
            "{name}: {stderr} does not name the file"
        );
        fails_with_args(&["bridge", "--modules", s(&path)], needle);
    }
    // The lanes message says which counts do not divide.
    let lanes = file(
        "malformed",
        "lanes.json",
        r#"{"modules": [{"name": "a", "mesh": "dp=2"}, {"name": "b", "mesh": "dp=3"}], "edges": [{"src": "a", "dst": "b"}]}"#,
    );
    let stderr = fails_with_args(&["bridge", "--modules", s(&lanes)], "lanes");
    assert!(stderr.contains('2') && stderr.contains('3'), "{stderr}");
    fails_with_args(
        &["groups", "--modules", "/nonexistent/m.toml"],
        "cannot read the modules file /nonexistent/m.toml",
    );
}

#[test]
fn modules_exclude_layout_and_mesh_flags() {
    let t = file("exclusive", "m.toml", WORKED_TOML);
    fails_with_args(
        &["groups", "--modules", s(&t), "--tp", "2"],
        "--modules and --tp cannot be given together",
    );
    fails_with_args(
        &["rank", "0", "--modules", s(&t), "--mesh", "tp=2"],
        "--modules and --mesh",
    );
    fails_with_args(
        &[
            "describe",
            "--modules",
            s(&t),
            "--tensor-model-parallel-size",
            "2",
        ],
        "--modules and --tensor-model-parallel-size",
    );
    fails_with_args(
        &["suggest", "--modules", s(&t)],
        "suggest does not take --modules",
    );
    // The machine's flags apply.
    let out = run_args(&["check", "--modules", s(&t), "--gpus-per-node", "4"]);
    assert!(out.status.success());
}

#[test]
fn check_warns_of_the_last_node_once() {
    // 6 + 6 ranks on nodes of 8: only the last module's span ends the
    // machine's ranks, so only it reports the partly used node.
    let f = file(
        "check-last-node",
        "m.toml",
        "[[modules]]\nname = \"vision\"\nmesh = \"tp=2,dp=3\"\n[[modules]]\nname = \"llm\"\nmesh = \"tp=2,dp=3\"\n[[edges]]\nsrc = \"vision\"\ndst = \"llm\"\n",
    );
    let out = stdout_args(&["check", "--modules", s(&f), "--gpus-per-node", "8"]);
    assert_eq!(out.matches("is partly used").count(), 1, "{out}");
    assert!(out.contains("node 1, is partly used"), "{out}");
}

#[test]
fn every_written_form_of_a_module_file_gives_the_same_modules() {
    // The worked example written five ways: mesh text; dims as text,
    // pairs and a table; dim keys with an order; a table of tables;
    // Megatron-Core's topology; from/to edges.
    let forms = [
        (
            "mesh.toml",
            "[[modules]]\nname = \"vision\"\nmesh = \"tp=2,dp=4\"\n[[modules]]\nname = \"llm\"\nmesh = \"tp=4,dp=2\"\n[[edges]]\nsrc = \"vision\"\ndst = \"llm\"\n",
        ),
        (
            "dims-text.toml",
            "[[modules]]\nname = \"vision\"\ndims = \"tp=2,dp=4\"\n[[modules]]\nname = \"llm\"\ndims = \"tp=4,dp=2\"\n[[edges]]\nfrom = \"vision\"\nto = \"llm\"\n",
        ),
        (
            "dims-pairs.json",
            r#"{"modules": [{"name": "vision", "dims": [["tp", 2], ["dp", 4]]}, {"name": "llm", "dims": {"tp": 4, "dp": 2}}], "topology": {"vision": ["llm"], "llm": []}}"#,
        ),
        (
            "keys.toml",
            "[modules.vision]\ndp = 4\ntp = 2\n[modules.llm]\ndp = 2\ntp = 4\norder = \"tp-dp\"\n[[edges]]\nsrc = \"vision\"\ndst = \"llm\"\n",
        ),
        (
            "table.json",
            r#"{"modules": {"vision": {"mesh": "tp=2,dp=4"}, "llm": {"tp": 4, "dp": 2}}, "edges": [{"src": "vision", "dst": "llm"}]}"#,
        ),
    ];
    let mut outputs = Vec::new();
    for (name, text) in forms {
        let f = file("forms", name, text);
        let v = json_out(&["bridge", "--modules", s(&f), "--format", "json"]);
        assert_eq!(
            v[0]["pairs"],
            serde_json::json!([[1, 8], [3, 8], [5, 12], [7, 12]]),
            "{name}"
        );
        outputs.push((name, v));
    }
    for (name, v) in &outputs[1..] {
        assert_eq!(*v, outputs[0].1, "{name}");
    }
    // A topology must name every module; an order must name every dim key.
    let cases = [
        (
            "topology.json",
            r#"{"modules": [{"name": "a", "mesh": "dp=2"}, {"name": "b", "mesh": "dp=2"}], "topology": {"a": ["b"]}}"#,
            "module b is not in the topology",
        ),
        (
            "order.toml",
            "[modules.a]\ntp = 2\ndp = 2\norder = \"tp\"\n",
            "leaves out dp",
        ),
        (
            "renamed.toml",
            "[modules.a]\nname = \"b\"\nmesh = \"dp=2\"\n",
            "module a is named \"b\" inside",
        ),
    ];
    for (name, text, needle) in cases {
        let f = file("forms-bad", name, text);
        fails_with_args(&["groups", "--modules", s(&f)], needle);
    }
}
