//! What goes in: JSON and TOML configuration files with the same keys as
//! the flags, Megatron-LM's flag names, and the nearest valid world sizes
//! of a divisibility error.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use common::{fails_with, json, stdout, temp_dir};

/// Every command whose output depends on the configuration, with `args`.
fn outputs(args: &str) -> Vec<String> {
    [
        "groups --format json",
        "rank 13 --format json",
        "rank 13",
        "check --format json",
        "describe",
    ]
    .iter()
    .map(|command| stdout(&format!("{command} {args}")))
    .collect()
}

#[test]
fn toml_and_json_configs_are_equal() {
    let dir = temp_dir("configs");
    let json_path = dir.join("layout.json");
    let toml_path = dir.join("layout.toml");
    // Every key of the layout and the machine, in both formats.
    std::fs::write(
        &json_path,
        r#"{"tp": 2, "cp": 2, "ep": 1, "pp": 2, "world_size": 32, "order": "tp-cp-dp-pp",
            "rank_offset": 8, "expert_layout": "folded", "etp": 1,
            "hierarchical_cp": [2], "dist_opt_instances": 2,
            "gpus_per_node": 4, "nodes_per_domain": 2}"#,
    )
    .unwrap();
    std::fs::write(
        &toml_path,
        r#"# the same layout
tp = 2
cp = 2
ep = 1
pp = 2
world_size = 32
order = "tp-cp-dp-pp"
rank_offset = 8
expert_layout = "folded"
etp = 1
hierarchical_cp = [2]
dist_opt_instances = 2
gpus_per_node = 4
nodes_per_domain = 2
"#,
    )
    .unwrap();
    let from_json = outputs(&format!("--config {}", json_path.display()));
    let from_toml = outputs(&format!("--config {}", toml_path.display()));
    let from_flags = outputs(
        "--tp 2 --cp 2 --ep 1 --pp 2 --world-size 32 --order tp-cp-dp-pp --rank-offset 8 \
         --expert-layout folded --etp 1 --hierarchical-cp 2 --dist-opt-instances 2 \
         --gpus-per-node 4 --nodes-per-domain 2",
    );
    assert_eq!(from_json, from_toml);
    assert_eq!(from_json, from_flags);
    // And the values are those of that layout: dp = 32 / (2*2*2) = 4,
    // ranks 8..39; rank 13 is position 5 = 1 + 2*0 + 4*1 (tp fastest, then
    // cp, then dp): tp=1, cp=0, dp=1.
    let v = json(&format!(
        "rank 13 --config {} --format json",
        toml_path.display()
    ));
    assert_eq!(v["coord"]["tp"], 1);
    assert_eq!(v["coord"]["cp"], 0);
    assert_eq!(v["coord"]["dp"], 1);
    let v = json(&format!(
        "groups --config {} --format json --kind tp",
        toml_path.display()
    ));
    assert_eq!(v["config"]["dp"], 4);
    assert_eq!(v["groups"]["tp"][0], serde_json::json!([8, 9]));
    // The machine keys come from the file too: 4 GPUs per node.
    let text = stdout(&format!(
        "rank 13 --config {} --kind tp",
        toml_path.display()
    ));
    assert!(
        text.contains("node      3, local GPU 1 (4 GPUs per node), domain 1"),
        "{text}"
    );
    // Flags override the file.
    let v = json(&format!(
        "groups --config {} --tp 4 --etp 1 --format json --kind tp",
        toml_path.display()
    ));
    assert_eq!(v["groups"]["tp"][0], serde_json::json!([8, 9, 10, 11]));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_config_files_name_the_file() {
    let dir = temp_dir("bad-configs");
    let toml_path = dir.join("bad.toml");
    std::fs::write(&toml_path, "tp = 2\ntensor = 4\n").unwrap();
    let p = toml_path.display().to_string();
    let err = fails_with(&format!("groups --config {p}"), "tensor");
    assert!(err.contains(&p), "{err}");
    std::fs::write(&toml_path, "tp = [2\n").unwrap();
    fails_with(&format!("groups --config {p}"), &p);
    // A file without an extension is read by its first character.
    let plain = dir.join("layout");
    std::fs::write(&plain, "tp = 2\nworld_size = 4\n").unwrap();
    let v = json(&format!(
        "groups --config {} --format json --kind tp",
        plain.display()
    ));
    assert_eq!(v["groups"]["tp"][1], serde_json::json!([2, 3]));
    std::fs::write(&plain, r#"{"tp": 2, "world_size": 4}"#).unwrap();
    let v = json(&format!(
        "groups --config {} --format json --kind tp",
        plain.display()
    ));
    assert_eq!(v["groups"]["tp"][1], serde_json::json!([2, 3]));
    let list = dir.join("list.json");
    std::fs::write(&list, "[1, 2]").unwrap();
    fails_with(
        &format!("groups --config {}", list.display()),
        "expected a table",
    );
    fails_with(
        "groups --gpus-per-node 0",
        "gpus_per_node must be at least 1",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn megatron_flag_names_are_aliases() {
    let pairs = [
        (
            "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 \
             --context-parallel-size 2 --expert-model-parallel-size 2 --world-size 32",
            "--tp 2 --pp 4 --cp 2 --ep 2 --world-size 32",
        ),
        (
            "--tp 4 --cp 2 --encoder-tensor-model-parallel-size 2 \
             --encoder-pipeline-model-parallel-size 1 --world-size 12",
            "--tp 4 --cp 2 --encoder-tp 2 --encoder-pp 1 --world-size 12",
        ),
        (
            "--expert-layout folded --tp 1 --cp 2 --dp 4 --ep 2 \
             --expert-tensor-parallel-size 1 --num-distributed-optimizer-instances 2",
            "--expert-layout folded --tp 1 --cp 2 --dp 4 --ep 2 --etp 1 --dist-opt-instances 2",
        ),
        (
            // Megatron-LM's sizes are space-separated.
            "--expert-layout folded --tp 2 --cp 4 --hierarchical-context-parallel-sizes 2 2",
            "--expert-layout folded --tp 2 --cp 4 --hierarchical-cp 2,2",
        ),
    ];
    for (megatron, ours) in pairs {
        let a = stdout(&format!("groups {megatron} --format json"));
        let b = stdout(&format!("groups {ours} --format json"));
        assert_eq!(a, b, "{megatron}");
    }
    // And they mean what they say: tp=2, pp=4 on 16 ranks: dp = 2, the pp
    // stride is tp*dp = 4.
    let v = json(
        "groups --tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 --world-size 16 \
         --kind pp --format json",
    );
    assert_eq!(v["groups"]["pp"][0], serde_json::json!([0, 4, 8, 12]));
    let v = json(
        "groups --expert-layout folded --tp 2 --cp 4 --hierarchical-context-parallel-sizes 2 2 \
         --kind hcp-1 --format json",
    );
    // cp group 0 is 0, 2, 4, 6 (stride tp = 2); level 1 pairs positions
    // {0, 2} and {1, 3}: ranks {0, 4} and {2, 6}.
    let groups = v["groups"]["hcp-1"].as_array().unwrap();
    assert_eq!(groups.len(), 4);
    assert!(groups.contains(&serde_json::json!([0, 4])), "{groups:?}");
    assert!(groups.contains(&serde_json::json!([2, 6])), "{groups:?}");
}

#[test]
fn divisibility_errors_suggest_the_nearest_valid_world_sizes() {
    // 64 / 12: 60 and 72 are the multiples on either side.
    let err = fails_with("groups --world-size 64 --tp 12", "is not divisible");
    assert!(err.contains("nearest valid: 60, 72"), "{err}");
    fails_with("check --world-size 10 --tp 4", "nearest valid: 8, 12");
    // Below the first multiple, only the one above.
    fails_with("describe --world-size 3 --tp 4", "nearest valid: 4\n");
    // The folded expert grid: 24 is no multiple of etp*ep*pp = 16.
    fails_with(
        "groups --expert-layout folded --world-size 24 --ep 16",
        "nearest valid: 16, 32",
    );
}

#[test]
fn config_files_name_duplicate_keys_and_large_integers_and_skip_a_bom() {
    let dir = temp_dir("strict-configs");
    let write = |name: &str, text: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    // A key given twice is an error naming it, in JSON (where serde_json
    // keeps the last) and in TOML.
    let p = write("twice.json", br#"{"tp": 2, "tp": 4}"#);
    let err = fails_with(&format!("groups --config {p}"), "duplicate key `tp`");
    assert!(err.contains(&p), "{err}");
    let p = write("twice.toml", b"tp = 2\ntp = 4\n");
    fails_with(
        &format!("groups --config {p}"),
        "duplicate key `tp` at line 2",
    );
    // A UTF-8 byte-order mark is skipped, in both formats and in a file
    // read by its first character.
    for (name, text) in [
        (
            "bom.json",
            &b"\xef\xbb\xbf{\"tp\": 2, \"world_size\": 4}"[..],
        ),
        ("bom.toml", b"\xef\xbb\xbftp = 2\nworld_size = 4\n"),
        ("bom", b"\xef\xbb\xbf{\"tp\": 2, \"world_size\": 4}"),
    ] {
        let p = write(name, text);
        let v = json(&format!("groups --config {p} --format json --kind tp"));
        assert_eq!(v["groups"]["tp"][1], serde_json::json!([2, 3]), "{name}");
    }
    // An integer too large for any key is named as written, not as the
    // float serde_json would round it to.
    let big = "100000000000000000000000";
    let p = write("big.json", format!(r#"{{"tp": {big}}}"#).as_bytes());
    let err = fails_with(
        &format!("groups --config {p}"),
        &format!("tp = {big} does not fit"),
    );
    assert!(!err.contains("1e+23") && !err.contains("floating"), "{err}");
    let p = write(
        "big-list.json",
        format!(r#"{{"cp": 4, "hierarchical_cp": [2, -{big}]}}"#).as_bytes(),
    );
    fails_with(
        &format!("groups --config {p}"),
        &format!("hierarchical_cp[1] = -{big} does not fit"),
    );
    let p = write("big.toml", format!("tp = {big}\n").as_bytes());
    fails_with(
        &format!("groups --config {p}"),
        &format!("tp = {big} does not fit"),
    );
    // Within 64 bits, serde's message names the integer already.
    let p = write("u64.json", br#"{"tp": 5000000000}"#);
    fails_with(&format!("groups --config {p}"), "5000000000");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn numeric_flags_name_the_flag_and_the_value() {
    // clap took `-1` for an unknown flag ("unexpected argument '-1'"),
    // never naming --tp; every numeric flag now names itself and the value.
    for (args, flag, value) in [
        ("groups --tp -1", "--tp", "-1"),
        ("groups --tp=-1", "--tp", "-1"),
        (
            "groups --tensor-model-parallel-size -2",
            "--tensor-model-parallel-size",
            "-2",
        ),
        ("groups --cp -1", "--cp", "-1"),
        ("groups --ep -1", "--ep", "-1"),
        ("groups --dp -1", "--dp", "-1"),
        ("groups --pp -1", "--pp", "-1"),
        ("groups --world-size -8", "--world-size", "-8"),
        ("groups --rank-offset -4", "--rank-offset", "-4"),
        ("groups --encoder-tp -1", "--encoder-tp", "-1"),
        ("groups --encoder-pp -1", "--encoder-pp", "-1"),
        ("groups --etp -1", "--etp", "-1"),
        (
            "groups --dist-opt-instances -2",
            "--dist-opt-instances",
            "-2",
        ),
        ("groups --hierarchical-cp -2", "--hierarchical-cp", "-2"),
        ("groups --gpus-per-node -8", "--gpus-per-node", "-8"),
        ("groups --nodes-per-domain -9", "--nodes-per-domain", "-9"),
        ("rank -1", "<RANK>", "-1"),
        ("suggest --top -1", "--top", "-1"),
        ("render --max-ranks -1", "--max-ranks", "-1"),
        ("groups --tp x", "--tp", "x"),
        ("groups --tp 1.5", "--tp", "1.5"),
        ("groups --tp 5000000000", "--tp", "5000000000"),
        ("rank two", "<RANK>", "two"),
    ] {
        let err = fails_with(args, &format!("'{value}'"));
        assert!(err.contains(flag), "{args}: {err}");
        let reason = if value.starts_with('-') {
            "negative"
        } else if value == "5000000000" {
            "too large"
        } else {
            "not a whole number"
        };
        assert!(err.contains(reason), "{args}: {err}");
    }
}

#[test]
fn zero_counts_are_errors() {
    // --max-ranks 0 drew one rank's worth silently; --top 0 printed every
    // order. Both are errors naming 0.
    let err = fails_with("render --max-ranks 0", "'0'");
    assert!(
        err.contains("--max-ranks") && err.contains("from 1"),
        "{err}"
    );
    let err = fails_with("suggest --tp 2 --top 0", "'0'");
    assert!(err.contains("--top") && err.contains("from 1"), "{err}");
    // 1 is fine.
    common::stdout("suggest --tp 2 --world-size 16 --top 1");
}

/// Runs the binary with `args`, killed after `limit`: its exit code (None
/// when it was killed or ended by a signal), stderr and how long it took.
fn run_within(
    args: &[&str],
    limit: std::time::Duration,
) -> (Option<i32>, String, std::time::Duration) {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let start = std::time::Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rank-layout"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    (
        status.and_then(|s| s.code()),
        reader.join().unwrap(),
        elapsed,
    )
}

#[test]
fn deeply_nested_config_files_are_refused_quickly() {
    // `{"tp": [[[...]]]}` 10,000 deep overflowed the stack (an abort), and
    // 100,000 deep took seconds before that: the reader recursed and parsed
    // again at every level. Now the file is parsed once, and nesting past
    // the limit is an error naming the limit and the file.
    let dir = temp_dir("deep-configs");
    for depth in [10_000usize, 100_000] {
        for (name, text) in [
            (
                format!("deep-{depth}.json"),
                format!("{{\"tp\": {}{}}}", "[".repeat(depth), "]".repeat(depth)),
            ),
            (
                format!("deep-{depth}-objects.json"),
                format!("{}1{}", "{\"a\": ".repeat(depth), "}".repeat(depth)),
            ),
            (
                format!("deep-{depth}.toml"),
                format!("tp = {}{}\n", "[".repeat(depth), "]".repeat(depth)),
            ),
        ] {
            let path = dir.join(&name);
            std::fs::write(&path, text).unwrap();
            let p = path.display().to_string();
            let (code, stderr, took) = run_within(
                &["groups", "--config", &p],
                std::time::Duration::from_secs(30),
            );
            assert_eq!(code, Some(2), "{name}: {stderr}");
            assert!(
                stderr.contains("nesting deeper than 64 levels") && stderr.contains(&p),
                "{name}: {stderr}"
            );
            // The message quotes no more than a line's worth of the file.
            assert!(
                stderr.len() < 400,
                "{name}: {} bytes of stderr",
                stderr.len()
            );
            assert!(took.as_secs_f64() < 5.0, "{name}: took {took:?}");
        }
    }
    // 64 levels are read (and judged as keys: here a list is no size).
    let path = dir.join("deep-64.json");
    std::fs::write(
        &path,
        format!("{{\"tp\": {}{}}}", "[".repeat(63), "]".repeat(63)),
    )
    .unwrap();
    let err = fails_with(
        &format!("groups --config {}", path.display()),
        "invalid type: sequence",
    );
    assert!(!err.contains("nesting"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
