//! `rank/all-kinds/131072` and `rank/encdec-all-kinds/147456` of the main
//! crate's `benches/enumerate.rs`, timed from a crate that depends on
//! rank-layout: one rank's comm-split color and key for every kind and
//! round (`Layout::splits`).

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rank_layout_downstream_bench::{RANK, layouts, one_rank};

fn rank(c: &mut Criterion) {
    let mut g = c.benchmark_group("downstream-rank");
    g.sample_size(50).measurement_time(Duration::from_secs(3));
    for (name, layout, steps) in layouts() {
        let world = layout.world_size();
        g.bench_function(BenchmarkId::new(name, world), |b| {
            b.iter(|| one_rank(&layout, RANK, steps))
        });
    }
    g.finish();
}

criterion_group!(benches, rank);
criterion_main!(benches);
