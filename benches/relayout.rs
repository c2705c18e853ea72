//! Re-layout after a failure (`rank_layout::relayout`) at 131,072 ranks:
//! tp 8, cp 2, pp 8, ep 8, dp 1,024 (Megatron order, 8 GPUs per node), the
//! node of ranks 40,960-40,967 lost.
//!
//! - `relayout/<policy>/131072`: the whole plan (rank map, the default
//!   kinds' changes, cost and hash) under each policy;
//! - `relayout/drop-replica-two-lanes/131072`: drop-replica after ranks
//!   70,000-70,007 and 12,345 fail (replicas 279 and 771, in two expert
//!   data-parallel lanes of 4 replicas), asserted to create nothing;
//! - `relayout/groups-baseline/131072`: listing the old and new layouts'
//!   groups of the same kinds into tables once, the least any tool that
//!   rebuilds every group from a rank list must do, for scale.
//!
//! After the timings, each plan's memory is printed, counted by a global
//! allocator: the peak while it is computed (transient: the rank map and,
//! one kind at a time, its group tables, all O(ranks)), and what the plan
//! keeps (the rank map, O(ranks), and the changed groups' lists, O(changed
//! groups)), against every group of the kinds classified as tables.
// Benchmark code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]
// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use std::alloc::{GlobalAlloc, Layout as Allocation, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use rank_layout::relayout::{Failure, Policy, RelayoutOptions, default_kinds, relayout};
use rank_layout::{Config, Layout};
use std::hint::black_box;

/// Bytes allocated now, and the most since the last reset.
static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

struct Counting;

// SAFETY: every call is forwarded to the system allocator unchanged; only
// the byte counts are kept beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Allocation) -> *mut u8 {
        grow(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Allocation) -> *mut u8 {
        grow(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Allocation) {
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Allocation, new_size: usize) -> *mut u8 {
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
        grow(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn grow(bytes: usize) {
    let now = NOW.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

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
    let two_lanes = Failure::new(8, (70_000..70_008).chain([12_345]));
    g.bench_function("drop-replica-two-lanes/131072", |b| {
        b.iter(|| {
            let plan = relayout(
                black_box(&layout),
                &two_lanes,
                Policy::DropReplica,
                &options,
            )
            .expect("a plan");
            // Whole expert data-parallel lanes dropped: nothing created.
            assert_eq!(plan.cost().new_communicators, 0);
            plan.hash()
        })
    });
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
    // Memory: each plan's peak and what it keeps, against every group of
    // its kinds as tables.
    let before = NOW.load(Ordering::Relaxed);
    let tables: Vec<_> = kinds
        .iter()
        .map(|&k| layout.groups(k).and_then(|g| g.table()).expect("a table"))
        .collect();
    let all = NOW.load(Ordering::Relaxed) - before;
    drop(tables);
    let plans = Policy::ALL
        .into_iter()
        .map(|p| (p.to_string(), p, &failure))
        .chain([(
            "drop-replica-two-lanes".to_string(),
            Policy::DropReplica,
            &two_lanes,
        )]);
    for (name, policy, failure) in plans {
        let before = NOW.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        let plan = relayout(&layout, failure, policy, &options).expect("a plan");
        let peak = PEAK.load(Ordering::Relaxed) - before;
        let kept = NOW.load(Ordering::Relaxed) - before;
        let changed: usize = plan
            .kinds()
            .iter()
            .map(|c| c.new.len() + c.gone.len() + c.shrunk.len())
            .sum();
        println!(
            "relayout/{name}: {} new communicators, {} moved, {changed} groups changed; peak {:.1} MB, the plan keeps {:.2} MB (rank map {:.2} MB); every group of the {} kinds as tables: {:.1} MB",
            plan.cost().new_communicators,
            plan.cost().moved,
            peak as f64 / 1e6,
            kept as f64 / 1e6,
            (plan.rank_map().len() as usize * 8) as f64 / 1e6,
            kinds.len(),
            all as f64 / 1e6
        );
    }
}

criterion_group!(benches, relayouts);
criterion_main!(benches);
