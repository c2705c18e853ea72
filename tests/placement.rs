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
                let mut h = Host::new(format!("h{n:05}"), Some(&format!("rack{r:02}")));
                h.gpus = Some(gpus);
                h.healthy = !(r == 0 && i < down);
                hosts.push(h);
                n += 1;
            }
        }
    }
    for _ in 0..alone {
        let mut h = Host::new(format!("h{n:05}"), None);
        h.gpus = Some(gpus);
        hosts.push(h);
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
        let Ok(plan) = place(world, &must, &hosts, &PlaceOptions::default()) else {
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
        let again = place(world, &must, &Hosts::new(rows).unwrap(), &PlaceOptions::default()).unwrap();
        prop_assert_eq!(again, plan.clone());
        // The Slurm host file read back gives each rank its node's host.
        let file = Launcher::SlurmHostfile.file(&plan, &hosts);
        for (r, line) in file.lines().enumerate() {
            prop_assert_eq!(line, &hosts.get(plan.host_of(r as u32).unwrap()).unwrap().name);
        }
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
    let plan = place(1152, &must, &hosts, &PlaceOptions::default()).unwrap();
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
    let err = place(1024, &must, &hosts, &PlaceOptions::default()).unwrap_err();
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
    let plan = place(1088, &must, &hosts, &PlaceOptions::default()).unwrap();
    assert_eq!(crossing(&plan, &hosts, &must)["etp-ep"], 4);
    assert_eq!(crossing(&plan, &hosts, &must)["tp"], 0);
    assert_eq!(plan.idle.len(), 14);
    let plain = NodePlan::plain(1088, &hosts, 4).unwrap();
    assert_eq!(crossing(&plain, &hosts, &must)["etp-ep"], 7);
    let fail = PlaceOptions {
        shortfall: Shortfall::Fail,
        ..PlaceOptions::default()
    };
    assert!(place(1088, &must, &hosts, &fail).is_err());
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
    let plan = place(1152, &must, &hosts, &PlaceOptions::default()).unwrap();
    assert_eq!(crossing(&plan, &hosts, &must)["tp"], 0);
    assert_eq!(crossing(&plan, &hosts, &must)["etp-ep"], 8);
}

#[test]
fn unhealthy_and_unknown_hosts() {
    let hosts = Hosts::parse_plain("a r1 4 down\nb r1 4\nc r1 4\nd - 4\ne unknown 4\n").unwrap();
    // tp 8 = 2 nodes: r1 holds one unit; the two hosts of no domain straddle.
    let layout = Layout::new(&Config::new().tp(8).world_size(16)).unwrap();
    let must = kinds(&layout, &[Kind::TP]);
    let plan = place(16, &must, &hosts, &PlaceOptions::default()).unwrap();
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
    let plan = place(8, &must, &hosts, &PlaceOptions::default()).unwrap();
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
