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
//! - `mesh/fill-up-to-3-dims/1048576`: every dim set of up to three dims
//!   of a 6-dim mesh of 1,048,576 ranks (41 sets) filled one after the
//!   other into one buffer; `mesh/fill-baseline/1048576`: a sequential write
//!   of the same length.
//! - `mesh/splits-16-dim-sets/1048576`: one rank's color and key in 16 dim
//!   sets of the mesh and of a view, in one pass (`Mesh::split_plan`).
//!
//! Every closure checks its result.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rank_layout::{Config, ExpertLayout, Kind, Layout, Mesh};

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

/// The 6-dim mesh of the mesh benchmarks: 1,048,576 ranks.
fn mesh6() -> Mesh {
    Mesh::new([
        ("tp", 16),
        ("cp", 8),
        ("ep", 8),
        ("dp", 8),
        ("pp", 8),
        ("x", 16),
    ])
    .expect("a valid mesh")
    .view(
        "expert",
        &[("etp", 4), ("moe", 256), ("edp", 128), ("x", 8)],
        &[],
    )
    .expect("a valid view")
}

/// Every dim set of up to three dims of `mesh`'s own dims.
fn small_sets(mesh: &Mesh) -> Vec<String> {
    let dims: Vec<String> = mesh.dims().map(|(n, _)| n.to_owned()).collect();
    let mut out = Vec::new();
    for bits in 1u32..(1 << dims.len()) {
        if bits.count_ones() <= 3 {
            let chosen: Vec<&str> = dims
                .iter()
                .enumerate()
                .filter(|(i, _)| bits & (1 << i) != 0)
                .map(|(_, d)| d.as_str())
                .collect();
            out.push(chosen.join("-"));
        }
    }
    out
}

fn mesh(c: &mut Criterion) {
    let mut g = c.benchmark_group("mesh");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    let mesh = mesh6();
    let sets = small_sets(&mesh);
    assert_eq!(sets.len(), 41);
    let world = mesh.world_size() as usize;
    let mut buf = vec![0u32; world * sets.len()];
    g.bench_function(BenchmarkId::new("fill-up-to-3-dims", world), |b| {
        b.iter(|| {
            let mut at = 0;
            for s in &sets {
                at += mesh
                    .groups(s)
                    .expect("a dim set")
                    .fill(&mut black_box(&mut buf)[at..])
                    .expect("room");
            }
            assert_eq!(at, buf.len());
            assert_eq!(buf[world - 1] as usize, world - 1); // "tp": the last group ends the mesh
        })
    });
    g.bench_function(BenchmarkId::new("fill-baseline", world), |b| {
        b.iter(|| sequential(black_box(&mut buf)))
    });
    // One rank's color and key in 16 dim sets of the mesh and its view.
    let specs = [
        "tp",
        "cp",
        "ep",
        "dp",
        "pp",
        "x",
        "tp-cp",
        "cp-dp",
        "dp-pp",
        "tp-cp-ep",
        "ep-dp-x",
        "expert:etp",
        "expert:moe",
        "expert:edp",
        "expert:moe-edp",
        "expert:x",
    ];
    let plan = mesh.split_plan(&specs).expect("dim sets of the mesh");
    g.bench_function(BenchmarkId::new("splits-16-dim-sets", world), |b| {
        b.iter(|| {
            let mut sum = 0u32;
            let mut n = 0;
            for s in plan.splits(black_box(987_654)).expect("a rank of the mesh") {
                sum = sum.wrapping_add(s.color ^ s.key);
                n += 1;
            }
            assert_eq!(n, 16);
            sum
        })
    });
    g.finish();
}

criterion_group!(benches, enumerate, rank, mesh);
criterion_main!(benches);
