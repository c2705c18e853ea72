//! `calls LAYOUT N`: builds LAYOUT (`all-kinds` or `encdec-all-kinds`) and
//! makes N timed-loop calls of the bench, for instruction counts under
//! callgrind (the difference of an N and a 2N run, divided by N, is the
//! count of one call).

use std::hint::black_box;

use rank_layout_downstream_bench::{RANK, layouts, one_rank};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (which, n) = match args.as_slice() {
        [_, which, n] => (which.as_str(), n.parse::<u64>().expect("a count")),
        _ => panic!("usage: calls LAYOUT N"),
    };
    let (_, layout, steps) = layouts()
        .into_iter()
        .find(|(name, _, _)| *name == which)
        .expect("all-kinds or encdec-all-kinds");
    let mut sum = 0u32;
    for _ in 0..n {
        sum = sum.wrapping_add(one_rank(black_box(&layout), RANK, steps));
    }
    println!("{which} {n} {sum}");
}
