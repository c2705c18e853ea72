//! Fill against a plain write, timed the simple way: every kind of a
//! layout (every dim set of up to three dims of a mesh) filled into one
//! buffer, against `buf[i] = i` over the same length, each the best of
//! three single runs on a settled buffer, the two alternating
//! round by round (`FILL_RATIO_ORDER=fill-first` or `write-first` times
//! one loop's three runs before the other's: see DESIGN.md). Criterion's
//! `enumerate` benchmarks measure the same with many iterations; this one
//! is what a user timing one call sees. The buffer is written over and
//! over before anything is timed ([`warm`]), and each case then prints the
//! median ratio of many alternating pairs beside the best of three.
//! `cargo bench --bench fill_ratio`.
// Benchmark code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

use std::hint::black_box;
use std::time::Instant;

use rank_layout::{Config, ExpertLayout, Layout, Mesh};

fn best_of_three(run: &mut dyn FnMut()) -> f64 {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            run();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::MAX, f64::min)
}

fn sequential(buf: &mut [u32]) {
    for (i, x) in buf.iter_mut().enumerate() {
        *x = i as u32;
    }
}

/// Writes `buf` over and over for at least [`WARM_PASSES`] passes and
/// [`WARM_SECONDS`]: memory the kernel has just handed out is slow for the
/// first passes over it (on the reference VM the first write of an 8 MB
/// buffer after faulting it in takes 3x a settled one, and it settles after
/// five or six passes), and a comparison made during that warm-up favours
/// whichever loop runs later. Returns the passes made.
fn warm(buf: &mut [u32]) -> usize {
    let t = Instant::now();
    let mut passes = 0;
    while passes < WARM_PASSES || t.elapsed().as_secs_f64() < WARM_SECONDS {
        sequential(black_box(buf));
        passes += 1;
    }
    passes
}

/// Fewest passes over a new buffer before it is timed.
const WARM_PASSES: usize = 10;

/// Shortest time spent writing a new buffer before it is timed.
const WARM_SECONDS: f64 = 0.05;

fn compare(name: &str, len: usize, fill: &mut dyn FnMut(&mut [u32])) {
    let mut buf = vec![0u32; len];
    let passes = warm(&mut buf);
    // Which loop is timed first matters (DESIGN.md): rounds alternate
    // unless FILL_RATIO_ORDER says fill-first or write-first.
    let order = std::env::var("FILL_RATIO_ORDER").unwrap_or_default();
    let (f, w) = if order != "fill-first" && order != "write-first" {
        let (mut f, mut w) = (f64::MAX, f64::MAX);
        for _ in 0..3 {
            let t = Instant::now();
            fill(black_box(&mut buf));
            f = f.min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            sequential(black_box(&mut buf));
            w = w.min(t.elapsed().as_secs_f64());
        }
        (f, w)
    } else if order == "write-first" {
        let w = best_of_three(&mut || sequential(black_box(&mut buf)));
        (best_of_three(&mut || fill(black_box(&mut buf))), w)
    } else {
        let f = best_of_three(&mut || fill(black_box(&mut buf)));
        (f, best_of_three(&mut || sequential(black_box(&mut buf))))
    };
    // Then many alternating pairs, for as long as the best of three took
    // times 300 (at least 0.3 s): the median of the pairs' ratios is what
    // the machine gives most of the time, between its fast and slow phases.
    let t = Instant::now();
    let budget = ((f + w) * 300.0).max(0.3);
    let mut ratios = Vec::new();
    while ratios.len() < 3 || t.elapsed().as_secs_f64() < budget {
        let s = Instant::now();
        fill(black_box(&mut buf));
        let pf = s.elapsed().as_secs_f64();
        let s = Instant::now();
        sequential(black_box(&mut buf));
        ratios.push(pf / s.elapsed().as_secs_f64());
    }
    ratios.sort_by(f64::total_cmp);
    let quantile = |q: f64| ratios[((ratios.len() - 1) as f64 * q) as usize];
    println!(
        "{name:<40} {len:>11} members  fill {:>8.3} ms  write {:>8.3} ms  {:.2}x  \
         | {} pairs: median {:.2}x, p10-p90 {:.2}-{:.2}x  ({passes} warm-up passes)",
        f * 1e3,
        w * 1e3,
        f / w,
        ratios.len(),
        quantile(0.5),
        quantile(0.1),
        quantile(0.9),
    );
}

fn layout_case(name: &str, layout: &Layout) {
    let len: u64 = layout
        .kinds()
        .iter()
        .map(|k| layout.groups(*k).expect("a kind").member_count())
        .sum();
    compare(name, len as usize, &mut |buf| {
        let mut at = 0;
        for &k in layout.kinds() {
            at += layout
                .groups(k)
                .expect("a kind")
                .fill(&mut buf[at..])
                .expect("room");
        }
        assert_eq!(at, buf.len());
    });
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` asks for benchmark names
    }
    let dense = |world: u32| {
        Layout::new(
            &Config::new()
                .tp(8)
                .cp(2)
                .ep(8)
                .pp(16)
                .world_size(world)
                .expert_layout(ExpertLayout::Nested),
        )
        .expect("a valid layout")
    };
    for world in [4096, 131_072, 1_048_576] {
        layout_case(&format!("all 16 kinds, {world} ranks"), &dense(world));
    }
    let encdec = Layout::new(
        &Config::new()
            .tp(8)
            .cp(2)
            .pp(8)
            .dp(1024)
            .encoder_tp(4)
            .encoder_pp(2)
            .expert_layout(ExpertLayout::Nested),
    )
    .expect("a valid layout");
    layout_case("encoder + decoder, 147456 ranks", &encdec);
    let mesh = Mesh::new([
        ("tp", 16),
        ("cp", 8),
        ("ep", 8),
        ("dp", 8),
        ("pp", 8),
        ("x", 16),
    ])
    .expect("a valid mesh");
    let dims: Vec<String> = mesh.dims().map(|(n, _)| n.to_owned()).collect();
    let sets: Vec<String> = (1u32..64)
        .filter(|b| b.count_ones() <= 3)
        .map(|b| {
            dims.iter()
                .enumerate()
                .filter(|(i, _)| b & (1 << i) != 0)
                .map(|(_, d)| d.as_str())
                .collect::<Vec<_>>()
                .join("-")
        })
        .collect();
    let len = mesh.world_size() as usize * sets.len();
    compare("6-dim mesh, 41 dim sets, 1048576 ranks", len, &mut |buf| {
        let mut at = 0;
        for s in &sets {
            at += mesh
                .groups(s)
                .expect("a dim set")
                .fill(&mut buf[at..])
                .expect("room");
        }
        assert_eq!(at, buf.len());
    });
}
