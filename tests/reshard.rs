//! Reshard plans (`rank_layout::reshard`): properties at random layouts,
//! models, machines and failures, each checked against the shards the
//! sides hold (asked of every process) rather than against the planner's
//! own reasoning: every destination element arrives exactly once from a
//! holder, a holder copies locally, nothing leaves a node or domain that
//! holds the piece, one process's plan is the whole plan's rows for it,
//! the plan is the same every time, and no holder sends more than its
//! share; plus the distributed optimizer's shards against the layout's
//! own groups, and the errors.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proptest::prelude::*;
use rank_layout::machine::{Hosts, NodePlan};
use rank_layout::relayout::{Failure, Policy, RelayoutOptions, relayout};
use rank_layout::reshard::{
    LayerRef, LayerSplit, Locality, Model, Region, Reshard, Shard, Side, Tensor, Tier, Transfer,
};
use rank_layout::{Config, Error, ExpertLayout, Kind, Layout, Order, Part, Topology};

/// The local offset at which `shard` holds all of `region`, if it does.
fn held_at(shard: &Shard, region: &Region) -> Option<Vec<u64>> {
    shard.boxes.iter().find_map(|(b, local)| {
        let inside = (0..region.dims()).all(|d| {
            let (lo, hi) = region.range(d).unwrap();
            let (blo, bhi) = b.range(d).unwrap();
            blo <= lo && hi <= bhi
        });
        inside.then(|| {
            (0..region.dims())
                .map(|d| local[d] + region.lo()[d] - b.lo()[d])
                .collect()
        })
    })
}

/// Every process of either side.
fn processes(plan: &Reshard) -> Vec<u32> {
    let mut all = BTreeSet::new();
    for side in [plan.from(), plan.to()] {
        let l = side.layout();
        for r in l.rank_offset()..(l.rank_end() as u32) {
            all.insert(side.process_of(r).unwrap());
        }
    }
    all.into_iter().collect()
}

/// Checks every property of the module doc on `plan`.
fn check_plan(plan: &Reshard) {
    let locality = plan.locality();
    let all: Vec<Transfer> = plan.transfers().map(Result::unwrap).collect();
    let procs = processes(plan);
    let tensors = plan.model().tensors().len() as u32;
    // Shards, asked of every process.
    let mut src: HashMap<(u32, u32), Shard> = HashMap::new();
    let mut dst: HashMap<(u32, u32), Shard> = HashMap::new();
    for &p in &procs {
        for t in 0..tensors {
            if let Some(s) = plan.source_shard(p, t).unwrap() {
                src.insert((p, t), s);
            }
            if let Some(s) = plan.destination_shard(p, t).unwrap() {
                dst.insert((p, t), s);
            }
        }
    }
    let holders = |t: u32, region: &Region| -> Vec<u32> {
        procs
            .iter()
            .copied()
            .filter(|p| {
                src.get(&(*p, t))
                    .is_some_and(|s| held_at(s, region).is_some())
            })
            .collect()
    };
    // Ids unique; each transfer's source holds it where it says, and its
    // destination wants it where it says.
    let ids: BTreeSet<u64> = all.iter().map(|t| t.id).collect();
    assert_eq!(ids.len(), all.len(), "ids not unique");
    let mut received: HashMap<(u32, u32), u64> = HashMap::new();
    for t in &all {
        let s = src
            .get(&(t.src, t.tensor))
            .expect("the source holds the tensor");
        assert_eq!(held_at(s, &t.region), Some(t.src_offset.to_vec()), "{t:?}");
        let d = dst
            .get(&(t.dst, t.tensor))
            .expect("the destination wants the tensor");
        assert_eq!(held_at(d, &t.region), Some(t.dst_offset.to_vec()), "{t:?}");
        let bytes =
            t.region.numel() * u64::from(plan.model().tensors()[t.tensor as usize].element_bytes);
        assert_eq!(t.bytes, bytes);
        *received.entry((t.dst, t.tensor)).or_default() += t.region.numel();
        // A holder copies locally: a network transfer goes to a process
        // that does not hold the piece.
        let dst_holds = src
            .get(&(t.dst, t.tensor))
            .is_some_and(|s| held_at(s, &t.region).is_some());
        assert_eq!(t.is_local(), dst_holds, "{t:?}");
        assert_eq!(t.tier == Tier::Local, t.is_local());
        // Near the data: the source is on the destination's node (domain)
        // when a live holder is.
        let h = holders(t.tensor, &t.region);
        if h.iter().any(|p| locality.same_node(*p, t.dst)) {
            assert!(locality.same_node(t.src, t.dst), "{t:?} holders {h:?}");
        } else if h.iter().any(|p| locality.same_domain(*p, t.dst)) {
            assert!(locality.same_domain(t.src, t.dst), "{t:?} holders {h:?}");
            assert_eq!(t.tier, Tier::Domain);
        } else {
            assert_eq!(t.tier, Tier::Any);
        }
    }
    // Every destination element arrives exactly once: the regions are
    // disjoint (distinct ids name distinct first elements; equal element
    // counts then mean a partition when the regions lie inside the shard).
    for ((p, t), shard) in &dst {
        let want: u64 = shard.boxes.iter().map(|(b, _)| b.numel()).sum();
        assert_eq!(
            received.get(&(*p, *t)).copied().unwrap_or(0),
            want,
            "process {p} tensor {t}"
        );
        let mut mine: Vec<&Transfer> = all
            .iter()
            .filter(|x| x.dst == *p && x.tensor == *t)
            .collect();
        mine.sort_by_key(|x| x.id);
        for (i, a) in mine.iter().enumerate() {
            for b in &mine[i + 1..] {
                let overlap = (0..a.region.dims()).all(|d| {
                    let (alo, ahi) = a.region.range(d).unwrap();
                    let (blo, bhi) = b.region.range(d).unwrap();
                    alo < bhi && blo < ahi
                });
                assert!(!overlap, "{a:?} and {b:?} overlap");
            }
        }
    }
    // One process's plan is the whole plan's rows for it.
    for &p in &procs {
        let mine = plan.plan_of(p).unwrap();
        let mut rows: Vec<Transfer> = all
            .iter()
            .filter(|t| t.src == p || t.dst == p)
            .copied()
            .collect();
        rows.sort_by_key(|t| t.id);
        assert_eq!(mine.all(), rows, "process {p}");
        assert!(mine.sends.iter().all(|t| t.src == p && t.dst != p));
        assert!(mine.recvs.iter().all(|t| t.dst == p && t.src != p));
        assert!(mine.copies.iter().all(|t| t.src == p && t.dst == p));
    }
    // No holder sends more than its share, per tensor, piece, tier and
    // node or domain.
    let mut groups: BTreeMap<(u32, String, Tier, Option<u64>), Vec<&Transfer>> = BTreeMap::new();
    for t in all.iter().filter(|t| !t.is_local()) {
        let scope = match t.tier {
            Tier::Node => locality.node_of(t.dst),
            Tier::Domain => locality.domain_of(t.dst),
            _ => None,
        };
        groups
            .entry((t.tensor, t.region.to_string(), t.tier, scope))
            .or_default()
            .push(t);
    }
    for ((tensor, _, tier, scope), list) in &groups {
        let region = list[0].region;
        let h = holders(*tensor, &region);
        let (senders, served) = match tier {
            Tier::Node => (
                h.iter().filter(|p| locality.node_of(**p) == *scope).count(),
                list.len(),
            ),
            Tier::Domain => (
                h.iter()
                    .filter(|p| locality.domain_of(**p) == *scope)
                    .count(),
                list.len(),
            ),
            _ => (
                h.len(),
                dst.iter()
                    .filter(|((_, t), s)| t == tensor && held_at(s, &region).is_some())
                    .count(),
            ),
        };
        let mut per: HashMap<u32, usize> = HashMap::new();
        for t in list {
            *per.entry(t.src).or_default() += 1;
        }
        let bound = served.div_ceil(senders);
        for (s, n) in per {
            assert!(
                n <= bound,
                "{tier} {region}: {s} sends {n} > {bound} ({served} over {senders})"
            );
        }
    }
}

/// A valid layout of at most `max` ranks at `offset`, or none.
fn layout(
    sizes: (u32, u32, u32, u32, u32),
    etp: u32,
    gtp: u32,
    order: &str,
    nested: bool,
    instances: u32,
    offset: u32,
) -> Option<Layout> {
    let (tp, cp, pp, dp, ep) = sizes;
    let mut c = Config::new()
        .tp(tp)
        .cp(cp)
        .pp(pp)
        .dp(dp)
        .ep(ep)
        .rank_offset(offset)
        .order(order.parse::<Order>().ok()?)
        .dist_opt_instances(instances)
        .gtp_remat(gtp);
    if nested {
        c = c.expert_layout(ExpertLayout::Nested);
    } else if etp != tp {
        c = c.etp(etp);
    }
    Layout::new(&c).ok()
}

fn side_layout(offset: u32) -> impl Strategy<Value = Layout> {
    (
        (
            prop::sample::select(vec![1u32, 2, 4]),
            1u32..=2,
            1u32..=3,
            1u32..=3,
            prop::sample::select(vec![1u32, 2, 4]),
        ),
        prop::sample::select(vec![1u32, 2, 4]),
        1u32..=2,
        prop::sample::select(vec![
            "tp-cp-ep-dp-pp",
            "tp-cp-ep-pp-dp",
            "tp-dp-ep-cp-pp",
            "cp-tp-ep-dp-pp",
        ]),
        prop::bool::weighted(0.15),
        1u32..=2,
    )
        .prop_filter_map(
            "a valid layout",
            move |(sizes, etp, gtp, order, nested, instances)| {
                let l = layout(sizes, etp, gtp, order, nested, instances, offset)?;
                (l.world_size() <= 48).then_some(l)
            },
        )
}

fn layer_split() -> impl Strategy<Value = LayerSplit> {
    prop_oneof![
        3 => Just(LayerSplit::even()),
        1 => Just(LayerSplit::even().virtual_stages(2)),
        1 => Just(LayerSplit::even().first(2)),
        1 => Just(LayerSplit::even().last(4)),
        1 => Just(LayerSplit::even().first(3).last(3)),
    ]
}

/// A model of `layers` (12) layers and 4 experts, tensors chosen among
/// the kinds of sharding (every dim a multiple of what any side cuts).
fn model() -> impl Strategy<Value = Model> {
    prop::collection::vec((0u8..10, 0u32..12, any::<bool>()), 1..6).prop_map(|picks| {
        let mut tensors = Vec::new();
        for (i, (kind, layer, gtp)) in picks.into_iter().enumerate() {
            let name = format!("t{i}");
            let at = LayerRef::Layer(layer);
            let mut t = match kind {
                0 => Tensor::new(name, [144, 8])
                    .layer(at)
                    .tp_stride(0, 1 + u64::from(layer % 3)),
                1 => Tensor::new(name, [8, 48]).layer(at).tp(1),
                2 => Tensor::new(name, [24]).layer(at),
                3 => Tensor::new(name, [96, 8])
                    .layer([LayerRef::First, LayerRef::Last, LayerRef::Ends][layer as usize % 3])
                    .tp(0),
                4 => Tensor::new(name, [48, 8])
                    .layer(at)
                    .expert(layer % 4)
                    .tp_stride(0, 2),
                5 => Tensor::new(name, [8, 48, 4]).layer(at).experts_dim(0).tp(1),
                6 => Tensor::new(name, [24, 8, 4])
                    .pp_dim(0)
                    .tp(1)
                    .element_bytes(4),
                7 => Tensor::new(name, [1152])
                    .layer(at)
                    .tp(0)
                    .dp_dim(0)
                    .element_bytes(4),
                8 => Tensor::new(name, [144, 8])
                    .layer(at)
                    .tp_blocks(0, [48, 24, 72]),
                _ => Tensor::new(name, [96, 16])
                    .layer(at)
                    .expert(3 - layer % 4)
                    .tp(1)
                    .dp_dim(0),
            };
            if gtp && matches!(kind, 0 | 1 | 3) {
                t = t.gtp();
            }
            tensors.push(t);
        }
        Model::new(12, 4, tensors).unwrap()
    })
}

/// GPUs per node and nodes per domain, or a host table (hosts in random
/// domains, some unknown, listed out of order).
fn locality() -> impl Strategy<Value = Locality> {
    let topology = (
        prop::sample::select(vec![1u32, 2, 4, 8]),
        prop::option::of(1u32..=3),
    )
        .prop_map(|(g, m)| Locality::new(Topology::new(g, m).unwrap()));
    let hosts = (
        prop::sample::select(vec![2u32, 4]),
        prop::collection::vec(0u8..4, 48..=48),
    )
        .prop_map(|(g, domains)| {
            let text: String = domains
                .iter()
                .enumerate()
                .map(|(i, d)| match d {
                    3 => format!("h{:02} - {g}\n", 47 - i),
                    d => format!("h{:02} d{d} {g}\n", 47 - i),
                })
                .collect();
            let hosts = Hosts::parse_plain(&text).unwrap();
            let plan = NodePlan::plain(g * domains.len() as u32, &hosts, g).unwrap();
            Locality::hosts(&plan, &hosts)
        });
    prop_oneof![3 => topology, 1 => hosts]
}

/// Whether an error is one a valid random input may meet (a dim a side
/// does not divide, a layer split a side refuses, every holder dead).
fn expected(e: &Error) -> bool {
    matches!(
        e,
        Error::TensorNotDivisible { .. }
            | Error::LayerSplit { .. }
            | Error::NoSurvivingHolder { .. }
            | Error::ReshardLayout { .. }
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, max_global_rejects: 4096, ..ProptestConfig::default() })]

    /// Collocated, disjoint and overlapping sides, with dead processes on
    /// the source side: every property of `check_plan`.
    #[test]
    fn plans_hold_their_properties(
        from in side_layout(0),
        offset in prop::sample::select(vec![0u32, 4, 48]),
        to_sizes in ((prop::sample::select(vec![1u32, 2, 4]), 1u32..=2, 1u32..=3, 1u32..=3, prop::sample::select(vec![1u32, 2, 4])), prop::sample::select(vec![1u32, 2, 4]), 1u32..=2, 1u32..=2),
        splits in (layer_split(), layer_split()),
        model in model(),
        locality in locality(),
        dead in prop::collection::vec(0u32..48, 0..3),
    ) {
        let (sizes, etp, gtp, instances) = to_sizes;
        let to = layout(sizes, etp, gtp, "tp-cp-ep-dp-pp", false, instances, offset);
        prop_assume!(to.as_ref().is_some_and(|l| l.world_size() <= 48));
        let dead: Vec<u32> = dead.into_iter().filter(|p| *p < from.world_size()).collect();
        let from = Side::new(from).layers(splits.0).dead(dead);
        let to = Side::new(to.unwrap()).layers(splits.1);
        match Reshard::new(model, from, to, locality) {
            Ok(plan) => check_plan(&plan),
            Err(e) => {
                prop_assert!(expected(&e), "{e}");
                prop_assume!(false);
            }
        }
    }

    /// The same inputs give the same plan, and the dead listed in another
    /// order too.
    #[test]
    fn plans_are_deterministic(from in side_layout(0), model in model(), dead in prop::collection::vec(0u32..48, 0..3)) {
        let to = Layout::new(&Config::new().tp(1).world_size(from.world_size())).unwrap();
        let dead: Vec<u32> = dead.into_iter().filter(|p| *p < from.world_size()).collect();
        let mut reversed = dead.clone();
        reversed.reverse();
        let a = Reshard::new(model.clone(), Side::new(from.clone()).dead(dead), Side::new(to.clone()), Locality::default());
        let b = Reshard::new(model, Side::new(from).dead(reversed), Side::new(to), Locality::default());
        match (a, b) {
            (Ok(a), Ok(b)) => {
                let x: Vec<Transfer> = a.transfers().map(Result::unwrap).collect();
                let y: Vec<Transfer> = b.transfers().map(Result::unwrap).collect();
                prop_assert_eq!(x, y);
                prop_assert_eq!(a.cost().unwrap(), b.cost().unwrap());
            }
            (Err(a), Err(b)) => prop_assert_eq!(a, b),
            (a, b) => prop_assert!(false, "{:?} vs {:?}", a.err(), b.err()),
        }
    }

    /// After a failure: from the old layout (the failed processes dead) to
    /// the re-layout's new one on the surviving processes.
    #[test]
    fn after_a_failure(dp in 2u32..=4, failed in 0u32..16, policy in prop::sample::select(vec![Policy::DropReplica, Policy::ShiftRanks, Policy::FillGaps, Policy::NextGrid])) {
        let old = Layout::new(&Config::new().tp(2).pp(2).dp(dp)).unwrap();
        let failed = failed % old.world_size();
        let plan = relayout(&old, &Failure::new(2, [failed]), policy, &RelayoutOptions::default());
        prop_assume!(plan.is_ok());
        let plan = plan.unwrap();
        let model = Model::new(4, 0, vec![
            Tensor::new("w", [16, 8]).layer(LayerRef::Layer(1)).tp(0),
            Tensor::new("n", [8]).layer(LayerRef::Layer(3)),
            Tensor::new("e", [32, 8]).layer(LayerRef::Ends).tp(0),
        ]).unwrap();
        let reshard = Reshard::new(model, Side::before(&plan), Side::after(&plan).unwrap(), Locality::new(Topology::new(2, None).unwrap())).unwrap();
        // The failed process neither sends nor receives.
        let mine = reshard.plan_of(failed).unwrap();
        prop_assert!(mine.sends.is_empty() && mine.recvs.is_empty() && mine.copies.is_empty());
        check_plan(&reshard);
    }
}

/// A rank's distributed-optimizer shard is its key in the layout's own
/// `dp-cp` group (the `dp-cp-intra` slice with two instances), its expert
/// shard its key in `edp` (`edp-intra`).
#[test]
fn dist_opt_shards_follow_the_layout_s_groups() {
    let mut checked = 0;
    for (order, instances) in [
        ("tp-cp-ep-dp-pp", 1),
        ("tp-dp-ep-cp-pp", 1),
        ("tp-cp-ep-dp-pp", 2),
        ("tp-dp-ep-cp-pp", 2),
        ("cp-dp-tp-ep-pp", 2),
    ] {
        // Megatron-Core accepts more instance layouts than hold together
        // (semantics 3.4); those rank-layout refuses are skipped.
        let Ok(layout) = Layout::new(
            &Config::new()
                .tp(2)
                .cp(2)
                .dp(4)
                .ep(2)
                .order(order.parse::<Order>().unwrap())
                .dist_opt_instances(instances),
        ) else {
            continue;
        };
        checked += 1;
        let model = Model::new(
            1,
            2,
            vec![
                Tensor::new("dense", [64])
                    .layer(LayerRef::Layer(0))
                    .dp_dim(0),
                Tensor::new("expert", [64])
                    .layer(LayerRef::Layer(0))
                    .expert(1)
                    .dp_dim(0),
            ],
        )
        .unwrap();
        let side = Side::new(layout.clone());
        let plan = Reshard::new(model, side.clone(), side, Locality::default()).unwrap();
        let (dense, expert) = if instances > 1 {
            (Kind::DP_CP_INTRA, Kind::EDP_INTRA)
        } else {
            (Kind::DP_CP, Kind::EDP)
        };
        for (t, kind) in [(0, dense), (1, expert)] {
            let size = layout.groups(kind).unwrap().group_len().unwrap() as u64;
            for r in 0..layout.world_size() {
                let Some(s) = plan.source_shard(r, t).unwrap() else {
                    continue;
                };
                let key = layout.split(r, kind).unwrap().unwrap().key as u64;
                let per = 64 / size;
                assert_eq!(
                    s.boxes[0].0.range(0),
                    Some((key * per, (key + 1) * per)),
                    "{order} {kind} rank {r}"
                );
            }
        }
    }
    assert!(checked >= 3, "{checked}");
}

/// `Layout::expert_rank` inverts the placement's expert coordinates on
/// every rank, folded and nested.
#[test]
fn expert_rank_inverts_the_placement() {
    for config in [
        Config::new().tp(2).cp(2).ep(4).etp(1).pp(2).world_size(32),
        Config::new()
            .tp(2)
            .ep(2)
            .gtp_remat(2)
            .expert_gtp_remat(2)
            .world_size(32),
        Config::new()
            .tp(2)
            .cp(2)
            .ep(2)
            .pp(2)
            .world_size(32)
            .expert_layout(ExpertLayout::Nested),
        Config::new()
            .tp(2)
            .cp(2)
            .ep(2)
            .world_size(16)
            .order("tp-cp-dp-ep-pp".parse::<Order>().unwrap())
            .expert_layout(ExpertLayout::Nested),
    ] {
        let layout = Layout::new(&config).unwrap();
        for r in 0..layout.world_size() {
            let p = layout.placement(r).unwrap();
            // Only the nested expert grid keeps cp.
            let cp = if layout.shape() == rank_layout::LayoutShape::Nested {
                p.coord.cp
            } else {
                0
            };
            assert_eq!(layout.expert_rank(Part::Decoder, p.expert, cp).unwrap(), r);
        }
    }
}

/// Megatron-Core's `partition_stride`: tp 2 stride 2 (a SwiGLU fc1 [gate;
/// up]) to tp 1 puts tp rank 1's first half after rank 0's first half.
#[test]
fn stride_two_to_one() {
    let model = Model::new(
        1,
        0,
        vec![
            Tensor::new("fc1", [8, 2])
                .layer(LayerRef::Layer(0))
                .tp_stride(0, 2),
        ],
    )
    .unwrap();
    let from = Side::new(Layout::new(&Config::new().tp(2).world_size(2)).unwrap());
    let to = Side::new(Layout::new(&Config::new().world_size(1).rank_offset(2)).unwrap());
    let plan = Reshard::new(model, from, to, Locality::default()).unwrap();
    let got: Vec<(u32, (u64, u64), u64, u64)> = plan
        .plan_of(2)
        .unwrap()
        .recvs
        .iter()
        .map(|t| {
            (
                t.src,
                t.region.range(0).unwrap(),
                t.src_offset[0],
                t.dst_offset[0],
            )
        })
        .collect();
    // Rank 0 holds rows 0-1 (gate) and 4-5 (up); rank 1 rows 2-3 and 6-7.
    assert_eq!(
        got,
        [
            (0, (0, 2), 0, 0),
            (1, (2, 4), 0, 2),
            (0, (4, 6), 2, 4),
            (1, (6, 8), 2, 6)
        ]
    );
}

/// Bad input is a typed error naming the value.
#[test]
fn errors_name_the_values() {
    let tp3 = Side::new(Layout::new(&Config::new().tp(3).world_size(3)).unwrap());
    let one = Side::new(Layout::new(&Config::new().world_size(1)).unwrap());
    let m = |t: Tensor| Model::new(4, 8, vec![t]);
    let e = Reshard::new(
        m(Tensor::new("q", [16, 4]).layer(LayerRef::Layer(0)).tp(0)).unwrap(),
        tp3.clone(),
        one.clone(),
        Locality::default(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "tensor q: dim 0 (16) is not divisible by 3 (tp 3) on the from side"
    );
    assert!(matches!(
        m(Tensor::new("q", [16, 0])),
        Err(Error::ZeroTensorDim { dim: 1, .. })
    ));
    assert_eq!(
        m(Tensor::new("x", [4]).expert(8)).unwrap_err().to_string(),
        "tensor x: expert 8 is out of range (the model has 8 experts)"
    );
    assert!(
        m(Tensor::new("x", [4]).tp(1))
            .unwrap_err()
            .to_string()
            .contains("tp_dim 1 is past its 1 dims")
    );
    let pp3 = Side::new(Layout::new(&Config::new().pp(3).world_size(3)).unwrap());
    let e = Reshard::new(
        m(Tensor::new("n", [4])).unwrap(),
        one.clone(),
        pp3,
        Locality::default(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "num_layers (4) is not divisible by pp = 3 for the even split (give the first and last stages' layers, or the chunks) on the to side"
    );
    let plan = Reshard::new(
        m(Tensor::new("n", [4])).unwrap(),
        one.clone(),
        tp3.clone(),
        Locality::default(),
    )
    .unwrap();
    assert_eq!(
        plan.plan_of(7).unwrap_err().to_string(),
        "process 7 is in neither layout (from: 0..0; to: 0..2)"
    );
    let e = Reshard::new(
        m(Tensor::new("n", [4])).unwrap(),
        one.clone().dead([0]),
        tp3,
        Locality::default(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "tensor n: no surviving process holds its source shard (the whole tensor)"
    );
}

/// The plan and its values cross threads (a binding may hold them).
#[test]
fn plan_values_are_send_and_sync() {
    fn both<T: Send + Sync>() {}
    both::<Reshard>();
    both::<Model>();
    both::<Side>();
    both::<Transfer>();
    both::<rank_layout::reshard::RankPlan>();
}

/// Issue 31's prefill-to-decode KV handoff as a reshard: a KV cache
/// `[layers, kv heads, 2, 16]` with `pp_dim` 0 and `tp_dim` 1, from a
/// prefill shard (tp 2, pp 2, ep 2 over dp 2: two replicas of each
/// attention shard) to a decode shard (tp 4, pp 1). Each decode rank
/// receives exactly megatron-core 0.19.2's `KVShardLayout.layer_range()
/// x head_range()` (the even split: layers `pp_rank * L/pp ..`, heads
/// `tp_rank * H/tp ..`), each piece from a rank whose own ranges hold it;
/// where `plan_kv_reshard` takes every attention shard from its
/// smallest-rank replica, both replicas send here.
#[test]
fn kv_handoff_gets_megatron_s_ranges_from_both_replicas() {
    let (layers, heads) = (8u64, 8u64);
    let model = Model::new(
        8,
        0,
        vec![Tensor::new("kv", [layers, heads, 2, 16]).pp_dim(0).tp(1)],
    )
    .unwrap();
    let prefill = Layout::new(&Config::new().tp(2).pp(2).ep(2).world_size(8)).unwrap();
    let decode = Layout::new(&Config::new().tp(4).world_size(4).rank_offset(8)).unwrap();
    let locality = Locality::new(Topology::new(4, None).unwrap());
    let plan = Reshard::new(
        model,
        Side::new(prefill.clone()),
        Side::new(decode.clone()),
        locality,
    )
    .unwrap();
    // KVShardLayout's ranges.
    let range = |layout: &Layout, rank: u32| {
        let p = layout.placement(rank).unwrap();
        let (tp, pp) = (u64::from(layout.sizes().tp), u64::from(layout.sizes().pp));
        let (tr, pr) = (u64::from(p.coord.tp), u64::from(p.coord.pp));
        (
            (pr * layers / pp, (pr + 1) * layers / pp),
            (tr * heads / tp, (tr + 1) * heads / tp),
        )
    };
    let mut senders = BTreeSet::new();
    for d in 8..12 {
        let (want_layers, want_heads) = range(&decode, d);
        let recvs = plan.plan_of(d).unwrap().recvs;
        let elements: u64 = recvs.iter().map(|t| t.region.numel()).sum();
        assert_eq!(
            elements,
            (want_layers.1 - want_layers.0) * (want_heads.1 - want_heads.0) * 2 * 16
        );
        for t in &recvs {
            let (l, h) = (t.region.range(0).unwrap(), t.region.range(1).unwrap());
            assert!(
                want_layers.0 <= l.0
                    && l.1 <= want_layers.1
                    && want_heads.0 <= h.0
                    && h.1 <= want_heads.1
            );
            let (sl, sh) = range(&prefill, t.src);
            assert!(
                sl.0 <= l.0 && l.1 <= sl.1 && sh.0 <= h.0 && h.1 <= sh.1,
                "{t:?}"
            );
            senders.insert(t.src);
        }
    }
    // Every prefill rank sends: both replicas of each (tp, pp) shard.
    assert_eq!(senders, (0..8).collect::<BTreeSet<u32>>());
}

/// The other way round: prefill tp 4 (two replicas, ep 2 over dp 2) to
/// decode tp 2, pp 2. The decode shards that need one prefill shard
/// differ in their stage only; the rotation steps by 1 along every axis
/// (the sum of a shard's coordinates), so both replicas send: with a
/// mixed-radix number the stage steps by tp (2), a multiple of the two
/// holders, and one replica sent all.
#[test]
fn kv_handoff_to_more_stages_spreads_over_the_replicas() {
    let model = Model::new(
        8,
        0,
        vec![Tensor::new("kv", [8u64, 8, 2, 16]).pp_dim(0).tp(1)],
    )
    .unwrap();
    let prefill = Layout::new(&Config::new().tp(4).ep(2).world_size(8)).unwrap();
    let decode = Layout::new(&Config::new().tp(2).pp(2).world_size(4).rank_offset(8)).unwrap();
    let locality = Locality::new(Topology::new(4, None).unwrap());
    let plan = Reshard::new(model, Side::new(prefill), Side::new(decode), locality).unwrap();
    let senders: BTreeSet<u32> = plan.transfers().map(|t| t.unwrap().src).collect();
    assert_eq!(senders, (0..8).collect::<BTreeSet<u32>>());
    // Each sends one piece: 4 layers x 2 heads x 2 x 16 elements of 2 bytes.
    assert_eq!(plan.cost().unwrap().max_send_bytes, 4 * 2 * 2 * 16 * 2);
}
