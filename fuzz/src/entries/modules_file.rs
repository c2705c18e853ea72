//! The `modules_file` target: modules files and their bridges.

use std::collections::BTreeMap;

use rank_layout::Split;

use super::shared::SMALL_WORLD;

/// Modules files (`ModulesSpec`, the CLI's `--modules`): the bytes as JSON,
/// built into [`Modules`](rank_layout::Modules).
///
/// Nothing panics; a refusal is a typed error with a message; a spec goes
/// to JSON and back unchanged. Modules of at most [`SMALL_WORLD`] ranks
/// have every bridge checked against its definition: each source lane's
/// leader is paired exactly with the destination leaders of its block;
/// each broadcast group holds its lane's leader; every rank of the
/// boundary stages is in exactly one broadcast group; a colocated gather
/// plan puts every rank in exactly one gather group (none when the lanes
/// are equal) and has one slot per rank; and every rank's `role` splits
/// are, for every kind the edge builds, the index of the plan's group that
/// holds it and its position there. Stages stay below `total_stages`.
pub fn modules_file(data: &[u8]) {
    use rank_layout::{Modules, modules::ModulesSpec};
    let Ok(spec) = serde_json::from_slice::<ModulesSpec>(data) else {
        return;
    };
    let text = serde_json::to_string(&spec).unwrap();
    assert_eq!(
        serde_json::from_str::<ModulesSpec>(&text).unwrap(),
        spec,
        "{text}"
    );
    let modules: Modules = match spec.build() {
        Ok(m) => m,
        Err(e) => {
            assert!(!e.to_string().is_empty(), "{text}");
            return;
        }
    };
    assert_eq!(modules.names().count(), spec.modules.len());
    assert_eq!(modules.edges().count(), spec.edges.len());
    assert_eq!(modules.rank_offset(), spec.rank_offset);
    if modules.world_size() > u64::from(SMALL_WORLD) {
        return;
    }
    let names: Vec<String> = modules.names().map(str::to_owned).collect();
    for name in &names {
        let mesh = modules.module(name).unwrap();
        let pp = mesh.dims().find(|(d, _)| *d == "pp").map_or(1, |(_, s)| s);
        let first = modules.first_stage(name).unwrap();
        assert!(first + pp <= modules.total_stages(), "{text} {name}");
    }
    let first = modules.rank_offset();
    let end = u32::try_from(modules.rank_end()).unwrap();
    for rank in first..end {
        assert!(
            modules.stage(rank).unwrap() < modules.total_stages(),
            "{text} {rank}"
        );
        assert!(modules.modules_of(rank).next().is_some(), "{text} {rank}");
    }
    assert!(modules.stage(end).is_err());
    for plan in modules.bridges().expect("a small world's plans") {
        check_bridge(&modules, &plan, &text);
    }
}

/// The ranks of module `name` at pipeline coordinate `pp` (`None`: its last).
fn stage_ranks(modules: &rank_layout::Modules, name: &str, pp: Option<u32>) -> Vec<u32> {
    let mesh = modules.module(name).unwrap();
    let size = mesh.dims().find(|(d, _)| *d == "pp").map_or(1, |(_, s)| s);
    let want = pp.unwrap_or(size - 1);
    let start = mesh.rank_offset();
    let end = u32::try_from(mesh.rank_end()).unwrap();
    (start..end)
        .filter(|&r| mesh.placement(r).unwrap().get("pp").unwrap_or(0) == want)
        .collect()
}

/// Every rank's (color, key) in `groups`, asserting each rank is in at
/// most one group and, when `cover` is given, that exactly those ranks are.
fn splits_of(groups: &[&[u32]], cover: Option<&[u32]>, what: &str) -> BTreeMap<u32, Split> {
    let mut out = BTreeMap::new();
    for (color, g) in groups.iter().enumerate() {
        for (key, &r) in g.iter().enumerate() {
            let split = Split {
                color: color as u32,
                key: key as u32,
            };
            assert!(
                out.insert(r, split).is_none(),
                "{what}: rank {r} in two groups"
            );
        }
    }
    if let Some(cover) = cover {
        let ranks: Vec<u32> = out.keys().copied().collect();
        let mut want = cover.to_vec();
        want.sort_unstable();
        assert_eq!(ranks, want, "{what}: not the ranks of the stage");
    }
    out
}

/// One bridge plan against its definition and against every rank's role.
fn check_bridge(modules: &rank_layout::Modules, b: &rank_layout::modules::Bridge, text: &str) {
    use rank_layout::modules::{BridgeKind, ColocatedMode, Direction};
    let what = format!("{text} {} -> {}", b.src, b.dst);
    let (ns, nd) = (b.src_leaders.len() as u32, b.dst_leaders.len() as u32);
    let k = b.scale;
    match b.direction {
        Direction::Equal => assert!(ns == nd && k == 1, "{what}"),
        Direction::FanIn => assert!(k > 1 && ns == nd * k, "{what}"),
        Direction::FanOut => assert!(k > 1 && nd == ns * k, "{what}"),
        other => panic!("{what}: an unknown direction {other:?}"),
    }
    // R2: each source lane's leader paired with its block's leaders.
    for (l, &s) in (0u32..).zip(&b.src_leaders) {
        let block: Vec<u32> = match b.direction {
            Direction::FanIn => vec![l / k],
            Direction::FanOut => (l * k..(l + 1) * k).collect(),
            _ => vec![l],
        };
        let want: Vec<u32> = block.iter().map(|&j| b.dst_leaders[j as usize]).collect();
        let got: Vec<u32> = b
            .pairs
            .iter()
            .filter(|(a, _)| *a == s)
            .map(|&(_, d)| d)
            .collect();
        assert_eq!(got, want, "{what}: pairs of source leader {s}");
    }
    assert_eq!(b.pairs.len() as u32, ns.max(nd), "{what}: pairs");
    // R3: each broadcast group holds its leader; the stage is covered once.
    assert_eq!(b.src_broadcast.len() as u32, ns, "{what}");
    assert_eq!(b.dst_broadcast.len() as u32, nd, "{what}");
    for (g, l) in b.src_broadcast.iter().zip(&b.src_leaders) {
        assert!(g.contains(l), "{what}: source leader {l} not in {g:?}");
    }
    for (g, l) in b.dst_broadcast.iter().zip(&b.dst_leaders) {
        assert!(g.contains(l), "{what}: destination leader {l} not in {g:?}");
    }
    let last = stage_ranks(modules, &b.src, None);
    let first = stage_ranks(modules, &b.dst, Some(0));
    let mut expected: BTreeMap<BridgeKind, BTreeMap<u32, Split>> = BTreeMap::new();
    expected.insert(
        BridgeKind::SrcBroadcast,
        splits_of(
            &groups(&b.src_broadcast),
            Some(&last),
            &format!("{what} src_broadcast"),
        ),
    );
    expected.insert(
        BridgeKind::DstBroadcast,
        splits_of(
            &groups(&b.dst_broadcast),
            Some(&first),
            &format!("{what} dst_broadcast"),
        ),
    );
    expected.insert(
        BridgeKind::Bridge,
        splits_of(&[&b.bridge_group], None, &format!("{what} bridge")),
    );
    if let Some(g) = &b.dst_cp_reduce {
        expected.insert(BridgeKind::DstCpReduce, splits_of(&groups(g), None, &what));
    }
    if let Some(g) = &b.src_cp_gather {
        expected.insert(BridgeKind::SrcCpGather, splits_of(&groups(g), None, &what));
    }
    let world: Vec<u32> =
        (modules.rank_offset()..u32::try_from(modules.rank_end()).unwrap()).collect();
    if let Some(c) = &b.colocated {
        if c.mode == ColocatedMode::Collective {
            assert!(c.reason.is_none(), "{what}");
            assert_eq!(c.slots.len(), world.len(), "{what}: slots");
            assert!(c.slots.iter().all(|&s| s < k), "{what}: slots");
            // The gather plan replaces the leader plan's communicators.
            expected.clear();
            if b.direction == Direction::Equal {
                assert!(c.gather_groups.is_empty(), "{what}: gather groups");
            } else {
                expected.insert(
                    BridgeKind::Gather,
                    splits_of(
                        &groups(&c.gather_groups),
                        Some(&world),
                        &format!("{what} gather"),
                    ),
                );
            }
            if let Some(g) = &c.src_cp_gather {
                expected.insert(
                    BridgeKind::ColocatedCpGather,
                    splits_of(&groups(g), None, &what),
                );
            }
            if let Some(g) = &c.dst_cp_reduce {
                expected.insert(
                    BridgeKind::ColocatedCpReduce,
                    splits_of(&groups(g), None, &what),
                );
            }
        } else {
            assert!(c.reason.is_some(), "{what}");
            assert!(c.slots.is_empty() && c.gather_groups.is_empty(), "{what}");
        }
    }
    let kinds = modules.bridge_kinds(&b.src, &b.dst).unwrap();
    let planned: Vec<BridgeKind> = expected.keys().copied().collect();
    assert_eq!(kinds, planned, "{what}: kinds");
    for &rank in &world {
        let role = modules.role(rank, &b.src, &b.dst).unwrap();
        let listed: Vec<BridgeKind> = role.splits.iter().map(|(k, _)| *k).collect();
        assert_eq!(listed, kinds, "{what}: rank {rank}'s kinds");
        for (kind, want) in &expected {
            let got = role.split(*kind);
            assert_eq!(
                got,
                want.get(&rank).copied(),
                "{what}: rank {rank} in {kind}"
            );
            assert_eq!(
                modules.bridge_split(rank, &b.src, &b.dst, *kind).unwrap(),
                got,
                "{what}: rank {rank} bridge_split {kind}"
            );
        }
        let leads = b.src_leaders.contains(&rank);
        if b.colocated
            .as_ref()
            .is_none_or(|c| c.mode == ColocatedMode::P2p)
        {
            assert_eq!(role.src_leader, leads, "{what}: rank {rank}");
            let sends: Vec<u32> = b
                .pairs
                .iter()
                .filter(|(s, _)| *s == rank)
                .map(|&(_, d)| d)
                .collect();
            assert_eq!(role.sends_to, sends, "{what}: rank {rank} sends");
            let receives: Vec<u32> = b
                .pairs
                .iter()
                .filter(|(_, d)| *d == rank)
                .map(|&(s, _)| s)
                .collect();
            assert_eq!(role.receives_from, receives, "{what}: rank {rank} receives");
        } else {
            let i = (rank - modules.rank_offset()) as usize;
            assert_eq!(role.slot, c_slot(b, i), "{what}: rank {rank} slot");
        }
    }
}

/// The groups of a plan's list.
fn groups(l: &rank_layout::modules::GroupList) -> Vec<&[u32]> {
    l.iter().collect()
}

/// The colocated plan's slot of the `i`-th rank.
fn c_slot(b: &rank_layout::modules::Bridge, i: usize) -> Option<u32> {
    b.colocated.as_ref().and_then(|c| c.slots.get(i).copied())
}
