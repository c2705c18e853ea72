//! Group construction (every kind) and one rank's questions at 131,072
//! ranks, against a baseline measured in the same run: a transcription of
//! Megatron-LM's `generate_masked_orthogonal_rank_groups` (lists of lists),
//! and, per rank, Megatron's scan of every group for its own rank.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use rank_layout::{Config, Layout};

#[path = "../tests/common/mod.rs"]
mod common;

/// tp=8, cp=2, ep=8, dp=512, pp=16: 131,072 ranks.
fn config() -> Config {
    Config {
        tp: 8,
        cp: 2,
        ep: 8,
        pp: 16,
        world_size: Some(131_072),
        ..Config::default()
    }
}

fn bench(c: &mut Criterion) {
    let layout = Layout::new(&config()).unwrap();
    let world = layout.world_size() as u64;
    let kinds = layout.kinds();
    let (wo, w) = common::nested_grids(8, 2, 8, 512, 16, "tp-cp-ep-dp-pp", 0);

    let mut g = c.benchmark_group("all_kinds_131072_ranks");
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    g.bench_function("rank_layout_lazy", |b| {
        b.iter(|| {
            let mut members = 0u64;
            let mut sum = 0u64;
            for kind in &kinds {
                for group in layout.groups(*kind).unwrap() {
                    for r in group.iter() {
                        members += 1;
                        sum += u64::from(r);
                    }
                }
            }
            // 14 partition kinds cover the world; embd 2 per pipeline, pos-embd 1.
            assert_eq!(members, 14 * world + 3 * world / 16);
            black_box(sum)
        })
    });
    g.bench_function("rank_layout_collect_vecs", |b| {
        b.iter(|| {
            let all: Vec<Vec<Vec<u32>>> = kinds
                .iter()
                .map(|k| layout.groups(*k).unwrap().to_vecs())
                .collect();
            assert_eq!(all.len(), 16);
            black_box(all)
        })
    });
    g.bench_function("megatron_port_baseline", |b| {
        b.iter(|| {
            let all: Vec<(String, common::Groups)> = common::nested_kinds(&wo, &w);
            assert_eq!(all.len(), 16);
            black_box(all)
        })
    });
    g.finish();

    let rank = 98_765;
    let mut g = c.benchmark_group("one_rank_all_kinds_131072_ranks");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    g.bench_function("rank_layout_arithmetic", |b| {
        b.iter(|| {
            let mut found = 0;
            for kind in &kinds {
                found += layout.memberships(black_box(rank), *kind).unwrap().len();
            }
            assert!(found >= 14);
            found
        })
    });
    g.bench_function("megatron_scan_baseline", |b| {
        b.iter(|| {
            // What every Megatron-LM rank does: build every group, keep its own.
            let mut found = 0;
            for (_, groups) in common::nested_kinds(&wo, &w) {
                found += groups.iter().filter(|g| g.contains(&rank)).count();
            }
            assert!(found >= 14);
            found
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
