//! Reshard plans (`rank_layout::reshard`) of an 80-layer GPT (Llama-3
//! 70B's shape from Megatron-LM's arguments: hidden 8192, 64 heads, 8
//! query groups, ffn 28672, vocabulary 128256, SwiGLU, RMSNorm, rope,
//! untied; 483 tensors), refit from training (tp 8, pp 8) to inference
//! (tp 4, pp 1) on the same ranks (collocated, 8 GPUs per node, NVL72
//! domains of 9 nodes), at 1,024, 8,192 and 65,536 ranks:
//!
//! - `reshard/rank/<W>`: one process's plan (`Reshard::plan_of`: its
//!   sends, receives and local copies), for a process in the middle of
//!   the world;
//! - `reshard/new/<W>`: making the plan (`Reshard::new`: both sides'
//!   splits of every tensor);
//! - `reshard/whole/1024`: the whole plan, every transfer enumerated
//!   (`Reshard::transfers`) and its cost added up.
//!
//! Each measured closure asserts what it computed (the transfer counts
//! found once before timing).
// Benchmark code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]
// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use rank_layout::megatron::MegatronArgs;
use rank_layout::reshard::{CostTally, GptModel, Locality, Model, Reshard, Side};
use rank_layout::{Config, Layout, Topology};

const ARGS: &str = "--num-layers 80 --hidden-size 8192 --num-attention-heads 64 \
    --group-query-attention --num-query-groups 8 --ffn-hidden-size 28672 --vocab-size 128256 \
    --swiglu --normalization RMSNorm --position-embedding-type rope --disable-bias-linear \
    --untie-embeddings-and-output-weights";

fn model() -> Model {
    let args = MegatronArgs::parse_command_line(ARGS).unwrap();
    GptModel::from_megatron_args(&args)
        .unwrap()
        .model(&[8, 4])
        .unwrap()
}

fn plan(world: u32) -> Reshard {
    let train = Layout::new(&Config::new().tp(8).pp(8).world_size(world)).unwrap();
    let infer = Layout::new(&Config::new().tp(4).world_size(world)).unwrap();
    let locality = Locality::new(Topology::new(8, Some(9)).unwrap());
    Reshard::new(model(), Side::new(train), Side::new(infer), locality).unwrap()
}

fn reshard(c: &mut Criterion) {
    let mut g = c.benchmark_group("reshard");
    g.sample_size(10);
    assert_eq!(model().tensors().len(), 483);
    for world in [1024u32, 8192, 65536] {
        g.bench_function(format!("new/{world}"), |b| {
            b.iter(|| assert_eq!(plan(black_box(world)).model().tensors().len(), 483))
        });
        let p = plan(world);
        let x = world / 2 + 3;
        let once = p.plan_of(x).unwrap();
        let counts = (once.sends.len(), once.recvs.len(), once.copies.len());
        assert!(counts.1 + counts.2 > 0);
        eprintln!(
            "reshard/rank/{world}: process {x} sends {}, receives {}, copies {}",
            counts.0, counts.1, counts.2
        );
        g.bench_function(format!("rank/{world}"), |b| {
            b.iter(|| {
                let r = p.plan_of(black_box(x)).unwrap();
                assert_eq!((r.sends.len(), r.recvs.len(), r.copies.len()), counts);
            })
        });
    }
    let p = plan(1024);
    let start = Instant::now();
    let total = p.transfers().count();
    eprintln!(
        "reshard/whole/1024: {total} transfers ({:?} once), cost {:?}",
        start.elapsed(),
        p.cost().unwrap()
    );
    g.bench_function("whole/1024", |b| {
        b.iter(|| {
            let mut tally = CostTally::new();
            let mut n = 0;
            for t in p.transfers() {
                tally.add(&t.unwrap(), p.locality());
                n += 1;
            }
            assert_eq!(n, total);
            tally.finish()
        })
    });
    g.finish();
}

criterion_group!(benches, reshard);
criterion_main!(benches);
