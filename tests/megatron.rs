//! Against Megatron-LM's own code: the groups `initialize_model_parallel`
//! of Megatron-LM 5a3b6bcf1f builds (encoder + decoder with folded experts,
//! hierarchical cp and distributed-optimizer instances) and of Megatron-LM
//! d98e8a64dd (main, with the weight-shard axes of Megatron-Core 0.19), and
//! the lists `RankGenerator.get_ranks` of 4ff9e66 returns. The data in
//! `tests/data/megatron/` is the output of that code at those commits, run
//! on one process with a recording stand-in for `torch.distributed` (every
//! `new_group` call in creation order); see `tests/data/megatron/README.md`.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

use std::collections::BTreeMap;

use rank_layout::megatron::RankGenerator;
use rank_layout::{Config, Kind, Layout};
use serde_json::Value;

mod common;
use common::{megatron_data, rank_lists};

/// The configuration Megatron-LM was given, in rank-layout's keys
/// (Megatron-Core's defaults: folded experts, etp = tp, encoder tp 0 = tp).
fn config(c: &Value) -> Config {
    try_config(c).unwrap_or_else(|e| panic!("{c}: {e}"))
}

/// [`config`], or the error of an order rank-layout does not parse.
fn try_config(c: &Value) -> Result<Config, rank_layout::Error> {
    let n = |k: &str| c.get(k).and_then(Value::as_u64).map(|v| v as u32);
    let mut config = Config::new()
        .tp(n("tp").unwrap())
        .cp(n("cp").unwrap())
        .ep(n("ep").unwrap())
        .pp(n("pp").unwrap())
        .world_size(n("world_size"))
        .order(c["order"].as_str().unwrap().parse()?)
        .etp(n("etp_passed"))
        .dist_opt_instances(n("dist_opt_instances").unwrap_or(1))
        .gtp_remat(n("gtp_remat").unwrap_or(1))
        .expert_gtp_remat(n("expert_gtp_remat").unwrap_or(1));
    if let Some(levels) = c.get("hierarchical_cp").and_then(Value::as_array) {
        config = config.hierarchical_cp(
            levels
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect::<Vec<_>>(),
        );
    }
    if n("encoder_pp").unwrap_or(0) > 0 {
        config = config
            .encoder_pp(n("encoder_pp"))
            .encoder_tp(n("encoder_tp").filter(|t| *t > 0));
    }
    Ok(config)
}

/// Every accepted case of Megatron-LM 5a3b6bcf1f: rank-layout accepts it
/// and builds every kind's groups, in Megatron's order, exactly; the joined
/// pipelines (pp, embd, pos-embd) are rank-layout's own join by
/// coordinates, and equal Megatron's where its join pairs list positions of
/// equal grids (encoder tp = tp). Decoder-only distributed-optimizer groups
/// are today's Megatron-Core construction (checked in tests/dist_opt.rs), not
/// 5a3b6bcf1f's.
#[test]
fn initialize_model_parallel_5a3b6bcf1f() {
    let data = megatron_data("megatron_5a3b6bcf1f.json");
    let cases = data["cases"].as_array().unwrap();
    assert!(cases.len() > 250, "{}", cases.len());
    let (mut encoder_cases, mut compared, mut joined_equal) = (0, 0, 0);
    for case in cases {
        let c = config(&case["config"]);
        let megatron: BTreeMap<String, Vec<Vec<u32>>> = case["groups"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), rank_lists(v)))
            .collect();
        let layout = match Layout::new(&c) {
            Ok(l) => l,
            Err(e) if !c.has_encoder() && c.dist_opt_instances > 1 => {
                // Refused on purpose: intra and inter groups that would
                // not be what they claim (tests/dist_opt.rs).
                assert!(e.to_string().contains("dist_opt_instances"), "{c}: {e}");
                continue;
            }
            Err(e) => panic!("{c}: Megatron-LM accepts it, rank-layout says {e}"),
        };
        encoder_cases += usize::from(c.has_encoder());
        let ours: Vec<String> = layout.kinds().iter().map(Kind::to_string).collect();
        for kind in &ours {
            let dist_opt = [
                "dp-cp-intra",
                "dp-cp-inter",
                "edp-intra",
                "dist-opt-instance",
            ];
            if !c.has_encoder() && dist_opt.contains(&kind.as_str()) {
                continue;
            }
            let want = megatron
                .get(kind)
                .unwrap_or_else(|| panic!("{c}: Megatron-LM has no {kind} groups"));
            let got = layout.groups(kind.parse().unwrap()).unwrap().to_vecs();
            let joined = ["pp", "embd", "pos-embd"].contains(&kind.as_str());
            if joined && c.has_encoder() {
                let encoder_tp = layout.encoder_sizes().unwrap().tp;
                if encoder_tp == c.tp {
                    assert_eq!(&got, want, "{c}: {kind}");
                    joined_equal += 1;
                }
                continue;
            }
            assert_eq!(&got, want, "{c}: {kind}");
            compared += 1;
        }
        for kind in megatron.keys() {
            assert!(ours.contains(kind), "{c}: rank-layout lacks {kind}");
        }
    }
    assert!(encoder_cases > 200, "{encoder_cases}");
    assert!(compared > 3000, "{compared}");
    assert!(joined_equal > 50, "{joined_equal}");
}

/// Megatron-LM 5a3b6bcf1f's refusals that are rank-layout's too: the
/// decoder's expert grid must fit the decoder's world, edp must equal dp
/// when pp is not last, N must divide dp*cp. (It also refuses encoder
/// tp > tp, which rank-layout joins by fan-in.)
#[test]
fn refusals_5a3b6bcf1f() {
    let data = megatron_data("megatron_5a3b6bcf1f.json");
    let mut checked = 0;
    for case in data["rejected"].as_array().unwrap() {
        let error = case["error"].as_str().unwrap();
        let shared = [
            "is not divisible by expert_tensor",
            "When not using pp-last rank ordering",
            "partial DistOpt shard factor",
            "but you haven't",
        ];
        if shared.iter().any(|s| error.contains(s)) {
            let c = config(&case["config"]);
            assert!(
                Layout::new(&c).is_err(),
                "{c}: Megatron-LM refuses it: {error}"
            );
            checked += 1;
        }
    }
    assert!(checked > 50, "{checked}");
}

/// `RankGenerator.get_ranks` of Megatron-LM 4ff9e66 on 300 random
/// generators, every token and both `independent_ep`: the same lists, and
/// an error wherever Megatron-LM raises one. Where `ep` does not divide
/// `dp`, Megatron-LM's independent-ep lists are incomplete or fail; rank-layout
/// refuses them all.
#[test]
fn rank_generator_4ff9e66() {
    let data = megatron_data("rank_generator_4ff9e66.json");
    let mut compared = 0;
    for case in data["cases"].as_array().unwrap() {
        let a = &case["args"];
        let n = |k: &str| a[k].as_u64().unwrap() as u32;
        let offset = a.get("rank_offset").and_then(Value::as_u64).unwrap_or(0) as u32;
        let g = RankGenerator::new(
            n("tp"),
            n("ep"),
            n("dp"),
            n("pp"),
            n("cp"),
            a["order"].as_str().unwrap(),
            offset,
        )
        .unwrap_or_else(|e| panic!("{a}: {e}"));
        let divides = n("dp") % n("ep") == 0;
        for (key, want) in case["ranks"].as_object().unwrap() {
            let (token, independent) = key.split_once('|').unwrap();
            let independent = independent == "true";
            let got = g.get_ranks(token, independent);
            if independent && !divides {
                assert!(got.is_err(), "{a} {key}");
                continue;
            }
            assert_eq!(
                got.unwrap_or_else(|e| panic!("{a} {key}: {e}")),
                rank_lists(want),
                "{a} {key}"
            );
            compared += 1;
        }
        if let Some(errors) = case.get("token_errors").and_then(Value::as_object) {
            for key in errors.keys() {
                let (token, independent) = key.split_once('|').unwrap();
                assert!(
                    g.get_ranks(token, independent == "true").is_err(),
                    "{a} {key}"
                );
            }
        }
    }
    assert!(compared > 10_000, "{compared}");
    for case in data["rejected"].as_array().unwrap() {
        let a = &case["args"];
        let n = |k: &str| a[k].as_u64().unwrap() as u32;
        let offset = a.get("rank_offset").and_then(Value::as_u64).unwrap_or(0) as u32;
        assert!(
            RankGenerator::new(
                n("tp"),
                n("ep"),
                n("dp"),
                n("pp"),
                n("cp"),
                a["order"].as_str().unwrap(),
                offset
            )
            .is_err(),
            "{a}: {}",
            case["error"]
        );
    }
}

/// Every accepted case of Megatron-LM d98e8a64dd (main, whose
/// `parallel_state.py` megatron-core 0.19.2 ships unchanged), 340 of them,
/// 243 with `gtp_remat` > 1 and 178 with `expert_gtp_remat` > 1 (but the
/// few whose order names gtp_remat twice, refused here): every
/// kind rank-layout lists equals Megatron's groups in Megatron's order, and
/// every group Megatron creates is one rank-layout has: the weight-shard
/// groups it builds even at size 1 are singletons (`gtp_remat`,
/// `egtp_remat`) or the `etp-ep-pp` groups (`etp-ep-egtp_remat-pp`), and
/// its one distributed-optimizer instance is the `etp-ep-pp` groups one
/// after another (the whole world, sorted, with weight shards).
#[test]
fn initialize_model_parallel_d98e8a64dd() {
    let data = megatron_data("megatron_d98e8a64dd.json");
    let cases = data["cases"].as_array().unwrap();
    assert!(cases.len() >= 340, "{}", cases.len());
    let (mut compared, mut gtp, mut egtp, mut repeated) = (0, 0, 0, 0);
    for case in cases {
        let c = match try_config(&case["config"]) {
            Ok(c) => c,
            Err(e) => {
                // Megatron-LM builds an order naming gtp_remat twice when
                // its size is 1 (and fails later when it is not); every
                // repeated token is an error in rank-layout.
                assert!(matches!(e, rank_layout::Error::RepeatedAxis { .. }), "{e}");
                repeated += 1;
                continue;
            }
        };
        assert!(case["same_in_0_19_2"].as_bool().unwrap(), "{c}");
        let megatron: BTreeMap<String, Vec<Vec<u32>>> = case["groups"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), rank_lists(v)))
            .collect();
        let layout = match Layout::new(&c) {
            Ok(l) => l,
            Err(e) if c.dist_opt_instances > 1 => {
                // Refused on purpose (tests/dist_opt.rs), as for 5a3b6bcf1f.
                assert!(e.to_string().contains("dist_opt_instances"), "{c}: {e}");
                continue;
            }
            Err(e) => panic!("{c}: Megatron-LM accepts it, rank-layout says {e}"),
        };
        gtp += usize::from(c.gtp_remat > 1);
        egtp += usize::from(c.expert_gtp_remat > 1);
        let ours: Vec<String> = layout.kinds().iter().map(Kind::to_string).collect();
        for kind in &ours {
            // Megatron-Core 0.19 names these tp-gtp_remat-* at any size.
            let named = match kind.as_str() {
                "tp-pp" | "tp-dp" | "tp-dp-cp" => kind.replacen("tp-", "tp-gtp_remat-", 1),
                _ => kind.clone(),
            };
            let want = megatron
                .get(&named)
                .unwrap_or_else(|| panic!("{c}: Megatron-LM has no {named} groups"));
            let got = layout.groups(kind.parse().unwrap()).unwrap().to_vecs();
            assert_eq!(&got, want, "{c}: {kind}");
            compared += 1;
        }
        let groups = |kind: Kind| layout.groups(kind).unwrap().to_vecs();
        let first = layout.rank_offset();
        let world: Vec<u32> = (first..first + layout.world_size()).collect();
        for (kind, want) in &megatron {
            if ours.contains(kind) {
                continue;
            }
            let expected = match kind.as_str() {
                "gtp_remat" | "egtp_remat" => world.iter().map(|r| vec![*r]).collect(),
                "etp-ep-egtp_remat-pp" => groups(Kind::ETP_EP_PP),
                // Megatron-Core 0.19's names of tp-pp, tp-dp and tp-dp-cp,
                // which span a weight-shard axis of size 1.
                "tp-gtp_remat-pp" => groups(Kind::TP_PP),
                "tp-gtp_remat-dp" => groups(Kind::TP_DP),
                "tp-gtp_remat-dp-cp" => groups(Kind::TP_DP_CP),
                "dist-opt-instance" if c.gtp_remat > 1 || c.expert_gtp_remat > 1 => {
                    vec![world.clone()]
                }
                "dist-opt-instance" => vec![groups(Kind::ETP_EP_PP).concat()],
                _ => panic!("{c}: rank-layout lacks {kind}"),
            };
            assert_eq!(&expected, want, "{c}: {kind}");
        }
    }
    assert!(gtp >= 200 && egtp >= 150, "{gtp} {egtp}");
    assert!(repeated <= 10, "{repeated}");
    assert!(compared > 6000, "{compared}");
}

/// Megatron-LM d98e8a64dd's refusals are rank-layout's, but for two
/// documented choices: an order that does not write `tp` (size 1) is
/// refused by Megatron-LM because `"tp" in "...-gtp_remat-..."` finds `tp`
/// inside `gtp_remat`, so tp is never appended (semantics 3.5), where
/// rank-layout appends it as every left-out axis of size 1; and "the order
/// ends in pp" means every axis after `pp` has size 1 in both grids, where
/// Megatron-LM compares the string (semantics 3.1).
#[test]
fn refusals_d98e8a64dd() {
    let data = megatron_data("megatron_d98e8a64dd.json");
    let (mut refused, mut no_tp, mut pp_last) = (0, 0, 0);
    for case in data["rejected"].as_array().unwrap() {
        let error = case["error"].as_str().unwrap();
        let order = case["config"]["order"].as_str().unwrap();
        let writes_tp = order.split('-').any(|t| t.eq_ignore_ascii_case("tp"));
        let c = match try_config(&case["config"]) {
            Ok(c) => c,
            Err(_) => {
                // An unknown or repeated order token.
                refused += 1;
                continue;
            }
        };
        match Layout::new(&c) {
            Err(_) => refused += 1,
            Ok(_) if !writes_tp && c.tp == 1 => no_tp += 1,
            Ok(l) if error.contains("pp-last") => {
                // Only size-1 axes after pp, in both grids.
                let s = l.sizes();
                let size = |t: &str| match t {
                    "tp" => s.tp.max(s.etp),
                    "cp" => s.cp,
                    "ep" => s.ep,
                    "dp" => s.dp.max(s.edp),
                    _ => s.gtp_remat.max(s.egtp_remat),
                };
                let after: Vec<&str> = order
                    .split('-')
                    .skip_while(|t| *t != "pp")
                    .skip(1)
                    .collect();
                assert!(after.iter().all(|t| size(t) == 1), "{c}: {error}");
                pp_last += 1;
            }
            Ok(_) => panic!("{c}: Megatron-LM refuses it ({error}), rank-layout accepts it"),
        }
    }
    assert!(
        refused >= 120,
        "{refused} refused, {pp_last} by the pp-last string"
    );
    assert!(no_tp <= 10, "{no_tp}");
}

/// Megatron-LM main (d98e8a64dd): every argument its training parser
/// defines and what its `initialize.py` passes to
/// `initialize_model_parallel`, extracted by
/// `tests/data/megatron/megatron_arguments.py`.
mod main_d98e8a64dd {
    use std::collections::BTreeMap;

    use rank_layout::megatron::{ArgType, Handling, MEGATRON_ARGS, MegatronArg, Source};
    use serde_json::Value;

    use super::megatron_data;

    /// Each flag of main's parser: its `dest`, what it takes and its type.
    fn flags(data: &Value) -> BTreeMap<String, (String, String, Value)> {
        let mut out = BTreeMap::new();
        for a in data["arguments"].as_array().unwrap() {
            for flag in a["flags"].as_array().unwrap() {
                let entry = (
                    a["dest"].as_str().unwrap().to_owned(),
                    a["takes"].as_str().unwrap().to_owned(),
                    a["type"].clone(),
                );
                assert!(
                    out.insert(flag.as_str().unwrap().to_owned(), entry)
                        .is_none(),
                    "{flag}"
                );
            }
        }
        out
    }

    /// What an argument of `takes` looks like in argparse: a switch, one
    /// value or several, and the value's type.
    fn argparse_form(takes: ArgType) -> (&'static str, Option<&'static str>) {
        match takes {
            ArgType::Int => ("value", Some("int")),
            ArgType::Flag => ("switch", None),
            ArgType::Ints => ("values", Some("int")),
            ArgType::Text => ("value", Some("str")),
            ArgType::Texts => ("values", Some("str")),
            other => panic!("{other:?}"),
        }
    }

    /// Every flag of the table with source `Main` is main's, with the
    /// table's name as its `dest` and the table's kind of value (a renamed
    /// or retyped flag fails here); no flag or name of another source is
    /// main's (one main adds must be marked `Main`).
    #[test]
    fn the_table_names_main_s_flags() {
        let data = megatron_data("arguments_d98e8a64dd.json");
        assert_eq!(
            data["megatron_lm"],
            "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
        );
        let main = flags(&data);
        assert!(main.len() > 800, "{}", main.len());
        let dests: Vec<&str> = main.values().map(|(d, _, _)| d.as_str()).collect();
        for (i, a) in MEGATRON_ARGS.iter().enumerate() {
            assert!(
                MEGATRON_ARGS[..i]
                    .iter()
                    .all(|b| b.name != a.name && b.flag != a.flag),
                "{} twice",
                a.name
            );
            assert_eq!(MegatronArg::find(a.flag), Some(a), "{}", a.flag);
            assert_eq!(MegatronArg::find(a.name), Some(a), "{}", a.name);
            assert_eq!(
                a.key.is_empty(),
                a.handling != Handling::Modelled,
                "{}",
                a.name
            );
            assert!(!a.meaning.is_empty(), "{}", a.name);
            match a.source {
                Source::Main => {
                    let (dest, takes, kind) = main
                        .get(a.flag)
                        .unwrap_or_else(|| panic!("{} is not a flag of main", a.flag));
                    assert_eq!(dest, a.name, "{}", a.flag);
                    let (want_takes, want_kind) = argparse_form(a.takes);
                    assert_eq!(takes, want_takes, "{}", a.flag);
                    if want_kind.is_some() {
                        assert_eq!(kind.as_str(), want_kind, "{}", a.flag);
                    }
                }
                _ => {
                    assert!(!main.contains_key(a.flag), "{} is main's", a.flag);
                    assert!(!dests.contains(&a.name), "{} is main's", a.name);
                }
            }
        }
    }

    /// Attributes main's `initialize_model_parallel` call reads that no
    /// flag sets: the flags they are computed from.
    const DERIVED: [(&str, &[&str]); 3] = [
        (
            "gtp_weight_remat_size",
            &["tensor_parallel_num_weight_shards"],
        ),
        (
            "expert_gtp_weight_remat_size",
            &["expert_tensor_parallel_num_weight_shards"],
        ),
        (
            "virtual_pipeline_model_parallel_size",
            &[
                "num_layers_per_virtual_pipeline_stage",
                "num_virtual_stages_per_pipeline_rank",
                "pipeline_model_parallel_layout",
            ],
        ),
    ];

    /// Every argument whose value main's `initialize.py` passes to
    /// `initialize_model_parallel` (directly or computed from it) is in
    /// the table: modelled, refused, or listed as leaving the groups as
    /// they are; and the parameters left at their defaults are
    /// `rank_offset` and `local_world_size`, which no argument sets.
    #[test]
    fn every_argument_initialize_model_parallel_reads_is_in_the_table() {
        let data = megatron_data("arguments_d98e8a64dd.json");
        let main = flags(&data);
        let is_dest = |name: &str| main.values().any(|(d, _, _)| d == name);
        let call = &data["initialize_model_parallel"];
        let mut read = Vec::new();
        for passed in call["passed"].as_array().unwrap() {
            for attr in passed["reads"].as_array().unwrap() {
                let attr = attr.as_str().unwrap();
                if is_dest(attr) {
                    read.push(attr.to_owned());
                    continue;
                }
                let (_, sources) = DERIVED
                    .iter()
                    .find(|(derived, _)| *derived == attr)
                    .unwrap_or_else(|| {
                        panic!(
                            "{attr} ({}) is no flag's dest: add it to DERIVED",
                            passed["keyword"]
                        )
                    });
                for source in *sources {
                    assert!(is_dest(source), "{source}");
                    read.push((*source).to_owned());
                }
            }
        }
        assert!(read.len() >= 20, "{read:?}");
        for name in &read {
            let row = MEGATRON_ARGS.iter().find(|a| a.name == name);
            assert!(
                row.is_some(),
                "{name} feeds initialize_model_parallel but is not in the table"
            );
        }
        // The group sizes among them are modelled, hybrid cp refused.
        for name in [
            "tensor_model_parallel_size",
            "pipeline_model_parallel_size",
            "context_parallel_size",
            "expert_model_parallel_size",
            "expert_tensor_parallel_size",
            "tensor_parallel_num_weight_shards",
            "expert_tensor_parallel_num_weight_shards",
            "hierarchical_context_parallel_sizes",
            "num_distributed_optimizer_instances",
            "use_tp_pp_dp_mapping",
        ] {
            assert!(read.iter().any(|r| r == name), "{name}");
            assert_eq!(
                MegatronArg::find(name).unwrap().handling,
                Handling::Modelled,
                "{name}"
            );
        }
        assert_eq!(
            MegatronArg::find("hybrid_context_parallel")
                .unwrap()
                .handling,
            Handling::Refused
        );
        assert_eq!(
            call["not_passed"],
            serde_json::json!(["rank_offset", "local_world_size"])
        );
    }
}

/// Megatron-LM's weight-shard arguments (main, d98e8a64dd): S shards over
/// tp give `gtp_remat = S / tp`, over etp (default tp)
/// `expert_gtp_remat = S / etp`, as Megatron-Core's
/// `resolve_tensor_parallel_weight_shards`, whose refusals are typed
/// errors naming the values.
mod weight_shards {
    use rank_layout::megatron::MegatronArgs;
    use rank_layout::megatron::MegatronValue::Int;
    use rank_layout::{Config, Error, Layout};

    fn config(args: &[(&str, i64)]) -> Result<Config, Error> {
        let mut parsed = MegatronArgs::new();
        for (name, value) in args {
            assert!(parsed.set(name, Int(*value))?, "{name}");
        }
        parsed.config()
    }

    #[test]
    fn shards_over_tp_and_etp() {
        let c = config(&[("tensor_model_parallel_size", 2)]).unwrap();
        assert_eq!((c.gtp_remat, c.expert_gtp_remat), (1, 1));
        // S = tp: no weight-shard axis.
        let c = config(&[
            ("tensor_model_parallel_size", 4),
            ("tensor_parallel_num_weight_shards", 4),
        ])
        .unwrap();
        assert_eq!(c.gtp_remat, 1);
        let c = config(&[
            ("tensor_model_parallel_size", 2),
            ("tensor_parallel_num_weight_shards", 8),
            ("world_size", 32),
        ])
        .unwrap();
        assert_eq!((c.tp, c.gtp_remat, c.expert_gtp_remat), (2, 4, 1));
        let layout = Layout::new(&c).unwrap();
        assert_eq!(layout.sizes().dp, 4); // 32 / (tp 2 * gtp_remat 4)
        // Expert shards over etp, which defaults to tp; given in any order.
        let c = config(&[
            ("expert_tensor_parallel_num_weight_shards", 8),
            ("tensor_model_parallel_size", 2),
        ])
        .unwrap();
        assert_eq!((c.gtp_remat, c.expert_gtp_remat), (1, 4));
        let c = config(&[
            ("tensor_model_parallel_size", 2),
            ("expert_tensor_parallel_size", 1),
            ("expert_tensor_parallel_num_weight_shards", 8),
            ("expert_model_parallel_size", 2),
            ("world_size", 16),
        ])
        .unwrap();
        assert_eq!((c.etp, c.expert_gtp_remat), (Some(1), 8));
        let layout = Layout::new(&c).unwrap();
        assert_eq!(layout.sizes().edp, 1); // 16 / (etp 1 * ep 2 * expert_gtp_remat 8)
    }

    #[test]
    fn megatron_s_refusals_name_the_values() {
        let err = config(&[
            ("tensor_model_parallel_size", 8),
            ("tensor_parallel_num_weight_shards", 4),
        ])
        .unwrap_err();
        assert_eq!(
            err,
            Error::WeightShardsBelowTp {
                name: "tensor_parallel_num_weight_shards",
                shards: 4,
                tp_name: "tensor_model_parallel_size",
                tp: 8
            }
        );
        assert_eq!(
            err.to_string(),
            "tensor_parallel_num_weight_shards (4) must be >= tensor_model_parallel_size (8)"
        );
        let err = config(&[
            ("tensor_model_parallel_size", 4),
            ("tensor_parallel_num_weight_shards", 6),
        ])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "tensor_parallel_num_weight_shards (6) must be divisible by tensor_model_parallel_size (4)"
        );
        assert!(matches!(err, Error::WeightShardsNotDivisible { .. }));
        // The expert count is checked against etp, not tp.
        let err = config(&[
            ("tensor_model_parallel_size", 1),
            ("expert_tensor_parallel_size", 4),
            ("expert_tensor_parallel_num_weight_shards", 2),
        ])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "expert_tensor_parallel_num_weight_shards (2) must be >= expert_tensor_parallel_size (4)"
        );
        let err = config(&[
            ("tensor_model_parallel_size", 2),
            ("expert_tensor_parallel_num_weight_shards", 3),
        ])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "expert_tensor_parallel_num_weight_shards (3) must be divisible by expert_tensor_parallel_size (2)"
        );
        // Zero shards: out of the table's range.
        let mut args = MegatronArgs::new();
        assert!(matches!(
            args.set("tensor_parallel_num_weight_shards", Int(0)),
            Err(Error::InvalidArgument { .. })
        ));
    }
}

/// A pasted command line or launch script, read as bash reads its words.
mod command_lines {
    use rank_layout::Error;
    use rank_layout::megatron::{Handling, MEGATRON_ARGS, MegatronArgs, MegatronValue};

    fn parse(text: &str) -> MegatronArgs {
        MegatronArgs::parse_command_line(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    fn fails(text: &str) -> Error {
        match MegatronArgs::parse_command_line(text) {
            Ok(args) => panic!("{text:?} was accepted: {args:?}"),
            Err(e) => e,
        }
    }

    /// Megatron-LM d98e8a64dd's `examples/llama/train_llama3_8b_h100_fp8.sh`,
    /// the lines that set its parallelism (verbatim): a commented-out
    /// `--pipeline-model-parallel-size` and a comment after a switch.
    const LLAMA3_8B_FP8: &str = r#"DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --node_rank $NODE_RANK
    --master_addr $MASTER_ADDR
    --master_port $MASTER_PORT
)
# Model parallelism arguments
MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size $TP_SIZE
    --context-parallel-size $CP_SIZE
    # --pipeline-model-parallel-size $PP_SIZE # Not explicitly set in llama script options, assume 1 if not multi-node PP
    --sequence-parallel  # Always enable sequence parallelism with TP_SIZE=2
)
"#;

    #[test]
    fn comments_are_not_read() {
        // As bash runs it with GPUS_PER_NODE=8, NUM_NODES=1, TP_SIZE=2,
        // CP_SIZE=1 and PP_SIZE=4: the commented line is never expanded.
        let expanded = LLAMA3_8B_FP8
            .replace("$GPUS_PER_NODE", "8")
            .replace("$NUM_NODES", "1")
            .replace("$NODE_RANK", "0")
            .replace("$MASTER_ADDR", "localhost")
            .replace("$MASTER_PORT", "29500")
            .replace("$TP_SIZE", "2")
            .replace("$CP_SIZE", "1")
            .replace("$PP_SIZE", "4");
        let args = parse(&expanded);
        let c = args.config().unwrap();
        assert_eq!((c.tp, c.cp, c.pp, c.world_size), (2, 1, 1, Some(8)));
        let used: Vec<&str> = args.given().map(|(a, _)| a.flag).collect();
        assert_eq!(
            used,
            [
                "--nproc-per-node",
                "--nnodes",
                "--tensor-model-parallel-size",
                "--context-parallel-size"
            ]
        );
        // As pasted, its variables are not expanded: the first layout
        // argument holding one is an error naming it and the text.
        let err = fails(LLAMA3_8B_FP8);
        assert!(
            matches!(&err, Error::InvalidArgument { name, value, .. }
                if name == "--nproc-per-node" && value == "$GPUS_PER_NODE"),
            "{err}"
        );
        let model = &LLAMA3_8B_FP8[LLAMA3_8B_FP8.find("# Model").unwrap()..];
        let err = fails(model).to_string();
        assert!(
            err.starts_with("--tensor-model-parallel-size = $TP_SIZE is not an integer")
                && err.contains("not expanded"),
            "{err}"
        );
        // Comments start words outside quotes only; a `#` inside a word
        // is the word's.
        let c = parse("--pipeline-model-parallel-size 2 # --pipeline-model-parallel-size 4")
            .config()
            .unwrap();
        assert_eq!(c.pp, 2);
        let c = parse("--pipeline-model-parallel-size 2 \\\n# --pipeline-model-parallel-size 4\n")
            .config()
            .unwrap();
        assert_eq!(c.pp, 2);
        let c = parse("--tensor-model-parallel-size 2 --foo a#b --pipeline-model-parallel-size 4")
            .config()
            .unwrap();
        assert_eq!((c.tp, c.pp), (2, 4));
        let c = parse("--x '# a' --pipeline-model-parallel-size 4")
            .config()
            .unwrap();
        assert_eq!(c.pp, 4);
    }

    #[test]
    fn arrays_and_scripts() {
        let script = r#"
GPUS=8
TP=4
GPT_ARGS=(--tensor-model-parallel-size 4 "--pipeline-model-parallel-size 2")
EXTRA_ARGS+=( --context-parallel-size=2 )   # cp
if [[ "$MODE" == "big" ]]; then GPT_ARGS+=("--context-parallel-size 1"); fi
torchrun --nproc-per-node=8 --nnodes 2:2 pretrain_gpt.py ${GPT_ARGS[@]} ${EXTRA_ARGS[@]} \
    $DATA_ARGS --num-layers $NUM_LAYERS "$@" | tee log.txt
"#;
        let args = parse(script);
        let c = args.config().unwrap();
        // Read wherever they are, the last one counting: the array
        // element in the branch too (bash runs it or not; the text does
        // not say), split as `${GPT_ARGS[@]}` splits it.
        assert_eq!(
            (c.tp, c.pp, c.cp, c.world_size),
            (4, 2, 1, Some(16)),
            "{args:?}"
        );
        // The variables used as arguments and defined nowhere in the text.
        assert_eq!(args.unexpanded(), ["$DATA_ARGS"]);
    }

    #[test]
    fn torchrun_gives_the_world_size() {
        let c = parse("torchrun --nproc_per_node 8 --nnodes 4 train.py")
            .config()
            .unwrap();
        assert_eq!(c.world_size, Some(32));
        let c = parse("torchrun --nproc-per-node=4 train.py")
            .config()
            .unwrap();
        assert_eq!(c.world_size, Some(4));
        let c = parse("torchrun --nnodes=1:1 --nproc-per-node 2 train.py")
            .config()
            .unwrap();
        assert_eq!(c.world_size, Some(2));
        // Checked against the world size, naming both.
        let c = parse("torchrun --nproc-per-node 8 --nnodes 2 x.py --world-size 16")
            .config()
            .unwrap();
        assert_eq!(c.world_size, Some(16));
        let err = fails("torchrun --nproc-per-node 8 --nnodes 2 x.py --world-size 8");
        assert_eq!(
            err,
            Error::LaunchMismatch {
                world_size: 8,
                nproc_per_node: 8,
                nnodes: 2,
                ranks: 16
            }
        );
        assert_eq!(
            err.to_string(),
            "world_size (8) disagrees with torchrun's --nproc-per-node 8 --nnodes 2 (16 ranks)"
        );
        // An elastic range, and a count torchrun takes from the machine.
        let err = fails("torchrun --nnodes 1:4 --nproc-per-node 8 x.py").to_string();
        assert!(
            err.starts_with("--nnodes = 1:4 is not a number of nodes"),
            "{err}"
        );
        let err = fails("torchrun --nproc-per-node gpu x.py").to_string();
        assert!(
            err.starts_with("--nproc-per-node = gpu is not a number of processes"),
            "{err}"
        );
        assert!(matches!(
            fails("torchrun --nnodes 0 x.py"),
            Error::InvalidArgument { .. }
        ));
        assert!(matches!(
            fails("torchrun --nproc-per-node 65536 --nnodes 65536 x.py"),
            Error::Overflow { .. }
        ));
    }

    #[test]
    fn refused_arguments_are_errors_naming_them() {
        let refused: Vec<_> = MEGATRON_ARGS
            .iter()
            .filter(|a| a.handling == Handling::Refused)
            .collect();
        assert!(refused.len() >= 6);
        for a in refused {
            let line = format!(
                "pretrain_gpt.py --tensor-model-parallel-size 2 {} 2",
                a.flag
            );
            let err = fails(&line);
            assert_eq!(
                err,
                Error::UnmodelledArgument {
                    flag: a.flag,
                    why: a.meaning
                },
                "{line}"
            );
            assert!(err.to_string().starts_with(a.flag), "{err}");
            // The same from Python or a file; a switch given as false is off.
            let value = match a.takes {
                rank_layout::megatron::ArgType::Flag => MegatronValue::Bool(true),
                rank_layout::megatron::ArgType::Int => MegatronValue::Int(2),
                _ => MegatronValue::Text("tp=2".into()),
            };
            assert!(
                MegatronArgs::new().set(a.name, value).is_err(),
                "{}",
                a.name
            );
            assert!(
                !MegatronArgs::new()
                    .set(a.name, MegatronValue::Bool(false))
                    .unwrap()
            );
        }
        assert_eq!(
            fails("--hybrid-context-parallel").to_string(),
            "--hybrid-context-parallel changes Megatron-LM's process groups in a way rank-layout does not model: it adds, in every dp-cp group, subgroups of each power-of-two size (create_hybrid_dp_cp_groups) to balance packed sequences"
        );
    }

    #[test]
    fn arguments_that_leave_the_groups_alone_are_ignored() {
        let line = "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 \
                    --num-layers-per-virtual-pipeline-stage 2 --virtual-pipeline-model-parallel-size 2 \
                    --decoder-first-pipeline-num-layers 3 --use-sharp --sharp-enabled-group dp \
                    --high-priority-stream-groups dp_cp ep_dp --disable-gloo-process-groups \
                    --distributed-timeout-minutes 60 --pipeline-model-parallel-layout 'E|t*4|L'";
        let args = parse(line);
        let used: Vec<&str> = args.given().map(|(a, _)| a.name).collect();
        assert_eq!(
            used,
            ["tensor_model_parallel_size", "pipeline_model_parallel_size"]
        );
        let mut set = MegatronArgs::new();
        assert!(
            !set.set(
                "virtual_pipeline_model_parallel_size",
                MegatronValue::Int(2)
            )
            .unwrap()
        );
    }

    #[test]
    fn unexpanded_values_name_the_argument_and_the_text() {
        for (line, flag, text) in [
            (
                "--pipeline-model-parallel-size ${PP}",
                "--pipeline-model-parallel-size",
                "${PP}",
            ),
            (
                "--context-parallel-size=$((2*2))",
                "--context-parallel-size",
                "$((2*2))",
            ),
            (
                "--expert-model-parallel-size \"$EP\"",
                "--expert-model-parallel-size",
                "$EP",
            ),
            ("--world-size `nproc`", "--world-size", "`nproc`"),
            (
                "--hierarchical-context-parallel-sizes 2 $HCP",
                "--hierarchical-context-parallel-sizes",
                "$HCP",
            ),
            (
                "--tensor-parallel-num-weight-shards $S",
                "--tensor-parallel-num-weight-shards",
                "$S",
            ),
        ] {
            match fails(line) {
                Error::InvalidArgument { name, value, .. } => {
                    assert_eq!((name.as_str(), value.as_str()), (flag, text), "{line}");
                }
                other => panic!("{line}: {other}"),
            }
        }
        // A value of an argument that is not a layout argument may be anything.
        parse("--num-layers $NL --lr ${LR:-1e-4} --save \"$(pwd)/ckpt\"");
    }

    #[test]
    fn weight_shards_from_a_command_line() {
        let c = parse(
            "--tensor-model-parallel-size 2 --tensor-parallel-num-weight-shards 4 \
             --expert-tensor-parallel-size 1 --expert-tensor-parallel-num-weight-shards 2",
        )
        .config()
        .unwrap();
        assert_eq!((c.gtp_remat, c.expert_gtp_remat), (2, 2));
        assert!(matches!(
            fails("--tensor-model-parallel-size 4 --tensor-parallel-num-weight-shards 2"),
            Error::WeightShardsBelowTp { .. }
        ));
    }
}
