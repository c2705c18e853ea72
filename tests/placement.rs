//! Placement on a host table (`rank_layout::machine`): properties at random
//! host tables and layouts, and the worked GB200 cases of the semantics
//! (4 GPUs per node, 18 nodes per NVL72 rack).
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use rank_layout::machine::{
    Host, Hosts, KindGroups, Launcher, NodePlan, PlaceOptions, Shortfall, place,
};
use rank_layout::{Config, Kind, Layout};

/// A table of `racks` (nodes per rack), then `alone` hosts of no domain,
/// `down` of the first rack's hosts not healthy; names interleave racks.
fn table(racks: &[usize], alone: usize, down: usize, gpus: u32) -> Hosts {
    let mut hosts = Vec::new();
    let deepest = racks.iter().copied().max().unwrap_or(0);
    let mut n = 0;
    for i in 0..deepest {
        for (r, &size) in racks.iter().enumerate() {
            if i < size {
                hosts.push(
                    Host::new(format!("h{n:05}"), Some(&format!("rack{r:02}")))
                        .gpus(Some(gpus))
                        .healthy(!(r == 0 && i < down)),
                );
                n += 1;
            }
        }
    }
    for _ in 0..alone {
        hosts.push(Host::new(format!("h{n:05}"), None).gpus(Some(gpus)));
        n += 1;
    }
    Hosts::new(hosts).unwrap()
}

fn kinds(layout: &Layout, names: &[Kind]) -> Vec<KindGroups> {
    names
        .iter()
        .filter(|k| layout.kinds().contains(k))
        .map(|&k| KindGroups::of_layout(layout, k).unwrap())
        .collect()
}

fn domain(hosts: &Hosts, h: usize) -> Option<&str> {
    hosts.get(h).unwrap().domain()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn placements_keep_what_they_promise(
        racks in proptest::collection::vec(1usize..12, 1..7),
        alone in 0usize..3,
        down in 0usize..3,
        gpus in prop::sample::select(vec![1u32, 2, 4, 8]),
        tp in prop::sample::select(vec![1u32, 2, 4, 8]),
        ep in prop::sample::select(vec![1u32, 2, 4]),
        etp in prop::sample::select(vec![1u32, 2]),
        pp in 1u32..3,
        use_nodes in 1usize..80,
        shuffle in any::<u64>(),
    ) {
        let hosts = table(&racks, alone, down, gpus);
        let usable = hosts.iter().filter(|h| h.healthy).count();
        let nodes = (use_nodes % usable.max(1)).max(1) as u32;
        let world = nodes * gpus;
        let Ok(layout) = Layout::new(&Config::new().tp(tp).ep(ep).etp(etp).pp(pp).world_size(world)) else {
            return Ok(());
        };
        let must = kinds(&layout, &[Kind::TP, Kind::CP, Kind::ETP_EP]);
        let Ok(plan) = place(world, &must, &[], &hosts, &PlaceOptions::default()) else {
            return Ok(());
        };
        // A bijection onto healthy hosts; idle and used partition the usable.
        let used: BTreeSet<usize> = plan.node_hosts.iter().copied().collect();
        prop_assert_eq!(used.len(), plan.node_hosts.len());
        prop_assert_eq!(plan.node_hosts.len() as u32, nodes);
        for &h in &plan.node_hosts {
            prop_assert!(hosts.get(h).unwrap().healthy);
        }
        prop_assert_eq!(used.len() + plan.idle.len(), usable);
        prop_assert!(plan.idle.iter().all(|h| !used.contains(h)));
        // Whole units inside one domain (an unknown host is a domain of one
        // only for a unit of one node); exactly the lower bound straddles.
        let k = plan.unit_nodes as usize;
        let straddling = plan
            .node_hosts
            .chunks(k)
            .filter(|unit| {
                let first = domain(&hosts, unit[0]);
                first.is_none() && k > 1 || unit.iter().any(|&h| domain(&hosts, h) != first)
            })
            .count() as u64;
        let lower = u64::from(plan.units).saturating_sub(plan.whole_units);
        prop_assert_eq!(straddling, lower);
        prop_assert_eq!(u64::from(plan.straddling_units), lower);
        // Every must-fit group inside one domain whenever capacity allows.
        if lower == 0 {
            for kind in &must {
                prop_assert_eq!(plan.crossing(&hosts, kind).domain_crossing(), 0, "{}", kind.name);
            }
        }
        // The same hosts in another row order: the same placement.
        let mut rows: Vec<Host> = hosts.iter().cloned().collect();
        let n = rows.len();
        let mut s = shuffle;
        for i in (1..n).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            rows.swap(i, (s >> 33) as usize % (i + 1));
        }
        let again = place(world, &must, &[], &Hosts::new(rows).unwrap(), &PlaceOptions::default()).unwrap();
        prop_assert_eq!(again, plan.clone());
        // The Slurm host file read back gives each rank its node's host.
        let file = Launcher::SlurmHostfile.file(&plan, &hosts);
        for (r, line) in file.lines().enumerate() {
            prop_assert_eq!(line, &hosts.get(plan.host_of(r as u32).unwrap()).unwrap().name);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// A straddling unit is cut at the boundaries of the must-fit kinds'
    /// smaller groups: with units of `m` tp groups (an etp-ep group of `m`
    /// tp groups of `s` nodes), the tp groups that cross domains are
    /// exactly those the leftovers cannot hold whole: the straddling units
    /// need `m` blocks of `s` nodes each, the leftovers (`n_d mod k` nodes
    /// of each rack) hold `sum floor(l_d / s)`.
    #[test]
    fn straddling_units_are_cut_between_tp_groups(
        racks in proptest::collection::vec(1usize..20, 1..10),
        gpus in prop::sample::select(vec![1u32, 2, 4]),
        s in prop::sample::select(vec![2u32, 3]),
        m in prop::sample::select(vec![2u32, 4]),
        use_nodes in 1usize..200,
    ) {
        let hosts = table(&racks, 0, 0, gpus);
        let (tp, k) = (s * gpus, s * m);
        let total: usize = racks.iter().sum();
        let units = (use_nodes % (total / k as usize + 1)).max(1) as u32;
        let world = units * k * gpus;
        let Ok(layout) = Layout::new(&Config::new().tp(tp).ep(tp * m).etp(1).world_size(world)) else {
            return Ok(());
        };
        let must = kinds(&layout, &[Kind::TP, Kind::ETP_EP]);
        let Ok(plan) = place(world, &must, &[], &hosts, &PlaceOptions::default()) else {
            return Ok(());
        };
        prop_assert_eq!(plan.unit_nodes, k);
        let ku = k as usize;
        let leftovers: usize = racks.iter().map(|&n| n % ku / s as usize).sum();
        let need = plan.straddling_units as usize * m as usize;
        let got = crossing(&plan, &hosts, &must);
        prop_assert_eq!(got["tp"], need.saturating_sub(leftovers));
        prop_assert_eq!(got["etp-ep"], plan.straddling_units as usize);
    }
}

fn gb200(racks: &[usize]) -> Hosts {
    let mut rows = String::new();
    let mut n = 0;
    for (r, &size) in racks.iter().enumerate() {
        for _ in 0..size {
            rows.push_str(&format!("gb{n:04} nvl72-{r:02} 4\n"));
            n += 1;
        }
    }
    Hosts::parse_plain(&rows).unwrap()
}

fn crossing(plan: &NodePlan, hosts: &Hosts, must: &[KindGroups]) -> BTreeMap<String, usize> {
    must.iter()
        .map(|k| (k.name.clone(), plan.crossing(hosts, k).domain_crossing()))
        .collect()
}

#[test]
fn sixteen_full_racks_tp8_pp4_ep16() {
    // 16 x 18 nodes x 4 GPUs = 1,152: units of 4 nodes (an EP group of 16),
    // 4 whole units per rack, 72 units: 8 straddle two racks, no TP group.
    let hosts = gb200(&[18; 16]);
    let layout = Layout::new(&Config::new().tp(8).pp(4).ep(16).etp(1).world_size(1152)).unwrap();
    let must = kinds(&layout, &[Kind::TP, Kind::CP, Kind::ETP_EP]);
    let plan = place(1152, &must, &[], &hosts, &PlaceOptions::default()).unwrap();
    assert_eq!((plan.unit_nodes, plan.units, plan.whole_units), (4, 72, 64));
    let got = crossing(&plan, &hosts, &must);
    assert_eq!(got["tp"], 0);
    assert_eq!(got["etp-ep"], 8);
    let ep = KindGroups::of_layout(&layout, Kind::ETP_EP).unwrap();
    assert_eq!(plan.crossing(&hosts, &ep).widest, vec![2]);
    assert!(plan.idle.is_empty());
}

#[test]
fn a_group_larger_than_every_rack_has_no_placement() {
    let hosts = gb200(&[18; 16]);
    let layout = Layout::new(&Config::new().tp(8).pp(4).ep(16).etp(8).world_size(1024)).unwrap();
    let must = kinds(&layout, &[Kind::TP, Kind::CP, Kind::ETP_EP]);
    let err = place(1024, &must, &[], &hosts, &PlaceOptions::default()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("128 GPUs") && text.contains("72 GPUs"),
        "{text}"
    );
}

#[test]
fn one_short_rack_dp34() {
    // One rack down to 16 nodes: 64 whole units, 68 needed, 4 straddle
    // (the hosts' own order gives 7), 14 nodes idle.
    let mut racks = vec![18; 16];
    racks[0] = 16;
    let hosts = gb200(&racks);
    let layout = Layout::new(&Config::new().tp(8).pp(4).ep(16).etp(1).dp(34)).unwrap();
    let must = kinds(&layout, &[Kind::TP, Kind::CP, Kind::ETP_EP]);
    let plan = place(1088, &must, &[], &hosts, &PlaceOptions::default()).unwrap();
    assert_eq!(crossing(&plan, &hosts, &must)["etp-ep"], 4);
    assert_eq!(crossing(&plan, &hosts, &must)["tp"], 0);
    assert_eq!(plan.idle.len(), 14);
    let plain = NodePlan::plain(1088, &hosts, 4).unwrap();
    assert_eq!(crossing(&plain, &hosts, &must)["etp-ep"], 7);
    let fail = PlaceOptions::default().shortfall(Shortfall::Fail);
    assert!(place(1088, &must, &[], &hosts, &fail).is_err());
}

#[test]
fn a_straddling_unit_is_cut_between_tp_groups() {
    // 16 racks of 18 nodes, rack03 short 2, rack07 1 and rack11 3 (282
    // nodes); tp 8, pp 4, ep 16, etp 1, dp 32: 64 units of 4 nodes (an
    // etp-ep group, two tp groups of 2 nodes), 63 whole: one straddles.
    // Cut 2 + 2 it crosses with its etp-ep group only; 3 + 1 (rack11's
    // three leftovers and one of another rack) split a tp group too.
    let mut racks = vec![18; 16];
    racks[3] = 16;
    racks[7] = 17;
    racks[11] = 15;
    let hosts = gb200(&racks);
    let layout = Layout::new(&Config::new().tp(8).pp(4).ep(16).etp(1).dp(32)).unwrap();
    let must = kinds(&layout, &[Kind::TP, Kind::CP, Kind::ETP_EP]);
    let plan = place(1024, &must, &[], &hosts, &PlaceOptions::default()).unwrap();
    assert_eq!(
        (
            plan.unit_nodes,
            plan.units,
            plan.whole_units,
            plan.straddling_units
        ),
        (4, 64, 63, 1)
    );
    let got = crossing(&plan, &hosts, &must);
    assert_eq!((got["tp"], got["etp-ep"]), (0, 1));
    assert_eq!(plan.idle.len(), 282 - 256);
    // The table's order: the first 256 nodes; rack boundaries at nodes 18,
    // 36, 54, 70, 88, 106, 124, 141, 159, 177, 195, 210, 228 and 246 fall
    // inside 10 units (not multiples of 4), 4 of them inside tp groups
    // (odd: 141, 159, 177, 195).
    let plain = NodePlan::plain(1024, &hosts, 4).unwrap();
    let table = crossing(&plain, &hosts, &must);
    assert_eq!((table["tp"], table["etp-ep"]), (4, 10));
    // The straddling unit: 2 nodes of each of two racks.
    let straddler = plan
        .node_hosts
        .chunks(4)
        .find(|unit| {
            unit.iter()
                .any(|&h| domain(&hosts, h) != domain(&hosts, unit[0]))
        })
        .unwrap();
    let mut per_rack: BTreeMap<Option<&str>, usize> = BTreeMap::new();
    for &h in straddler {
        *per_rack.entry(domain(&hosts, h)).or_default() += 1;
    }
    assert_eq!(per_rack.values().copied().collect::<Vec<_>>(), [2, 2]);
}

#[test]
fn hosts_of_unknown_domain_only_when_the_known_cannot_hold_the_job() {
    // Racks of 6, 8, 3, 7, 13, 9, 13 and 11 nodes of 4 GPUs (70) and 2
    // hosts of no domain; tp 4, ep 8, etp 1: units of 2 nodes, 32 whole,
    // 280 GPUs = 35 units: 3 straddle, and the known leftovers (one node
    // of each of 6 racks) hold them exactly.
    let mut rows = String::new();
    let mut n = 0;
    for (r, size) in [6, 8, 3, 7, 13, 9, 13, 11].into_iter().enumerate() {
        for _ in 0..size {
            rows.push_str(&format!("gb{n:04} nvl72-{r:02} 4\n"));
            n += 1;
        }
    }
    rows.push_str("gb0070 - 4\ngb0071 - 4\n");
    let hosts = Hosts::parse_plain(&rows).unwrap();
    let unknown = [
        hosts.index_of("gb0070").unwrap(),
        hosts.index_of("gb0071").unwrap(),
    ];
    let layout = Layout::new(&Config::new().tp(4).ep(8).etp(1).world_size(280)).unwrap();
    let must = kinds(&layout, &[Kind::TP, Kind::CP, Kind::ETP_EP]);
    let plan = place(280, &must, &[], &hosts, &PlaceOptions::default()).unwrap();
    assert_eq!((plan.whole_units, plan.straddling_units), (32, 3));
    assert!(plan.node_hosts.iter().all(|h| !unknown.contains(h)));
    assert_eq!(plan.idle, unknown);
    assert_eq!(crossing(&plan, &hosts, &must)["etp-ep"], 3);
    // 288 GPUs: the known hosts are too few, and the two hosts join.
    let layout = Layout::new(&Config::new().tp(4).ep(8).etp(1).world_size(288)).unwrap();
    let must = kinds(&layout, &[Kind::TP, Kind::CP, Kind::ETP_EP]);
    let plan = place(288, &must, &[], &hosts, &PlaceOptions::default()).unwrap();
    assert!(unknown.iter().all(|h| plan.node_hosts.contains(h)));
    assert!(plan.idle.is_empty());
}

#[test]
fn interleaved_racks() {
    // Hosts named so that the table's order alternates racks host by host:
    // every TP and EP group crosses in that order, the lower bound after.
    let mut rows = String::new();
    for i in 0..288 {
        rows.push_str(&format!("gb{i:04} nvl72-{:02} 4\n", i % 16));
    }
    let hosts = Hosts::parse_plain(&rows).unwrap();
    let layout = Layout::new(&Config::new().tp(8).pp(4).ep(16).etp(1).world_size(1152)).unwrap();
    let must = kinds(&layout, &[Kind::TP, Kind::CP, Kind::ETP_EP]);
    let plain = NodePlan::plain(1152, &hosts, 4).unwrap();
    assert_eq!(crossing(&plain, &hosts, &must)["tp"], 144);
    assert_eq!(crossing(&plain, &hosts, &must)["etp-ep"], 72);
    let plan = place(1152, &must, &[], &hosts, &PlaceOptions::default()).unwrap();
    assert_eq!(crossing(&plan, &hosts, &must)["tp"], 0);
    assert_eq!(crossing(&plan, &hosts, &must)["etp-ep"], 8);
}

#[test]
fn unhealthy_and_unknown_hosts() {
    let hosts = Hosts::parse_plain("a r1 4 down\nb r1 4\nc r1 4\nd - 4\ne unknown 4\n").unwrap();
    // tp 8 = 2 nodes: r1 holds one unit; the two hosts of no domain straddle.
    let layout = Layout::new(&Config::new().tp(8).world_size(16)).unwrap();
    let must = kinds(&layout, &[Kind::TP]);
    let plan = place(16, &must, &[], &hosts, &PlaceOptions::default()).unwrap();
    assert!(!plan.node_hosts.contains(&0));
    assert_eq!(plan.unhealthy, vec![0]);
    assert_eq!((plan.whole_units, plan.straddling_units), (1, 1));
    assert_eq!(crossing(&plan, &hosts, &must)["tp"], 1);
}

#[test]
fn device_mesh_rank_map() {
    // Two racks listed interleaved: the plan's node order is not the name
    // order, and the map sends each logical rank to the launched rank (the
    // plan's hosts in name order, GPU = local rank) on its planned host.
    let hosts = Hosts::parse_plain("n0 rA 2\nn1 rB 2\nn2 rA 2\nn3 rB 2\n").unwrap();
    let layout = Layout::new(&Config::new().tp(4).world_size(8)).unwrap();
    let must = kinds(&layout, &[Kind::TP]);
    let plan = place(8, &must, &[], &hosts, &PlaceOptions::default()).unwrap();
    let text = Launcher::DeviceMesh.file(&plan, &hosts);
    let map: Vec<usize> = serde_json::from_str(&text).unwrap();
    let mut used = plan.node_hosts.clone();
    used.sort_unstable();
    for (r, &q) in map.iter().enumerate() {
        assert_eq!((used[q / 2], q % 2), (plan.node_hosts[r / 2], r % 2), "{r}");
    }
    // tp groups of the mesh hold one rack's launched ranks each.
    for group in map.chunks(4) {
        let racks: BTreeSet<Option<&str>> = group
            .iter()
            .map(|&q| hosts.get(used[q / 2]).unwrap().domain())
            .collect();
        assert_eq!(racks.len(), 1, "{group:?}");
    }
    assert_eq!(map, [0, 1, 4, 5, 2, 3, 6, 7]);
}
