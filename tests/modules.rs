//! Multi-module layouts and their bridges: equal to Megatron-Core 0.19.2's
//! own plans where it is right (`tests/data/megatron/bridges.json`, its
//! output), the coordinate-correct plan where it is wrong or refuses, and
//! the bridge properties on random module pairs.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use rank_layout::{
    Error, Mesh, Modules, Split,
    modules::{BridgeKind, ColocatedMode, Direction, Spans},
};
use serde_json::Value;

mod common;
use common::{megatron_data, rank_lists, ranks};

/// A grid of the reference data: dims (Megatron's `gtp_remat` is `gtp`).
fn dims(grid: &Value) -> Vec<(String, u32)> {
    grid["dims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let name = d[0].as_str().unwrap();
            let name = if name == "gtp_remat" { "gtp" } else { name };
            (name.to_owned(), d[1].as_u64().unwrap() as u32)
        })
        .collect()
}

fn mesh(grid: &Value) -> Mesh {
    Mesh::new(dims(grid))
        .unwrap()
        .with_rank_offset(grid["offset"].as_u64().unwrap() as u32)
        .unwrap()
}

fn size(dims: &[(String, u32)], name: &str) -> u32 {
    dims.iter().find(|(n, _)| n == name).map_or(1, |d| d.1)
}

/// The test's own reading of a grid: a rank's coordinate along `name`.
fn coord(dims: &[(String, u32)], offset: u32, rank: u32, name: &str) -> u32 {
    let mut p = rank - offset;
    for (n, s) in dims {
        if n == name {
            return p % s;
        }
        p /= s;
    }
    0
}

/// The test's own data lane: gtp and dp coordinates, first listed fastest.
fn lane(dims: &[(String, u32)], offset: u32, rank: u32) -> u32 {
    let mut lane = 0;
    let mut weight = 1;
    for (n, s) in dims {
        if n == "gtp" || n == "dp" {
            lane += coord(dims, offset, rank, n) * weight;
            weight *= s;
        }
    }
    lane
}

fn lanes(dims: &[(String, u32)]) -> u32 {
    size(dims, "gtp") * size(dims, "dp")
}

fn pair(case: &Value, spans: Spans) -> Result<Modules, Error> {
    Modules::new(
        [("src", mesh(&case["src"])), ("dst", mesh(&case["dst"]))],
        spans,
    )?
    .edge("src", "dst")
}

/// Whether the pair's lane counts do not divide, and then that building
/// it was the typed error.
fn refused_for_lanes(
    case: &Value,
    sd: &[(String, u32)],
    dd: &[(String, u32)],
    built: &Result<Modules, Error>,
) -> bool {
    let divides = lanes(sd) % lanes(dd) == 0 || lanes(dd) % lanes(sd) == 0;
    if !divides {
        assert!(
            matches!(built, Err(Error::LanesNotPaired { .. })),
            "{case}: {built:?}"
        );
    }
    !divides
}

#[test]
fn separate_spans_equal_megatron_core_where_it_is_right() {
    let data = megatron_data("bridges.json");
    let (mut equal, mut gtp_fixed, mut cp_built, mut refused_alike, mut dims_added) =
        (0, 0, 0, 0, 0);
    for case in data["separate"].as_array().unwrap() {
        let (sd, dd) = (dims(&case["src"]), dims(&case["dst"]));
        let built = pair(case, Spans::Consecutive);
        if refused_for_lanes(case, &sd, &dd, &built) {
            refused_alike += 1;
            continue;
        }
        let modules = built.unwrap_or_else(|e| panic!("{case}: {e}"));
        let plan = modules.bridge("src", "dst").unwrap();
        match case["refused"].as_str() {
            None if size(&sd, "gtp") == 1 && size(&dd, "gtp") == 1 => {
                assert_eq!(plan.src_leaders, ranks(&case["src_leaders"]), "{case}");
                assert_eq!(plan.dst_leaders, ranks(&case["dst_leaders"]), "{case}");
                assert_eq!(
                    plan.src_broadcast.to_vecs(),
                    rank_lists(&case["src_broadcast"]),
                    "{case}"
                );
                assert_eq!(
                    plan.dst_broadcast.to_vecs(),
                    rank_lists(&case["dst_broadcast"]),
                    "{case}"
                );
                assert_eq!(plan.bridge_group, ranks(&case["bridge_group"]), "{case}");
                // The comm map, from the pairs.
                let mut map: BTreeMap<u32, (Vec<u32>, Vec<u32>)> = BTreeMap::new();
                for &(s, d) in &plan.pairs {
                    map.entry(s).or_default().0.push(d);
                    map.entry(d).or_default().1.push(s);
                }
                let theirs: BTreeMap<u32, (Vec<u32>, Vec<u32>)> = case["comm_map"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(r, v)| {
                        (
                            r.parse().unwrap(),
                            (ranks(&v["send_to"]), ranks(&v["recv_from"])),
                        )
                    })
                    .collect();
                assert_eq!(map, theirs, "{case}");
                assert!(plan.dst_cp_reduce.is_none() && plan.src_cp_gather.is_none());
                equal += 1;
            }
            None => {
                // gtp > 1: Megatron-Core 0.19.2 elects one leader per dp
                // replica, so some broadcast groups hold no leader; here
                // every lane has its leader in its broadcast group.
                let leaderless = |bcast: &Value, leaders: &Value| {
                    let l: BTreeSet<u32> = ranks(leaders).into_iter().collect();
                    rank_lists(bcast)
                        .iter()
                        .filter(|g| !g.iter().any(|r| l.contains(r)))
                        .count()
                };
                assert!(
                    leaderless(&case["src_broadcast"], &case["src_leaders"])
                        + leaderless(&case["dst_broadcast"], &case["dst_leaders"])
                        > 0,
                    "{case}"
                );
                for (bcast, leaders) in [
                    (&plan.src_broadcast, &plan.src_leaders),
                    (&plan.dst_broadcast, &plan.dst_leaders),
                ] {
                    for (g, l) in bcast.iter().zip(leaders) {
                        assert!(g.contains(l), "{case}");
                    }
                }
                gtp_fixed += 1;
            }
            Some(msg) if msg.contains("CP size must be 1") => {
                assert_eq!(plan.src_cp_gather.is_some(), size(&sd, "cp") > 1, "{case}");
                assert_eq!(plan.dst_cp_reduce.is_some(), size(&dd, "cp") > 1, "{case}");
                cp_built += 1;
            }
            Some(msg) if msg.contains("is not in list") => dims_added += 1,
            // Megatron counts dp replicas, not lanes: with gtp it refuses
            // pairs whose lanes divide.
            Some(msg) => assert!(
                msg.contains("evenly divisible") && (size(&sd, "gtp") > 1 || size(&dd, "gtp") > 1),
                "{case}"
            ),
        }
    }
    eprintln!(
        "separate: {equal} equal, {gtp_fixed} with gtp, {cp_built} with cp, {dims_added} without cp or pp, {refused_alike} refused alike"
    );
    assert!(equal >= 100 && gtp_fixed >= 20 && cp_built >= 30 && refused_alike >= 40);
}

/// Whether every rank's lanes line up (rule C1), read by the test itself.
fn lanes_line_up(sd: &[(String, u32)], dd: &[(String, u32)], offset: u32, world: u32) -> bool {
    let (ns, nd) = (lanes(sd), lanes(dd));
    (offset..offset + world).all(|r| {
        let (ls, ld) = (lane(sd, offset, r), lane(dd, offset, r));
        if ns >= nd {
            ld == ls / (ns / nd)
        } else {
            ls == ld / (nd / ns)
        }
    })
}

#[test]
fn colocated_equal_megatron_core_where_it_is_right() {
    let data = megatron_data("bridges.json");
    let (mut equal, mut p2p_fixed, mut gtp_fixed, mut extended, mut refused_alike) =
        (0, 0, 0, 0, 0);
    for case in data["colocated"].as_array().unwrap() {
        let (sd, dd) = (dims(&case["src"]), dims(&case["dst"]));
        let offset = case["src"]["offset"].as_u64().unwrap() as u32;
        let built = pair(case, Spans::Colocated);
        let msg = case["refused"].as_str().unwrap_or("");
        if msg.contains("same rank offset") || msg.contains("same number of ranks") {
            assert!(
                matches!(built, Err(Error::ModuleSpans { .. })),
                "{case}: {built:?}"
            );
            refused_alike += 1;
            continue;
        }
        if refused_for_lanes(case, &sd, &dd, &built) {
            refused_alike += 1;
            continue;
        }
        let modules = built.unwrap_or_else(|e| panic!("{case}: {e}"));
        let world = modules.module("src").unwrap().world_size();
        let plan = modules.bridge("src", "dst").unwrap();
        let colocated = plan.colocated.as_ref().unwrap();
        let pp1 = size(&sd, "pp") == 1 && size(&dd, "pp") == 1;
        let line_up = pp1 && lanes_line_up(&sd, &dd, offset, world);
        assert_eq!(
            colocated.mode,
            if line_up {
                ColocatedMode::Collective
            } else {
                ColocatedMode::P2p
            },
            "{case}"
        );
        let no_gtp = size(&sd, "gtp") == 1 && size(&dd, "gtp") == 1;
        if !msg.is_empty() {
            // Refused for cp > 1, pp > 1, a missing dp, dp sizes that do
            // not divide while the lanes do: built here.
            extended += 1;
        } else if no_gtp && line_up {
            assert_eq!(
                plan.direction.name(),
                case["direction"].as_str().unwrap(),
                "{case}"
            );
            assert_eq!(
                u64::from(plan.scale),
                case["scale"].as_u64().unwrap(),
                "{case}"
            );
            assert_eq!(
                colocated.gather_groups.to_vecs(),
                rank_lists(&case["gather_groups"]),
                "{case}"
            );
            let slots: Vec<u32> = (offset..offset + world)
                .map(|r| case["slots"][r.to_string()].as_u64().unwrap() as u32)
                .collect();
            assert_eq!(colocated.slots, slots, "{case}");
            equal += 1;
        } else if no_gtp {
            // Megatron-Core gathers by dp and never checks that the lanes
            // line up: some rank would get another lane's samples.
            assert!(!lanes_line_up(&sd, &dd, offset, world));
            p2p_fixed += 1;
        } else {
            // gtp > 1: Megatron sizes its gather plan by dp alone.
            if line_up && plan.direction != Direction::Equal {
                let mut seen = vec![0u32; world as usize];
                for g in &colocated.gather_groups {
                    for &r in g {
                        seen[(r - offset) as usize] += 1;
                    }
                }
                assert!(seen.iter().all(|&n| n == 1), "{case}");
            }
            gtp_fixed += 1;
        }
    }
    eprintln!(
        "colocated: {equal} equal, {p2p_fixed} p2p where Megatron-Core mixes lanes, {gtp_fixed} with gtp, {extended} Megatron-Core refuses, {refused_alike} refused alike"
    );
    assert!(equal >= 50 && extended >= 40 && refused_alike >= 20 && gtp_fixed >= 10);
}

#[test]
fn stages_equal_megatron_core() {
    let data = megatron_data("bridges.json");
    let (mut compared, mut skipped) = (0, 0);
    for case in data["stages"].as_array().unwrap() {
        let listed: Vec<(String, Mesh)> = case["modules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["name"].as_str().unwrap().to_owned(), mesh(m)))
            .collect();
        let modules = match Modules::new(listed.clone(), Spans::AsGiven) {
            Ok(m) => m,
            Err(Error::ModuleSpans { .. }) => {
                // Some modules share ranks and others do not: not a
                // layout of this crate (spans tile or all coincide).
                skipped += 1;
                continue;
            }
            Err(e) => panic!("{case}: {e}"),
        };
        let mut edges = Vec::new();
        for (name, _) in &listed {
            for d in case["topology"][name.as_str()].as_array().unwrap() {
                edges.push((name.as_str(), d.as_str().unwrap()));
            }
        }
        let modules = modules.edges_from(edges).unwrap();
        assert_eq!(
            u64::from(modules.total_stages()),
            case["total_stages"].as_u64().unwrap(),
            "{case}"
        );
        for (rank, stage) in case["current_stage"].as_object().unwrap() {
            let rank: u32 = rank.parse().unwrap();
            assert_eq!(
                u64::from(modules.stage(rank).unwrap()),
                stage.as_u64().unwrap(),
                "{case}"
            );
        }
        compared += 1;
    }
    eprintln!("stages: {compared} compared, {skipped} with mixed spans");
    assert!(compared >= 40);
}

/// A random module grid: tp, gtp, cp, dp, pp of sizes 1-3 (some left out),
/// in a random order.
fn grid() -> impl Strategy<Value = Vec<(String, u32)>> {
    (
        proptest::collection::vec((1u32..=3, any::<bool>()), 5),
        Just(["tp", "gtp", "cp", "dp", "pp"]).prop_shuffle(),
    )
        .prop_map(|(sizes, names)| {
            names
                .iter()
                .zip(sizes)
                .filter(|(n, (s, keep))| *keep || *s > 1 || **n == "dp")
                .map(|(n, (s, _))| (n.to_string(), s))
                .collect()
        })
}

/// Every property of a bridge, and every rank's splits against the plan's
/// lists (color = the group's index, key = the rank's position).
fn check_bridge(modules: &Modules, sd: &[(String, u32)], dd: &[(String, u32)]) {
    let plan = modules.bridge("a", "b").unwrap();
    let a = modules.module("a").unwrap();
    let b = modules.module("b").unwrap();
    let (oa, ob) = (a.rank_offset(), b.rank_offset());
    let (ns, nd) = (lanes(sd), lanes(dd));
    let (tpa, cpa, ppa) = (size(sd, "tp"), size(sd, "cp"), size(sd, "pp"));
    // R1: leaders in lane order, one per lane, at the right coordinates.
    assert_eq!(plan.src_leaders.len() as u32, ns);
    for (l, &r) in plan.src_leaders.iter().enumerate() {
        assert_eq!(lane(sd, oa, r), l as u32);
        assert_eq!(
            [
                coord(sd, oa, r, "tp"),
                coord(sd, oa, r, "cp"),
                coord(sd, oa, r, "pp")
            ],
            [tpa - 1, cpa - 1, ppa - 1]
        );
    }
    for (j, &r) in plan.dst_leaders.iter().enumerate() {
        assert_eq!(lane(dd, ob, r), j as u32);
        assert_eq!(
            [
                coord(dd, ob, r, "tp"),
                coord(dd, ob, r, "cp"),
                coord(dd, ob, r, "pp")
            ],
            [0, 0, 0]
        );
    }
    // R2: each source lane sent by its leader to exactly its block, each
    // destination lane received from exactly its block.
    let k = ns.max(nd) / ns.min(nd);
    for l in 0..ns {
        let to: Vec<u32> = plan
            .pairs
            .iter()
            .filter(|p| p.0 == plan.src_leaders[l as usize])
            .map(|p| lane(dd, ob, p.1))
            .collect();
        let want: Vec<u32> = if ns >= nd {
            vec![l / k]
        } else {
            (l * k..l * k + k).collect()
        };
        assert_eq!(to, want);
    }
    for j in 0..nd {
        let from: Vec<u32> = plan
            .pairs
            .iter()
            .filter(|p| p.1 == plan.dst_leaders[j as usize])
            .map(|p| lane(sd, oa, p.0))
            .collect();
        let want: Vec<u32> = if ns >= nd {
            (j * k..j * k + k).collect()
        } else {
            vec![j / k]
        };
        assert_eq!(from, want);
    }
    // R3: every boundary rank in exactly one broadcast group, with its
    // lane's leader; members ascending.
    for (groups, leaders, d, o, stage) in [
        (&plan.src_broadcast, &plan.src_leaders, sd, oa, ppa - 1),
        (&plan.dst_broadcast, &plan.dst_leaders, dd, ob, 0),
    ] {
        let mut seen = BTreeMap::new();
        for (l, g) in groups.iter().enumerate() {
            assert!(g.contains(&leaders[l]));
            assert!(g.windows(2).all(|w| w[0] < w[1]));
            for &r in g {
                assert_eq!((lane(d, o, r), coord(d, o, r, "pp")), (l as u32, stage));
                *seen.entry(r).or_insert(0) += 1;
            }
        }
        let boundary =
            (o..o + size(d, "tp") * size(d, "gtp") * size(d, "cp") * size(d, "dp") * size(d, "pp"))
                .filter(|&r| coord(d, o, r, "pp") == stage)
                .count();
        assert_eq!(seen.len(), boundary);
        assert!(seen.values().all(|&n| n == 1));
    }
    // R4 / E1: cp groups keep lane, tp and stage; only cp varies.
    for (groups, d, o) in [(&plan.dst_cp_reduce, dd, ob), (&plan.src_cp_gather, sd, oa)] {
        if let Some(groups) = groups {
            for g in groups {
                let cps: Vec<u32> = g.iter().map(|&r| coord(d, o, r, "cp")).collect();
                assert_eq!(cps, (0..size(d, "cp")).collect::<Vec<_>>());
                assert!(g.iter().all(|&r| lane(d, o, r) == lane(d, o, g[0])
                    && coord(d, o, r, "tp") == coord(d, o, g[0], "tp")));
            }
        }
    }
    // R5.
    let mut bg: Vec<u32> = plan
        .src_leaders
        .iter()
        .chain(&plan.dst_leaders)
        .copied()
        .collect();
    bg.sort_unstable();
    bg.dedup();
    assert_eq!(plan.bridge_group, bg);
    // Colocated: the gather plan covers every rank once; its groups keep
    // the (tp, cp) position and join the lanes of one block.
    if let Some(c) = &plan.colocated {
        if c.mode == ColocatedMode::Collective && plan.direction != Direction::Equal {
            let (d, o) = if plan.direction == Direction::FanIn {
                (sd, oa)
            } else {
                (dd, ob)
            };
            let mut seen = BTreeSet::new();
            for g in &c.gather_groups {
                for &r in g {
                    assert!(seen.insert(r));
                    assert_eq!(
                        (coord(d, o, r, "tp"), coord(d, o, r, "cp")),
                        (coord(d, o, g[0], "tp"), coord(d, o, g[0], "cp"))
                    );
                }
                let ls: Vec<u32> = g.iter().map(|&r| lane(d, o, r)).collect();
                assert_eq!(ls, (ls[0]..ls[0] + k).collect::<Vec<_>>());
                assert_eq!(ls[0] % k, 0);
            }
            assert_eq!(seen.len() as u32, a.world_size());
        }
        if c.mode == ColocatedMode::Collective {
            assert_eq!(c.slots.len() as u32, a.world_size());
        }
    }
    // Per-rank splits equal the plan's lists.
    let lists: Vec<(BridgeKind, Vec<Vec<u32>>)> = modules
        .bridge_kinds("a", "b")
        .unwrap()
        .into_iter()
        .map(|kind| (kind, plan.groups(kind).unwrap().to_vecs()))
        .collect();
    let end = modules.rank_end() as u32;
    for r in modules.rank_offset()..end {
        let role = modules.role(r, "a", "b").unwrap();
        for (kind, groups) in &lists {
            let want = groups.iter().enumerate().find_map(|(i, g)| {
                g.iter().position(|&x| x == r).map(|p| Split {
                    color: i as u32,
                    key: p as u32,
                })
            });
            assert_eq!(
                modules.bridge_split(r, "a", "b", *kind).unwrap(),
                want,
                "{kind} rank {r}"
            );
            assert_eq!(role.split(*kind), want);
            let group = want.map(|w| groups[w.color as usize].clone());
            assert_eq!(
                modules.bridge_group_of(r, "a", "b", *kind).unwrap(),
                group,
                "{kind} rank {r}"
            );
        }
        if let Some(c) = &plan.colocated {
            if c.mode == ColocatedMode::Collective {
                assert_eq!(role.slot, Some(c.slots[(r - oa) as usize]));
            }
        }
        let sends: Vec<u32> = plan
            .pairs
            .iter()
            .filter(|p| p.0 == r)
            .map(|p| p.1)
            .collect();
        let leader_plan = plan
            .colocated
            .as_ref()
            .is_none_or(|c| c.mode == ColocatedMode::P2p);
        if leader_plan {
            assert_eq!(role.sends_to, sends);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn separate_bridges_hold_every_property(sd in grid(), dd in grid()) {
        let built = Modules::new(
            [("a", Mesh::new(sd.clone()).unwrap()), ("b", Mesh::new(dd.clone()).unwrap())],
            Spans::Consecutive,
        ).unwrap().edge("a", "b");
        let (ns, nd) = (lanes(&sd), lanes(&dd));
        match built {
            Ok(m) => check_bridge(&m, &sd, &dd),
            Err(e) => {
                prop_assert!(ns % nd != 0 && nd % ns != 0, "{e}");
                let typed = matches!(e, Error::LanesNotPaired { .. });
                prop_assert!(typed);
            }
        }
    }

    #[test]
    fn colocated_bridges_hold_every_property(
        sd in grid(),
        perm in Just([0usize, 1, 2, 3, 4]).prop_shuffle(),
        split_dp in any::<bool>(),
    ) {
        // A destination over the same ranks: the source's sizes regrouped
        // (dp moved into gtp or tp sometimes), dims reordered.
        let mut sizes: BTreeMap<&str, u32> = ["tp", "gtp", "cp", "dp", "pp"].iter().map(|n| (*n, size(&sd, n))).collect();
        if split_dp {
            let dp = sizes["dp"];
            *sizes.get_mut("tp").unwrap() *= dp;
            *sizes.get_mut("dp").unwrap() = 1;
        }
        let names = ["tp", "gtp", "cp", "dp", "pp"];
        let dd: Vec<(String, u32)> = perm.iter().map(|&i| (names[i].to_owned(), sizes[names[i]])).collect();
        let m = Modules::new(
            [("a", Mesh::new(sd.clone()).unwrap()), ("b", Mesh::new(dd.clone()).unwrap())],
            Spans::Colocated,
        ).unwrap().edge("a", "b").unwrap();
        let world = m.module("a").unwrap().world_size();
        let plan = m.bridge("a", "b").unwrap();
        let line_up = size(&sd, "pp") == 1 && size(&dd, "pp") == 1 && lanes_line_up(&sd, &dd, 0, world);
        let colocated = plan.colocated.as_ref().unwrap();
        prop_assert_eq!(colocated.mode == ColocatedMode::Collective, line_up);
        // The rank a p2p reason names is one whose lanes do not line up.
        if let Some(reason) = colocated.reason.as_deref().filter(|r| r.starts_with("rank ")) {
            let r: u32 = reason[5..].split(' ').next().unwrap().parse().unwrap();
            let (ls, ld) = (lane(&sd, 0, r), lane(&dd, 0, r));
            let (ns, nd) = (lanes(&sd), lanes(&dd));
            let ok = if ns >= nd { ld == ls / (ns / nd) } else { ls == ld / (nd / ns) };
            prop_assert!(!ok, "{}", reason);
        }
        check_bridge(&m, &sd, &dd);
    }
}

#[test]
fn graph_errors_are_typed() {
    let m = |d: &[(&str, u32)]| Mesh::new(d.iter().map(|(n, s)| (*n, *s))).unwrap();
    let three = || {
        Modules::new(
            [
                ("a", m(&[("dp", 2)])),
                ("b", m(&[("dp", 2)])),
                ("c", m(&[("dp", 3)])),
            ],
            Spans::Consecutive,
        )
        .unwrap()
    };
    let err = three().edge("a", "b").unwrap().edge("b", "a").unwrap_err();
    assert_eq!(
        err.to_string(),
        "the module edges make a cycle: a -> b -> a"
    );
    let err = three().edge("a", "a").unwrap_err();
    assert_eq!(err.to_string(), "the module edges make a cycle: a -> a");
    let err = three().edge("a", "x").unwrap_err();
    assert!(matches!(err, Error::UnknownName { .. }), "{err}");
    let err = three().edge("b", "c").unwrap_err();
    assert_eq!(
        err.to_string(),
        "edge b -> c: b has 2 data lanes (gtp*dp) and c 3; one count must divide the other"
    );
    let err = three().edge("a", "b").unwrap().edge("a", "b").unwrap_err();
    assert!(matches!(err, Error::DuplicateName { .. }), "{err}");
    let err = Modules::new([("a", m(&[("ep", 2)]))], Spans::Consecutive).unwrap_err();
    assert!(matches!(err, Error::ModuleDim { .. }), "{err}");
    let err = Modules::new(
        [("a", m(&[("dp", 2)])), ("b", m(&[("dp", 4)]))],
        Spans::Colocated,
    )
    .unwrap_err();
    assert!(matches!(err, Error::ModuleSpans { .. }), "{err}");
    let err = Modules::new(
        [
            ("a", m(&[("dp", 2)])),
            ("b", m(&[("dp", 2)]).with_rank_offset(3).unwrap()),
        ],
        Spans::AsGiven,
    )
    .unwrap_err();
    assert!(matches!(err, Error::ModuleSpans { .. }), "{err}");
    assert!(matches!(
        Modules::new(Vec::<(String, Mesh)>::new(), Spans::Consecutive),
        Err(Error::NoModules)
    ));
    let err = Modules::new([("a b", m(&[("dp", 2)]))], Spans::Consecutive).unwrap_err();
    assert!(matches!(err, Error::BadName { .. }), "{err}");
    let err = three().module_of(7).unwrap_err();
    assert!(matches!(err, Error::RankOutOfRange { .. }), "{err}");
}

#[test]
fn stages_follow_the_longest_path() {
    // vision (pp 2) and audio (pp 1) into llm (pp 3) into a generator (pp 1).
    let m = |pp: u32| Mesh::new([("dp", 1), ("pp", pp)]).unwrap();
    let modules = Modules::new(
        [
            ("vision", m(2)),
            ("audio", m(1)),
            ("llm", m(3)),
            ("gen", m(1)),
        ],
        Spans::Consecutive,
    )
    .unwrap()
    .edges_from([("vision", "llm"), ("audio", "llm"), ("llm", "gen")])
    .unwrap();
    assert_eq!(modules.total_stages(), 2 + 3 + 1);
    assert_eq!(modules.first_stage("llm").unwrap(), 2);
    assert_eq!(modules.first_stage("audio").unwrap(), 0);
    // ranks: vision 0-1, audio 2, llm 3-5, gen 6.
    let stages: Vec<u32> = (0..7).map(|r| modules.stage(r).unwrap()).collect();
    assert_eq!(stages, vec![0, 1, 0, 2, 3, 4, 5]);
}

#[test]
fn colocated_lanes_are_decided_from_strides_at_any_size() {
    // 2^30 ranks each: rank r is on a's lane r >> 3 and b's lane r >> 4.
    let a = Mesh::new([("tp", 8), ("dp", 1 << 27)]).unwrap();
    let b = Mesh::new([("tp", 16), ("dp", 1 << 26)]).unwrap();
    let m = Modules::new([("a", a.clone()), ("b", b)], Spans::Colocated)
        .unwrap()
        .edge("a", "b")
        .unwrap();
    let rank = 1_000_000_007u32; // below 2^30
    let role = m.role(rank, "a", "b").unwrap();
    assert_eq!(role.slot, Some((rank >> 3) % 2));
    assert!(role.split(BridgeKind::Gather).is_some());
    // The same with b's dims swapped: rank 1 is on b's lane 1 but a's lane
    // 0. (A leader plan keeps its sorted leaders: O(lanes), so smaller.)
    let a = Mesh::new([("tp", 8), ("dp", 1 << 17)]).unwrap();
    let swapped = Mesh::new([("dp", 1 << 16), ("tp", 16)]).unwrap();
    let m = Modules::new([("a", a), ("b", swapped)], Spans::Colocated)
        .unwrap()
        .edge("a", "b")
        .unwrap();
    let kinds = m.bridge_kinds("a", "b").unwrap();
    assert!(kinds.contains(&BridgeKind::Bridge) && !kinds.contains(&BridgeKind::Gather));
}
