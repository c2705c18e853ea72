//! The fast paths against the plain per-group enumeration, for every kind
//! of random nested, folded, encoder + decoder and family layouts (all
//! orders, offsets): `Groups::fill` (fresh and partly consumed iterators),
//! `Groups::table`, `Layout::splits` and `Layout::splits_of`; and `Group`
//! equality by members.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use std::collections::BTreeSet;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use proptest::prelude::*;
use rank_layout::{Config, Error, ExpertLayout, Group, Kind, Layout, Split};

use common::{any_config, nested_config};

/// Every member of every group, group after group, by iterating each group.
fn flat(groups: impl Iterator<Item = Group>) -> Vec<u32> {
    groups.flat_map(|g| g.iter().collect::<Vec<_>>()).collect()
}

fn hash(g: &Group) -> u64 {
    let mut h = DefaultHasher::new();
    g.hash(&mut h);
    h.finish()
}

/// `fill` writes exactly the members of the remaining groups in
/// enumeration order, whether the iterator is fresh or partly consumed from
/// either end, and refuses a short buffer without writing.
fn check_fill(l: &Layout, front: usize, back: usize) -> Result<(), TestCaseError> {
    {
        for &kind in l.kinds() {
            let want = flat(l.groups(kind).unwrap());
            let groups = l.groups(kind).unwrap();
            prop_assert_eq!(groups.member_count(), want.len() as u64);
            let mut out = vec![u32::MAX; want.len() + 3];
            prop_assert_eq!(groups.fill(&mut out).unwrap(), want.len());
            prop_assert_eq!(&out[..want.len()], &want[..], "kind {}", kind);
            prop_assert!(
                out[want.len()..].iter().all(|x| *x == u32::MAX),
                "kind {} wrote past its members",
                kind
            );

            let mut partial = l.groups(kind).unwrap();
            let n = partial.len();
            let (front, back) = (front.min(n), back.min(n - front.min(n)));
            for _ in 0..front {
                partial.next();
            }
            for _ in 0..back {
                partial.next_back();
            }
            let rest = flat(partial.clone());
            let mut out = vec![0; rest.len()];
            prop_assert_eq!(partial.clone().fill(&mut out).unwrap(), rest.len());
            prop_assert_eq!(
                &out,
                &rest,
                "kind {} after {} + {} groups",
                kind,
                front,
                back
            );

            if !rest.is_empty() {
                let mut short = vec![7u32; rest.len() - 1];
                let err = partial.fill(&mut short).unwrap_err();
                prop_assert_eq!(
                    err,
                    Error::BufferTooSmall {
                        needed: rest.len() as u64,
                        len: rest.len() - 1
                    }
                );
                prop_assert!(short.iter().all(|x| *x == 7));
            }
        }
    }
    Ok(())
}

/// The table holds every group as a slice, in order, with one buffer.
fn check_table(l: &Layout, front: usize) -> Result<(), TestCaseError> {
    {
        for &kind in l.kinds() {
            let want = l.groups(kind).unwrap().to_vecs();
            let table = l.groups(kind).unwrap().table().unwrap();
            prop_assert_eq!(table.len(), want.len());
            prop_assert_eq!(table.iter().len(), want.len());
            for (i, g) in want.iter().enumerate() {
                prop_assert_eq!(table.get(i), Some(&g[..]), "kind {} group {}", kind, i);
            }
            prop_assert_eq!(table.get(want.len()), None);
            let slices: Vec<Vec<u32>> = table.iter().map(<[u32]>::to_vec).collect();
            prop_assert_eq!(&slices, &want);
            let back: Vec<Vec<u32>> = table.iter().rev().map(<[u32]>::to_vec).collect();
            prop_assert_eq!(back, want.iter().rev().cloned().collect::<Vec<_>>());
            prop_assert_eq!(table.members(), &want.concat()[..]);
            let sizes: BTreeSet<usize> = want.iter().map(Vec::len).collect();
            prop_assert_eq!(
                table.group_len(),
                if sizes.len() <= 1 {
                    Some(sizes.into_iter().next().unwrap_or(0))
                } else {
                    None
                }
            );
            prop_assert_eq!(l.groups(kind).unwrap().group_len(), table.group_len());

            let mut rest = l.groups(kind).unwrap();
            for _ in 0..front.min(want.len()) {
                rest.next();
            }
            let table = rest.table().unwrap();
            prop_assert_eq!(
                table.iter().map(<[u32]>::to_vec).collect::<Vec<_>>(),
                want[front.min(want.len())..].to_vec()
            );
        }
    }
    Ok(())
}

/// `splits` gives, for every kind and round, the rank's color and key that
/// the enumeration gives (group index, position), each round's answer being
/// one of the rank's memberships and all of them listed once; `splits_of`
/// gives the same for chosen kinds.
fn check_splits(l: &Layout) -> Result<(), TestCaseError> {
    {
        let mut table: std::collections::HashMap<(Kind, u32), Vec<Split>> = Default::default();
        for &kind in l.kinds() {
            for (i, g) in l.groups(kind).unwrap().enumerate() {
                for (k, r) in g.iter().enumerate() {
                    table.entry((kind, r)).or_default().push(Split {
                        color: i as u32,
                        key: k as u32,
                    });
                }
            }
        }
        let end = l.rank_offset() + l.world_size();
        for r in l.rank_offset()..end {
            let steps: Vec<_> = l.splits(r).unwrap().collect();
            let mut i = 0;
            for &kind in l.kinds() {
                let rounds = l.split_rounds(kind).unwrap();
                let mut got = Vec::new();
                for round in 0..rounds {
                    let s = steps[i];
                    i += 1;
                    prop_assert_eq!((s.kind, s.round, s.rounds), (kind, round, rounds));
                    prop_assert_eq!(s.split, l.split_in_round(r, kind, round).unwrap());
                    got.extend(s.split);
                }
                got.sort();
                let want = table.get(&(kind, r)).cloned().unwrap_or_default();
                prop_assert_eq!(got, want, "rank {} kind {}", r, kind);
            }
            prop_assert_eq!(i, steps.len());
            prop_assert_eq!(l.splits(r).unwrap().len(), steps.len());
            let chosen = [Kind::PP, Kind::TP, Kind::PP, Kind::EMBD];
            let some: Vec<_> = l.splits_of(r, &chosen).unwrap().collect();
            let want: Vec<_> = steps
                .iter()
                .filter(|s| s.kind == Kind::PP)
                .chain(steps.iter().filter(|s| s.kind == Kind::TP))
                .chain(steps.iter().filter(|s| s.kind == Kind::EMBD))
                .copied()
                .collect();
            prop_assert_eq!(some, want);
        }
        prop_assert!(l.splits(end).is_err());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn fill_equals_enumeration(c in any_config(), front in 0usize..5, back in 0usize..5) {
        check_fill(&Layout::new(&c).unwrap(), front, back)?;
    }

    #[test]
    fn table_equals_enumeration(c in any_config(), front in 0usize..4) {
        check_table(&Layout::new(&c).unwrap(), front)?;
    }

    #[test]
    fn splits_equal_enumeration(c in any_config()) {
        check_splits(&Layout::new(&c).unwrap())?;
    }

    /// Groups are equal, and hash alike, exactly when they list the same
    /// ranks in the same order, whatever kind they come from.
    #[test]
    fn group_equality_is_by_members(c in nested_config()) {
        let l = Layout::new(&c).unwrap();
        let mut all: Vec<(Group, Vec<u32>)> = Vec::new();
        for &kind in l.kinds() {
            for g in l.groups(kind).unwrap().take(6) {
                let v = g.to_vec();
                all.push((g, v));
            }
        }
        for (a, va) in &all {
            for (b, vb) in &all {
                prop_assert_eq!(a == b, va == vb, "{:?} {:?}", va, vb);
                if a == b {
                    prop_assert_eq!(hash(a), hash(b));
                }
            }
        }
    }
}

/// Layouts whose plans take every path: boxes, strided slices (a
/// dp-cp-intra cut inside contiguous cp and dp), stacks, concatenations,
/// joined pipelines both ways, pipeline ends over each.
#[test]
fn every_plan_shape() {
    let folded = |c: Config| c.expert_layout(rank_layout::ExpertLayout::Folded);
    let layouts = [
        folded(
            Config::new()
                .cp(2)
                .dp(Some(3))
                .etp(Some(1))
                .dist_opt_instances(2),
        ),
        folded(
            Config::new()
                .tp(2)
                .cp(4)
                .pp(2)
                .dp(Some(2))
                .hierarchical_cp(vec![2, 2])
                .dist_opt_instances(2)
                .etp(Some(1))
                .ep(2),
        ),
        Config::new()
            .tp(4)
            .cp(2)
            .dp(Some(2))
            .pp(2)
            .encoder_tp(Some(2))
            .encoder_pp(Some(2))
            .order("dp-tp-cp-pp".parse().unwrap())
            .expert_layout(ExpertLayout::Nested),
        Config::new()
            .tp(2)
            .cp(2)
            .dp(Some(2))
            .pp(3)
            .encoder_tp(Some(5))
            .encoder_pp(Some(1))
            .order("cp-tp-dp-pp".parse().unwrap())
            .rank_offset(3)
            .expert_layout(ExpertLayout::Nested),
        // Joined groups whose period of per-part constants spans more
        // vectors than are kept in registers (tp-pp: 6 + 15 members), and
        // fewer (pp: 3 + 5).
        Config::new()
            .tp(3)
            .cp(2)
            .dp(Some(2))
            .pp(5)
            .encoder_tp(Some(2))
            .encoder_pp(Some(3))
            .expert_layout(ExpertLayout::Nested),
        // The encoder part the larger one (tp-pp: 30 + 3 members).
        Config::new()
            .tp(3)
            .dp(Some(2))
            .encoder_tp(Some(6))
            .encoder_pp(Some(5))
            .expert_layout(ExpertLayout::Nested),
    ];
    let intra = Layout::new(&layouts[0]).unwrap();
    assert_eq!(
        intra.groups(Kind::DP_CP_INTRA).unwrap().to_vecs(),
        vec![vec![0, 1, 2], vec![3, 4, 5]]
    );
    for c in &layouts {
        let l = Layout::new(c).unwrap();
        for (front, back) in [(0, 0), (1, 0), (0, 1), (2, 3)] {
            check_fill(&l, front, back).unwrap();
            check_table(&l, front).unwrap();
        }
        check_splits(&l).unwrap();
    }
}

#[test]
fn tp_group_equals_tp_cp_group_when_cp_is_one() {
    let l = Layout::new(
        &Config::new()
            .tp(2)
            .world_size(Some(4))
            .expert_layout(ExpertLayout::Nested),
    )
    .unwrap();
    let tp = l.groups(Kind::TP).unwrap().next().unwrap();
    let tp_cp = l.groups(Kind::TP_CP).unwrap().next().unwrap();
    assert_eq!(tp.to_vec(), vec![0, 1]);
    assert_eq!(tp, tp_cp);
    assert_eq!(hash(&tp), hash(&tp_cp));
}

#[test]
fn fill_at_a_million_ranks_is_a_partition() {
    // 2^20 ranks: every partition kind's members cover the world once.
    let l = Layout::new(
        &Config::new()
            .tp(8)
            .cp(2)
            .ep(8)
            .pp(16)
            .world_size(Some(1 << 20))
            .expert_layout(ExpertLayout::Nested),
    )
    .unwrap();
    let mut out = vec![0u32; 1 << 20];
    for &kind in l.kinds() {
        if matches!(kind, Kind::EMBD | Kind::POS_EMBD) {
            continue;
        }
        assert_eq!(l.groups(kind).unwrap().fill(&mut out).unwrap(), 1 << 20);
        let mut seen = vec![false; 1 << 20];
        for r in &out {
            assert!(
                !std::mem::replace(&mut seen[*r as usize], true),
                "{kind}: {r} twice"
            );
        }
    }
}
