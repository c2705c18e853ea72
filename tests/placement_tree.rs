//! Placement on a multi-level topology tree (`rank_layout::machine`): the
//! worked cases of topology files written by others (NVIDIA topograph's CI
//! output, Slurm's RouteTree test tree), and the promise checked on random
//! trees: never worse than the table's order, at any level, for any kind.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

use std::collections::BTreeSet;

use proptest::prelude::*;
use rank_layout::machine::{
    Host, Hosts, KindGroups, NodePlan, PlaceOptions, Placed, default_must_fit, place, place_layout,
};
use rank_layout::mesh::Mesh;
use rank_layout::{Config, Kind, Layout};

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/data/hosts/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `kind`'s crossing by level, placed and in the table's order, as the plan
/// reports them, checked against a count of its own.
fn levels(plan: &NodePlan, hosts: &Hosts, layout: &Layout, kind: Kind) -> (Vec<usize>, Vec<usize>) {
    let groups = KindGroups::of_layout(layout, kind).unwrap();
    let name = kind.to_string();
    let reported = plan.kinds.iter().find(|k| k.placed.name == name).unwrap();
    assert_eq!(reported.placed, plan.crossing(hosts, &groups));
    let plain = NodePlan::plain(layout.world_size(), hosts, plan.gpus_per_node).unwrap();
    assert_eq!(
        reported.plain.as_ref(),
        Some(&plain.crossing(hosts, &groups))
    );
    (
        reported.placed.crossing.clone(),
        reported.plain.as_ref().unwrap().crossing.clone(),
    )
}

#[test]
fn topograph_sim_tree_keeps_each_dp_group_under_one_spine() {
    // A core over 6 spines over 12 leaves of 8 hosts (srv1101-1108 under
    // switch.1.1, srv1201-1208 under switch.1.2, ...); 8 GPUs per node, tp
    // 8, pp 2, 256 GPUs: 32 nodes, each pipeline stage's 16 dp groups on
    // 16 nodes, two leaves. Taken in string order (switch.1.1, 1.10, 1.11,
    // 1.12) the leaves sit under 3 spines and 8 dp groups cross spines; in
    // natural order (1.1, 1.2, 1.3, 1.4: spines 2.1 and 2.2) none does, as
    // in the file's own order.
    let hosts = Hosts::parse_topology_conf(&fixture("topograph_slinky_oci_sim_tree.conf")).unwrap();
    assert_eq!((hosts.len(), hosts.levels()), (96, 3));
    let layout = Layout::new(&Config::new().tp(8).pp(2).world_size(256)).unwrap();
    let options = PlaceOptions::default().gpus_per_node(8);
    let (_, plan) = place_layout(&layout, &default_must_fit(&layout), &hosts, &options).unwrap();
    // Levels: core, spine, leaf.
    let (placed, table) = levels(&plan, &hosts, &layout, Kind::DP);
    assert_eq!((placed, table), (vec![0, 0, 16], vec![0, 0, 16]));
    let (placed, _) = levels(&plan, &hosts, &layout, Kind::TP);
    assert_eq!(placed, [0, 0, 0]);
    let leaves: BTreeSet<&str> = plan
        .node_hosts
        .iter()
        .map(|&h| hosts.get(h).unwrap().domain().unwrap())
        .collect();
    let want: BTreeSet<&str> = ["switch.1.1", "switch.1.2", "switch.1.3", "switch.1.4"].into();
    assert_eq!(leaves, want);
    assert!(!plan.table_order);
}

/// `Placed` reads every kind's crossings from its plan (no second count):
/// a layout's are `place_layout`'s; a mesh's other dim sets (here dp and
/// pp) are placed as `place`'s others, so the mesh of the same groups
/// keeps each dp group under one spine as the layout does.
#[test]
fn placed_reads_the_plan_s_kinds_for_a_layout_and_a_mesh() {
    let hosts = Hosts::parse_topology_conf(&fixture("topograph_slinky_oci_sim_tree.conf")).unwrap();
    let options = PlaceOptions::default().gpus_per_node(8);
    let layout = Layout::new(&Config::new().tp(8).pp(2).world_size(256)).unwrap();
    let (_, plan) = place_layout(&layout, &default_must_fit(&layout), &hosts, &options).unwrap();
    let placed = Placed::layout(&layout, None, hosts.clone(), &options).unwrap();
    assert_eq!(placed.plan(), &plan);
    assert_eq!(placed.kinds(), plan.kinds.as_slice());
    let must: Vec<_> = plan.kinds.iter().filter(|k| k.must_fit).cloned().collect();
    assert_eq!(placed.crossings(), must);
    // The mesh of the same tp, dp and pp groups (first dim fastest).
    let mesh = Mesh::new([("tp", 8), ("dp", 16), ("pp", 2)]).unwrap();
    let placed = Placed::mesh(&mesh, None, hosts.clone(), &options).unwrap();
    let group = |name: &str| KindGroups::of_mesh(&mesh, name).unwrap();
    let direct = place(
        256,
        &[group("tp")],
        &[group("dp"), group("pp")],
        &hosts,
        &options,
    )
    .unwrap();
    assert_eq!(placed.plan(), &direct);
    let names: Vec<&str> = placed
        .kinds()
        .iter()
        .map(|k| k.placed.name.as_str())
        .collect();
    assert_eq!(names, ["tp", "dp", "pp"]);
    let dp = &placed.kinds()[1];
    assert_eq!(dp.placed.crossing, [0, 0, 16]);
    assert_eq!(
        dp.placed,
        plan.crossing(&hosts, &KindGroups::of_layout(&layout, Kind::DP).unwrap())
    );
    assert_eq!(placed.crossings().len(), 1);
}

#[test]
fn slurm_route_tree_keeps_pipeline_stages_under_few_groups() {
    // Slurm's 10,000-node test tree (root, im0-1, grp10-35, leaves of 20
    // nodes); the job got peta[10000-10255] (grp10: 12 leaves and 16 nodes
    // of a 13th) and peta[12000-12999] (grp15, grp16 and half of grp17).
    // 4 GPUs per node, tp 8, pp 4, ep 16, etp 1, 4,096 GPUs: units of 4
    // nodes (an etp-ep group), 256 units, each pipeline stage 64 units
    // holding 8 whole dp groups. The groups hold 64 (grp10), 100, 100 and
    // 50 units: three stages fit one each and the fourth crosses, 8 dp
    // groups at the grp level, as in the table's order. Taking leaves in
    // string order filled 240 nodes of grp10 and went on into grp15: two
    // stages crossed, 16 dp groups.
    let cluster = Hosts::parse_topology_conf(&fixture("slurm_testcase1_topology.conf")).unwrap();
    assert_eq!((cluster.len(), cluster.levels()), (10_000, 4));
    let hosts = cluster
        .restrict_to("peta[10000-10255],peta[12000-12999]")
        .unwrap();
    assert_eq!(hosts.len(), 1256);
    let layout = Layout::new(&Config::new().tp(8).pp(4).ep(16).etp(1).world_size(4096)).unwrap();
    let options = PlaceOptions::default().gpus_per_node(4);
    let (_, plan) = place_layout(&layout, &default_must_fit(&layout), &hosts, &options).unwrap();
    assert_eq!(
        (plan.unit_nodes, plan.units, plan.straddling_units),
        (4, 256, 0)
    );
    // Levels: root, im, grp, leaf.
    let (placed, table) = levels(&plan, &hosts, &layout, Kind::DP);
    assert_eq!(table, [0, 0, 8, 32]);
    assert_eq!(placed, [0, 0, 8, 32]);
    let (placed, table) = levels(&plan, &hosts, &layout, Kind::ETP_EP);
    assert_eq!((placed, table), (vec![0, 0, 0, 0], vec![0, 0, 0, 0]));
    // Each stage's units under at most two grp switches.
    let grp = |h: usize| hosts.get(h).unwrap().keys[2].clone();
    for stage in plan.node_hosts.chunks(256) {
        let groups: BTreeSet<String> = stage.iter().map(|&h| grp(h)).collect();
        assert!(groups.len() <= 2, "{groups:?}");
    }
}

/// A random tree: `fanout` groups the nodes of each level (domains first)
/// under parents, `sizes` are the domains' hosts; keys numbered with gaps
/// (`s1.2`, `s1.9`, `s1.10`: string and natural order differ); host names
/// in the tree's natural order or shuffled; `unknown` hosts of no domain;
/// `ragged`: every third domain's hosts have their domain key only.
#[allow(clippy::too_many_arguments)]
fn tree_table(
    sizes: &[usize],
    fanout: &[Vec<usize>],
    gaps: u64,
    follow: bool,
    ragged: bool,
    unknown: usize,
    down: usize,
    gpus: u32,
) -> Hosts {
    // paths[d]: the keys of domain d, outermost first.
    let mut paths: Vec<Vec<String>> = (0..sizes.len())
        .map(|d| vec![format!("r.{}", number(d, gaps))])
        .collect();
    let mut below: Vec<usize> = (0..sizes.len()).collect();
    for (level, groups) in fanout.iter().enumerate() {
        // The nodes of the level below, 0..m, grouped in runs of `groups`.
        let m = below.iter().max().unwrap() + 1;
        let mut parent = Vec::with_capacity(m);
        let mut p = 0;
        let mut cycle = groups.iter().cycle();
        let mut left = *cycle.next().unwrap();
        for _ in 0..m {
            if left == 0 {
                p += 1;
                left = *cycle.next().unwrap();
            }
            parent.push(p);
            left -= 1;
        }
        for (d, path) in paths.iter_mut().enumerate() {
            path.insert(0, format!("s{level}.{}", number(parent[below[d]], gaps)));
        }
        below = (0..sizes.len()).map(|d| parent[below[d]]).collect();
    }
    if ragged {
        for path in paths.iter_mut().step_by(3) {
            path.drain(..path.len() - 1);
        }
    }
    let total: usize = sizes.iter().sum::<usize>() + unknown;
    let mut names: Vec<usize> = (0..total).collect();
    if !follow {
        let mut s = gaps;
        for i in (1..total).rev() {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            names.swap(i, (s >> 33) as usize % (i + 1));
        }
    }
    let mut hosts = Vec::new();
    let mut n = 0;
    for (d, &size) in sizes.iter().enumerate() {
        for i in 0..size {
            hosts.push(
                Host::new(format!("h{}", names[n]), None)
                    .keys(paths[d].clone())
                    .gpus(Some(gpus))
                    .healthy(!(d == 0 && i < down)),
            );
            n += 1;
        }
    }
    for _ in 0..unknown {
        hosts.push(Host::new(format!("h{}", names[n]), None).gpus(Some(gpus)));
        n += 1;
    }
    Hosts::new(hosts).unwrap()
}

/// The `i`-th key number: increasing, with gaps chosen by `gaps`.
fn number(i: usize, gaps: u64) -> u64 {
    (0..=i as u64).map(|j| 1 + (gaps >> (j % 60)) % 3 * 4).sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// On random trees (some with hosts that lack the upper keys) and
    /// layouts: the placement uses healthy hosts once,
    /// exactly the lower bound of units straddles, hosts of an unknown
    /// domain are used only when the known ones are too few, the report's
    /// crossings are the groups' own, and for every kind of the layout and
    /// every level the placement crosses no more groups than the table's
    /// order, unless it crosses fewer where the comparison looks first.
    #[test]
    fn never_worse_than_the_table_order(
        sizes in proptest::collection::vec(1usize..11, 1..14),
        fanout in proptest::collection::vec(proptest::collection::vec(1usize..4, 1..4), 0..3),
        gaps in any::<u64>(),
        follow in any::<bool>(),
        ragged in any::<bool>(),
        unknown in 0usize..3,
        down in 0usize..2,
        gpus in prop::sample::select(vec![1u32, 2, 4, 8]),
        tp in prop::sample::select(vec![1u32, 2, 4, 8]),
        cp in 1u32..3,
        ep in prop::sample::select(vec![1u32, 2, 4]),
        etp in 1u32..3,
        pp in 1u32..4,
        use_nodes in 1usize..120,
    ) {
        let hosts = tree_table(&sizes, &fanout, gaps, follow, ragged, unknown, down, gpus);
        let usable = hosts.iter().filter(|h| h.healthy).count();
        let known = hosts.iter().filter(|h| h.healthy && h.domain().is_some()).count();
        let nodes = (use_nodes % usable.max(1)).max(1) as u32;
        let world = nodes * gpus;
        let Ok(layout) = Layout::new(&Config::new().tp(tp).cp(cp).ep(ep).etp(etp).pp(pp).world_size(world)) else {
            return Ok(());
        };
        let must = default_must_fit(&layout);
        let Ok((_, plan)) = place_layout(&layout, &must, &hosts, &PlaceOptions::default()) else {
            return Ok(());
        };
        let used: BTreeSet<usize> = plan.node_hosts.iter().copied().collect();
        prop_assert_eq!(used.len(), nodes as usize);
        prop_assert!(plan.node_hosts.iter().all(|&h| hosts.get(h).unwrap().healthy));
        prop_assert_eq!(used.len() + plan.idle.len(), usable);
        // The lower bound of straddling units.
        let k = plan.unit_nodes as usize;
        let domain = |h: usize| hosts.get(h).unwrap().domain();
        let straddling = plan
            .node_hosts
            .chunks(k)
            .filter(|u| (domain(u[0]).is_none() && k > 1) || u.iter().any(|&h| domain(h) != domain(u[0])))
            .count() as u64;
        prop_assert_eq!(straddling, u64::from(plan.units).saturating_sub(plan.whole_units));
        // Unknown hosts only when the known ones are too few.
        if plan.node_hosts.iter().any(|&h| domain(h).is_none()) {
            prop_assert!(known < nodes as usize);
        }
        // Every kind of the layout, every level: as the groups fall.
        prop_assert_eq!(plan.kinds.len(), layout.kinds().len());
        let plain = NodePlan::plain(world, &hosts, gpus).unwrap();
        for &kind in layout.kinds() {
            let groups = KindGroups::of_layout(&layout, kind).unwrap();
            let reported = plan.kinds.iter().find(|k| k.placed.name == groups.name).unwrap();
            prop_assert_eq!(&reported.placed, &plan.crossing(&hosts, &groups));
            prop_assert_eq!(reported.plain.as_ref(), Some(&plain.crossing(&hosts, &groups)));
            prop_assert_eq!(reported.must_fit, must.contains(&kind));
        }
        // Never worse than the table's order: where it crosses fewer groups
        // of a kind at a level, the placement crosses fewer at a level
        // compared before (the must-fit kinds first, each kind's levels
        // from the domain outwards), or the table's order straddles more
        // units or takes hosts of an unknown domain the job does not need.
        let table_straddles = plain
            .node_hosts
            .chunks(k)
            .filter(|u| (domain(u[0]).is_none() && k > 1) || u.iter().any(|&h| domain(h) != domain(u[0])))
            .count() as u64;
        let unknown_in = |p: &NodePlan| p.node_hosts.iter().filter(|&&h| domain(h).is_none()).count();
        let eligible = table_straddles <= straddling && unknown_in(&plain) <= unknown_in(&plan);
        let must_first: Vec<bool> = plan.kinds.iter().map(|k| k.must_fit).collect();
        prop_assert!(must_first.windows(2).all(|w| w[0] >= w[1]));
        let first_difference = plan.kinds.iter().find_map(|k| {
            let (p, t) = (&k.placed.crossing, &k.plain.as_ref().unwrap().crossing);
            p.iter().zip(t).rev().find(|(x, y)| x != y).map(|(x, y)| (k.placed.name.clone(), *x, *y))
        });
        if let (true, Some((name, placed, table))) = (eligible, first_difference) {
            prop_assert!(placed < table, "{}: placed {}, table {}", name, placed, table);
        }
        if plan.table_order {
            prop_assert_eq!(&plan.node_hosts, &plain.node_hosts);
        }
    }
}
