//! Megatron-LM's arguments, every way in: the flags as Megatron-LM names
//! them, a pasted command line (`--megatron-args`), and Megatron-LM names as
//! keys of JSON and TOML files give the same layout, and it is the layout
//! the library (and so Python's `Layout.from_megatron_args`) builds from
//! the same arguments through its one table.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use common::{fails_with, fails_with_args, json, run_args, stdout, stdout_args, temp_dir};
use rank_layout::Layout;
use rank_layout::megatron::{MegatronArg, MegatronArgs, MegatronValue};
use serde_json::{Value, json as j};

/// One argument: its Megatron-LM name and value.
type Arg = (&'static str, MegatronValue);

/// Fixed argument sets, each a layout Megatron-Core builds.
fn argument_sets() -> Vec<Vec<Arg>> {
    use MegatronValue::{Bool, Int, Ints};
    vec![
        // The issue's example: cp and ep both > 1, folded experts with etp
        // = tp (Megatron-Core's ep groups are [0, 2, 4, 6], ...).
        vec![
            ("tensor_model_parallel_size", Int(2)),
            ("context_parallel_size", Int(2)),
            ("expert_model_parallel_size", Int(4)),
            ("pipeline_model_parallel_size", Int(2)),
            ("world_size", Int(64)),
        ],
        // The tp-pp-dp mapping, etp of its own, dp given and checked.
        vec![
            ("tensor_model_parallel_size", Int(4)),
            ("pipeline_model_parallel_size", Int(2)),
            ("expert_tensor_parallel_size", Int(2)),
            ("expert_model_parallel_size", Int(2)),
            ("data_parallel_size", Int(4)),
            ("world_size", Int(32)),
            ("use_tp_pp_dp_mapping", Bool(true)),
        ],
        // An encoder whose tp is 0: the decoder's tp.
        vec![
            ("tensor_model_parallel_size", Int(4)),
            ("context_parallel_size", Int(2)),
            ("encoder_tensor_model_parallel_size", Int(0)),
            ("encoder_pipeline_model_parallel_size", Int(1)),
            ("world_size", Int(32)),
        ],
        // Hierarchical cp and distributed-optimizer instances.
        vec![
            ("tensor_model_parallel_size", Int(2)),
            ("context_parallel_size", Int(4)),
            ("hierarchical_context_parallel_sizes", Ints(vec![2, 2])),
            ("num_distributed_optimizer_instances", Int(2)),
            ("world_size", Int(32)),
        ],
        // Weight shards: gtp_remat = 4 / tp 2, expert_gtp_remat = 2 / etp 1.
        vec![
            ("tensor_model_parallel_size", Int(2)),
            ("tensor_parallel_num_weight_shards", Int(4)),
            ("expert_tensor_parallel_size", Int(1)),
            ("expert_tensor_parallel_num_weight_shards", Int(2)),
            ("expert_model_parallel_size", Int(2)),
            ("world_size", Int(32)),
        ],
    ]
}

/// The arguments as Megatron-LM's flags.
fn as_flags(args: &[Arg]) -> Vec<String> {
    let mut out = Vec::new();
    for (name, value) in args {
        let arg = MegatronArg::find(name).unwrap();
        match value {
            MegatronValue::Bool(true) => out.push(arg.flag.to_owned()),
            MegatronValue::Int(n) => out.extend([arg.flag.to_owned(), n.to_string()]),
            MegatronValue::Ints(list) => {
                out.push(arg.flag.to_owned());
                out.extend(list.iter().map(i64::to_string));
            }
            other => panic!("{other:?}"),
        }
    }
    out
}

/// The arguments as a JSON object with Megatron-LM's names.
fn as_json(args: &[Arg]) -> String {
    let mut map = serde_json::Map::new();
    for (name, value) in args {
        let v = match value {
            MegatronValue::Bool(b) => j!(b),
            MegatronValue::Int(n) => j!(n),
            MegatronValue::Ints(list) => j!(list),
            other => panic!("{other:?}"),
        };
        map.insert((*name).to_owned(), v);
    }
    Value::Object(map).to_string()
}

/// The arguments as TOML with Megatron-LM's names.
fn as_toml(args: &[Arg]) -> String {
    let mut out = String::from("# Megatron-LM's names\n");
    for (name, value) in args {
        let v = match value {
            MegatronValue::Bool(b) => b.to_string(),
            MegatronValue::Int(n) => n.to_string(),
            MegatronValue::Ints(list) => format!("{list:?}"),
            other => panic!("{other:?}"),
        };
        out.push_str(&format!("{name} = {v}\n"));
    }
    out
}

/// What the library builds from the arguments: its world size, every
/// kind's groups and its resolved configuration's keys.
fn library(args: &[Arg]) -> (Value, Value, Value) {
    let mut parsed = MegatronArgs::new();
    for (name, value) in args {
        assert!(parsed.set(name, value.clone()).unwrap(), "{name}");
    }
    let layout = Layout::new(&parsed.config().unwrap()).unwrap();
    let mut groups = serde_json::Map::new();
    for kind in layout.kinds() {
        let lists = layout.groups(*kind).unwrap().to_vecs();
        groups.insert(kind.to_string(), j!(lists));
    }
    let config = serde_json::to_value(layout.config()).unwrap();
    (j!(layout.world_size()), Value::Object(groups), config)
}

#[test]
fn flags_pasted_lines_files_and_the_library_agree() {
    let dir = temp_dir("megatron-ways");
    for (i, args) in argument_sets().iter().enumerate() {
        let flags = as_flags(args);
        let mut command: Vec<&str> = vec!["groups", "--format", "json"];
        command.extend(flags.iter().map(String::as_str));
        let from_flags = stdout_args(&command);

        // torchrun's world size agrees with the arguments' world_size.
        let world = args
            .iter()
            .find_map(|(name, v)| match v {
                MegatronValue::Int(n) if *name == "world_size" => Some(*n),
                _ => None,
            })
            .unwrap();
        let line = format!(
            "torchrun --nproc-per-node 8 --nnodes {} pretrain_gpt.py --lr 3e-4 \\\n  {} --seq-length 4096 # --pipeline-model-parallel-size 4",
            world / 8,
            flags.join(" ")
        );
        let from_line = stdout_args(&["groups", "--format", "json", "--megatron-args", &line]);

        let json_path = dir.join(format!("set{i}.json"));
        std::fs::write(&json_path, as_json(args)).unwrap();
        let from_json = stdout(&format!(
            "groups --format json --config {}",
            json_path.display()
        ));
        let toml_path = dir.join(format!("set{i}.toml"));
        std::fs::write(&toml_path, as_toml(args)).unwrap();
        let from_toml = stdout(&format!(
            "groups --format json --config {}",
            toml_path.display()
        ));

        assert_eq!(from_flags, from_line, "set {i}: flags and --megatron-args");
        assert_eq!(from_flags, from_json, "set {i}: flags and JSON");
        assert_eq!(from_flags, from_toml, "set {i}: flags and TOML");

        let cli: Value = serde_json::from_str(&from_flags).unwrap();
        let (world, groups, config) = library(args);
        assert_eq!(cli["world_size"], world, "set {i}");
        assert_eq!(cli["groups"], groups, "set {i}: the library's groups");
        for (key, value) in config.as_object().unwrap() {
            assert_eq!(&cli["config"][key], value, "set {i}: config key {key}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn megatron_core_defaults_not_the_2024_nesting() {
    // The issue's command: Megatron-Core's folded ep groups, not the 2024
    // nested [0, 4, 8, 12].
    let v = json(
        "groups --tensor-model-parallel-size 2 --context-parallel-size 2 \
         --expert-model-parallel-size 4 --pipeline-model-parallel-size 2 --world-size 64 \
         --kind ep --format json",
    );
    assert_eq!(v["groups"]["ep"][0], j!([0, 2, 4, 6]));
}

#[test]
fn megatron_flags_mean_what_the_table_says() {
    let same = |a: &str, b: &str| {
        let x = stdout(&format!("groups --format json {a}"));
        let y = stdout(&format!("groups --format json {b}"));
        assert_eq!(x, y, "{a} | {b}");
    };
    let differ = |a: &str, b: &str| {
        let x = stdout(&format!("groups --format json {a}"));
        let y = stdout(&format!("groups --format json {b}"));
        assert_ne!(x, y, "{a} | {b}");
    };
    // Encoder tp 0 is the decoder's tp.
    same(
        "--tp 4 --encoder-tensor-model-parallel-size 0 --encoder-pipeline-model-parallel-size 1 --world-size 16",
        "--tp 4 --encoder-tp 4 --encoder-pp 1 --world-size 16",
    );
    // Encoder pp 0 (or left out) is no encoder, whatever the encoder tp.
    same(
        "--tp 2 --encoder-tensor-model-parallel-size 4 --encoder-pipeline-model-parallel-size 0 --world-size 8",
        "--tp 2 --world-size 8",
    );
    same(
        "--tp 2 --encoder-tensor-model-parallel-size 4 --world-size 8",
        "--tp 2 --world-size 8",
    );
    // While our --encoder-tp alone makes an encoder.
    differ(
        "--tp 2 --encoder-tp 4 --world-size 12",
        "--tp 2 --world-size 12",
    );
    same(
        "--tp 2 --pp 2 --use-tp-pp-dp-mapping --world-size 16",
        "--tp 2 --pp 2 --order tp-cp-ep-pp-dp --world-size 16",
    );
    differ(
        "--tp 2 --pp 2 --use-tp-pp-dp-mapping --world-size 16",
        "--tp 2 --pp 2 --world-size 16",
    );
    same("--tp 2 --data-parallel-size 4", "--tp 2 --dp 4");
    same(
        "--tp 2 --ep 2 --expert-tensor-parallel-size 2 --world-size 8",
        "--tp 2 --ep 2 --world-size 8",
    );
    // A short flag and its Megatron-LM name with the same value agree.
    same(
        "--tp 2 --tensor-model-parallel-size 2 --world-size 8",
        "--tp 2 --world-size 8",
    );
    // dp is checked against the world.
    fails_with("groups --data-parallel-size 3 --world-size 8", "8");
}

#[test]
fn megatron_args_lists_what_it_used_and_flags_override_it() {
    let line = "python pretrain_gpt.py --tensor-model-parallel-size 8 --micro-batch-size 1 \
                --pipeline-model-parallel-size 4 --lr 1e-4 --num-layers 32";
    let out = run_args(&[
        "groups",
        "--kind",
        "tp",
        "--format",
        "json",
        "--world-size",
        "64",
        "--megatron-args",
        line,
    ]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim(),
        "megatron-args: used --tensor-model-parallel-size 8, --pipeline-model-parallel-size 4"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["tp"], 8);
    assert_eq!(v["config"]["pp"], 4);
    assert_eq!(v["config"]["dp"], 2);

    // Flags override it, and the note says which.
    let out = run_args(&[
        "groups",
        "--kind",
        "tp",
        "--format",
        "json",
        "--world-size",
        "64",
        "--megatron-args",
        line,
        "--tp",
        "4",
        "--pipeline-model-parallel-size",
        "2",
    ]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--tensor-model-parallel-size 8 (overridden by --tp 4)")
            && stderr.contains(
                "--pipeline-model-parallel-size 4 (overridden by --pipeline-model-parallel-size 2)"
            ),
        "{stderr}"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["config"]["tp"].clone(), v["config"]["pp"].clone()),
        (j!(4), j!(2))
    );
    assert_eq!(v["config"]["dp"], 8);

    // A line without parallelism arguments: Megatron-Core's defaults, said.
    let out = run_args(&[
        "groups",
        "--kind",
        "tp",
        "--megatron-args",
        "--lr 1e-4 --bf16",
    ]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no parallelism arguments found"),
        "{out:?}"
    );
    // Nothing on stderr without it.
    assert!(run_args(&["groups", "--tp", "2"]).stderr.is_empty());
}

#[test]
fn a_key_and_its_megatron_name_must_agree() {
    let dir = temp_dir("megatron-conflicts");
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let p = write("both.json", r#"{"tp": 2, "tensor_model_parallel_size": 4}"#);
    let err = fails_with(&format!("groups --config {p}"), "differ");
    assert!(
        err.contains("tp = 2")
            && err.contains("tensor_model_parallel_size = 4")
            && err.contains(&p),
        "{err}"
    );
    let p = write("both.toml", "tp = 2\ntensor_model_parallel_size = 4\n");
    let err = fails_with(&format!("groups --config {p}"), "differ");
    assert!(
        err.contains("tp = 2") && err.contains("tensor_model_parallel_size = 4"),
        "{err}"
    );
    let p = write(
        "order.toml",
        "order = \"tp-dp-pp\"\nuse_tp_pp_dp_mapping = true\n",
    );
    let err = fails_with(&format!("groups --config {p}"), "differ");
    assert!(
        err.contains("order") && err.contains("use_tp_pp_dp_mapping"),
        "{err}"
    );
    // The same value twice is fine, and so is etp equal to Megatron's tp
    // (etp defaults to tp).
    let p = write(
        "same.toml",
        "tp = 2\ntensor_model_parallel_size = 2\nworld_size = 8\n",
    );
    assert_eq!(
        json(&format!("groups --config {p} --format json"))["config"]["tp"],
        2
    );
    let p = write(
        "etp.toml",
        "etp = 4\ntensor_model_parallel_size = 4\nexpert_model_parallel_size = 2\nworld_size = 16\n",
    );
    assert_eq!(
        json(&format!("groups --config {p} --format json"))["config"]["etp"],
        4
    );
    // On the command line too.
    let err = fails_with("groups --tp 2 --tensor-model-parallel-size 4", "differ");
    assert!(
        err.contains("--tp 2") && err.contains("--tensor-model-parallel-size 4"),
        "{err}"
    );
    let err = fails_with("groups --dp 2 --data-parallel-size 4", "differ");
    assert!(
        err.contains("--dp 2") && err.contains("--data-parallel-size 4"),
        "{err}"
    );
    let err = fails_with(
        "groups --encoder-tp 2 --encoder-pp 1 --encoder-pipeline-model-parallel-size 0",
        "differ",
    );
    assert!(
        err.contains("--encoder-pipeline-model-parallel-size 0"),
        "{err}"
    );
    // A flag overrides a file's Megatron-LM name (another layer).
    let p = write(
        "megatron.toml",
        "tensor_model_parallel_size = 4\nworld_size = 8\n",
    );
    assert_eq!(
        json(&format!("groups --config {p} --tp 2 --format json"))["config"]["tp"],
        2
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_megatron_arguments_name_the_value() {
    // An unexpanded shell variable in a pasted line.
    let err = fails_with_args(
        &[
            "groups",
            "--megatron-args",
            "pretrain_gpt.py --tensor-model-parallel-size $TP",
        ],
        "$TP",
    );
    assert!(
        err.contains("--tensor-model-parallel-size") && err.contains("--megatron-args"),
        "{err}"
    );
    fails_with_args(
        &[
            "groups",
            "--megatron-args",
            "--pipeline-model-parallel-size=0",
        ],
        "pipeline_model_parallel_size = 0",
    );
    fails_with_args(
        &[
            "groups",
            "--megatron-args",
            "--context-parallel-size 2 --lr 'oops",
        ],
        "quotes",
    );
    fails_with_args(
        &[
            "groups",
            "--megatron-args",
            "--hierarchical-context-parallel-sizes x",
        ],
        "x",
    );
    // A flag's value out of the table's range names the flag and the value.
    let err = fails_with(
        "groups --tensor-model-parallel-size 0",
        "--tensor-model-parallel-size 0",
    );
    assert!(err.contains("from 1"), "{err}");
    fails_with("groups --tensor-model-parallel-size -2", "'-2'");
    fails_with("groups --data-parallel-size x", "'x'");
    // A file's value of the wrong type names the key and the value.
    let dir = temp_dir("megatron-bad-files");
    let path = dir.join("bad.toml");
    std::fs::write(&path, "tensor_model_parallel_size = \"4\"\n").unwrap();
    let err = fails_with(
        &format!("groups --config {}", path.display()),
        "tensor_model_parallel_size = \"4\"",
    );
    assert!(err.contains(&path.display().to_string()), "{err}");
    std::fs::write(&path, "use_tp_pp_dp_mapping = 1\n").unwrap();
    fails_with(
        &format!("groups --config {}", path.display()),
        "use_tp_pp_dp_mapping = 1",
    );
    std::fs::write(&path, "pipeline_model_parallel_size = -1\n").unwrap();
    fails_with(
        &format!("groups --config {}", path.display()),
        "pipeline_model_parallel_size = -1",
    );
    // An unknown key lists Megatron-LM's names among the known ones.
    std::fs::write(&path, "tensor_parallel = 4\n").unwrap();
    fails_with(
        &format!("groups --config {}", path.display()),
        "tensor_model_parallel_size",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn weight_shards_every_way_in() {
    let same = |a: &str, b: &str| {
        let x = stdout(&format!("groups --format json {a}"));
        let y = stdout(&format!("groups --format json {b}"));
        assert_eq!(x, y, "{a} | {b}");
    };
    same(
        "--tp 2 --gtp-remat 2 --world-size 16",
        "--tensor-model-parallel-size 2 --tensor-parallel-num-weight-shards 4 --world-size 16",
    );
    same(
        "--tp 2 --etp 1 --ep 2 --expert-gtp-remat 4 --world-size 16",
        "--tp 2 --etp 1 --ep 2 --expert-tensor-parallel-num-weight-shards 4 --world-size 16",
    );
    // The expert count is divided by etp, which defaults to tp.
    same(
        "--tp 2 --ep 2 --expert-gtp-remat 2 --world-size 16",
        "--tp 2 --ep 2 --expert-tensor-parallel-num-weight-shards 4 --world-size 16",
    );
    // A count equal to tp: no weight-shard axis.
    same(
        "--tp 4 --world-size 16",
        "--tp 4 --tensor-parallel-num-weight-shards 4 --world-size 16",
    );
    let v = json("groups --format json --kind tp --tp 2 --gtp-remat 2 --world-size 16");
    assert_eq!(
        (v["config"]["gtp_remat"].clone(), v["config"]["dp"].clone()),
        (j!(2), j!(4))
    );

    // The count is divided by the tp the layout ends with, whichever way
    // each was given.
    let gtp = |args: &[&str]| {
        let mut command = vec!["groups", "--format", "json", "--kind", "tp"];
        command.extend(args);
        let v: Value = serde_json::from_str(&stdout_args(&command)).unwrap();
        (v["config"]["tp"].clone(), v["config"]["gtp_remat"].clone())
    };
    assert_eq!(
        gtp(&[
            "--tp",
            "2",
            "--tensor-parallel-num-weight-shards",
            "8",
            "--world-size",
            "16"
        ]),
        (j!(2), j!(4))
    );
    assert_eq!(
        gtp(&[
            "--megatron-args",
            "--tensor-model-parallel-size 2 --tensor-parallel-num-weight-shards 8",
            "--tp",
            "4",
            "--world-size",
            "16"
        ]),
        (j!(4), j!(2))
    );
    let dir = temp_dir("megatron-shards");
    let path = dir.join("shards.toml");
    std::fs::write(
        &path,
        "tp = 2\ntensor_parallel_num_weight_shards = 8\nworld_size = 16\n",
    )
    .unwrap();
    let file = path.display().to_string();
    assert_eq!(gtp(&["--config", &file]), (j!(2), j!(4)));
    assert_eq!(gtp(&["--config", &file, "--tp", "8"]), (j!(8), Value::Null));
    // Our key in a later layer replaces the count, and the note says so.
    let out = run_args(&[
        "groups",
        "--kind",
        "tp",
        "--megatron-args",
        "--tensor-model-parallel-size 2 --tensor-parallel-num-weight-shards 8",
        "--gtp-remat",
        "2",
        "--world-size",
        "16",
    ]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--tensor-parallel-num-weight-shards 8 (overridden by --gtp-remat 2)"),
        "{stderr}"
    );

    // Megatron-Core's refusals, naming both values and where they came from.
    let err = fails_with(
        "groups --tp 3 --tensor-parallel-num-weight-shards 8",
        "must be divisible by tp = 3 (--tp 3)",
    );
    assert!(
        err.contains("--tensor-parallel-num-weight-shards 8"),
        "{err}"
    );
    fails_with(
        "groups --tp 8 --tensor-parallel-num-weight-shards 4",
        "--tensor-parallel-num-weight-shards 4 must be >= tp = 8 (--tp 8)",
    );
    fails_with(
        "groups --tp 2 --etp 4 --expert-tensor-parallel-num-weight-shards 2",
        "must be >= etp = 4 (--etp 4)",
    );
    fails_with(
        &format!("groups --config {file} --tp 16"),
        "tensor_parallel_num_weight_shards = 8 (in",
    );
    fails_with_args(
        &[
            "groups",
            "--megatron-args",
            "--tensor-model-parallel-size 4 --tensor-parallel-num-weight-shards 6",
        ],
        "tensor_parallel_num_weight_shards (6) must be divisible by tensor_model_parallel_size (4)",
    );

    // Two names of one key in one layer must agree.
    let err = fails_with(
        "groups --tp 2 --gtp-remat 2 --tensor-parallel-num-weight-shards 8",
        "differ",
    );
    assert!(
        err.contains("--gtp-remat 2") && err.contains("--tensor-parallel-num-weight-shards 8"),
        "{err}"
    );
    assert_eq!(
        json(
            "groups --format json --kind tp --tp 2 --gtp-remat 4 --tensor-parallel-num-weight-shards 8 --world-size 16"
        )["config"]["gtp_remat"],
        4
    );
    std::fs::write(
        &path,
        "tp = 2\ngtp_remat = 2\ntensor_parallel_num_weight_shards = 8\n",
    )
    .unwrap();
    let err = fails_with(&format!("groups --config {file}"), "differ");
    assert!(
        err.contains("gtp_remat = 2") && err.contains("tensor_parallel_num_weight_shards = 8"),
        "{err}"
    );
    std::fs::write(&path, "expert_gtp_remat = 2\nep = 2\nworld_size = 8\n").unwrap();
    assert_eq!(
        json(&format!("groups --config {file} --format json --kind tp"))["config"]["expert_gtp_remat"],
        2
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Megatron-LM d98e8a64dd's `examples/llama/train_llama3_8b_h100_fp8.sh`,
/// its parallelism lines with the values bash gives them.
const LLAMA3_LINES: &str = "torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py
MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size 2
    --context-parallel-size 1
    # --pipeline-model-parallel-size 4 # Not explicitly set in llama script options, assume 1 if not multi-node PP
    --sequence-parallel  # Always enable sequence parallelism with TP_SIZE=2
)";

#[test]
fn pasted_scripts_are_read_as_bash_reads_them() {
    let out = run_args(&[
        "groups",
        "--format",
        "json",
        "--kind",
        "tp",
        "--megatron-args",
        LLAMA3_LINES,
    ]);
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            v["config"]["tp"].clone(),
            v["config"]["pp"].clone(),
            v["world_size"].clone()
        ),
        (j!(2), j!(1), j!(8))
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "megatron-args: used --nproc-per-node 8, --nnodes 1, --tensor-model-parallel-size 2, --context-parallel-size 1"
    );
    // Variables used as arguments and defined nowhere are listed.
    let out = run_args(&[
        "groups",
        "--kind",
        "tp",
        "--megatron-args",
        "torchrun $DISTRIBUTED_ARGS pretrain_gpt.py ${GPT_ARGS[@]} --num-layers $NUM_LAYERS \
         --tensor-model-parallel-size 2 $MODEL_ARGS\nMODEL_ARGS=\"--pipeline-model-parallel-size 2\"",
    ]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "megatron-args: not expanded: $DISTRIBUTED_ARGS, ${GPT_ARGS[@]} (the arguments"
        ),
        "{stderr}"
    );
    // An unexpanded value of a layout argument names it and the text.
    let err = fails_with_args(
        &[
            "groups",
            "--megatron-args",
            "MODEL_ARGS=(\n  --pipeline-model-parallel-size ${PP}\n)",
        ],
        "--pipeline-model-parallel-size = ${PP} is not an integer",
    );
    assert!(err.contains("not expanded"), "{err}");
}

#[test]
fn torchrun_gives_the_world_size() {
    let v: Value = serde_json::from_str(&stdout_args(&[
        "groups",
        "--format",
        "json",
        "--kind",
        "tp",
        "--megatron-args",
        "torchrun --nproc-per-node=4 --nnodes=2 train.py --tensor-model-parallel-size 2",
    ]))
    .unwrap();
    assert_eq!(
        (v["world_size"].clone(), v["config"]["dp"].clone()),
        (j!(8), j!(4))
    );
    // The same world size from a flag is fine; another one is an error
    // naming both, whichever layer gives it.
    let line = "torchrun --nproc_per_node 8 --nnodes 2 train.py";
    stdout_args(&[
        "groups",
        "--kind",
        "tp",
        "--world-size",
        "16",
        "--megatron-args",
        line,
    ]);
    let err = fails_with_args(
        &["groups", "--world-size", "8", "--megatron-args", line],
        "differ",
    );
    assert!(
        err.contains("--world-size 8")
            && err.contains(
                "torchrun's --nproc-per-node 8 --nnodes 2 (in --megatron-args, 16 ranks)"
            ),
        "{err}"
    );
    fails_with_args(
        &[
            "groups",
            "--megatron-args",
            "torchrun --nproc-per-node 8 --nnodes 2 x.py --world-size 8",
        ],
        "world_size (8) disagrees with torchrun's --nproc-per-node 8 --nnodes 2 (16 ranks)",
    );
    fails_with_args(
        &[
            "groups",
            "--megatron-args",
            "torchrun --nnodes 1:4 --nproc-per-node 8 x.py",
        ],
        "--nnodes = 1:4 is not a number of nodes",
    );
    fails_with_args(
        &[
            "groups",
            "--megatron-args",
            "torchrun --nproc-per-node gpu x.py",
        ],
        "--nproc-per-node = gpu is not a number of processes",
    );
}

#[test]
fn refused_arguments_are_errors_naming_them() {
    fails_with_args(
        &[
            "groups",
            "--megatron-args",
            "pretrain_gpt.py --tensor-model-parallel-size 2 --hybrid-context-parallel",
        ],
        "--megatron-args: --hybrid-context-parallel changes Megatron-LM's process groups in a way rank-layout does not model",
    );
    fails_with_args(
        &[
            "groups",
            "--megatron-args",
            "--rl-inference-tensor-model-parallel-size 4",
        ],
        "build_inference_pg_collection",
    );
    // Not flags of ours.
    fails_with(
        "groups --hybrid-context-parallel",
        "--hybrid-context-parallel",
    );
    // Arguments that leave the groups alone are ignored.
    let v = json(
        "groups --format json --kind tp --world-size 8 --tp 2 --pipeline-model-parallel-size 2 \
         --megatron-args --use-sharp",
    );
    assert_eq!(v["config"]["pp"], 2);
    let out = run_args(&[
        "groups",
        "--kind",
        "tp",
        "--megatron-args",
        "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 4 \
         --virtual-pipeline-model-parallel-size 2 --sharp-enabled-group dp_replica",
    ]);
    assert!(out.status.success(), "{out:?}");
    // In a file: an error naming the key, unless the switch is off.
    let dir = temp_dir("megatron-refused");
    let path = dir.join("hybrid.toml");
    std::fs::write(
        &path,
        "tensor_model_parallel_size = 2\nhybrid_context_parallel = true\n",
    )
    .unwrap();
    let err = fails_with(
        &format!("groups --config {}", path.display()),
        "--hybrid-context-parallel changes",
    );
    assert!(err.contains(&path.display().to_string()), "{err}");
    std::fs::write(
        &path,
        "tensor_model_parallel_size = 2\nhybrid_context_parallel = false\n",
    )
    .unwrap();
    assert_eq!(
        json(&format!(
            "groups --config {} --format json --kind tp",
            path.display()
        ))["config"]["tp"],
        2
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn help_lists_the_modelled_arguments_only() {
    let help = stdout("groups --help");
    for flag in [
        "--gtp-remat",
        "--expert-gtp-remat",
        "--tensor-parallel-num-weight-shards",
        "--expert-tensor-parallel-num-weight-shards",
        "--tensor-model-parallel-size",
    ] {
        assert!(help.contains(flag), "{flag}");
    }
    // No flag of ours (torchrun's are named in --megatron-args' help).
    for flag in [
        "--hybrid-context-parallel",
        "--nproc-per-node <",
        "--nnodes <",
        "--use-sharp",
    ] {
        assert!(!help.contains(flag), "{flag}");
    }
}
