//! Against Megatron-LM's own code: the groups `initialize_model_parallel`
//! of Megatron-LM 5a3b6bcf1f builds (encoder + decoder with folded experts,
//! hierarchical cp and distributed-optimizer instances), and the lists
//! `RankGenerator.get_ranks` of 4ff9e66 returns. The data in
//! `tests/data/megatron/` is the output of that code at those commits, run
//! on one process with a recording stand-in for `torch.distributed` (every
//! `new_group` call in creation order); see `tests/data/megatron/README.md`.

use std::collections::BTreeMap;

use rank_layout::megatron::RankGenerator;
use rank_layout::{Config, Kind, Layout};
use serde_json::Value;

mod common;
use common::{megatron_data, rank_lists};

/// The configuration Megatron-LM was given, in rank-layout's keys
/// (Megatron-Core's defaults: folded experts, etp = tp, encoder tp 0 = tp).
fn config(c: &Value) -> Config {
    let n = |k: &str| c.get(k).and_then(Value::as_u64).map(|v| v as u32);
    let mut config = Config::new()
        .tp(n("tp").unwrap())
        .cp(n("cp").unwrap())
        .ep(n("ep").unwrap())
        .pp(n("pp").unwrap())
        .world_size(n("world_size"))
        .order(c["order"].as_str().unwrap().parse().unwrap())
        .etp(n("etp_passed"))
        .dist_opt_instances(n("dist_opt_instances").unwrap_or(1));
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
    config
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
