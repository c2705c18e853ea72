//! The MPI reshard executor (`rank_layout::mpi::reshard_buffers`, feature
//! `mpi`) under `mpirun` at 8 and 16 processes: a model with every kind of
//! sharding (fused QKV of stride 3, SwiGLU fc1 of stride 2, row-parallel
//! weights whose pieces are not contiguous, packed blocks, per-expert and
//! fused expert tensors, a KV cache over the stages, a distributed
//! optimizer buffer; 2-, 4- and 8-byte elements) goes collocated (both
//! layouts on every process) and disjoint (the source layout on the first
//! half, the destination on the second); every byte of every destination
//! buffer is checked against the global tensors (each element holds its
//! own global index). Then one process passes a buffer one byte short:
//! every process returns an error (it its own, the others one naming it),
//! none hangs.
//!
//! Run by `cargo test --features mpi,serde --test mpi_reshard`: this binary
//! starts itself under `mpirun` (Open MPI) for each world size and checks
//! what the job printed and how it ended, under a deadline (a hang fails
//! the test). Without `mpirun` it fails; it never skips.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

use std::process::ExitCode;
use std::time::Duration;

use rank_layout::mpi::rsmpi::collective::SystemOperation;
use rank_layout::mpi::traits::*;
use rank_layout::mpi::{LocalTensor, SimpleCommunicator, from_mpi_rank, reshard_buffers};
use rank_layout::reshard::{
    LayerRef, Locality, Model, RankPlan, Region, Reshard, Shard, Side, Tensor,
};
use rank_layout::{Config, Error, ExpertLayout, Layout, Topology};

mod mpirun;

use mpirun::{Launcher, Scenario, run_scenarios, suite_end};

/// Set in the processes mpirun starts, and the longest a job may take
/// before it counts as hung.
const MPIRUN: Launcher = Launcher {
    mode_var: "RANK_LAYOUT_MPI_RESHARD",
    deadline: Duration::from_secs(240),
};

fn model() -> Model {
    let mut t = vec![
        Tensor::new("embedding", [32, 6])
            .element_bytes(4)
            .layer(LayerRef::Ends)
            .tp(0),
    ];
    for l in 0..4u32 {
        let at = LayerRef::Layer(l);
        t.extend([
            Tensor::new(format!("l{l}.qkv"), [24, 6])
                .element_bytes(4)
                .layer(at)
                .tp_stride(0, 3),
            Tensor::new(format!("l{l}.proj"), [6, 8])
                .element_bytes(4)
                .layer(at)
                .tp(1),
            Tensor::new(format!("l{l}.fc1"), [16, 6])
                .element_bytes(8)
                .layer(at)
                .tp_stride(0, 2),
            Tensor::new(format!("l{l}.fc2"), [6, 8]).layer(at).tp(1),
            Tensor::new(format!("l{l}.norm"), [6])
                .element_bytes(8)
                .layer(at),
        ]);
        if l == 1 {
            t.push(
                Tensor::new("l1.in_proj", [20, 6])
                    .element_bytes(4)
                    .layer(at)
                    .tp_blocks(0, [8, 4, 8]),
            );
        }
        if l % 2 == 1 {
            for e in 0..4 {
                t.push(
                    Tensor::new(format!("l{l}.e{e}.fc1"), [8, 6])
                        .element_bytes(4)
                        .layer(at)
                        .expert(e)
                        .tp_stride(0, 2),
                );
            }
        }
        if l == 3 {
            t.push(
                Tensor::new("l3.experts", [4, 8, 6])
                    .element_bytes(4)
                    .layer(at)
                    .experts_dim(0)
                    .tp(1),
            );
        }
    }
    t.extend([
        Tensor::new("kv", [8, 8, 3])
            .element_bytes(4)
            .pp_dim(0)
            .tp(1),
        Tensor::new("final_norm", [6])
            .element_bytes(8)
            .layer(LayerRef::Last),
        Tensor::new("optimizer", [96]).element_bytes(8).dp_dim(0),
    ]);
    Model::new(4, 4, t).unwrap()
}

fn layout(tp: u32, pp: u32, dp: u32, ep: u32, etp: u32, offset: u32) -> Layout {
    Layout::new(
        &Config::new()
            .tp(tp)
            .pp(pp)
            .dp(dp)
            .ep(ep)
            .etp(etp)
            .rank_offset(offset)
            .expert_layout(ExpertLayout::Folded),
    )
    .unwrap()
}

/// The cases of a world of `n` processes: a name, the plan.
fn cases(n: u32) -> Vec<(String, Reshard)> {
    let (collocated, disjoint, g) = match n {
        8 => (
            (layout(2, 2, 2, 2, 1, 0), layout(4, 1, 2, 4, 2, 0)),
            (layout(2, 2, 1, 2, 1, 0), layout(2, 1, 2, 4, 1, 4)),
            (4, 2),
        ),
        _ => (
            (layout(2, 4, 2, 2, 1, 0), layout(4, 1, 4, 4, 2, 0)),
            (layout(2, 2, 2, 4, 1, 0), layout(4, 1, 2, 2, 2, 8)),
            (4, 4),
        ),
    };
    let plan = |(a, b): (Layout, Layout), g: u32| {
        let locality = Locality::new(Topology::new(g, None).unwrap());
        Reshard::new(model(), Side::new(a), Side::new(b), locality).unwrap()
    };
    vec![
        (format!("collocated on {n}"), plan(collocated, g.0)),
        (format!("disjoint on {n}"), plan(disjoint, g.1)),
    ]
}

/// The bytes of `shard` of tensor `t`: element at global row-major index
/// `i` holds `i`, little-endian, in its element size.
fn bytes_of(model: &Model, t: u32, shard: &Shard) -> Vec<u8> {
    let tensor = model.tensor(t).unwrap();
    let eb = tensor.element_bytes as usize;
    let local: Vec<u64> = shard.local_shape.to_vec();
    let mut out = vec![0xffu8; local.iter().product::<u64>() as usize * eb];
    for (region, at) in &shard.boxes {
        for (global, here) in elements(region, &tensor.shape, at, &local) {
            let v = global.to_le_bytes();
            out[here as usize * eb..(here as usize + 1) * eb].copy_from_slice(&v[..eb]);
        }
    }
    out
}

/// Every element of `region`: its row-major index in `shape`, and in the
/// local tensor of `local` shape where the region starts at `at`.
fn elements(region: &Region, shape: &[u64], at: &[u64], local: &[u64]) -> Vec<(u64, u64)> {
    let dims = region.dims();
    let lens = region.shape();
    let mut out = Vec::new();
    let mut idx = vec![0u64; dims];
    loop {
        let (mut g, mut l) = (0u64, 0u64);
        for d in 0..dims {
            g = g * shape[d] + region.lo()[d] + idx[d];
            l = l * local[d] + at[d] + idx[d];
        }
        out.push((g, l));
        let mut d = dims;
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < lens[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// Whether `result` is `Ok` on every process.
fn everywhere(world: &SimpleCommunicator, name: &str, result: Result<u64, String>) -> bool {
    let all_ok = mpirun::everywhere(world, name, &result);
    let mut checked = 0u64;
    world.all_reduce_into(&result.unwrap_or(0), &mut checked, SystemOperation::sum());
    if world.rank() == 0 && all_ok {
        println!("ok {name}: {checked} destination bytes checked");
    }
    all_ok
}

/// One process's part of a case: its plan, its source bytes (filled
/// from the global tensors) and destination bytes (0xff), with the local
/// shape and element size of each, by tensor.
struct Buffers {
    plan: RankPlan,
    sources: Vec<Option<LocalTensor<Vec<u8>>>>,
    destinations: Vec<Option<(Vec<u8>, Shard, u64)>>,
}

impl Buffers {
    fn new(plan: &Reshard, me: u32) -> Buffers {
        let model = plan.model();
        let n = model.tensors().len() as u32;
        let eb = |t: u32| u64::from(model.tensor(t).unwrap().element_bytes);
        let sources = (0..n)
            .map(|t| {
                let s = plan.source_shard(me, t).unwrap()?;
                Some(LocalTensor::new(
                    bytes_of(model, t, &s),
                    s.local_shape.to_vec(),
                    eb(t),
                ))
            })
            .collect();
        let destinations = (0..n)
            .map(|t| {
                let s = plan.destination_shard(me, t).unwrap()?;
                let len = s.local_shape.iter().product::<u64>() * eb(t);
                Some((vec![0xffu8; len as usize], s, eb(t)))
            })
            .collect();
        Buffers {
            plan: plan.plan_of(me).unwrap_or_default(),
            sources,
            destinations,
        }
    }

    /// Runs the plan; `short`: the tensor whose source is passed one byte
    /// short.
    fn exchange(
        &mut self,
        world: &SimpleCommunicator,
        short: Option<usize>,
    ) -> rank_layout::Result<u64> {
        let sources: Vec<Option<LocalTensor<&[u8]>>> = self
            .sources
            .iter()
            .enumerate()
            .map(|(t, s)| {
                s.as_ref().map(|s| {
                    let end = s.data.len() - usize::from(short == Some(t));
                    LocalTensor::new(&s.data[..end], s.shape.clone(), s.element_bytes)
                })
            })
            .collect();
        let mut destinations: Vec<Option<LocalTensor<&mut [u8]>>> = self
            .destinations
            .iter_mut()
            .map(|d| {
                d.as_mut()
                    .map(|(b, s, eb)| LocalTensor::new(&mut b[..], s.local_shape.to_vec(), *eb))
            })
            .collect();
        let done = reshard_buffers(world, &self.plan, &sources, &mut destinations)?;
        Ok(done.received_bytes)
    }
}

/// Runs one case on this process; the destination bytes it checked.
fn run(world: &SimpleCommunicator, plan: &Reshard) -> Result<u64, String> {
    let me = from_mpi_rank(world.rank()).unwrap();
    let model = plan.model();
    let mut mine = Buffers::new(plan, me);
    let received = mine.exchange(world, None).map_err(|e| e.to_string())?;
    let moved: u64 = mine.plan.recvs.iter().map(|t| t.bytes).sum();
    if received != moved {
        return Err(format!("received {received} bytes, the plan {moved}"));
    }
    let mut checked = 0u64;
    for (t, d) in mine.destinations.iter().enumerate() {
        let Some((got, shard, _)) = d else {
            continue;
        };
        let want = bytes_of(model, t as u32, shard);
        if *got != want {
            let at = got.iter().zip(&want).position(|(a, b)| a != b).unwrap();
            return Err(format!(
                "tensor {}: byte {at} is {:#x}, want {:#x}",
                model.tensor(t as u32).unwrap().name,
                got[at],
                want[at]
            ));
        }
        checked += got.len() as u64;
    }
    Ok(checked)
}

/// Process 3 passes its first source buffer one byte short: it returns
/// the error naming the tensor, every other process one naming process 3,
/// and nothing is sent (the destinations stay 0xff).
fn short_buffer(world: &SimpleCommunicator, plan: &Reshard) -> Result<u64, String> {
    let me = from_mpi_rank(world.rank()).unwrap();
    let mut mine = Buffers::new(plan, me);
    let first = mine.sources.iter().position(Option::is_some);
    let result = mine.exchange(world, first.filter(|_| me == 3));
    if mine
        .destinations
        .iter()
        .flatten()
        .any(|(b, _, _)| b.iter().any(|x| *x != 0xff))
    {
        return Err("a destination was written".to_string());
    }
    match result {
        Ok(_) => Err("the short buffer was taken".to_string()),
        Err(Error::BadTensor { tensor, problem }) if me == 3 => {
            if tensor == first.unwrap().to_string() && problem.starts_with("the source buffer has ")
            {
                Ok(0)
            } else {
                Err(format!("process 3's error: tensor {tensor}: {problem}"))
            }
        }
        Err(e @ Error::ReshardBuffers { process: 3, .. }) if me != 3 => {
            let text = e.to_string();
            let want =
                "process 3: its buffers do not fit its plan (it returned why); nothing was sent";
            if text == want { Ok(0) } else { Err(text) }
        }
        Err(e) => Err(format!("unexpected error: {e}")),
    }
}

fn suite(world: &SimpleCommunicator) -> ExitCode {
    let n = world.size() as u32;
    let mut outcomes = Vec::new();
    let all = cases(n);
    for (name, plan) in &all {
        outcomes.push(everywhere(world, name, run(world, plan)));
    }
    let name = format!("a short buffer on process 3 of {n}");
    outcomes.push(everywhere(world, &name, short_buffer(world, &all[0].1)));
    suite_end(world, &outcomes)
}

/// One scenario per world size: the suite's job, which must pass every
/// case.
fn scenarios() -> Vec<Scenario> {
    [8u32, 16]
        .into_iter()
        .map(|n| -> Scenario {
            (
                format!("reshard_buffers on {n} processes"),
                Box::new(move || {
                    let j = MPIRUN.job(n, "suite", &[], &[])?;
                    let want = format!("suite: {} passed, 0 failed", cases(n).len() + 1);
                    if j.code == Some(0) && j.stdout.contains(&want) {
                        print!("{}", j.stdout);
                        Ok(())
                    } else {
                        Err(format!("exit {:?}\n{}\n{}", j.code, j.stdout, j.stderr))
                    }
                }),
            )
        })
        .collect()
}

fn main() -> ExitCode {
    match std::env::var(MPIRUN.mode_var).as_deref() {
        Ok("suite") => {
            let universe = rank_layout::mpi::initialize().expect("MPI initializes");
            let code = suite(&universe.world());
            drop(universe);
            code
        }
        _ => run_scenarios("mpi_reshard", scenarios()),
    }
}
