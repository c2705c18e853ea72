//! The audit of Megatron-LM's encoder + decoder joins
//! (`rank_layout::megatron::audit`): its reproduction of the joined
//! pipelines is Megatron-LM's own output at both commits
//! (`tests/data/megatron/encoder_joins.json`), its counts are an
//! independent classification of that output, and small cases are checked
//! by hand.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

use std::collections::HashSet;

use rank_layout::megatron::{
    AUDIT_EXAMPLES, Audit, JoinClass, MegatronJoin, audit, megatron_pipelines,
};
use rank_layout::{Config, Error, ExpertLayout, Kind, Layout, Part, Placement};
use serde_json::Value;

mod common;
use common::{megatron_data, rank_lists};

/// The layout Megatron-LM was given (encoder tp 0 is the decoder's tp),
/// with experts laid out as the commit lays them out (2024 nests them in
/// dp, 2025 folds them; without experts the groups are the same), or
/// rank-layout's error for it.
fn layout(c: &Value, join: MegatronJoin) -> Result<Layout, Error> {
    let experts = match join {
        MegatronJoin::Zip2024 => ExpertLayout::Nested,
        _ => ExpertLayout::Folded,
    };
    let n = |k: &str| c[k].as_u64().unwrap() as u32;
    let config = Config::new()
        .tp(n("tp"))
        .cp(n("cp"))
        .pp(n("pp"))
        .dp(n("dp"))
        .world_size(n("world_size"))
        .order(c["order"].as_str().unwrap().parse().unwrap())
        .encoder_pp(n("encoder_pp"))
        .encoder_tp(Some(n("encoder_tp")).filter(|t| *t > 0))
        .expert_layout(experts);
    Layout::new(&config)
}

/// One case at one commit: the configuration, rank-layout's layout of it,
/// and what Megatron-LM built (`pp`, `embd`, `pos-embd`, `tp-pp`) or its
/// `error`.
struct Case {
    config: Value,
    layout: Result<Layout, Error>,
    join: MegatronJoin,
    megatron: Value,
}

/// Every case, once per commit.
fn cases() -> Vec<Case> {
    let data = megatron_data("encoder_joins.json");
    let commits = &data["commits"];
    let cases = data["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 210);
    let mut out = Vec::new();
    for case in cases {
        for join in MegatronJoin::ALL {
            assert_eq!(commits[join.short_commit()], join.commit());
            out.push(Case {
                config: case["config"].clone(),
                layout: layout(&case["config"], join),
                join,
                megatron: case[join.short_commit()].clone(),
            });
        }
    }
    out
}

/// The cases Megatron-LM built, with their layouts.
fn built() -> Vec<(Value, Layout, MegatronJoin, Value)> {
    cases()
        .into_iter()
        .filter(|c| c.megatron.get("error").is_none())
        .map(|c| {
            let layout = c
                .layout
                .unwrap_or_else(|e| panic!("{} {}: {e}", c.join, c.config));
            (c.config, layout, c.join, c.megatron)
        })
        .collect()
}

/// (a) The reproduced joined pipelines are Megatron-LM's, in its creation
/// order, at both commits; so are the embedding groups made from them;
/// and what Megatron-LM refused, the audit (or the layout) refuses.
#[test]
fn reproduces_megatron_pipelines() {
    let data = megatron_data("encoder_joins.json");
    let differ_between_commits = data["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["4ff9e66"].get("pp").is_some() && c["4ff9e66"]["pp"] != c["5a3b6bcf1f"]["pp"])
        .count();
    assert!(differ_between_commits > 50, "{differ_between_commits}");
    let (mut refused, mut reproduced) = (0, 0);
    for case in cases() {
        let Some(message) = case.megatron.get("error") else {
            continue;
        };
        refused += 1;
        if let Ok(layout) = &case.layout {
            let e = audit(layout, case.join).unwrap_err();
            assert!(megatron_pipelines(layout, case.join).is_err());
            assert!(
                matches!(e, Error::MegatronRefuses { commit, .. } if commit == case.join.short_commit()),
                "{} {}: {e}",
                case.join,
                case.config
            );
            // The reason quotes Megatron-LM's message.
            let quoted = message.as_str().unwrap().split(": ").nth(1).unwrap();
            let quoted = &quoted[..quoted.len().min(40)];
            assert!(e.to_string().contains(quoted), "{e} lacks {quoted:?}");
        }
    }
    for (config, layout, join, megatron) in built() {
        reproduced += 1;
        let ours: Vec<Vec<u32>> = megatron_pipelines(&layout, join).unwrap().collect();
        assert_eq!(ours, rank_lists(&megatron["pp"]), "{join} {config}");
        assert_eq!(megatron_pipelines(&layout, join).unwrap().len(), ours.len());
        let embd: Vec<Vec<u32>> = ours
            .iter()
            .map(|p| match p.len() {
                1 => vec![p[0]],
                _ => vec![p[0], *p.last().unwrap()],
            })
            .collect();
        assert_eq!(embd, rank_lists(&megatron["embd"]), "{join} {config}");
        let pos: Vec<Vec<u32>> = ours.iter().map(|p| vec![p[0]]).collect();
        assert_eq!(pos, rank_lists(&megatron["pos-embd"]), "{join} {config}");
        // tp-pp pairs list positions of equal lists: rank-layout's groups.
        assert_eq!(
            layout.groups(Kind::TP_PP).unwrap().to_vecs(),
            rank_lists(&megatron["tp-pp"]),
            "{join} {config}"
        );
    }
    assert_eq!((refused, reproduced), (136, 284));
}

/// The class of one of Megatron-LM's joined pipelines, judged from the
/// layout's coordinates of every rank, and rank-layout's pairs of (encoder
/// tp, decoder tp).
fn classify(layout: &Layout, group: &[u32], pairs: &HashSet<(u32, u32)>) -> Option<JoinClass> {
    let placements: Vec<_> = group
        .iter()
        .map(|r| layout.placement(*r).unwrap())
        .collect();
    let (encoder, decoder): (Vec<&Placement>, Vec<&Placement>) =
        placements.iter().partition(|p| p.part == Part::Encoder);
    assert!(!encoder.is_empty() && !decoder.is_empty());
    for e in &encoder {
        for d in &decoder {
            if (e.coord.cp, e.coord.dp) != (d.coord.cp, d.coord.dp) {
                return Some(JoinClass::Mixing);
            }
        }
    }
    let pair = (encoder[0].coord.tp, decoder[0].coord.tp);
    (!pairs.contains(&pair)).then_some(JoinClass::OtherTpPairing)
}

/// rank-layout's (encoder tp, decoder tp) pairs, from its pp groups.
fn pairs(layout: &Layout) -> HashSet<(u32, u32)> {
    layout
        .groups(Kind::PP)
        .unwrap()
        .to_vecs()
        .iter()
        .map(|g| {
            let tp = |r: u32| layout.placement(r).unwrap().coord.tp;
            (tp(g[0]), tp(*g.last().unwrap()))
        })
        .collect()
}

/// (b) The audit's counts and examples are an independent classification
/// of Megatron-LM's own groups.
#[test]
fn counts_match_an_independent_classification() {
    let (mut mixing_cases, mut other_cases, mut clean_cases) = (0, 0, 0);
    for (config, layout, join, megatron) in built() {
        let pairs = pairs(&layout);
        let megatron = rank_lists(&megatron["pp"]);
        let classes: Vec<Option<JoinClass>> = megatron
            .iter()
            .map(|g| classify(&layout, g, &pairs))
            .collect();
        let count = |c: JoinClass| classes.iter().filter(|x| **x == Some(c)).count();
        let a = audit(&layout, join).unwrap();
        let what = format!("{join} {config}");
        assert_eq!(a.join, join);
        assert_eq!(a.pipelines, megatron.len(), "{what}");
        assert_eq!(a.mixing, count(JoinClass::Mixing), "{what}");
        assert_eq!(
            a.other_tp_pairing,
            count(JoinClass::OtherTpPairing),
            "{what}"
        );
        assert_eq!(a.agrees(), a.mixing + a.other_tp_pairing == 0);
        // The examples: the first few of each class, in creation order.
        for class in [JoinClass::Mixing, JoinClass::OtherTpPairing] {
            let expected: Vec<&Vec<u32>> = megatron
                .iter()
                .zip(&classes)
                .filter(|(_, c)| **c == Some(class))
                .map(|(g, _)| g)
                .take(AUDIT_EXAMPLES)
                .collect();
            let got: Vec<&Vec<u32>> = a
                .examples
                .iter()
                .filter(|e| e.class == class)
                .map(|e| &e.megatron)
                .collect();
            assert_eq!(got, expected, "{what}");
        }
        for e in &a.examples {
            let ours = layout.memberships(e.decoder.rank, Kind::PP).unwrap();
            assert_eq!(e.rank_layout, ours[0].group.to_vec(), "{what}");
            assert_ne!(e.rank_layout, e.megatron, "{what}");
            assert_eq!(e.encoder.part, Part::Encoder);
            assert_eq!(e.decoder.part, Part::Decoder);
            assert!(e.megatron.contains(&e.encoder.rank) && e.megatron.contains(&e.decoder.rank));
            let encoder_last = e
                .megatron
                .iter()
                .rposition(|r| *r < layout.encoder_world_size())
                .unwrap();
            assert_eq!(e.megatron[encoder_last], e.encoder.rank);
            assert_eq!(e.megatron[encoder_last + 1], e.decoder.rank);
        }
        match (a.mixing > 0, a.other_tp_pairing > 0) {
            (true, _) => mixing_cases += 1,
            (false, true) => other_cases += 1,
            (false, false) => clean_cases += 1,
        }
    }
    // The data exercises every class.
    assert!(
        mixing_cases > 20 && other_cases > 5 && clean_cases > 20,
        "{mixing_cases} {other_cases} {clean_cases}"
    );
}

fn counts(a: &Audit) -> (usize, usize, usize) {
    (a.pipelines, a.mixing, a.other_tp_pairing)
}

fn examples(a: &Audit, class: JoinClass) -> Vec<(Vec<u32>, Vec<u32>)> {
    a.examples
        .iter()
        .filter(|e| e.class == class)
        .map(|e| (e.megatron.clone(), e.rank_layout.clone()))
        .collect()
}

/// (c) tp=4 cp=2 encoder_tp=2 (semantics, section 3.3): 2024's zip joins
/// encoder rank 2 (cp slice 1) to decoder rank 6 (cp slice 0).
#[test]
fn docs_example_by_hand() {
    let layout = Layout::new(&Config::new().tp(4).cp(2).encoder_tp(2)).unwrap();
    // Encoder rank = tp + 2 cp (0..4); decoder rank = 4 + tp + 4 cp.
    let zip = audit(&layout, MegatronJoin::Zip2024).unwrap();
    assert_eq!(counts(&zip), (8, 4, 2));
    assert_eq!(
        examples(&zip, JoinClass::Mixing),
        vec![
            (vec![2, 6], vec![1, 6]),
            (vec![3, 7], vec![1, 7]),
            (vec![0, 8], vec![2, 8]),
            (vec![1, 9], vec![2, 9]),
        ]
    );
    // [1, 5]: encoder tp 1 with decoder tp 1, but block(1) = 0.
    assert_eq!(
        examples(&zip, JoinClass::OtherTpPairing),
        vec![(vec![1, 5], vec![0, 5]), (vec![2, 10], vec![3, 10])]
    );
    let e = &zip.examples[0];
    assert_eq!(
        (e.encoder.rank, e.encoder.coord.tp, e.encoder.coord.cp),
        (2, 0, 1)
    );
    assert_eq!(
        (e.decoder.rank, e.decoder.coord.tp, e.decoder.coord.cp),
        (6, 2, 0)
    );
    // 2025's block map is rank-layout's join here (tp first, 2 | 4).
    let block = audit(&layout, MegatronJoin::Block2025).unwrap();
    assert_eq!(counts(&block), (8, 0, 0));
    assert!(block.examples.is_empty() && block.agrees());
}

/// (c) 2025 still mixes cp slices when cp precedes tp in the order.
#[test]
fn cp_before_tp_by_hand() {
    let order = "cp-tp-dp-pp".parse().unwrap();
    let layout = Layout::new(&Config::new().tp(4).cp(2).encoder_tp(2).order(order)).unwrap();
    // Encoder rank = cp + 2 tp; decoder rank = 4 + cp + 2 tp. Megatron's
    // lists: encoder groups by cp fastest ([0], [1], [2], [3]); decoder
    // groups [4], ..., [11]; the block map pairs decoder groups 0, 1 (tp 0,
    // cp 0 and 1) with encoder group 0 (tp 0, cp 0).
    let block = audit(&layout, MegatronJoin::Block2025).unwrap();
    assert_eq!(counts(&block), (8, 4, 0));
    assert_eq!(
        examples(&block, JoinClass::Mixing),
        vec![
            (vec![0, 5], vec![1, 5]),
            (vec![1, 6], vec![0, 6]),
            (vec![2, 9], vec![3, 9]),
            (vec![3, 10], vec![2, 10]),
        ]
    );
    // The 2024 zip happens to be right with cp fastest... for cp only.
    let zip = audit(&layout, MegatronJoin::Zip2024).unwrap();
    assert_eq!(counts(&zip), (8, 0, 4));
}

/// (c) tp % encoder_tp != 0 with dp > 1: the 2025 block map, longer
/// blocks first over the whole list, runs over dp replicas.
#[test]
fn uneven_blocks_by_hand() {
    let layout = Layout::new(&Config::new().tp(3).dp(2).encoder_tp(2)).unwrap();
    // Encoder rank = tp + 2 dp (0..4); decoder rank = 4 + tp + 3 dp.
    // rank-layout: block(0, 1) = 0, block(2) = 1: [0,4] [0,5] [1,6], [2,7] [2,8] [3,9].
    assert_eq!(
        layout.groups(Kind::PP).unwrap().to_vecs(),
        vec![
            vec![0, 4],
            vec![0, 5],
            vec![1, 6],
            vec![2, 7],
            vec![2, 8],
            vec![3, 9]
        ]
    );
    // Megatron 2025: 6 decoder groups over 4 encoder groups, rep 1,
    // remain 2: encoder 0 gets 4, 5; encoder 1 gets 6, 7; 2 gets 8; 3 gets 9.
    let block: Vec<_> = megatron_pipelines(&layout, MegatronJoin::Block2025)
        .unwrap()
        .collect();
    assert_eq!(
        block,
        vec![
            vec![0, 4],
            vec![0, 5],
            vec![1, 6],
            vec![1, 7],
            vec![2, 8],
            vec![3, 9]
        ]
    );
    // [1, 7] joins encoder dp replica 0 to decoder replica 1; [2, 8] is
    // right again (encoder tp 0 with decoder tp 1 of replica 1).
    let a = audit(&layout, MegatronJoin::Block2025).unwrap();
    assert_eq!(counts(&a), (6, 1, 0));
    assert_eq!(
        examples(&a, JoinClass::Mixing),
        vec![(vec![1, 7], vec![2, 7])]
    );
    let e = &a.examples[0];
    assert_eq!((e.encoder.coord.tp, e.encoder.coord.dp), (1, 0));
    assert_eq!((e.decoder.coord.tp, e.decoder.coord.dp), (0, 1));
    // 2024's zip: encoder group i % 4.
    let zip = audit(&layout, MegatronJoin::Zip2024).unwrap();
    assert_eq!(
        megatron_pipelines(&layout, MegatronJoin::Zip2024)
            .unwrap()
            .collect::<Vec<_>>(),
        vec![
            vec![0, 4],
            vec![1, 5],
            vec![2, 6],
            vec![3, 7],
            vec![0, 8],
            vec![1, 9]
        ]
    );
    assert_eq!(counts(&zip), (6, 3, 2));
}

/// (c) What has no Megatron-LM join to audit is an error naming why.
#[test]
fn refused_layouts() {
    let decoder_only = Layout::new(&Config::new().tp(4).cp(2)).unwrap();
    for join in MegatronJoin::ALL {
        assert_eq!(audit(&decoder_only, join).unwrap_err(), Error::NeedsEncoder);
        assert!(megatron_pipelines(&decoder_only, join).is_err());
    }
    // Fan-in: both commits assert encoder_tp <= tp.
    let fan_in = Layout::new(&Config::new().tp(2).encoder_tp(4)).unwrap();
    for join in MegatronJoin::ALL {
        let e = audit(&fan_in, join).unwrap_err();
        assert!(
            matches!(e, Error::MegatronRefuses { commit, .. } if commit == join.short_commit())
        );
        assert!(e.to_string().contains("encoder_tp (4) > tp (2)"), "{e}");
    }
    // Folded experts: 2025 builds them, 2024 only nests them in dp.
    let folded = Layout::new(&Config::new().tp(2).ep(2).dp(2).encoder_tp(1)).unwrap();
    let e = audit(&folded, MegatronJoin::Zip2024).unwrap_err();
    assert!(e.to_string().contains("folds them"), "{e}");
    assert!(audit(&folded, MegatronJoin::Block2025).is_ok());
    let nested = Layout::new(
        &Config::new()
            .tp(2)
            .ep(2)
            .dp(2)
            .encoder_tp(1)
            .expert_layout(ExpertLayout::Nested),
    )
    .unwrap();
    assert!(audit(&nested, MegatronJoin::Zip2024).is_ok());
    let e = audit(&nested, MegatronJoin::Block2025).unwrap_err();
    assert!(e.to_string().contains("nests them"), "{e}");
    // Hierarchical cp came after 2024.
    let hcp = Layout::new(
        &Config::new()
            .tp(2)
            .cp(4)
            .encoder_tp(1)
            .hierarchical_cp(vec![2, 2]),
    )
    .unwrap();
    assert!(audit(&hcp, MegatronJoin::Zip2024).is_err());
    assert!(audit(&hcp, MegatronJoin::Block2025).is_ok());
    // 2024's RankGenerator wants ep next to dp in the order string, even
    // for ep = 1 (rank-layout's folded layout does not).
    let order = "tp-cp-ep-pp-dp".parse().unwrap();
    let ep_apart = Layout::new(&Config::new().tp(2).cp(2).encoder_tp(1).order(order)).unwrap();
    let e = audit(&ep_apart, MegatronJoin::Zip2024).unwrap_err();
    assert!(
        e.to_string()
            .contains("The ep and dp must be adjacent in order (tp-cp-ep-pp-dp)"),
        "{e}"
    );
    assert!(audit(&ep_apart, MegatronJoin::Block2025).is_ok());
    // 2025's expert grid has no cp: with pp > 1 and an order not ending in
    // pp it needs cp = 1 (the folded layout refuses it itself).
    let order = "tp-cp-pp-dp".parse().unwrap();
    let config = Config::new().tp(2).cp(2).pp(2).encoder_tp(1).order(order);
    assert!(Layout::new(&config).is_err());
    let nested = Layout::new(&config.expert_layout(ExpertLayout::Nested)).unwrap();
    assert!(audit(&nested, MegatronJoin::Zip2024).is_ok());
    let e = audit(&nested, MegatronJoin::Block2025).unwrap_err();
    assert!(
        e.to_string()
            .contains("When not using pp-last rank ordering"),
        "{e}"
    );
}

#[test]
fn join_names() {
    for (text, join) in [
        ("2024", MegatronJoin::Zip2024),
        ("4ff9e66", MegatronJoin::Zip2024),
        (
            "4FF9E66EC870E6E45D765531318D50BD47C85D0F",
            MegatronJoin::Zip2024,
        ),
        (" 2025 ", MegatronJoin::Block2025),
        ("5a3b6bcf1f", MegatronJoin::Block2025),
    ] {
        assert_eq!(text.parse::<MegatronJoin>().unwrap(), join, "{text}");
    }
    for bad in ["", "2023", "4ff9e6", "5a3b6bcf1f1", "zip"] {
        let e = bad.parse::<MegatronJoin>().unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{bad}: {e}");
    }
    assert_eq!(
        MegatronJoin::Zip2024.to_string(),
        "Megatron-LM 4ff9e66 (2024)"
    );
    assert_eq!(JoinClass::OtherTpPairing.name(), "other_tp_pairing");
}

/// The examples are capped, the counts are not.
#[test]
fn examples_are_capped() {
    let layout = Layout::new(&Config::new().tp(4).cp(4).dp(8).encoder_tp(2)).unwrap();
    let a = audit(&layout, MegatronJoin::Zip2024).unwrap();
    assert_eq!(a.pipelines, 4 * 4 * 8);
    assert!(a.mixing > AUDIT_EXAMPLES);
    assert_eq!(
        a.examples
            .iter()
            .filter(|e| e.class == JoinClass::Mixing)
            .count(),
        AUDIT_EXAMPLES
    );
    assert!(a.examples.len() <= 2 * AUDIT_EXAMPLES);
}
