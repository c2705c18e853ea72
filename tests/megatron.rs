//! Against Megatron-LM's own code: the groups `initialize_model_parallel`
//! of Megatron-LM 5a3b6bcf1f builds (encoder + decoder with folded experts,
//! hierarchical cp and distributed-optimizer instances) and of Megatron-LM
//! d98e8a64dd (main, with the weight-shard axes of Megatron-Core 0.19), and
//! the lists `RankGenerator.get_ranks` of 4ff9e66 returns. The data in
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
