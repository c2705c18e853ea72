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
//! - `modules/bridge-plans/131072`: every bridge plan of a 4-module graph
//!   of 131,072 ranks (vision and audio encoders into a language model into
//!   a generator: fan-in 16, fan-in 16 with source cp, fan-out 2);
//!   `modules/plan-baseline/131072`: a sequential write of as many values
//!   as the plans hold.
//! - `modules/rank-bridge-splits/131072`: one rank's color and key in every
//!   communicator kind of every edge (`Modules::bridge_split`), and
//!   `modules/rank-roles/131072`: its whole role on every edge.
//!
//! - `spread/encdec-every-kind/2147483520`: what `check` computes, the
//!   spread of every kind (16) of an encoder (tp=2) + decoder (tp=4, pp=2)
//!   layout with cp=2 and dp=107,374,176 on 8-GPU nodes;
//!   `spread/encdec-{pp,embd,tp-pp}/2147483520`: its joined kinds alone;
//!   `spread/encdec-fan-in-every-kind/2147483520`: the same for an encoder
//!   with tp=4, pp=2 and a decoder with tp=2, pp=3, cp=2, on NVL72 racks (4
//!   GPUs per node, 18 nodes per domain) from rank offset 5.
//!
//! Every closure checks its result.
// Benchmark code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]
// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rank_layout::{
    Config, ExpertLayout, Kind, Layout, Mesh, MeshSpec, Modules, Topology, modules::Spans,
};

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

/// vision (16,384 ranks) and audio (16,384) into llm (65,536) into a
/// generator (32,768): 131,072 ranks.
fn mimo() -> Modules {
    let m = |t: &str| MeshSpec::parse(t).expect("a mesh").build().expect("a mesh");
    Modules::new(
        [
            ("vision", m("tp=2,gtp=2,dp=4096")),
            ("audio", m("cp=2,dp=8192")),
            ("llm", m("tp=8,cp=2,dp=512,pp=8")),
            ("gen", m("tp=4,dp=1024,pp=8")),
        ],
        Spans::Consecutive,
    )
    .and_then(|m| m.edges_from([("vision", "llm"), ("audio", "llm"), ("llm", "gen")]))
    .expect("valid modules")
}

fn modules(c: &mut Criterion) {
    let mut g = c.benchmark_group("modules");
    g.sample_size(20).measurement_time(Duration::from_secs(5));
    let modules = mimo();
    let world = modules.world_size();
    assert_eq!(world, 131_072);
    let held = |plans: &[rank_layout::modules::Bridge]| -> usize {
        plans
            .iter()
            .map(|p| {
                p.src_leaders.len()
                    + p.dst_leaders.len()
                    + 2 * p.pairs.len()
                    + p.src_broadcast.members().len()
                    + p.dst_broadcast.members().len()
                    + p.dst_cp_reduce.as_ref().map_or(0, |g| g.members().len())
                    + p.src_cp_gather.as_ref().map_or(0, |g| g.members().len())
                    + p.bridge_group.len()
            })
            .sum()
    };
    let values = held(&modules.bridges().expect("plans"));
    g.bench_function(BenchmarkId::new("bridge-plans", world), |b| {
        b.iter(|| {
            let plans = black_box(&modules).bridges().expect("plans");
            assert_eq!(plans.len(), 3);
            assert_eq!(held(&plans), values);
            plans
        })
    });
    let mut buf = vec![0u32; values];
    g.bench_function(BenchmarkId::new("plan-baseline", world), |b| {
        b.iter(|| sequential(black_box(&mut buf)))
    });
    let edges: Vec<(String, String)> = modules
        .edges()
        .map(|(s, d)| (s.to_owned(), d.to_owned()))
        .collect();
    let kinds: Vec<(&str, &str, rank_layout::modules::BridgeKind)> = edges
        .iter()
        .flat_map(|(s, d)| {
            modules
                .bridge_kinds(s, d)
                .expect("an edge")
                .into_iter()
                .map(move |k| (s.as_str(), d.as_str(), k))
        })
        .collect();
    // The first rank of llm's first stage: a destination leader of two
    // edges.
    let rank = 32_768;
    g.bench_function(BenchmarkId::new("rank-bridge-splits", world), |b| {
        b.iter(|| {
            let mut member = 0;
            for &(s, d, k) in &kinds {
                if modules
                    .bridge_split(black_box(rank), s, d, k)
                    .expect("a rank")
                    .is_some()
                {
                    member += 1;
                }
            }
            assert_eq!(member, 6); // two bridge groups, two broadcasts, two cp reduces
            member
        })
    });
    g.bench_function(BenchmarkId::new("rank-roles", world), |b| {
        b.iter(|| {
            let roles = modules.roles(black_box(rank)).expect("a rank");
            assert_eq!(roles.len(), 3);
            assert_eq!(roles[0].receives_from.len(), 16);
            roles
        })
    });
    g.finish();
}

/// Encoder + decoder layouts of 2,147,483,520 ranks: encoder tp=2 pp=1,
/// decoder tp=4 pp=2, cp=2 (dp = 107,374,176); and encoder tp=4 pp=2,
/// decoder tp=2 pp=3, cp=2 (dp = 76,695,840) from rank 5.
fn encdec_2_31(fan_in: bool) -> Layout {
    let c = if fan_in {
        Config::new()
            .tp(2)
            .pp(3)
            .encoder_tp(4)
            .encoder_pp(2)
            .rank_offset(5)
    } else {
        Config::new().tp(4).pp(2).encoder_tp(2).encoder_pp(1)
    };
    Layout::new(&c.cp(2).world_size(Some(2_147_483_520))).expect("a valid layout")
}

fn spread(c: &mut Criterion) {
    let mut g = c.benchmark_group("spread");
    g.sample_size(50).measurement_time(Duration::from_secs(3));
    let world = 2_147_483_520u32;
    let nodes = Topology::new(8, None).expect("a topology");
    let racks = Topology::new(4, Some(18)).expect("a topology");
    for (name, layout, topology) in [
        ("encdec-every-kind", encdec_2_31(false), nodes),
        ("encdec-fan-in-every-kind", encdec_2_31(true), racks),
    ] {
        assert_eq!(layout.world_size(), world);
        g.bench_function(BenchmarkId::new(name, world), |b| {
            b.iter(|| {
                let mut crossing = 0u64;
                for &kind in layout.kinds() {
                    let s = layout
                        .spread(kind, black_box(&topology))
                        .expect("a kind of the layout");
                    crossing += u64::from(s.cross_node_groups);
                }
                assert!(crossing > 0);
                crossing
            })
        });
    }
    // Encoder rank e + 2c + 4d, decoder ranks 4dp + t + 4c + 8d and 8dp
    // more: every joined pipeline spans 3 nodes, its ends 2, and the tp-pp
    // group of (c, d) 3.
    let layout = encdec_2_31(false);
    let dp = 107_374_176u32;
    for (kind, groups, most) in [
        (Kind::PP, 8 * dp, 3),
        (Kind::EMBD, 8 * dp, 2),
        (Kind::TP_PP, 2 * dp, 3),
    ] {
        g.bench_function(BenchmarkId::new(format!("encdec-{kind}"), world), |b| {
            b.iter(|| {
                let s = layout
                    .spread(kind, black_box(&nodes))
                    .expect("a kind of the layout");
                assert_eq!(
                    (s.groups, s.cross_node_groups, s.max_nodes_per_group),
                    (groups, groups, most)
                );
                s
            })
        });
    }
    g.finish();
}

criterion_group!(benches, enumerate, rank, mesh, modules, spread);
criterion_main!(benches);
