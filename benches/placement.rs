//! Placement on a host table (`rank_layout::machine`), at 100,000 GPUs;
//! every measured closure asserts its result:
//!
//! - `placement/read-plain/25100`: reading a 25,100-host plain table
//!   (`Hosts::parse_plain`), 1,395 racks of 18 nodes (the last 10 of 17);
//! - `placement/place/100352`: placing a 100,352-GPU job (25,088 nodes of 4
//!   GPUs; tp 8, pp 4, ep 16, etp 1: units of 4 nodes) on a table of
//!   25,100 hosts whose racks are listed interleaved, `tp` and `etp-ep` must
//!   fit (their groups built by the layout beforehand): 5,580 whole units,
//!   692 straddle, each cut 2 + 2 between its tp groups;
//! - `placement/place-layout/100352`: the same job as a layout
//!   (`place_layout`): every kind's groups built, the others' runs kept
//!   together, and all 16 kinds compared with the table's order at each
//!   level;
//! - `placement/crossing/100352`: how the `etp-ep` groups then fall;
//! - `placement/crossing-dp/100352`: how the `dp` groups fall (32 groups
//!   of 3,136 ranks, each on 3,136 nodes of every rack: the report's widest
//!   kind);
//! - `placement/groups-baseline/100352`: building the two kinds' groups as
//!   `Vec`s (what the placement is given), for scale.
// Benchmark code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]
// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use rank_layout::machine::{
    Hosts, KindGroups, PlaceOptions, default_must_fit, place, place_layout,
};
use rank_layout::{Config, Kind, Layout};
use std::hint::black_box;

fn table(hosts: usize) -> String {
    let racks = hosts.div_ceil(18);
    let mut out = String::with_capacity(hosts * 24);
    for i in 0..hosts {
        out.push_str(&format!("gb{i:06} nvl72-{:05} 4\n", i % racks));
    }
    out
}

fn placement(c: &mut Criterion) {
    let text = table(25_100);
    let mut g = c.benchmark_group("placement");
    g.sample_size(20);
    g.bench_function("read-plain/25100", |b| {
        b.iter(|| {
            let hosts = Hosts::parse_plain(black_box(&text)).unwrap();
            assert_eq!(hosts.len(), 25_100);
        })
    });
    let hosts = Hosts::parse_plain(&text).expect("the table reads");
    let layout = Layout::new(&Config::new().tp(8).pp(4).ep(16).etp(1).world_size(100_352))
        .expect("the layout builds");
    let kinds = || -> Vec<KindGroups> {
        [Kind::TP, Kind::ETP_EP]
            .iter()
            .map(|&k| KindGroups::of_layout(&layout, k).expect("the kind exists"))
            .collect()
    };
    g.bench_function("groups-baseline/100352", |b| {
        b.iter(|| {
            let kinds = black_box(kinds());
            assert_eq!(kinds[1].groups.len(), 100_352 / 16);
        })
    });
    let must = kinds();
    let options = PlaceOptions::default();
    g.bench_function("place/100352", |b| {
        b.iter(|| {
            let plan = place(100_352, black_box(&must), &[], &hosts, &options).unwrap();
            assert_eq!(
                (plan.units, plan.whole_units, plan.straddling_units),
                (6272, 5580, 692)
            );
        })
    });
    let must_kinds = default_must_fit(&layout);
    g.bench_function("place-layout/100352", |b| {
        b.iter(|| {
            let (_, plan) =
                place_layout(black_box(&layout), &must_kinds, &hosts, &options).unwrap();
            assert_eq!((plan.straddling_units, plan.kinds.len()), (692, 16));
        })
    });
    let plan = place(100_352, &must, &[], &hosts, &options).expect("it places");
    assert_eq!(plan.crossing(&hosts, &must[0]).domain_crossing(), 0);
    g.bench_function("crossing/100352", |b| {
        b.iter(|| {
            let crossing = plan.crossing(&hosts, black_box(&must[1]));
            assert_eq!(crossing.domain_crossing(), 692);
        })
    });
    let dp = KindGroups::of_layout(&layout, Kind::DP).expect("the kind exists");
    g.bench_function("crossing-dp/100352", |b| {
        b.iter(|| {
            let crossing = plan.crossing(&hosts, black_box(&dp));
            assert_eq!(crossing.domain_crossing(), 32);
        })
    });
    g.finish();
}

criterion_group!(benches, placement);
criterion_main!(benches);
