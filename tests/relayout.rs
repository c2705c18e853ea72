//! Re-layout after a failure (`rank_layout::relayout`): the worked case of
//! the semantics (Megatron order tp-dp-pp, tp 8, pp 4, dp 36, 4 GPUs per
//! node, the node of ranks 200-203 lost) and properties at random layouts,
//! failures and policies, checked against the groups listed from scratch.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

use std::collections::{BTreeSet, HashMap};

use proptest::prelude::*;
use rank_layout::machine::{Hosts, KindGroups, PlaceOptions, place};
use rank_layout::relayout::{
    Change, Failure, NodeDomains, Policy, Relayout, RelayoutOptions, default_kinds, relayout,
};
use rank_layout::{Config, ExpertLayout, Kind, Layout, Order};

fn worked() -> Layout {
    let order: Order = "tp-dp-pp".parse().unwrap();
    Layout::new(&Config::new().tp(8).pp(4).dp(36).order(order)).unwrap()
}

fn counts(plan: &Relayout, kind: Kind) -> (u32, usize, usize, usize) {
    let c = plan.changes(kind).unwrap();
    (c.kept, c.shrunk.len(), c.new.len(), c.gone.len())
}

/// The table of the semantics, row by row: world, then TP, DP and PP
/// groups (kept, shrunk, new, gone), then the new communicators.
#[test]
fn worked_case_table() {
    let layout = worked();
    let failure = Failure::new(4, 200..204);
    let options = RelayoutOptions::default();
    let rows = [
        // ShiftRanks trimmed to a multiple of 32: 115 of 140 TP groups new,
        // every DP and PP group new.
        (Policy::ShiftRanks, 0, 1120, 115, (0, 32), 280, 427),
        // FillGaps: the 4 last survivors take ranks 200-203: one TP group new.
        (Policy::FillGaps, 0, 1120, 1, (0, 32), 280, 313),
        // Drop the replica of ranks 200-203: nothing new, every DP group shrinks.
        (Policy::DropReplica, 0, 1120, 0, (32, 0), 0, 0),
        // A spare node in the dead node's place.
        (Policy::Spare, 1, 1152, 1, (0, 4), 4, 9),
    ];
    for (policy, spares, world, tp_new, (dp_shrunk, dp_new), pp_new, total) in rows {
        let plan = relayout(
            &layout,
            &failure.clone().spare_nodes(spares),
            policy,
            &options,
        )
        .unwrap();
        assert_eq!(plan.layout().world_size(), world, "{policy}");
        let tp = counts(&plan, Kind::TP);
        let dp = counts(&plan, Kind::DP);
        let pp = counts(&plan, Kind::PP);
        assert_eq!(tp.2, tp_new, "{policy} tp {tp:?}");
        assert_eq!((dp.1, dp.2), (dp_shrunk, dp_new), "{policy} dp {dp:?}");
        assert_eq!(pp.2, pp_new, "{policy} pp {pp:?}");
        assert_eq!(plan.cost().new_communicators, total, "{policy}");
        assert_eq!(default_kinds(&layout), [Kind::TP, Kind::DP, Kind::PP]);
    }
}

/// Dropping the replica: every TP and PP group of the 35 other replicas is
/// kept exactly, each DP group loses the member of replica 25 (position 25
/// of the old group), and the survivors of that replica wait.
#[test]
fn worked_case_drop_replica_details() {
    let layout = worked();
    let plan = relayout(
        &layout,
        &Failure::new(4, 200..204),
        Policy::DropReplica,
        &RelayoutOptions::default(),
    )
    .unwrap();
    assert_eq!(counts(&plan, Kind::TP), (140, 0, 0, 4));
    assert_eq!(counts(&plan, Kind::PP), (280, 0, 0, 8));
    let dp = plan.changes(Kind::DP).unwrap();
    assert!(
        dp.shrunk
            .iter()
            .all(|s| s.exclude == [25] && s.old_color == s.new_color)
    );
    let map = plan.rank_map();
    // Replica 25 holds ranks 200-207 of every stage (stride 288).
    for stage in 0..4 {
        for r in 200..208 {
            assert_eq!(map.new_rank(stage * 288 + r), None);
        }
    }
    assert_eq!(map.new_rank(208), Some(200));
    assert_eq!(map.new_rank(288), Some(280));
    assert_eq!(plan.cost().moved, 0);
    assert_eq!(plan.cost().idle, 28);
}

/// Old groups by members (as processes) -> number.
fn old_index(layout: &Layout, kind: Kind) -> HashMap<Vec<u32>, u32> {
    let off = layout.rank_offset();
    layout
        .groups(kind)
        .unwrap()
        .enumerate()
        .map(|(c, g)| (g.iter().map(|r| r - off).collect(), c as u32))
        .collect()
}

/// Checks a plan against the groups of both layouts listed from scratch.
fn check_plan(old: &Layout, failed: &[u32], plan: &Relayout) {
    let new = plan.layout();
    let map = plan.rank_map();
    // A valid grid of the same kinds.
    assert_eq!(new.kinds(), old.kinds());
    assert!(Layout::new(new.config()).is_ok());
    // The map: a bijection onto the new ranks; failed processes have none.
    let mut seen = BTreeSet::new();
    for p in 0..map.len() {
        if let Some(n) = map.new_rank(p) {
            assert!(n < new.world_size());
            assert!(seen.insert(n), "rank {n} twice");
            assert_eq!(map.process(n), Some(p));
        }
    }
    assert_eq!(seen.len() as u32, new.world_size());
    for &f in failed {
        assert_eq!(map.new_rank(f - old.rank_offset()), None);
    }
    let off2 = new.rank_offset();
    // Ranks that move: a spare, or another weight shard by coordinates.
    let same = |a: rank_layout::Sizes, b: rank_layout::Sizes| {
        (a.tp, a.pp, a.ep, a.etp, a.gtp_remat) == (b.tp, b.pp, b.ep, b.etp, b.gtp_remat)
    };
    let mut moved = 0;
    for p in 0..map.len() {
        let Some(n) = map.new_rank(p) else { continue };
        let m = map.is_spare(p) || !same(old.sizes(), new.sizes()) || {
            let (x, y) = (
                old.placement(p + old.rank_offset()).unwrap(),
                new.placement(n + off2).unwrap(),
            );
            (
                x.part,
                x.coord.tp,
                x.coord.pp,
                x.gtp_remat,
                x.expert.etp,
                x.expert.ep,
            ) != (
                y.part,
                y.coord.tp,
                y.coord.pp,
                y.gtp_remat,
                y.expert.etp,
                y.expert.ep,
            )
        };
        moved += u32::from(m);
    }
    assert_eq!(plan.cost().moved, moved);
    for changes in plan.kinds() {
        let kind = changes.kind;
        let before = old_index(old, kind);
        let old_groups: Vec<Vec<u32>> = old
            .groups(kind)
            .unwrap()
            .map(|g| g.iter().map(|r| r - old.rank_offset()).collect())
            .collect();
        let shrunk: HashMap<u32, _> = changes.shrunk.iter().map(|s| (s.new_color, s)).collect();
        let mut used = BTreeSet::new();
        let mut kept = 0;
        for (c2, g) in new.groups(kind).unwrap().enumerate() {
            let c2 = c2 as u32;
            let members: Vec<u32> = g.iter().map(|n| map.process(n - off2).unwrap()).collect();
            if let Some(s) = shrunk.get(&c2) {
                // The old group without the excluded positions, in order.
                let old_g = &old_groups[s.old_color as usize];
                let left: Vec<u32> = old_g
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| !s.exclude.contains(&(*k as u32)))
                    .map(|(_, &p)| p)
                    .collect();
                assert_eq!(left, members, "{kind} shrink {s:?}");
                for &k in &s.exclude {
                    assert_eq!(
                        map.new_rank(old_g[k as usize]),
                        None,
                        "excluded member stays"
                    );
                }
                assert!(used.insert(s.old_color));
            } else if changes.is_new(c2) {
                assert!(
                    !before.contains_key(&members),
                    "{kind} group {c2} is an old group, reported new"
                );
                assert!(members.len() > 1, "{kind} group {c2} of one, reported new");
            } else if changes.is_alone(c2) {
                assert_eq!(members.len(), 1, "{kind} group {c2} reported alone");
                assert!(
                    !before.contains_key(&members),
                    "{kind} group {c2} is an old group, reported alone"
                );
            } else {
                let c = before
                    .get(&members)
                    .unwrap_or_else(|| panic!("{kind} group {c2} reported kept, not an old group"));
                assert!(used.insert(*c));
                kept += 1;
            }
        }
        assert_eq!(kept, changes.kept, "{kind}");
        assert_eq!(changes.groups() as usize, new.groups(kind).unwrap().len());
        let gone: Vec<u32> = (0..old_groups.len() as u32)
            .filter(|c| !used.contains(c))
            .collect();
        assert_eq!(gone, changes.gone, "{kind}");
        // Each process's answer for the kind agrees with the lists: the
        // change of each of its groups, its color, key and members.
        for p in 0..map.len() {
            let fates = plan.fates_of(p, kind).unwrap();
            let Some(n) = map.new_rank(p) else {
                assert!(fates.is_empty());
                continue;
            };
            let want = new.memberships(n + off2, kind).unwrap();
            assert_eq!(fates.len(), want.len(), "{kind} process {p}");
            for (f, m) in fates.iter().zip(&want) {
                assert_eq!(f.membership, *m, "{kind} process {p}");
                let c2 = m.color;
                match &f.change {
                    Change::New => assert!(changes.is_new(c2)),
                    Change::Alone => assert!(changes.is_alone(c2)),
                    Change::Shrunk(s) => assert_eq!(shrunk.get(&c2), Some(&s)),
                    Change::Kept { old_color } => {
                        let members: Vec<u32> = m
                            .group
                            .iter()
                            .map(|n| map.process(n - off2).unwrap())
                            .collect();
                        assert_eq!(old_groups[*old_color as usize], members, "{kind} kept");
                    }
                    other => panic!("{other:?}"),
                }
            }
            if rounds_of(new, kind) == 1 {
                assert_eq!(plan.fate_of(p, kind).unwrap(), fates.first().cloned());
            }
        }
        // Every split of a new group is the new layout's, and only those,
        // in every split round of a kind whose groups overlap.
        let rounds = new.split_rounds(kind).unwrap();
        for p in 0..map.len() {
            for round in 0..rounds {
                let split = plan.split_in_round(p, kind, round).unwrap();
                match map.new_rank(p) {
                    Some(n) => {
                        let s = new.split_in_round(n + off2, kind, round).unwrap();
                        assert_eq!(split, s.filter(|s| changes.is_new(s.color)));
                    }
                    None => assert_eq!(split, None),
                }
            }
            if rounds == 1 {
                assert_eq!(
                    plan.split(p, kind).unwrap(),
                    plan.split_in_round(p, kind, 0).unwrap()
                );
            } else {
                assert!(plan.split(p, kind).is_err() || map.new_rank(p).is_none());
            }
        }
    }
}

fn rounds_of(layout: &Layout, kind: Kind) -> u32 {
    layout.split_rounds(kind).unwrap()
}

fn arb_case() -> impl Strategy<Value = (Config, u32, Vec<u32>, u32, usize)> {
    (
        prop::sample::select(vec![1u32, 2, 4]),
        prop::sample::select(vec![1u32, 2]),
        prop::sample::select(vec![1u32, 2, 3]),
        2u32..7,
        prop::sample::select(vec![1u32, 2]),
        prop::sample::select(vec![
            "tp-cp-ep-dp-pp",
            "tp-dp-pp",
            "tp-pp-dp",
            "dp-tp-pp",
            "pp-dp-tp-cp",
        ]),
        prop::collection::vec(0u32..10_000, 1..5),
        0u32..3,
        0usize..5,
        // An encoder grid (its tp and pp) in one case of three.
        prop::option::weighted(
            0.35,
            (
                prop::sample::select(vec![1u32, 2, 4]),
                prop::sample::select(vec![1u32, 2]),
            ),
        ),
    )
        .prop_map(
            |(tp, cp, pp, dp, ep, order, failed, spares, policy, encoder)| {
                let mut config = Config::new()
                    .tp(tp)
                    .cp(cp)
                    .pp(pp)
                    .dp(dp)
                    .ep(ep)
                    .order(order.parse().unwrap());
                if let Some((etp, epp)) = encoder {
                    config = config.encoder_tp(etp).encoder_pp(epp);
                }
                (config, spares, failed, tp.max(2), policy)
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Kept groups are identical in members and order, shrink lists give the
    /// new group exactly in NCCL's order, new groups are no old group, gone
    /// groups are those unused; the new layout is a valid grid of the same
    /// kinds; the map is a bijection; every process computes the same plan
    /// (same hash from the failure listed in any order).
    #[test]
    fn plans_match_the_groups((config, spares, failed, g, policy) in arb_case()) {
        let layout = Layout::new(&config);
        prop_assume!(layout.is_ok());
        let layout = layout.unwrap();
        let world = layout.world_size();
        prop_assume!(world % g == 0);
        // A failed rank may be a spare's (after the old world).
        let failed: Vec<u32> = failed.iter().map(|f| f % (world + spares * g)).collect();
        let policy = Policy::ALL[policy];
        let mut options = RelayoutOptions::default();
        options.kinds = Some(layout.kinds().to_vec());
        let failure = Failure::new(g, failed.iter().copied()).spare_nodes(spares);
        let plan = match relayout(&layout, &failure, policy, &options) {
            Ok(plan) => plan,
            Err(e) => {
                // Only a policy that cannot go on: too few spares, no grid.
                prop_assert!(matches!(e, rank_layout::Error::NoRelayout { .. }), "{e}");
                return Ok(());
            }
        };
        check_plan(&layout, &failed, &plan);
        let mut reversed = failed.clone();
        reversed.reverse();
        reversed.extend(failed.iter().copied());
        let again = relayout(&layout, &Failure::new(g, reversed).spare_nodes(spares), policy, &options).unwrap();
        prop_assert_eq!(again.hash(), plan.hash());
    }

    /// Dropping replicas never creates a communicator of a kind without
    /// `dp` among its axes, and keeps every such group of the replicas left.
    #[test]
    fn drop_replica_creates_nothing((config, _spares, failed, g, _p) in arb_case()) {
        let layout = Layout::new(&config.ep(1));
        prop_assume!(layout.is_ok());
        let layout = layout.unwrap();
        let world = layout.world_size();
        let failed: Vec<u32> = failed.iter().map(|f| f % world).collect();
        let Ok(plan) = relayout(&layout, &Failure::new(g, failed), Policy::DropReplica, &RelayoutOptions::default().kinds(vec![Kind::TP, Kind::CP, Kind::PP, Kind::DP])) else { return Ok(()) };
        for c in plan.kinds() {
            prop_assert!(c.new.is_empty(), "{} new {:?}", c.kind, c.new);
            if c.kind != Kind::DP {
                prop_assert!(c.shrunk.is_empty());
            }
        }
    }
}

/// The spare policy on a placement: a spare of the failed host's rack
/// takes its place, so every tp group is still inside one rack.
#[test]
fn spare_keeps_must_fit_groups_in_their_domain() {
    // Two racks of 3 hosts of 4 GPUs; the job uses 4 (tp 8: 2 hosts per group).
    let hosts =
        Hosts::parse_plain("a0 r0 4\na1 r0 4\na2 r0 4\nb0 r1 4\nb1 r1 4\nb2 r1 4\n").unwrap();
    let layout = Layout::new(&Config::new().tp(8).dp(2)).unwrap();
    let tp = KindGroups::of_layout(&layout, Kind::TP).unwrap();
    let plan = place(16, &[tp], &[], &hosts, &PlaceOptions::default()).unwrap();
    assert_eq!(plan.idle.len(), 2);
    for failed in ["a0", "a1", "b0", "b1"] {
        let used: Vec<&str> = plan
            .node_hosts
            .iter()
            .map(|&i| hosts.get(i).unwrap().name.as_str())
            .collect();
        if !used.contains(&failed) {
            continue;
        }
        let failure = Failure::of_hosts(&plan, &hosts, 0, &[failed]).unwrap();
        let re = relayout(
            &layout,
            &failure,
            Policy::Spare,
            &RelayoutOptions::default(),
        )
        .unwrap();
        // The host of every new rank: the old node's, or the spare's.
        let spares: Vec<usize> = plan.idle.clone();
        let domain_of_new = |n: u32| -> String {
            let p = re.rank_map().process(n).unwrap();
            let host = if p < 16 {
                plan.node_hosts[(p / 4) as usize]
            } else {
                spares[((p - 16) / 4) as usize]
            };
            hosts.get(host).unwrap().domain().unwrap().to_string()
        };
        for g in re.layout().groups(Kind::TP).unwrap() {
            let domains: BTreeSet<String> = g.iter().map(domain_of_new).collect();
            assert_eq!(
                domains.len(),
                1,
                "{failed}: tp group {:?} over {domains:?}",
                g.to_vec()
            );
        }
        assert_eq!(re.changes(Kind::TP).unwrap().new.len(), 1);
        let _ = NodeDomains::default();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 120, ..ProptestConfig::default() })]

    /// A placement's must-fit kinds still fit: on random racks, with the
    /// job placed so that every tp group is inside one rack, the failure of
    /// any used host under the spare policy keeps every tp group inside one
    /// rack whenever its rack has an idle host left; and dropping the
    /// replica keeps every tp group on the hosts it had.
    #[test]
    fn must_fit_groups_still_fit(racks in prop::collection::vec(2usize..6, 2..5), tp_nodes in 1u32..3, pick in 0usize..1000) {
        let g = 2;
        let mut table = String::new();
        for i in 0..racks.iter().max().copied().unwrap_or(0) {
            for (r, &n) in racks.iter().enumerate() {
                if i < n {
                    table.push_str(&format!("h{r}x{i} r{r} {g}\n"));
                }
            }
        }
        let hosts = Hosts::parse_plain(&table).unwrap();
        let tp = tp_nodes * g;
        let whole: u32 = racks.iter().map(|&n| n as u32 / tp_nodes).sum();
        prop_assume!(whole >= 2);
        let dp = whole - 1; // one unit short of the racks: idle hosts remain
        let layout = Layout::new(&Config::new().tp(tp).dp(dp)).unwrap();
        let must = KindGroups::of_layout(&layout, Kind::TP).unwrap();
        let plan = place(layout.world_size(), &[must], &[], &hosts, &PlaceOptions::default()).unwrap();
        let failed_node = pick % plan.node_hosts.len();
        let failed_host = hosts.get(plan.node_hosts[failed_node]).unwrap().name.clone();
        let failure = Failure::of_hosts(&plan, &hosts, 0, &[failed_host.as_str()]).unwrap();
        let spares: Vec<usize> = plan.idle.clone();
        let rack_of_failed = hosts.get(plan.node_hosts[failed_node]).unwrap().domain().unwrap().to_string();
        let same_rack_spare = spares.iter().any(|&i| hosts.get(i).unwrap().domain() == Some(&rack_of_failed));
        let world = layout.world_size();
        let host_of = |plan_map: &Relayout, n: u32| -> usize {
            let p = plan_map.rank_map().process(n).unwrap();
            if p < world { plan.node_hosts[(p / g) as usize] } else { spares[((p - world) / g) as usize] }
        };
        let re = relayout(&layout, &failure, Policy::Spare, &RelayoutOptions::default()).unwrap();
        if same_rack_spare {
            for group in re.layout().groups(Kind::TP).unwrap() {
                let racks: BTreeSet<String> = group.iter().map(|n| hosts.get(host_of(&re, n)).unwrap().domain().unwrap().to_string()).collect();
                prop_assert_eq!(racks.len(), 1);
            }
        }
        if let Ok(dropped) = relayout(&layout, &failure, Policy::DropReplica, &RelayoutOptions::default()) {
            for group in dropped.layout().groups(Kind::TP).unwrap() {
                let racks: BTreeSet<String> = group.iter().map(|n| hosts.get(host_of(&dropped, n)).unwrap().domain().unwrap().to_string()).collect();
                prop_assert_eq!(racks.len(), 1);
            }
        }
    }
}

/// Errors name the bad value: a failed rank outside the layout, too few
/// spares, no smaller grid above the minimum dp.
#[test]
fn errors_name_the_value() {
    let layout = worked();
    let e = relayout(
        &layout,
        &Failure::new(4, [1152]),
        Policy::ShiftRanks,
        &RelayoutOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("1152"), "{e}");
    let e = relayout(
        &layout,
        &Failure::new(4, [0, 500]),
        Policy::Spare,
        &RelayoutOptions::default().min_dp(1),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("2 node(s) failed and there are 0 spare"),
        "{e}"
    );
    let e = relayout(
        &layout,
        &Failure::new(4, [0]),
        Policy::DropReplica,
        &RelayoutOptions::default().min_dp(36),
    )
    .unwrap_err();
    assert!(e.to_string().contains("below the minimum 36"), "{e}");
    // Next-grid: no smaller dp at or above 36, so a smaller pp (2, dp 71).
    let plan = relayout(
        &layout,
        &Failure::new(4, [0]),
        Policy::NextGrid,
        &RelayoutOptions::default().min_dp(36),
    )
    .unwrap();
    assert_eq!(
        (plan.layout().sizes().pp, plan.layout().sizes().dp),
        (2, 71)
    );
    let e = relayout(
        &layout,
        &Failure::new(4, 0..1152),
        Policy::NextGrid,
        &RelayoutOptions::default(),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("no smaller grid fits 0 surviving ranks"),
        "{e}"
    );
}

/// Experts folded over data parallelism (tp 2, ep 4: an expert group spans
/// 4 replicas, so dp must stay a multiple of 4): drop-replica drops the
/// aligned block of 4 replicas that holds the failed rank, a whole expert
/// data-parallel lane, and every expert group of the other lane is kept,
/// as are the dense groups; nothing is created.
#[test]
fn drop_replica_drops_a_whole_expert_lane() {
    let layout = Layout::new(&Config::new().tp(2).ep(4).dp(8).pp(2)).unwrap();
    assert!(Layout::new(&Config::new().tp(2).ep(4).dp(7).pp(2)).is_err());
    // Rank 11: replica 5 of stage 0 (tp fastest, then dp).
    assert_eq!(layout.placement(11).unwrap().coord.dp, 5);
    let options = RelayoutOptions::default().kinds(vec![
        Kind::TP,
        Kind::PP,
        Kind::DP,
        Kind::EP,
        Kind::ETP,
        Kind::EDP,
    ]);
    let plan = relayout(
        &layout,
        &Failure::new(2, [11]),
        Policy::DropReplica,
        &options,
    )
    .unwrap();
    assert_eq!(plan.layout().sizes().dp, 4);
    for c in plan.kinds() {
        assert!(c.new.is_empty(), "{}: new {:?}", c.kind, c.new);
    }
    assert_eq!(
        plan.changes(Kind::EP).unwrap().kept,
        plan.changes(Kind::EP).unwrap().groups()
    );
    assert!(
        plan.notes()
            .iter()
            .any(|n| n.contains("an expert data-parallel lane is 4 replicas")),
        "{:?}",
        plan.notes()
    );
    check_plan(&layout, &[11], &plan);
}

/// An encoder + decoder layout (encoder tp 1 and pp 2 feeding decoder tp
/// 2, dp 4: encoder ranks 0-7, `d + 4 p`; decoder ranks 8-15, `8 + 2 d +
/// t`): rank 1 (encoder, replica 1) fails; drop-replica drops replica 1
/// from both grids (encoder ranks 1 and 5, decoder ranks 10 and 11) and
/// every other tp group (8 encoder singletons, 4 decoder pairs) and pp group
/// (8 joined pipelines of 3 ranks, overlapping on the encoder) is kept
/// next-grid gives the same layout.
#[test]
fn drop_replica_on_an_encoder_layout() {
    let layout = Layout::new(&Config::new().tp(2).encoder_tp(1).encoder_pp(2).dp(4)).unwrap();
    assert_eq!(layout.encoder_world_size(), 8);
    assert_eq!(layout.placement(1).unwrap().coord.dp, 1);
    assert_eq!(layout.split_rounds(Kind::PP).unwrap(), 2);
    let options = RelayoutOptions::default().kinds(vec![Kind::TP, Kind::PP, Kind::DP]);
    for policy in [Policy::DropReplica, Policy::NextGrid] {
        let plan = relayout(&layout, &Failure::new(2, [1]), policy, &options).unwrap();
        check_plan(&layout, &[1], &plan);
        let new = plan.layout();
        assert_eq!(
            (new.sizes().dp, new.world_size(), new.encoder_world_size()),
            (3, 12, 6)
        );
        let map = plan.rank_map();
        let leave: Vec<u32> = (0..16).filter(|&p| map.new_rank(p).is_none()).collect();
        assert_eq!(leave, [1, 5, 10, 11], "{policy}");
        // Replica 2 becomes replica 1: encoder rank 2 -> 1, decoder 12 -> 8.
        assert_eq!((map.new_rank(2), map.new_rank(12)), (Some(1), Some(8)));
        assert_eq!(counts(&plan, Kind::TP), (9, 0, 0, 3), "{policy}");
        assert_eq!(counts(&plan, Kind::PP), (6, 0, 0, 2), "{policy}");
        assert_eq!(plan.cost().new_communicators, 0, "{policy}");
        assert_eq!(plan.cost().moved, 0, "{policy}");
    }
}

/// The replicas a plan drops: the old replicas none of whose ranks has a
/// new rank (drop-replica leaves every rank of a replica kept or idle).
fn dropped_replicas(layout: &Layout, plan: &Relayout) -> Vec<u32> {
    let map = plan.rank_map();
    let off = layout.rank_offset();
    let mut kept = BTreeSet::new();
    for p in 0..layout.world_size() {
        if map.new_rank(p).is_some() {
            kept.insert(layout.placement(p + off).unwrap().coord.dp);
        }
    }
    (0..layout.sizes().dp)
        .filter(|d| !kept.contains(d))
        .collect()
}

/// The three cases of drop-replica on folded experts users reported: a
/// replica is `r / (tp * cp)` within a stage and an expert data-parallel
/// lane is `ep * etp / (tp * cp)` replicas (an `ep` group spans them), so
/// the lanes holding the failed ranks are dropped whole: no communicator
/// is created and no rank moves. Before, blocks of 2 replicas were
/// dropped, which cut lanes: 10, 72 and 8,384 new communicators, 4, 32
/// and 62,720 ranks moved.
#[test]
fn drop_replica_drops_whole_lanes_in_the_reported_cases() {
    // tp 2, ep 4, 32 ranks of 2 GPUs: dp 16, lanes of 4 replicas; ranks 2
    // and 10 are replicas 1 and 5, lanes 0-3 and 4-7.
    let small = Layout::new(&Config::new().tp(2).ep(4).world_size(Some(32))).unwrap();
    // tp 4, cp 2, ep 8, pp 2, 512 ranks: dp 32, lanes of 4 (ep 8 * etp 4 /
    // (tp 4 * cp 2)); ranks 40 and 72 are replicas 5 and 9.
    let mid = Layout::new(&Config::new().tp(4).cp(2).ep(8).pp(2).world_size(Some(512))).unwrap();
    let cases = [
        (&small, 2, vec![2, 10], (0..8).collect::<Vec<u32>>(), 8),
        (&mid, 8, vec![40, 72], (4..12).collect(), 24),
    ];
    for (layout, g, failed, dropped, dp2) in cases {
        let plan = relayout(
            layout,
            &Failure::new(g, failed.iter().copied()),
            Policy::DropReplica,
            &RelayoutOptions::default(),
        )
        .unwrap();
        assert_eq!(dropped_replicas(layout, &plan), dropped, "{failed:?}");
        assert_eq!(plan.layout().sizes().dp, dp2);
        assert_eq!(
            (plan.cost().new_communicators, plan.cost().moved),
            (0, 0),
            "{failed:?}: {:?}",
            plan.notes()
        );
        assert!(plan.kinds().iter().any(|c| c.kind == Kind::EP));
        check_plan(layout, &failed, &plan);
    }
    // 131,072 ranks, tp 8, cp 2, pp 8, ep 8: dp 1,024, lanes of 4;
    // 70,000-70,007 is replica 279 of stage 4 and 12,345 replica 771.
    let big = Layout::new(
        &Config::new()
            .tp(8)
            .cp(2)
            .pp(8)
            .ep(8)
            .world_size(Some(131_072)),
    )
    .unwrap();
    let failed: Vec<u32> = (70_000..70_008).chain([12_345]).collect();
    let plan = relayout(
        &big,
        &Failure::new(8, failed.iter().copied()),
        Policy::DropReplica,
        &RelayoutOptions::default(),
    )
    .unwrap();
    assert_eq!(plan.layout().sizes().dp, 1016);
    assert_eq!((plan.cost().new_communicators, plan.cost().moved), (0, 0));
    assert_eq!(
        plan.notes()[0],
        "replicas 276-279, 768-771 dropped: dp 1024 -> 1016"
    );
    // Every group without dp among its axes is kept; dp and edp shrink.
    for c in plan.kinds() {
        let shrinks = [Kind::DP, Kind::EDP].contains(&c.kind);
        assert_eq!(c.kept == 0, shrinks, "{}", c.kind);
        assert_eq!(c.shrunk.is_empty(), !shrinks, "{}", c.kind);
    }
}

/// Where no whole lanes can be dropped (here: they would leave dp 8,
/// below the minimum 12), blocks of 2 replicas are dropped, and the notes
/// say why communicators are made, and which.
#[test]
fn drop_replica_says_why_it_cuts_lanes() {
    let layout = Layout::new(&Config::new().tp(2).ep(4).world_size(Some(32))).unwrap();
    let plan = relayout(
        &layout,
        &Failure::new(2, [2, 10]),
        Policy::DropReplica,
        &RelayoutOptions::default().min_dp(12),
    )
    .unwrap();
    assert_eq!(dropped_replicas(&layout, &plan), [0, 1, 4, 5]);
    assert!(plan.cost().new_communicators > 0);
    let notes = plan.notes().join("\n");
    assert!(
        notes.contains("dropping whole expert data-parallel lanes (4 replicas each) leaves dp 8, below the minimum 12"),
        "{notes}"
    );
    assert!(notes.contains("communicators made for"), "{notes}");
    check_plan(&layout, &[2, 10], &plan);
}

/// Layouts with experts, folded or nested, in orders that keep `ep` next
/// to `dp`, with distributed-optimizer instances (which must divide
/// `dp * cp`, so that dropping the lanes holding a failure may leave no
/// valid grid and larger blocks of lanes are dropped), and up to four
/// failed ranks.
fn arb_expert_case() -> impl Strategy<Value = (Config, Vec<u32>, u32)> {
    (
        prop::sample::select(vec![1u32, 2, 4]),
        prop::sample::select(vec![1u32, 2]),
        prop::sample::select(vec![1u32, 2, 4, 8]),
        prop::sample::select(vec![None, Some(1u32), Some(2)]),
        prop::sample::select(vec![1u32, 2]),
        1u32..17,
        prop::sample::select(vec![
            "tp-cp-ep-dp-pp",
            "tp-cp-dp-ep-pp",
            "tp-pp-ep-dp-cp",
            "ep-dp-tp-cp-pp",
        ]),
        any::<bool>(),
        prop::collection::vec(0u32..100_000, 1..5),
        prop::sample::select(vec![1u32, 1, 2, 4, 6]),
        prop::sample::select(vec![1u32, 1, 2, 4]),
    )
        .prop_map(
            |(tp, cp, ep, etp, pp, dp, order, nested, failed, min_dp, instances)| {
                let config = Config::new()
                    .dist_opt_instances(instances)
                    .tp(tp)
                    .cp(cp)
                    .ep(ep)
                    .etp(etp)
                    .pp(pp)
                    .dp(dp)
                    .order(order.parse().unwrap())
                    .expert_layout(if nested {
                        ExpertLayout::Nested
                    } else {
                        ExpertLayout::Folded
                    });
                (config, failed, min_dp)
            },
        )
}

/// The lanes of `layout`, listed from scratch: replicas joined by any
/// group of a kind without a data-parallel axis (tp, cp, ep, pp, etp and
/// their products) that holds ranks of both.
fn lanes_from_groups(layout: &Layout) -> Vec<u32> {
    let dp = layout.sizes().dp;
    let mut lane: Vec<u32> = (0..dp).collect();
    fn root(lane: &mut [u32], mut d: u32) -> u32 {
        while lane[d as usize] != d {
            d = lane[d as usize];
        }
        d
    }
    let kinds = [
        Kind::TP,
        Kind::CP,
        Kind::EP,
        Kind::PP,
        Kind::ETP,
        Kind::TP_CP,
        Kind::TP_PP,
        Kind::TP_EP,
        Kind::ETP_EP,
        Kind::TP_EP_PP,
        Kind::ETP_EP_PP,
    ];
    for kind in kinds.into_iter().filter(|k| layout.kinds().contains(k)) {
        for g in layout.groups(kind).unwrap() {
            let mut it = g.iter().map(|r| layout.placement(r).unwrap().coord.dp);
            let first = it.next().unwrap();
            for d in it {
                let (a, b) = (root(&mut lane, first), root(&mut lane, d));
                lane[a.max(b) as usize] = a.min(b);
            }
        }
    }
    (0..dp).map(|d| root(&mut lane, d)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// drop-replica keeps its promise: where dropping the whole lanes
    /// holding a failed rank leaves a valid grid of at least `min_dp`
    /// replicas (lanes listed from the groups, independently of the
    /// library), exactly those replicas are dropped; wherever whole lanes
    /// are dropped, no communicator is created and no rank moves; where a
    /// lane is cut, whole lanes did not fit and the notes say why (and,
    /// where communicators are made, which). Every plan matches the
    /// groups.
    #[test]
    fn drop_replica_drops_whole_lanes((config, failed, min_dp) in arb_expert_case()) {
        let Ok(layout) = Layout::new(&config) else { return Ok(()) };
        let world = layout.world_size();
        let failed: Vec<u32> = failed.iter().map(|f| f % world).collect();
        let lanes = lanes_from_groups(&layout);
        let broken: BTreeSet<u32> = failed
            .iter()
            .map(|&f| lanes[layout.placement(f).unwrap().coord.dp as usize])
            .collect();
        let dropped: Vec<u32> = (0..layout.sizes().dp)
            .filter(|&d| broken.contains(&lanes[d as usize]))
            .collect();
        let dp2 = layout.sizes().dp - dropped.len() as u32;
        let lanes_fit = dp2 >= min_dp
            && Layout::new(&config.clone().dp(dp2).world_size(None)).is_ok();
        let options = RelayoutOptions::default().min_dp(min_dp);
        let plan = relayout(&layout, &Failure::new(1, failed.iter().copied()), Policy::DropReplica, &options);
        match plan {
            Ok(plan) => {
                check_plan(&layout, &failed, &plan);
                let got = dropped_replicas(&layout, &plan);
                if lanes_fit {
                    prop_assert_eq!(&got, &dropped);
                }
                // Whole lanes dropped (those holding a failed rank or
                // larger blocks of them): nothing made, nothing moved.
                let cut = (0..layout.sizes().dp).any(|d| {
                    got.contains(&d) != got.iter().any(|&g| lanes[g as usize] == lanes[d as usize])
                });
                if !cut {
                    prop_assert_eq!((plan.cost().new_communicators, plan.cost().moved), (0, 0), "{:?}", plan.notes());
                } else {
                    prop_assert!(!lanes_fit);
                    let notes = plan.notes().join("\n");
                    prop_assert!(notes.contains("dropping whole expert data-parallel lanes"), "{}", notes);
                    if plan.cost().new_communicators > 0 {
                        prop_assert!(notes.contains("communicators made for"), "{}", notes);
                    }
                }
            }
            Err(e) => {
                prop_assert!(!lanes_fit, "{}", e);
                prop_assert!(matches!(e, rank_layout::Error::NoRelayout { .. }), "{}", e);
            }
        }
    }
}

/// next-grid when no smaller dp fits (tp 2, pp 2, 8 ranks, rank 3 lost,
/// at least 2 replicas): pp shrinks to 1, dp grows to 3. Each pp group
/// is then one process alone: no communicator (before, 6 of the 10 "new"
/// communicators were such groups), and the one tp group whose members
/// are an old group's, in order, is kept, so the notes do not call every
/// group new.
#[test]
fn next_grid_counts_a_process_alone_as_no_communicator() {
    let layout = Layout::new(&Config::new().tp(2).pp(2).world_size(Some(8))).unwrap();
    let plan = relayout(
        &layout,
        &Failure::new(2, [3]),
        Policy::NextGrid,
        &RelayoutOptions::default().min_dp(2),
    )
    .unwrap();
    assert_eq!((plan.layout().sizes().pp, plan.layout().sizes().dp), (1, 3));
    let pp = plan.changes(Kind::PP).unwrap();
    assert_eq!((pp.new.len(), pp.alone.len()), (0, 6));
    assert_eq!(plan.changes(Kind::TP).unwrap().kept, 1);
    assert_eq!(plan.cost().new_communicators, 4);
    let notes = plan.notes().join("\n");
    assert!(!notes.contains("every group is new"), "{notes}");
    assert!(notes.contains("pp 2 -> 1"), "{notes}");
    // A process alone: its answer says so, and it splits nothing.
    let p = plan.rank_map().process(0).unwrap();
    let fate = plan.fate_of(p, Kind::PP).unwrap().unwrap();
    assert_eq!(
        (fate.change, fate.membership.group.to_vec()),
        (Change::Alone, vec![0])
    );
    assert_eq!(plan.split(p, Kind::PP).unwrap(), None);
    check_plan(&layout, &[3], &plan);
}

/// A process that is not the plan's, or a kind it did not classify, is an
/// error naming the value, never a silent `None`.
#[test]
fn questions_about_no_process_are_errors() {
    let layout = Layout::new(&Config::new().tp(2).dp(4)).unwrap();
    let plan = relayout(
        &layout,
        &Failure::new(2, [3]),
        Policy::DropReplica,
        &RelayoutOptions::default().kinds(vec![Kind::TP]),
    )
    .unwrap();
    for e in [
        plan.split(99_999, Kind::TP).unwrap_err(),
        plan.fate_of(99_999, Kind::TP).unwrap_err(),
        plan.split_in_round(8, Kind::TP, 0).unwrap_err(),
    ] {
        assert!(
            e.to_string().contains("process = 99999") || e.to_string().contains("process = 8"),
            "{e}"
        );
        assert!(e.to_string().contains("the plan has 8"), "{e}");
    }
    let e = plan.split(0, Kind::DP).unwrap_err();
    assert!(e.to_string().contains("kind = dp"), "{e}");
    // The failed process and those of its dropped replica have none.
    assert_eq!(plan.split(3, Kind::TP).unwrap(), None);
    assert_eq!(plan.fates_of(2, Kind::TP).unwrap(), []);
}

/// The library's errors speak its own words: placing the job of a
/// re-layout on hosts of unknown or mixed GPU counts names
/// `PlaceOptions::gpus_per_node`, not the command line's flag.
#[test]
fn place_errors_name_the_library_field() {
    let layout = Layout::new(&Config::new().tp(2).world_size(Some(2))).unwrap();
    let tp = KindGroups::of_layout(&layout, Kind::TP).unwrap();
    for table in ["a r0\nb r0\n", "a r0 2\nb r0 4\n"] {
        let hosts = Hosts::parse_plain(table).unwrap();
        let e = place(
            2,
            std::slice::from_ref(&tp),
            &[],
            &hosts,
            &PlaceOptions::default(),
        )
        .unwrap_err();
        let text = e.to_string();
        assert!(text.contains("PlaceOptions::gpus_per_node"), "{text}");
        assert!(!text.contains("--"), "{text}");
    }
}
