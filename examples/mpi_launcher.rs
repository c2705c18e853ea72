//! A launcher on every rank: build all of this rank's communicators with
//! one call, check each one, and report.
//!
//! ```sh
//! cargo build --release --features mpi,serde --example mpi_launcher
//! mpirun -n 32 target/release/examples/mpi_launcher --tp 2 --cp 2 --ep 2 --pp 2 --world-size 32 --verbose
//! ```
//!
//! Layout flags are the command line's (`--tp`, `--cp`, `--ep`, `--dp`,
//! `--pp`, `--world-size`, `--order`, `--rank-offset`, `--encoder-tp`,
//! `--encoder-pp`, `--expert-layout`, `--etp`, `--hierarchical-cp S0,S1`,
//! `--dist-opt-instances`, `--config FILE`); `--verbose` prints one line per
//! rank. Every communicator is checked: an all-reduce of the members' world
//! ranks must equal their sum, the rank in the communicator must be the
//! key, and the pipeline neighbours must be the layout's. Rank 0 prints a
//! one-line summary. On a mismatch, or a layout that does not fit the
//! processes, every rank exits non-zero.
//!
//! With `RANK_LAYOUT_FAULT_RANK=R`, rank R panics after its communicators
//! are built; the panic hook aborts the whole job (MPI_Abort), so it ends
//! with a non-zero status instead of hanging in the next collective.
// Example code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

use std::process::ExitCode;

use rank_layout::mpi::SimpleCommunicator;
use rank_layout::mpi::prelude::*;
use rank_layout::mpi::rsmpi::collective::SystemOperation;
use rank_layout::*;

/// The exit status of a bad layout or a layout that does not fit.
const BAD_INPUT: u8 = 2;
/// The exit status of a communicator that is not what the layout says.
const MISMATCH: u8 = 1;

fn main() -> ExitCode {
    let Some(universe) = rank_layout::mpi::initialize() else {
        eprintln!("mpi_launcher: MPI could not be initialized");
        return ExitCode::FAILURE;
    };
    abort_on_panic();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = run(&universe.world(), &args);
    // Communicators are dropped inside `run`, before `universe` finalizes MPI.
    ExitCode::from(code)
}

/// A panic on one rank would leave the others waiting in a collective:
/// abort the whole job instead.
pub fn abort_on_panic() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        if rank_layout::mpi::rsmpi::environment::is_initialized()
            && !rank_layout::mpi::rsmpi::environment::is_finalized()
        {
            SimpleCommunicator::world().abort(101);
        }
    }));
}

/// The layout flags as a configuration: `--key value` pairs become the
/// JSON keys of `Config` (`--world-size` is `world_size`), over the file of
/// `--config`. Returns the configuration and whether `--verbose` was given.
pub fn parse(args: &[String]) -> Result<(Config, bool), String> {
    let mut object = serde_json::Map::new();
    let mut verbose = false;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--verbose" {
            verbose = true;
            continue;
        }
        let key = flag
            .strip_prefix("--")
            .ok_or_else(|| format!("unexpected argument {flag:?}"))?
            .replace('-', "_");
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        if key == "config" {
            let text = std::fs::read_to_string(value).map_err(|e| format!("{value}: {e}"))?;
            let file: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(&text).map_err(|e| format!("{value}: {e}"))?;
            for (k, v) in file {
                object.entry(k).or_insert(v);
            }
            continue;
        }
        let json = if key == "hierarchical_cp" {
            let levels: Result<Vec<u64>, _> = value.split(',').map(str::parse).collect();
            serde_json::Value::from(levels.map_err(|_| format!("{flag} {value:?}: sizes"))?)
        } else if let Ok(n) = value.parse::<u64>() {
            n.into()
        } else {
            value.as_str().into()
        };
        object.insert(key, json);
    }
    let config =
        serde_json::from_value(serde_json::Value::Object(object)).map_err(|e| e.to_string())?;
    Ok((config, verbose))
}

/// Builds and checks every communicator of this rank; returns the exit
/// status, the same on every rank (0: every communicator checked).
pub fn run(world: &SimpleCommunicator, args: &[String]) -> u8 {
    let me = world.rank();
    let say = |what: &str| {
        if me == 0 {
            eprintln!("mpi_launcher: {what}");
        }
    };
    // Input errors are the same on every rank: each returns before any
    // collective call, so none is left waiting.
    let (config, verbose) = match parse(args) {
        Ok(parsed) => parsed,
        Err(e) => {
            say(&format!("error: {e}"));
            return BAD_INPUT;
        }
    };
    let layout = match Layout::new(&config) {
        Ok(layout) => layout,
        Err(e) => {
            say(&format!("error: {e}"));
            return BAD_INPUT;
        }
    };
    let comms = match layout.communicators(world) {
        Ok(comms) => comms,
        Err(e) => {
            say(&format!("error: {e}"));
            return BAD_INPUT;
        }
    };
    let mut problems: Vec<String> = Vec::new();
    let mut built = 0u64;
    for (kind, g) in comms.iter() {
        built += 1;
        let members = g.world_ranks();
        if usize::try_from(g.comm.size()).ok() != Some(members.len()) {
            problems.push(format!(
                "{kind}: {} processes for {members:?}",
                g.comm.size()
            ));
        }
        if i64::from(g.comm.rank()) != i64::from(g.key) {
            problems.push(format!(
                "{kind}: rank {} in its communicator, key {}",
                g.comm.rank(),
                g.key
            ));
        }
        let mine = u64::from(comms.rank().unwrap_or(0));
        let mut sum = 0u64;
        g.comm
            .all_reduce_into(&mine, &mut sum, SystemOperation::sum());
        let want: u64 = members.iter().map(|r| u64::from(*r)).sum();
        if sum != want {
            problems.push(format!(
                "{kind}: all-reduce {sum}, members {members:?} sum to {want}"
            ));
        }
    }
    if let Some(rank) = comms.rank() {
        let neighbours = |peers: rank_layout::Result<Vec<rank_layout::mpi::Peer<'_>>>| {
            let mut ranks: Vec<u32> = peers
                .map(|p| p.iter().map(|p| p.world_rank).collect())
                .unwrap_or_default();
            ranks.sort_unstable();
            ranks
        };
        let next = neighbours(comms.pipeline_next());
        let prev = neighbours(comms.pipeline_prev());
        let sorted = |r: rank_layout::Result<Vec<u32>>| {
            let mut v = r.unwrap_or_default();
            v.sort_unstable();
            v
        };
        if next != sorted(layout.pipeline_next(rank)) || prev != sorted(layout.pipeline_prev(rank))
        {
            problems.push(format!("pipeline neighbours next {next:?} prev {prev:?}"));
        }
        if verbose {
            let place = layout.placement(rank).map(|p| {
                format!(
                    "{} tp={} cp={} dp={} pp={} ep={} etp={} edp={}",
                    p.part,
                    p.coord.tp,
                    p.coord.cp,
                    p.coord.dp,
                    p.coord.pp,
                    p.expert.ep,
                    p.expert.etp,
                    p.expert.edp
                )
            });
            println!(
                "rank {rank}: {} | {built} communicators | next {next:?} prev {prev:?}",
                place.unwrap_or_default()
            );
        }
    } else if verbose {
        println!("process {me}: outside the layout, no communicators");
    }
    if let Ok(fault) = std::env::var("RANK_LAYOUT_FAULT_RANK") {
        if fault.parse::<i32>().ok() == Some(me) {
            panic!("injected fault on rank {me} (RANK_LAYOUT_FAULT_RANK)");
        }
    }
    for p in &problems {
        eprintln!("mpi_launcher: rank {me}: MISMATCH {p}");
    }
    // Every rank learns whether any rank failed, and exits alike.
    let mine = [
        problems.len() as u64,
        built,
        u64::from(comms.rank().is_some()),
    ];
    let mut total = [0u64; 3];
    world.all_reduce_into(&mine[..], &mut total[..], SystemOperation::sum());
    let [failures, communicators, inside] = total;
    if me == 0 {
        println!(
            "mpi_launcher: {} processes ({inside} in the layout of {} ranks, {} kinds): {communicators} communicators checked, {failures} mismatches",
            world.size(),
            layout.world_size(),
            layout.kinds().len()
        );
    }
    if failures == 0 { 0 } else { MISMATCH }
}
