//! Real communicators (feature `mpi`): under `mpirun -n 16`, every kind of
//! several layouts is split with `MPI_Comm_split`, and each communicator's
//! members, gathered over MPI, must be the group's ranks in group order.
//!
//! Run by `cargo test --features mpi --test mpi`: this binary starts itself
//! under `mpirun` (Open MPI) and reports the child's result. Without
//! `mpirun` it fails; it never skips.

use std::process::{Command, ExitCode};

use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;
use rank_layout::{Config, ExpertLayout, Layout};

const PROCESSES: i32 = 16;
const CHILD: &str = "RANK_LAYOUT_MPI_CHILD";

fn layouts() -> Vec<(&'static str, Config)> {
    vec![
        (
            "nested tp2 cp2 ep2 dp2 pp2",
            Config {
                tp: 2,
                cp: 2,
                ep: 2,
                dp: Some(2),
                pp: 2,
                ..Config::default()
            },
        ),
        (
            "nested order pp-dp-tp-cp, offset 2",
            Config {
                tp: 2,
                cp: 3,
                pp: 2,
                dp: Some(1),
                order: "pp-dp-tp-cp".parse().unwrap(),
                rank_offset: 2,
                ..Config::default()
            },
        ),
        (
            "folded etp1 ep4 dist-opt 2, hcp [2]",
            Config {
                tp: 2,
                cp: 2,
                dp: Some(4),
                ep: 4,
                etp: Some(1),
                expert_layout: ExpertLayout::Folded,
                dist_opt_instances: Some(2),
                hierarchical_cp: Some(vec![2]),
                ..Config::default()
            },
        ),
        (
            "encoder+decoder fan-out tp4 etp2 cp2",
            Config {
                tp: 4,
                cp: 2,
                encoder_tp: Some(2),
                encoder_pp: Some(1),
                ..Config::default()
            },
        ),
        (
            "encoder+decoder fan-in tp1 etp3 dp2 pp2",
            Config {
                tp: 1,
                dp: Some(2),
                pp: 2,
                encoder_tp: Some(3),
                encoder_pp: Some(1),
                ..Config::default()
            },
        ),
    ]
}

/// Gathers every member's world rank and compares with the group.
fn check(
    world: &SimpleCommunicator,
    comm: &SimpleCommunicator,
    want: &[u32],
    key: u32,
    what: &str,
) -> Result<(), String> {
    let size = usize::try_from(comm.size()).unwrap_or(0);
    if size != want.len() {
        return Err(format!(
            "{what}: communicator of {size} ranks, group {want:?}"
        ));
    }
    if comm.rank() as u32 != key {
        return Err(format!(
            "{what}: rank {} in communicator, key {key}",
            comm.rank()
        ));
    }
    let mut got = vec![0i32; size];
    comm.all_gather_into(&world.rank(), &mut got[..]);
    let got: Vec<u32> = got.into_iter().map(|r| r as u32).collect();
    if got != want {
        return Err(format!("{what}: members {got:?}, group {want:?}"));
    }
    Ok(())
}

fn child() -> ExitCode {
    let universe = mpi::initialize().expect("MPI initializes");
    let world = universe.world();
    // A panic on one rank would hang the others in a collective: abort all.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        SimpleCommunicator::world().abort(101);
    }));
    let me = world.rank() as u32;
    let (mut passed, mut failed) = (0u32, 0u32);
    for (name, config) in layouts() {
        let layout = Layout::new(&config).expect("valid layout");
        for kind in layout.kinds() {
            let what = format!("{name}, kind {kind}, rank {me}");
            let comms = layout.split_rounds(&world, kind).expect("split");
            let mut result = Ok(());
            if layout.comm_split_rounds(kind).unwrap() == 1 {
                let single = layout.split(&world, kind).expect("split");
                if single.is_some() == comms.is_empty() {
                    result = Err(format!("{what}: split and split_rounds disagree"));
                }
            }
            let want: Vec<(u32, u32)> = match layout.placement(me) {
                Ok(_) => layout
                    .memberships(me, kind)
                    .unwrap()
                    .iter()
                    .map(|m| (m.index, m.key))
                    .collect(),
                Err(_) => Vec::new(),
            };
            let mut got: Vec<(u32, u32)> = comms.iter().map(|g| (g.index, g.key)).collect();
            got.sort();
            let mut sorted = want.clone();
            sorted.sort();
            if result.is_ok() && got != sorted {
                result = Err(format!("{what}: joined {got:?}, memberships {sorted:?}"));
            }
            for g in &comms {
                if result.is_ok() {
                    let members = layout
                        .groups(kind)
                        .unwrap()
                        .nth(g.index as usize)
                        .unwrap()
                        .to_vec();
                    result = check(&world, &g.comm, &members, g.key, &what);
                }
            }
            // Count on rank 0 once everyone is done with this kind.
            let ok = i32::from(result.is_ok());
            let mut all = vec![0i32; world.size() as usize];
            world.all_gather_into(&ok, &mut all[..]);
            if let Err(e) = &result {
                eprintln!("FAILED {e}");
            }
            if all.iter().all(|v| *v == 1) {
                passed += 1;
            } else {
                failed += 1;
            }
        }
    }
    if me == 0 {
        println!("mpi: {passed} passed, {failed} failed");
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn parent() -> ExitCode {
    let exe = std::env::current_exe().expect("own path");
    let out = Command::new("mpirun")
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "--timeout",
            "600",
            "-n",
        ])
        .arg(PROCESSES.to_string())
        .arg(&exe)
        .env(CHILD, "1")
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            eprintln!(
                "cannot run mpirun ({e}): install Open MPI (apt-get install openmpi-bin libopenmpi-dev)"
            );
            return ExitCode::FAILURE;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    eprint!("{stderr}");
    let summary = stdout.lines().find(|l| l.starts_with("mpi: "));
    match summary {
        Some(line) if out.status.success() && line.ends_with(" 0 failed") => ExitCode::SUCCESS,
        _ => {
            eprintln!("mpirun exited with {}", out.status);
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    if std::env::var_os(CHILD).is_some() {
        child()
    } else {
        parent()
    }
}
