//! Enumeration and per-rank answers, against baselines measured in the same
//! run:
//!
//! - `enumerate/all-kinds/N`: every group of every kind of an N-rank layout
//!   (tp=8, cp=2, ep=8, pp=16) written into one caller buffer with
//!   `Groups::fill`; `enumerate/fill-baseline/N`: a plain sequential write
//!   of the same number of values into the same buffer (the memory-speed
//!   floor).
//! - `enumerate/encdec-all-kinds/147456` and its fill baseline: an encoder
//!   (tp=4, pp=2) + decoder (tp=8, cp=2, pp=8, dp=1024) layout.
//! - `enumerate/megatron-transcription/131072`: a transcription of
//!   Megatron-LM's `generate_masked_orthogonal_rank_groups` (lists of lists).
//! - `rank/all-kinds/131072`, `rank/encdec-all-kinds/147456`: one rank's
//!   comm-split color and key for every kind and round (`Layout::splits`);
//!   `rank/megatron-scan/131072`: Megatron-LM's way (build every group,
//!   keep the ones holding the rank).
//!
//! Every closure checks its result.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rank_layout::{Config, ExpertLayout, Kind, Layout};

#[path = "../tests/common/mod.rs"]
mod common;

/// tp=8, cp=2, ep=8, pp=16 and `world` ranks (dp = world / 256).
fn dense(world: u32) -> Layout {
    Layout::new(
        &Config::new()
            .tp(8)
            .cp(2)
            .ep(8)
            .pp(16)
            .world_size(Some(world))
            .expert_layout(ExpertLayout::Nested),
    )
    .expect("a valid layout")
}

/// Encoder tp=4 pp=2 before a decoder with tp=8, cp=2, pp=8, dp=1024: 147,456 ranks.
fn encdec() -> Layout {
    Layout::new(
        &Config::new()
            .tp(8)
            .cp(2)
            .pp(8)
            .dp(Some(1024))
            .encoder_tp(Some(4))
            .encoder_pp(Some(2))
            .expert_layout(ExpertLayout::Nested),
    )
    .expect("a valid layout")
}

/// Members of every kind of `layout`, and where each kind's last member lands.
fn plan(layout: &Layout) -> (usize, Vec<(Kind, usize, u32)>) {
    let mut total = 0usize;
    let mut ends = Vec::new();
    for &kind in layout.kinds() {
        let groups = layout.groups(kind).expect("a kind of the layout");
        let n = usize::try_from(groups.member_count()).expect("fits");
        let last = groups
            .clone()
            .next_back()
            .and_then(|g| g.last())
            .expect("a last member");
        total += n;
        ends.push((kind, total - 1, last));
    }
    (total, ends)
}

/// Fills every kind into `buf` and checks each kind's last member.
fn fill_all(layout: &Layout, buf: &mut [u32], ends: &[(Kind, usize, u32)]) {
    let mut at = 0;
    for &(kind, last_at, last) in ends {
        let groups = layout.groups(kind).expect("a kind of the layout");
        at += groups.fill(&mut buf[at..]).expect("room");
        assert_eq!(at - 1, last_at);
        assert_eq!(buf[last_at], last, "{kind}");
    }
}

fn sequential(buf: &mut [u32]) {
    for (i, x) in buf.iter_mut().enumerate() {
        *x = i as u32;
    }
    assert_eq!(buf[buf.len() - 1] as usize, buf.len() - 1);
}

fn enumerate(c: &mut Criterion) {
    let mut g = c.benchmark_group("enumerate");
    g.sample_size(20).measurement_time(Duration::from_secs(5));
    for world in [4096u32, 131_072, 1_048_576] {
        let layout = dense(world);
        let (total, ends) = plan(&layout);
        let mut buf = vec![0u32; total];
        g.bench_function(BenchmarkId::new("all-kinds", world), |b| {
            b.iter(|| fill_all(&layout, black_box(&mut buf), &ends))
        });
        g.bench_function(BenchmarkId::new("fill-baseline", world), |b| {
            b.iter(|| sequential(black_box(&mut buf)))
        });
    }
    let layout = encdec();
    let (total, ends) = plan(&layout);
    let mut buf = vec![0u32; total];
    g.bench_function(BenchmarkId::new("encdec-all-kinds", 147_456), |b| {
        b.iter(|| fill_all(&layout, black_box(&mut buf), &ends))
    });
    g.bench_function(BenchmarkId::new("encdec-fill-baseline", 147_456), |b| {
        b.iter(|| sequential(black_box(&mut buf)))
    });
    let (wo, w) = common::nested_grids(8, 2, 8, 512, 16, "tp-cp-ep-dp-pp", 0);
    g.bench_function(BenchmarkId::new("megatron-transcription", 131_072), |b| {
        b.iter(|| {
            let all: Vec<(String, common::Groups)> = common::nested_kinds(&wo, &w);
            assert_eq!(all.len(), 16);
            black_box(all)
        })
    });
    g.finish();
}

fn rank(c: &mut Criterion) {
    let mut g = c.benchmark_group("rank");
    g.sample_size(50).measurement_time(Duration::from_secs(3));
    let rank = 98_765;
    for (name, layout, steps) in [
        ("all-kinds", dense(131_072), 16),
        ("encdec-all-kinds", encdec(), 16 + 2 * 2 - 2),
    ] {
        let world = layout.world_size();
        g.bench_function(BenchmarkId::new(name, world), |b| {
            b.iter(|| {
                let mut n = 0;
                let mut sum = 0u32;
                for s in layout
                    .splits(black_box(rank))
                    .expect("a rank of the layout")
                {
                    n += 1;
                    if let Some(s) = s.split {
                        sum = sum.wrapping_add(s.color ^ s.key);
                    }
                }
                assert_eq!(n, steps);
                sum
            })
        });
    }
    let (wo, w) = common::nested_grids(8, 2, 8, 512, 16, "tp-cp-ep-dp-pp", 0);
    g.sample_size(10);
    g.bench_function(BenchmarkId::new("megatron-scan", 131_072), |b| {
        b.iter(|| {
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

criterion_group!(benches, enumerate, rank);
criterion_main!(benches);
