//! Golden layouts from documented sources: Megatron-LM's docstrings and
//! tests, the worked examples of docs/semantics.md, the issues' examples, and the reference
//! vectors in `tests/data/vectors` (copied from the project's shared spec).
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

use rank_layout::{Config, ExpertLayout, Kind, Layout};

fn layout(c: Config) -> Layout {
    Layout::new(&c).unwrap_or_else(|e| panic!("{c:?}: {e}"))
}

fn groups(l: &Layout, kind: &str) -> Vec<Vec<u32>> {
    l.groups(kind.parse().unwrap()).unwrap().to_vecs()
}

fn v(groups: &[&[u32]]) -> Vec<Vec<u32>> {
    groups.iter().map(|g| g.to_vec()).collect()
}

#[test]
fn megatron_docstring_tp2_dp3_pp4() {
    // generate_masked_orthogonal_rank_groups docstring: [tp, dp, pp] = [2, 3, 4].
    let l = layout(
        Config::new()
            .tp(2)
            .dp(Some(3))
            .pp(4)
            .order("tp-dp-pp".parse().unwrap())
            .expert_layout(ExpertLayout::Nested),
    );
    assert_eq!(
        groups(&l, "dp"),
        v(&[
            &[0, 2, 4],
            &[1, 3, 5],
            &[6, 8, 10],
            &[7, 9, 11],
            &[12, 14, 16],
            &[13, 15, 17],
            &[18, 20, 22],
            &[19, 21, 23]
        ])
    );
}

#[test]
fn megatron_docstring_16_ranks_tp2_pp4() {
    // initialize_model_parallel docstring: 16 GPUs, tp=2, pp=4 (dp=2).
    let l = layout(
        Config::new()
            .tp(2)
            .pp(4)
            .world_size(Some(16))
            .order("tp-dp-pp".parse().unwrap())
            .expert_layout(ExpertLayout::Nested),
    );
    assert_eq!(
        groups(&l, "tp"),
        v(&[
            &[0, 1],
            &[2, 3],
            &[4, 5],
            &[6, 7],
            &[8, 9],
            &[10, 11],
            &[12, 13],
            &[14, 15]
        ])
    );
    assert_eq!(
        groups(&l, "pp"),
        v(&[
            &[0, 4, 8, 12],
            &[1, 5, 9, 13],
            &[2, 6, 10, 14],
            &[3, 7, 11, 15]
        ])
    );
    assert_eq!(
        groups(&l, "dp"),
        v(&[
            &[0, 2],
            &[1, 3],
            &[4, 6],
            &[5, 7],
            &[8, 10],
            &[9, 11],
            &[12, 14],
            &[13, 15]
        ])
    );
}

#[test]
fn megatron_context_parallel_8_gpus() {
    // Megatron docstring: 8 GPUs, tp=4, cp=2.
    let l = layout(
        Config::new()
            .tp(4)
            .cp(2)
            .world_size(Some(8))
            .expert_layout(ExpertLayout::Nested),
    );
    assert_eq!(groups(&l, "cp"), v(&[&[0, 4], &[1, 5], &[2, 6], &[3, 7]]));
    assert_eq!(groups(&l, "tp"), v(&[&[0, 1, 2, 3], &[4, 5, 6, 7]]));
}

#[test]
fn spec_encdec_seed_case() {
    // semantics 3.3: tp=4, encoder_tp=2, cp=2, pp=encoder_pp=1, world 12.
    let l = layout(
        Config::new()
            .tp(4)
            .cp(2)
            .encoder_tp(Some(2))
            .encoder_pp(Some(1))
            .world_size(Some(12))
            .expert_layout(ExpertLayout::Nested),
    );
    assert_eq!(
        groups(&l, "pp"),
        v(&[
            &[0, 4],
            &[0, 5],
            &[1, 6],
            &[1, 7],
            &[2, 8],
            &[2, 9],
            &[3, 10],
            &[3, 11]
        ])
    );
}

#[test]
fn spec_megatron_encdec_expectation() {
    // semantics 3.3, Megatron's own test: order tp-dp-pp, encoder_tp=1,
    // encoder_pp=1, tp=2, pp=1, dp=2 (6 ranks).
    let base = Config::new()
        .tp(2)
        .dp(Some(2))
        .encoder_tp(Some(1))
        .encoder_pp(Some(1))
        .order("tp-dp-pp".parse().unwrap())
        .expert_layout(ExpertLayout::Nested);
    let l = layout(base.clone());
    assert_eq!(l.world_size(), 6);
    assert_eq!(groups(&l, "tp"), v(&[&[0], &[1], &[2, 3], &[4, 5]]));
    assert_eq!(groups(&l, "dp"), v(&[&[0, 1], &[2, 4], &[3, 5]]));
    assert_eq!(groups(&l, "pp"), v(&[&[0, 2], &[0, 3], &[1, 4], &[1, 5]]));
    // And with encoder_tp=3, tp=5, dp=1.
    let l = layout(base.tp(5).dp(Some(1)).encoder_tp(Some(3)));
    assert_eq!(
        groups(&l, "pp"),
        v(&[&[0, 3], &[0, 4], &[1, 5], &[1, 6], &[2, 7]])
    );
}

#[test]
fn issue_hierarchical_cp_examples() {
    // Folded, tp=2, cp=4, dp=pp=1, levels [2, 2].
    let l = layout(
        Config::new()
            .tp(2)
            .cp(4)
            .expert_layout(ExpertLayout::Folded)
            .hierarchical_cp(vec![2, 2]),
    );
    assert_eq!(groups(&l, "cp"), v(&[&[0, 2, 4, 6], &[1, 3, 5, 7]]));
    assert_eq!(
        groups(&l, "hcp-0"),
        v(&[&[0, 2], &[4, 6], &[1, 3], &[5, 7]])
    );
    assert_eq!(
        groups(&l, "hcp-1"),
        v(&[&[0, 4], &[2, 6], &[1, 5], &[3, 7]])
    );
    // cp=16, levels [2, 2, 4]: one cp group 0..15.
    let l = layout(
        Config::new()
            .cp(16)
            .hierarchical_cp(vec![2, 2, 4])
            .expert_layout(ExpertLayout::Nested),
    );
    let h0 = groups(&l, "hcp-0");
    assert_eq!(&h0[..2], &v(&[&[0, 1], &[2, 3]])[..]);
    let h1 = groups(&l, "hcp-1");
    assert_eq!(&h1[..3], &v(&[&[0, 2], &[1, 3], &[4, 6]])[..]);
    let h2 = groups(&l, "hcp-2");
    assert_eq!(&h2[..2], &v(&[&[0, 4, 8, 12], &[1, 5, 9, 13]])[..]);
}

#[test]
fn issue_dist_opt_example() {
    // Folded, tp=1, cp=2, dp=4, ep=2, etp=1, N=2.
    let l = layout(
        Config::new()
            .cp(2)
            .dp(Some(4))
            .ep(2)
            .etp(Some(1))
            .expert_layout(ExpertLayout::Folded)
            .dist_opt_instances(2),
    );
    assert_eq!(
        groups(&l, "dp-cp-intra"),
        v(&[&[0, 1, 2, 3], &[4, 5, 6, 7]])
    );
    assert_eq!(
        groups(&l, "edp-intra"),
        v(&[&[0, 2], &[4, 6], &[1, 3], &[5, 7]])
    );
    assert_eq!(
        groups(&l, "dp-cp-inter"),
        v(&[&[0, 4], &[2, 6], &[1, 5], &[3, 7]])
    );
    assert_eq!(
        groups(&l, "dist-opt-instance"),
        v(&[&[0, 1, 2, 3], &[4, 5, 6, 7]])
    );
}

/// A reference vector file: its config turned into a [`Config`].
fn vector_config(config: &serde_json::Value) -> Config {
    let n = |k: &str| config.get(k).and_then(|v| v.as_u64()).map(|v| v as u32);
    let mode = config["mode"].as_str().unwrap();
    let encdec = mode == "encdec";
    let folded = mode == "folded";
    Config::new()
        .tp(n("tp").unwrap_or(1))
        .cp(n("cp").unwrap_or(1))
        .ep(n("ep").unwrap_or(1))
        .dp(n("dp"))
        .pp(n("pp").unwrap_or(1))
        .world_size(n("world_size"))
        .order(config["order"].as_str().unwrap().parse().unwrap())
        .rank_offset(n("rank_offset").unwrap_or(0))
        .encoder_tp(if encdec { n("encoder_tp") } else { None })
        .encoder_pp(if encdec { n("encoder_pp") } else { None })
        .expert_layout(if folded {
            ExpertLayout::Folded
        } else {
            ExpertLayout::Nested
        })
        .etp(if folded { n("etp") } else { None })
}

#[test]
fn reference_vectors() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/vectors");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 6, "the six vector files are present");
    for path in files {
        let data: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let l = layout(vector_config(&data["config"]));
        let name = path.display();
        assert_eq!(
            u64::from(l.world_size()),
            data["config"]["world_size"].as_u64().unwrap(),
            "{name}"
        );
        if let Some(edp) = data["config"].get("edp") {
            assert_eq!(u64::from(l.sizes().edp), edp.as_u64().unwrap(), "{name}");
        }
        if let Some(enc) = data["config"].get("encoder_world_size") {
            assert_eq!(
                u64::from(l.encoder_world_size()),
                enc.as_u64().unwrap(),
                "{name}"
            );
        }
        let expected = data["groups"].as_object().unwrap();
        let kinds: Vec<String> = l.kinds().iter().map(Kind::to_string).collect();
        // Compare the sets (serde_json's map may be sorted or keep the
        // file's order, by feature), and the order via the file text.
        let mut names: Vec<&String> = expected.keys().collect();
        names.sort();
        let mut sorted = kinds.clone();
        sorted.sort();
        assert_eq!(sorted.iter().collect::<Vec<_>>(), names, "{name}: kinds");
        for (kind, groups_json) in expected {
            let want: Vec<Vec<u32>> = serde_json::from_value(groups_json.clone()).unwrap();
            assert_eq!(groups(&l, kind), want, "{name}: kind {kind}");
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let text = &text[text.find("\"groups\"").unwrap()..];
        let positions: Vec<usize> = kinds
            .iter()
            .map(|k| text.find(&format!("\"{k}\":")).unwrap())
            .collect();
        assert!(
            positions.windows(2).all(|w| w[0] < w[1]),
            "{name}: kind order"
        );
    }
}
