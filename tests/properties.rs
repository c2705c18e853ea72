//! Properties over random valid layouts of every shape (all orders, offsets):
//! parity with the Megatron-LM-style reference, partition, exact sizes,
//! coordinate round trip, per-rank answers agreeing with the enumeration,
//! exact `size_hint`s, and no panic on any input.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use std::collections::BTreeMap;

use proptest::prelude::*;
use rank_layout::{Config, Error, ExpertLayout, Kind, Layout, Part, Split};

use common::{any_config, encdec_config, folded_config, nested_config, reference};

/// The resolved config of a layout (dp filled in) for the reference.
fn resolved(c: &Config) -> (Layout, Config) {
    let l = Layout::new(c).unwrap();
    let r = l.config().clone();
    (l, r)
}

fn ranks(l: &Layout) -> std::ops::Range<u32> {
    l.rank_offset()..l.rank_offset() + l.world_size()
}

/// rank -> every (group index, position) from the enumeration.
fn enumerate(l: &Layout, kind: Kind) -> BTreeMap<u32, Vec<(u32, u32)>> {
    let mut out: BTreeMap<u32, Vec<(u32, u32)>> = BTreeMap::new();
    for (i, g) in l.groups(kind).unwrap().enumerate() {
        for (k, r) in g.iter().enumerate() {
            out.entry(r).or_default().push((i as u32, k as u32));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every kind of every layout equals the Megatron-LM-style reference,
    /// kinds in the same order.
    #[test]
    fn layouts_equal_reference(c in any_config()) {
        let (l, r) = resolved(&c);
        let want = reference(&r);
        let names: Vec<String> = l.kinds().iter().map(Kind::to_string).collect();
        let want_names: Vec<String> = want.iter().map(|(k, _)| k.clone()).collect();
        prop_assert_eq!(names, want_names);
        for (name, groups) in want {
            let got = l.groups(name.parse().unwrap()).unwrap().to_vecs();
            prop_assert_eq!(got, groups, "kind {}", name);
        }
    }

    /// Without an encoder every kind partitions the world (embd, pos-embd:
    /// each rank in at most one group); groups have equal sizes and the
    /// counts multiply to the world.
    #[test]
    fn kinds_partition_the_world(c in prop_oneof![nested_config(), folded_config()]) {
        let l = Layout::new(&c).unwrap();
        for &kind in l.kinds() {
            let groups = l.groups(kind).unwrap().to_vecs();
            let mut seen = vec![0u32; l.world_size() as usize];
            for g in &groups {
                for r in g {
                    seen[(r - l.rank_offset()) as usize] += 1;
                }
            }
            if matches!(kind, Kind::EMBD | Kind::POS_EMBD) {
                prop_assert!(seen.iter().all(|n| *n <= 1), "{}", kind);
            } else {
                prop_assert!(seen.iter().all(|n| *n == 1), "{}", kind);
                let size = groups[0].len();
                prop_assert!(groups.iter().all(|g| g.len() == size), "{}", kind);
                prop_assert_eq!(groups.len() * size, l.world_size() as usize, "{}", kind);
            }
        }
    }

    /// Per-rank answers (memberships, comm-split colour and key, rounds)
    /// agree with the enumeration, for every rank and kind.
    #[test]
    fn per_rank_answers_agree_with_enumeration(c in any_config()) {
        let l = Layout::new(&c).unwrap();
        for &kind in l.kinds() {
            let table = enumerate(&l, kind);
            let rounds = l.split_rounds(kind).unwrap();
            for r in ranks(&l) {
                let want = table.get(&r).cloned().unwrap_or_default();
                let got: Vec<(u32, u32)> = l
                    .memberships(r, kind)
                    .unwrap()
                    .iter()
                    .map(|m| {
                        assert_eq!(m.group.get(m.key as usize), Some(r));
                        (m.color, m.key)
                    })
                    .collect();
                // Listed by ascending index, as the enumeration meets them.
                prop_assert_eq!(&got, &want, "rank {} kind {}", r, kind);
                if rounds == 1 {
                    prop_assert_eq!(l.split(r, kind).unwrap().map(|s| (s.color, s.key)), want.first().copied());
                    let one = l.group_of(r, kind).unwrap().map(|m| (m.color, m.key));
                    prop_assert_eq!(one, want.first().copied());
                } else {
                    prop_assert!(matches!(l.split(r, kind), Err(Error::OverlappingKind { .. })), "{}", kind);
                }
                let mut by_round: Vec<(u32, u32)> = (0..rounds)
                    .filter_map(|round| l.split_in_round(r, kind, round).unwrap().map(|s| (s.color, s.key)))
                    .collect();
                by_round.sort();
                prop_assert_eq!(by_round, want, "rounds of rank {} kind {}", r, kind);
            }
            // Each round's groups are disjoint.
            for round in 0..rounds {
                let mut seen = std::collections::BTreeSet::new();
                for r in ranks(&l) {
                    if l.split_in_round(r, kind, round).unwrap().is_some() {
                        prop_assert!(seen.insert(r));
                    }
                }
            }
            prop_assert!(matches!(
                l.split_in_round(l.rank_offset(), kind, rounds),
                Err(Error::RoundOutOfRange { .. })
            ), "{}", kind);
        }
    }

    /// Coordinates round-trip: placement then rank gives the rank back; ranks
    /// outside the layout are errors.
    #[test]
    fn coordinates_round_trip(c in any_config()) {
        let l = Layout::new(&c).unwrap();
        for r in ranks(&l) {
            let p = l.placement(r).unwrap();
            prop_assert_eq!(l.rank(p.part, p.coord).unwrap(), r);
            prop_assert_eq!(p.part == Part::Encoder, r < l.rank_offset() + l.encoder_world_size());
        }
        let end = l.rank_offset() + l.world_size();
        prop_assert!(matches!(l.placement(end), Err(Error::RankOutOfRange { .. })), "{}", end);
        if l.rank_offset() > 0 {
            prop_assert!(l.memberships(l.rank_offset() - 1, Kind::TP).is_err());
        }
    }

    /// `size_hint` is exact for group and member iterators at every step.
    #[test]
    fn size_hints_are_exact(c in any_config()) {
        let l = Layout::new(&c).unwrap();
        for &kind in l.kinds() {
            let mut groups = l.groups(kind).unwrap();
            let total = groups.len();
            let mut n = 0;
            loop {
                prop_assert_eq!(groups.size_hint(), (total - n, Some(total - n)));
                let Some(g) = groups.next() else { break };
                n += 1;
                let mut members = g.iter();
                let len = g.len();
                for i in 0..=len {
                    prop_assert_eq!(members.size_hint(), (len - i, Some(len - i)));
                    let m = members.next();
                    prop_assert_eq!(m.is_some(), i < len);
                    prop_assert_eq!(m, g.get(i));
                }
            }
            prop_assert_eq!(n, total);
            let back: Vec<Vec<u32>> = l.groups(kind).unwrap().rev().map(|g| g.to_vec()).collect();
            let mut fwd = l.groups(kind).unwrap().to_vecs();
            fwd.reverse();
            prop_assert_eq!(back, fwd);
        }
    }

    /// Pipeline neighbours follow the pp groups; first and last stages are
    /// where they stop; embedding ranks are the embd members.
    #[test]
    fn pipeline_queries_follow_pp_groups(c in any_config()) {
        let l = Layout::new(&c).unwrap();
        let mut next: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        let mut prev: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for g in l.groups(Kind::PP).unwrap() {
            let g = g.to_vec();
            for w in g.windows(2) {
                let n = next.entry(w[0]).or_default();
                if !n.contains(&w[1]) { n.push(w[1]); }
                let p = prev.entry(w[1]).or_default();
                if !p.contains(&w[0]) { p.push(w[0]); }
            }
        }
        let embd: std::collections::BTreeSet<u32> = l.groups(Kind::EMBD).unwrap().flatten().collect();
        for r in ranks(&l) {
            let mut got = l.pipeline_next(r).unwrap();
            got.sort();
            let mut want = next.get(&r).cloned().unwrap_or_default();
            want.sort();
            prop_assert_eq!(l.is_last_stage(r).unwrap(), want.is_empty());
            prop_assert_eq!(got, want);
            let mut got = l.pipeline_prev(r).unwrap();
            got.sort();
            let mut want = prev.get(&r).cloned().unwrap_or_default();
            want.sort();
            prop_assert_eq!(l.is_first_stage(r).unwrap(), want.is_empty());
            prop_assert_eq!(got, want);
            prop_assert_eq!(l.is_embedding_rank(r).unwrap(), embd.contains(&r));
        }
    }

    /// Encoder + decoder: every joined pipeline stays inside one CP slice and
    /// DP replica; each decoder pipeline appears as often as its fan-in,
    /// each encoder pipeline as often as its fan-out, fan-outs differ by at
    /// most one; every other kind partitions each grid.
    #[test]
    fn joined_pipelines_keep_slices_and_replicas(c in encdec_config()) {
        let l = Layout::new(&c).unwrap();
        let cfg = l.config();
        let (tp, etp) = (cfg.tp, cfg.encoder_tp.unwrap());
        let mut uses: BTreeMap<u32, u32> = BTreeMap::new();
        for g in l.groups(Kind::PP).unwrap() {
            let places: Vec<_> = g.iter().map(|r| l.placement(r).unwrap()).collect();
            let (cp0, dp0) = (places[0].coord.cp, places[0].coord.dp);
            prop_assert!(places.iter().all(|p| p.coord.cp == cp0 && p.coord.dp == dp0), "{:?}", g);
            *uses.entry(g.first().unwrap()).or_default() += 1;
            *uses.entry(g.last().unwrap()).or_default() += 1;
        }
        // Fan-out of encoder tp index e and fan-in of decoder tp index t: the
        // sizes of their blocks in semantics 3.3's balanced block map.
        let blocks = |n: u32, parts: u32| common::block_table(u64::from(n), u64::from(parts));
        let fan_out = |e: u32| if tp >= etp { blocks(tp, etp).iter().filter(|b| **b == u64::from(e)).count() as u32 } else { 1 };
        let fan_in = |t: u32| if etp > tp { blocks(etp, tp).iter().filter(|b| **b == u64::from(t)).count() as u32 } else { 1 };
        let mut fan_outs = Vec::new();
        for (r, n) in uses {
            let p = l.placement(r).unwrap();
            if p.part == Part::Encoder {
                prop_assert_eq!(n, fan_out(p.coord.tp), "encoder pipeline of rank {}", r);
                fan_outs.push(n);
            } else {
                prop_assert_eq!(n, fan_in(p.coord.tp), "decoder pipeline of rank {}", r);
            }
        }
        let (lo, hi) = (fan_outs.iter().min().unwrap(), fan_outs.iter().max().unwrap());
        prop_assert!(hi - lo <= 1);
        prop_assert_eq!(fan_outs.iter().sum::<u32>() as usize, l.groups(Kind::PP).unwrap().len());
        // Other kinds: each grid's ranks exactly once.
        for &kind in l.kinds() {
            if matches!(kind, Kind::EMBD | Kind::POS_EMBD) || kind == Kind::PP || kind == Kind::TP_PP { continue; }
            let mut seen = vec![0u32; l.world_size() as usize];
            for g in l.groups(kind).unwrap() {
                let parts: Vec<Part> = g.iter().map(|r| l.placement(r).unwrap().part).collect();
                prop_assert!(parts.iter().all(|p| *p == parts[0]), "{} mixes grids", kind);
                for r in g { seen[(r - l.rank_offset()) as usize] += 1; }
            }
            prop_assert!(seen.iter().all(|n| *n == 1), "{}", kind);
        }
    }

    /// Nesting of semantics 3.4: each hcp group lies in one cp group; each
    /// dp-cp-intra group lies in one dp-cp group and one dist-opt instance;
    /// each dp-cp-inter group has one member per instance; instances
    /// partition the world into equal parts.
    #[test]
    fn families_nest(c in folded_config()) {
        let l = Layout::new(&c).unwrap();
        let owner = |kind: Kind| -> BTreeMap<u32, u32> {
            let mut out = BTreeMap::new();
            for (i, g) in l.groups(kind).unwrap().enumerate() {
                for r in g { out.insert(r, i as u32); }
            }
            out
        };
        let cp = owner(Kind::CP);
        for &kind in l.kinds() {
            if kind.hcp_level().is_some() {
                for g in l.groups(kind).unwrap() {
                    let first = cp[&g.first().unwrap()];
                    prop_assert!(g.iter().all(|r| cp[&r] == first), "{} {:?}", kind, g);
                }
            }
        }
        let n = l.config().dist_opt_instances;
        if n > 1 {
            let dp_cp = owner(Kind::DP_CP);
            let instance = owner(Kind::DIST_OPT_INSTANCE);
            prop_assert_eq!(l.groups(Kind::DIST_OPT_INSTANCE).unwrap().len(), n as usize);
            for g in l.groups(Kind::DIST_OPT_INSTANCE).unwrap() {
                prop_assert_eq!(g.len() as u32, l.world_size() / n);
            }
            for g in l.groups(Kind::DP_CP_INTRA).unwrap() {
                let (a, b) = (dp_cp[&g.first().unwrap()], instance[&g.first().unwrap()]);
                prop_assert!(g.iter().all(|r| dp_cp[&r] == a && instance[&r] == b), "{:?}", g);
            }
            for g in l.groups(Kind::EDP_INTRA).unwrap() {
                let b = instance[&g.first().unwrap()];
                prop_assert!(g.iter().all(|r| instance[&r] == b), "{:?}", g);
            }
            for g in l.groups(Kind::DP_CP_INTER).unwrap() {
                let mut seen: Vec<u32> = g.iter().map(|r| instance[&r]).collect();
                seen.sort();
                prop_assert_eq!(seen, (0..n).collect::<Vec<_>>(), "{:?}", g);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Any configuration, order string and rank: a layout or a typed error,
    /// never a panic.
    #[test]
    fn invalid_input_never_panics(
        sizes in proptest::collection::vec(prop_oneof![Just(0u32), 1..8u32, (0..32u32).prop_map(|k| 1u32 << k), any::<u32>()], 9),
        tokens in proptest::collection::vec(prop_oneof![
            Just("tp"), Just("cp"), Just("ep"), Just("dp"), Just("pp"), Just("TP"), Just(""), Just("xp"), Just("etp")
        ], 0..7),
        flags in any::<u8>(),
        rank in any::<u32>(),
        world in prop_oneof![Just(None), (0..5000u32).prop_map(Some), any::<u32>().prop_map(Some)],
    ) {
        let order = tokens.join("-");
        let Ok(order) = order.parse() else { return Ok(()) };
        let c = Config::new()
            .tp(sizes[0])
            .cp(sizes[1])
            .ep(sizes[2])
            .dp((flags & 1 != 0).then_some(sizes[3]))
            .pp(sizes[4])
            .world_size(world)
            .order(order)
            .rank_offset(if flags & 2 != 0 { sizes[5] } else { 0 })
            .encoder_tp((flags & 4 != 0).then_some(sizes[6]))
            .encoder_pp((flags & 8 != 0).then_some(sizes[7]))
            .expert_layout(if flags & 16 != 0 { ExpertLayout::Folded } else { ExpertLayout::Nested })
            .etp((flags & 32 != 0).then_some(sizes[8]))
            .hierarchical_cp(if flags & 64 != 0 { vec![sizes[1].min(4), 2] } else { Vec::new() })
            .dist_opt_instances(if flags & 128 != 0 { sizes[3] % 5 } else { 1 });
        if let Ok(l) = Layout::new(&c) {
            for &kind in l.kinds() {
                // Small kinds only: the world may be huge.
                let _ = l.split_rounds(kind);
                if matches!(kind, Kind::TP | Kind::PP | Kind::EMBD | Kind::POS_EMBD) {
                    let _ = l.memberships(rank, kind);
                }
            }
            let _ = l.placement(rank);
        }
    }
}

#[test]
fn seed_bug_list_position_pairing_mixes_cp_slices() {
    // tp=4, encoder_tp=2, cp=2: Megatron-LM 2024 paired with
    // zip(cycle(encoder_pp_groups), decoder_pp_groups).
    let l = Layout::new(
        &Config::new()
            .tp(4)
            .cp(2)
            .encoder_tp(Some(2))
            .encoder_pp(Some(1))
            .expert_layout(ExpertLayout::Nested),
    )
    .unwrap();
    let enc: Vec<u32> = (0..4).collect(); // encoder pp groups [0],[1],[2],[3]
    let dec: Vec<u32> = (4..12).collect(); // decoder pp groups [4],...,[11]
    let naive: Vec<(u32, u32)> = enc.iter().cycle().copied().zip(dec).collect();
    let cp_of = |r: u32| l.placement(r).unwrap().coord.cp;
    assert!(
        naive.iter().any(|(e, d)| cp_of(*e) != cp_of(*d)),
        "the naive pairing mixes cp slices: {naive:?}"
    );
    for g in l.groups(Kind::PP).unwrap() {
        let cps: Vec<u32> = g.iter().map(cp_of).collect();
        assert!(cps.iter().all(|c| *c == cps[0]), "{g:?} mixes cp slices");
    }
}

#[test]
fn two_to_the_31_ranks_answer_per_rank() {
    // 2^31 ranks: tp=8, cp=2, pp=16, dp=2^23; per-rank answers without enumeration.
    let l = Layout::new(
        &Config::new()
            .tp(8)
            .cp(2)
            .pp(16)
            .world_size(Some(1 << 31))
            .expert_layout(ExpertLayout::Nested),
    )
    .unwrap();
    assert_eq!(l.config().dp, Some(1 << 23));
    let r = (1u32 << 31) - 1;
    let tp = &l.memberships(r, Kind::TP).unwrap()[0];
    assert_eq!(
        tp.group.to_vec(),
        ((1u32 << 31) - 8..1 << 31).collect::<Vec<_>>()
    );
    assert_eq!(tp.key, 7);
    let pp = &l.memberships(r, Kind::PP).unwrap()[0];
    assert_eq!(pp.group.len(), 16);
    assert_eq!(pp.group.get(0), Some(r - 15 * (1 << 27)));
    assert_eq!(
        l.split(r, Kind::DP).unwrap().map(|s| s.key),
        Some((1 << 23) - 1)
    );
    assert!(l.placement(1 << 31).is_err());
}

#[test]
fn overflowing_sizes_are_errors() {
    let c = Config::new()
        .tp(1 << 16)
        .pp(1 << 16)
        .expert_layout(ExpertLayout::Nested);
    assert!(matches!(Layout::new(&c), Err(Error::Overflow { .. })));
    let c = Config::new()
        .tp(1 << 16)
        .pp(1 << 15)
        .rank_offset(1 << 31)
        .expert_layout(ExpertLayout::Nested);
    // 2^31 ranks from 2^31: the last rank is u32::MAX, fits.
    let l = Layout::new(&c).unwrap();
    assert_eq!(
        l.split(u32::MAX, Kind::TP).unwrap(),
        Some(Split {
            color: (1 << 15) - 1,
            key: (1 << 16) - 1
        })
    );
    let c = c.rank_offset((1 << 31) + 1);
    assert!(matches!(Layout::new(&c), Err(Error::Overflow { .. })));
    // Encoder and decoder of 2^31 ranks each: 2^32 ranks do not fit.
    let c = Config::new()
        .tp(1 << 15)
        .pp(1 << 15)
        .dp(Some(2))
        .encoder_tp(Some(1 << 15))
        .encoder_pp(Some(1 << 15))
        .expert_layout(ExpertLayout::Nested);
    assert!(matches!(Layout::new(&c), Err(Error::Overflow { .. })));
}
