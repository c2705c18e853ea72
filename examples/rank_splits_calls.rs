//! `rank_splits_calls LAYOUT N`: the body of the `rank/*` benches of
//! `benches/enumerate.rs` (one rank's comm-split color and key in every kind
//! and round), N times, for instruction counts under callgrind: the
//! difference of an N and a 2N run, divided by N, is the count of one call.
//! LAYOUT is `all-kinds` (tp=8, cp=2, ep=8, pp=16, 131,072 ranks) or
//! `encdec-all-kinds` (encoder tp=4 pp=2, decoder tp=8 cp=2 pp=8 dp=1024).
//! `benches/downstream` has the same binary built from a separate crate.
// Example code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

use std::hint::black_box;

use rank_layout::{Config, ExpertLayout, Layout};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (which, n) = match args.as_slice() {
        [_, which, n] => (which.as_str(), n.parse::<u64>().expect("a count")),
        _ => panic!("usage: rank_splits_calls LAYOUT N"),
    };
    let config = Config::new()
        .tp(8)
        .cp(2)
        .expert_layout(ExpertLayout::Nested);
    let (config, steps) = match which {
        "all-kinds" => (config.ep(8).pp(16).world_size(Some(131_072)), 16),
        "encdec-all-kinds" => (
            config
                .pp(8)
                .dp(Some(1024))
                .encoder_tp(Some(4))
                .encoder_pp(Some(2)),
            16 + 2 * 2 - 2,
        ),
        _ => panic!("all-kinds or encdec-all-kinds"),
    };
    let layout = Layout::new(&config).expect("a valid layout");
    let rank = 98_765;
    let mut total = 0u32;
    for _ in 0..n {
        let layout = black_box(&layout);
        let mut k = 0;
        let mut sum = 0u32;
        for s in layout
            .splits(black_box(rank))
            .expect("a rank of the layout")
        {
            k += 1;
            if let Some(s) = s.split {
                sum = sum.wrapping_add(s.color ^ s.key);
            }
        }
        assert_eq!(k, steps);
        total = total.wrapping_add(sum);
    }
    println!("{which} {n} {total}");
}
