//! Re-layout after a failure (`rank_layout::relayout`) at 131,072 ranks:
//! tp 8, cp 2, pp 8, ep 8, dp 1,024 (Megatron order, 8 GPUs per node), the
//! node of ranks 40,960-40,967 lost.
//!
//! - `relayout/<policy>/131072`: the whole plan (rank map, the default
//!   kinds' changes, cost and hash) under each policy;
//! - `relayout/groups-baseline/131072`: listing the old and new layouts'
//!   groups of the same kinds into tables once, the least any tool that
//!   rebuilds every group from a rank list must do, for scale.
//!
//! After the timings, the plan's own size (its changed-group lists) is
//! printed against the size of every group of the kinds classified.
// Benchmark code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]
// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use rank_layout::relayout::{Failure, Policy, RelayoutOptions, default_kinds, relayout};
use rank_layout::{Config, Layout};
use std::hint::black_box;

fn relayouts(c: &mut Criterion) {
    let layout =
        Layout::new(&Config::new().tp(8).cp(2).pp(8).ep(8).dp(1024)).expect("the layout builds");
    assert_eq!(layout.world_size(), 131_072);
    let failure = Failure::new(8, 40_960..40_968).spare_nodes(1);
    let options = RelayoutOptions::default();
    let mut g = c.benchmark_group("relayout");
    g.sample_size(10);
    for policy in Policy::ALL {
        g.bench_function(format!("{policy}/131072"), |b| {
            b.iter(|| relayout(black_box(&layout), &failure, policy, &options).map(|p| p.hash()))
        });
    }
    let kinds = default_kinds(&layout);
    let smaller = relayout(&layout, &failure, Policy::DropReplica, &options)
        .expect("a plan")
        .layout()
        .clone();
    g.bench_function("groups-baseline/131072", |b| {
        b.iter(|| {
            let mut n = 0;
            for l in [&layout, &smaller] {
                for &k in &kinds {
                    n += l
                        .groups(k)
                        .and_then(|g| g.table())
                        .map(|t| t.len())
                        .unwrap_or(0);
                }
            }
            black_box(n)
        })
    });
    g.finish();
    // The plan's size against every group's.
    let all: u64 = kinds
        .iter()
        .map(|&k| layout.groups(k).map(|g| g.member_count()).unwrap_or(0))
        .sum();
    for policy in Policy::ALL {
        let plan = relayout(&layout, &failure, policy, &options).expect("a plan");
        let listed: usize = plan
            .kinds()
            .iter()
            .map(|c| {
                c.new.len()
                    + c.gone.len()
                    + c.shrunk.iter().map(|s| 2 + s.exclude.len()).sum::<usize>()
            })
            .sum();
        println!(
            "relayout/{policy}: {} new communicators; the plan lists {listed} numbers, every group of its {} kinds is {all} members",
            plan.cost().new_communicators,
            kinds.len()
        );
    }
}

criterion_group!(benches, relayouts);
criterion_main!(benches);
