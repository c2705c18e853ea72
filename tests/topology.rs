//! Where groups fall on nodes and domains: hand-checked cases, and
//! `Layout::spread` against a brute-force count over the enumerated groups
//! for random layouts, offsets and node sizes.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use std::collections::BTreeSet;

use proptest::prelude::*;
use rank_layout::{Config, ExpertLayout, Kind, Layout, Spread, Topology};

use common::any_config;

fn layout(c: Config) -> Layout {
    Layout::new(&c).unwrap()
}

/// The spread by definition: every group listed, its distinct nodes counted.
/// A spread's fields, in declaration order.
type Fields = (u32, usize, u32, u32, Option<u32>, Option<u32>);

fn fields(s: &Spread) -> Fields {
    (
        s.groups,
        s.size,
        s.cross_node_groups,
        s.max_nodes_per_group,
        s.cross_domain_groups,
        s.max_domains_per_group,
    )
}

fn brute_force(l: &Layout, kind: Kind, t: &Topology) -> Fields {
    let groups = l.groups(kind).unwrap().to_vecs();
    let count = |unit: u32| {
        let spans: Vec<usize> = groups
            .iter()
            .map(|g| g.iter().map(|r| r / unit).collect::<BTreeSet<_>>().len())
            .collect();
        (
            spans.iter().filter(|n| **n > 1).count() as u32,
            spans.iter().copied().max().unwrap_or(0) as u32,
        )
    };
    let (cross, most) = count(t.gpus_per_node());
    let domains = t.gpus_per_domain().map(count);
    (
        groups.len() as u32,
        groups.iter().map(Vec::len).max().unwrap_or(0),
        cross,
        most,
        domains.map(|d| d.0),
        domains.map(|d| d.1),
    )
}

#[test]
fn tp_16_on_8_gpu_nodes_spans_two_nodes() {
    let l = layout(
        Config::new()
            .tp(16)
            .pp(2)
            .world_size(Some(64))
            .expert_layout(ExpertLayout::Nested),
    );
    let s = l
        .spread(Kind::TP, &Topology::new(8, None).unwrap())
        .unwrap();
    assert_eq!(s.groups, 4);
    assert_eq!(s.size, 16);
    assert_eq!(s.cross_node_groups, 4);
    assert_eq!(s.max_nodes_per_group, 2);
    assert_eq!(s.cross_domain_groups, None);
}

#[test]
fn dp_first_makes_tp_cross_nodes() {
    // 256 GPUs, tp=8 pp=4 cp=2 (dp = 4): with tp first, every tp group is one
    // node; with dp first, tp neighbours are dp*... ranks apart.
    let t = Topology::new(8, None).unwrap();
    let good = layout(
        Config::new()
            .tp(8)
            .pp(4)
            .cp(2)
            .world_size(Some(256))
            .order("tp-cp-dp-pp".parse().unwrap())
            .expert_layout(ExpertLayout::Nested),
    );
    let s = good.spread(Kind::TP, &t).unwrap();
    assert_eq!((s.cross_node_groups, s.max_nodes_per_group), (0, 1));
    let bad = layout(
        Config::new()
            .tp(8)
            .pp(4)
            .cp(2)
            .world_size(Some(256))
            .order("dp-tp-cp-pp".parse().unwrap())
            .expert_layout(ExpertLayout::Nested),
    );
    let s = bad.spread(Kind::TP, &t).unwrap();
    // dp = 4: a tp group is ranks d, d+4, ..., d+28: four nodes.
    assert_eq!(
        (s.groups, s.cross_node_groups, s.max_nodes_per_group),
        (32, 32, 4)
    );
}

#[test]
fn rank_offset_shifts_nodes() {
    // tp=8 groups start at rank 4: each straddles two nodes.
    let l = layout(
        Config::new()
            .tp(8)
            .world_size(Some(32))
            .rank_offset(4)
            .expert_layout(ExpertLayout::Nested),
    );
    let s = l
        .spread(Kind::TP, &Topology::new(8, None).unwrap())
        .unwrap();
    assert_eq!((s.cross_node_groups, s.max_nodes_per_group), (4, 2));
}

#[test]
fn domains_of_an_nvl72_rack() {
    // ep=16 groups of the expert grid: 72 GPUs per domain (9 nodes of 8).
    let l = layout(
        Config::new()
            .tp(4)
            .ep(16)
            .world_size(Some(576))
            .expert_layout(ExpertLayout::Nested),
    );
    let t = Topology::new(8, Some(9)).unwrap();
    let s = l.spread(Kind::EP, &t).unwrap();
    assert_eq!(fields(&s), brute_force(&l, Kind::EP, &t));
    assert_eq!(s.max_nodes_per_group, 8);
    assert!(s.cross_domain_groups.unwrap() > 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// For every kind of random layouts, node sizes and domain sizes, the
    /// stride computation equals the count over the enumerated groups.
    #[test]
    fn spread_equals_brute_force(
        c in any_config(),
        gpus in prop_oneof![Just(1u32), Just(2), Just(3), Just(4), Just(8)],
        nodes in prop_oneof![Just(None), Just(Some(2u32)), Just(Some(3))],
    ) {
        let l = Layout::new(&c).unwrap();
        let t = Topology::new(gpus, nodes).unwrap();
        for &kind in l.kinds() {
            prop_assert_eq!(fields(&l.spread(kind, &t).unwrap()), brute_force(&l, kind, &t), "kind {}", kind);
        }
    }
}

#[test]
fn joined_pipelines_sharing_the_boundary_node() {
    // The seed case (encoder ranks 0-3, decoder ranks 4-11; pipelines
    // [0,4],[0,5],[1,6],[1,7],[2,8],[2,9],[3,10],[3,11]) on 6-GPU nodes:
    // node 0 holds ranks 0-5, so [0,4] and [0,5] stay inside it.
    let l = layout(Config::new().tp(4).cp(2).encoder_tp(2));
    let t = Topology::new(6, None).unwrap();
    let pp = l.spread(Kind::PP, &t).unwrap();
    assert_eq!(
        (pp.groups, pp.cross_node_groups, pp.max_nodes_per_group),
        (8, 6, 2)
    );
    for kind in [Kind::PP, Kind::EMBD, Kind::POS_EMBD, Kind::TP_PP] {
        assert_eq!(
            fields(&l.spread(kind, &t).unwrap()),
            brute_force(&l, kind, &t),
            "{kind}"
        );
    }
}

/// Small encoder + decoder layouts of every shape: tp and encoder tp either
/// side larger (fan-out, fan-in, uneven blocks), any order, nested or folded
/// experts, hierarchical cp and optimizer instances when they fit, and rank
/// offsets that are multiples of nothing in particular. Invalid picks are
/// repaired (extra families dropped, then experts, then the order) rather
/// than rejected.
fn encoder_decoder() -> impl Strategy<Value = Config> {
    (
        (1..=6u32, 1..=6u32, 1..=3u32, 1..=4u32, 1..=5u32, 1..=4u32),
        (
            prop_oneof![Just(1u32), Just(2)],
            Just(vec!["tp", "cp", "ep", "dp", "pp"]).prop_shuffle(),
            any::<bool>(),
            0..=40u32,
            prop_oneof![Just(1u32), Just(2), Just(3)],
            any::<bool>(),
        ),
    )
        .prop_map(
            |((tp, etp, epp, cp, dp, pp), (ep, order, folded, offset, n, hcp))| {
                let mut c = Config::new()
                    .tp(tp)
                    .cp(cp)
                    .ep(ep)
                    .dp(Some(dp * ep))
                    .pp(pp)
                    .encoder_tp(etp)
                    .encoder_pp(epp)
                    .order(order.join("-").parse().unwrap())
                    .rank_offset(offset)
                    .expert_layout(if folded {
                        ExpertLayout::Folded
                    } else {
                        ExpertLayout::Nested
                    })
                    .dist_opt_instances(n)
                    .hierarchical_cp(if hcp && cp > 1 {
                        vec![2, cp / 2]
                    } else {
                        vec![]
                    });
                if Layout::new(&c).is_err() {
                    c = c.dist_opt_instances(1).hierarchical_cp(vec![]);
                }
                if Layout::new(&c).is_err() {
                    c = c.ep(1).dp(Some(dp));
                }
                if Layout::new(&c).is_err() {
                    c = c.order("tp-cp-ep-dp-pp".parse().unwrap());
                }
                c
            },
        )
        .prop_filter("a valid encoder + decoder layout", |c| {
            Layout::new(c).is_ok()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    /// The joined kinds (pp, embd, pos-embd, tp-pp) are counted from the
    /// strides and the join, every other kind as before: all of them equal
    /// the count over the enumerated groups, on nodes of 1 to 13 GPUs and
    /// domains of 1 to 5 nodes (most of which divide nothing in the
    /// layout).
    #[test]
    fn encoder_decoder_spread_equals_brute_force(
        c in encoder_decoder(),
        gpus in 1..=13u32,
        nodes in prop_oneof![Just(None), (1..=5u32).prop_map(Some)],
    ) {
        let l = Layout::new(&c).unwrap();
        let t = Topology::new(gpus, nodes).unwrap();
        for &kind in l.kinds() {
            prop_assert_eq!(
                fields(&l.spread(kind, &t).unwrap()),
                brute_force(&l, kind, &t),
                "kind {} of {:?} on {:?}", kind, c, t
            );
        }
    }
}
