//! Distributed-optimizer consistency: the crate's O(axes) decision against a
//! brute-force check of the definition on the groups themselves (built by
//! the independent reference in `tests/common`), for every folded layout of
//! up to 16 ranks in every order, and for random larger ones.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use rank_layout::{Config, DistOptProblem, Error, ExpertLayout, Layout};

type Groups = Vec<Vec<u32>>;

/// Rank -> index of the group holding it.
fn owner(groups: &Groups) -> BTreeMap<u32, usize> {
    let mut out = BTreeMap::new();
    for (i, g) in groups.iter().enumerate() {
        for r in g {
            out.insert(*r, i);
        }
    }
    out
}

fn sets(groups: impl IntoIterator<Item = Vec<u32>>) -> BTreeSet<BTreeSet<u32>> {
    groups
        .into_iter()
        .map(|g| g.into_iter().collect())
        .collect()
}

/// The first condition of consistency that fails, checked on the groups:
/// 1. every dp-cp-intra group lies in one instance;
/// 2. every edp-intra group lies in one instance;
/// 3. every dp-cp-inter group lies in one dp-cp group, one member per instance;
/// 4. the inter groups are the strided slices `g[a::len(g)/N]` of the dp-cp groups.
fn brute_force(c: &Config) -> Option<u8> {
    let n = c.dist_opt_instances as usize;
    let kinds: BTreeMap<String, Groups> = common::folded_kinds(c).into_iter().collect();
    let instance = owner(&kinds["dist-opt-instance"]);
    let dp_cp = owner(&kinds["dp-cp"]);
    let inside = |g: &Vec<u32>, map: &BTreeMap<u32, usize>| g.iter().all(|r| map[r] == map[&g[0]]);
    if !kinds["dp-cp-intra"].iter().all(|g| inside(g, &instance)) {
        return Some(1);
    }
    if !kinds["edp-intra"].iter().all(|g| inside(g, &instance)) {
        return Some(2);
    }
    let one_each = |g: &Vec<u32>| {
        let seen: BTreeSet<usize> = g.iter().map(|r| instance[r]).collect();
        seen.len() == n && g.len() == n
    };
    if !kinds["dp-cp-inter"]
        .iter()
        .all(|g| inside(g, &dp_cp) && one_each(g))
    {
        return Some(3);
    }
    let strided = kinds["dp-cp"].iter().flat_map(|g| {
        let step = g.len() / n;
        (0..step).map(move |a| g.iter().skip(a).step_by(step).copied().collect::<Vec<_>>())
    });
    if sets(strided) != sets(kinds["dp-cp-inter"].clone()) {
        return Some(4);
    }
    None
}

fn problem_number(p: DistOptProblem) -> u8 {
    match p {
        DistOptProblem::IntraSpansInstances => 1,
        DistOptProblem::InterLeavesDpCp => 3,
        DistOptProblem::InterNotStrided => 4,
        _ => 0,
    }
}

/// Compares the crate with brute force on `c` (with `dist_opt_instances`
/// set); `None` when the layout is invalid for another reason.
fn compare(c: &Config) -> Option<Result<(), String>> {
    let without = c.clone().dist_opt_instances(1);
    let resolved = Layout::new(&without).ok()?.config().clone();
    let n = Some(c.dist_opt_instances).filter(|n| *n > 1)?;
    let edp = Layout::new(&without).ok()?.sizes().edp;
    let dp_cp = resolved.dp? * resolved.cp;
    if dp_cp % n != 0 || edp % n != 0 {
        return None;
    }
    let want = brute_force(&resolved.dist_opt_instances(n));
    let got = match Layout::new(c) {
        Ok(_) => None,
        Err(Error::DistOptInconsistent { problem, .. }) => Some(problem_number(problem)),
        Err(e) => return Some(Err(format!("{c:?}: unexpected error {e}"))),
    };
    Some(if got == want {
        Ok(())
    } else {
        Err(format!("{c:?}: crate says {got:?}, brute force {want:?}"))
    })
}

fn divisors(n: u32) -> impl Iterator<Item = u32> {
    (1..=n).filter(move |d| n % d == 0)
}

/// Every permutation of the five order tokens.
fn orders() -> Vec<String> {
    let tokens = ["tp", "cp", "ep", "dp", "pp"];
    let mut out = Vec::new();
    let mut perm = [0usize, 1, 2, 3, 4];
    // Heap's algorithm.
    fn heap(k: usize, perm: &mut [usize; 5], tokens: &[&str; 5], out: &mut Vec<String>) {
        if k == 1 {
            out.push(
                perm.iter()
                    .map(|i| tokens[*i])
                    .collect::<Vec<_>>()
                    .join("-"),
            );
            return;
        }
        for i in 0..k {
            heap(k - 1, perm, tokens, out);
            let j = if k % 2 == 0 { i } else { 0 };
            perm.swap(j, k - 1);
        }
    }
    heap(5, &mut perm, &tokens, &mut out);
    out
}

/// The order written with only the tokens of size > 1 in either grid: orders
/// that differ in size-1 tokens alone build the same grids.
fn reduced(order: &str, sizes: [(&str, u32); 5]) -> String {
    order
        .split('-')
        .filter(|t| sizes.iter().any(|(name, s)| name == t && *s > 1))
        .collect::<Vec<_>>()
        .join("-")
}

#[test]
fn decision_equals_brute_force_up_to_16_ranks() {
    let orders = orders();
    assert_eq!(orders.len(), 120);
    let (mut checked, mut consistent, mut failures) = (0u32, 0u32, Vec::new());
    let mut seen = BTreeSet::new();
    for world in 2..=16u32 {
        for tp in divisors(world) {
            for cp in divisors(world / tp) {
                for pp in divisors(world / (tp * cp)) {
                    let dp = world / (tp * cp * pp);
                    for etp in divisors(world / pp) {
                        for ep in divisors(world / (pp * etp)) {
                            for n in 2..=dp * cp {
                                for order in &orders {
                                    let edp = world / (etp * ep * pp);
                                    let big = [
                                        ("tp", tp.max(etp)),
                                        ("cp", cp),
                                        ("ep", ep),
                                        ("dp", dp.max(edp)),
                                        ("pp", pp),
                                    ];
                                    let key = (tp, cp, dp, pp, etp, ep, n, reduced(order, big));
                                    if !seen.insert(key) {
                                        continue;
                                    }
                                    let c = Config::new()
                                        .tp(tp)
                                        .cp(cp)
                                        .ep(ep)
                                        .dp(Some(dp))
                                        .pp(pp)
                                        .etp(Some(etp))
                                        .order(order.parse().unwrap())
                                        .expert_layout(ExpertLayout::Folded)
                                        .dist_opt_instances(n);
                                    match compare(&c) {
                                        None => {}
                                        Some(r) => {
                                            checked += 1;
                                            consistent += u32::from(Layout::new(&c).is_ok());
                                            if let Err(e) = r {
                                                failures.push(e);
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    println!("{checked} layouts checked, {consistent} consistent");
    assert!(
        failures.is_empty(),
        "{} mismatches, first: {}",
        failures.len(),
        failures[0]
    );
    // Both answers occur often: the comparison is not vacuous.
    assert!(
        checked > 2_000 && consistent > 500 && checked - consistent > 500,
        "{checked} checked, {consistent} consistent"
    );
}

#[test]
fn megatron_core_accepts_and_so_do_we() {
    // The example: folded, tp=2, cp=2, world 8, etp=1, N=2, order
    // cp-tp-ep-dp-pp: the intra groups lie inside one instance and each
    // inter group meets every instance once.
    let l = Layout::new(
        &Config::new()
            .tp(2)
            .cp(2)
            .world_size(Some(8))
            .etp(Some(1))
            .expert_layout(ExpertLayout::Folded)
            .dist_opt_instances(2)
            .order("cp-tp-ep-dp-pp".parse().unwrap()),
    )
    .unwrap();
    let intra = l.groups(rank_layout::Kind::DP_CP_INTRA).unwrap().to_vecs();
    assert_eq!(intra, vec![vec![0, 1], vec![4, 5], vec![2, 3], vec![6, 7]]);
    let inter = l.groups(rank_layout::Kind::DP_CP_INTER).unwrap().to_vecs();
    assert_eq!(inter, vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Random folded layouts of up to a few hundred ranks.
    #[test]
    fn decision_equals_brute_force_at_random(
        sizes in proptest::collection::vec(prop_oneof![Just(1u32), Just(2), Just(3), Just(4), Just(6)], 6),
        perm in Just((0..5).collect::<Vec<usize>>()).prop_shuffle(),
        n in 2u32..=8,
    ) {
        let tokens = ["tp", "cp", "ep", "dp", "pp"];
        let order: String = perm.iter().map(|i| tokens[*i]).collect::<Vec<_>>().join("-");
        let c = Config::new().tp(sizes[0]).cp(sizes[1]).dp(Some(sizes[2] * n)).pp(sizes[3]).ep(sizes[4]).etp(Some(sizes[5])).order(order.parse().unwrap()).expert_layout(ExpertLayout::Folded).dist_opt_instances(n);
        if let Some(r) = compare(&c) {
            prop_assert!(r.is_ok(), "{}", r.unwrap_err());
        }
    }
}
