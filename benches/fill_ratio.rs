//! Fill against a plain write, timed the simple way: every kind of a
//! layout (every dim set of up to three dims of a mesh) filled into one
//! buffer, against `buf[i] = i` over the same length, each the best of
//! three single runs on a buffer already written once. Criterion's
//! `enumerate` benchmarks measure the same with many iterations; this one
//! is what a user timing one call sees. `cargo bench --bench fill_ratio`.

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

fn compare(name: &str, len: usize, fill: &mut dyn FnMut(&mut [u32])) {
    let mut buf = vec![0u32; len];
    sequential(&mut buf); // fault the pages in
    let f = best_of_three(&mut || fill(black_box(&mut buf)));
    let w = best_of_three(&mut || sequential(black_box(&mut buf)));
    println!(
        "{name:<40} {len:>11} members  fill {:>8.3} ms  write {:>8.3} ms  {:.2}x",
        f * 1e3,
        w * 1e3,
        f / w
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
