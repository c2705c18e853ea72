//! Real communicators (feature `mpi`), under `mpirun` at 8, 16 and 32
//! processes: every communicator `Layout::communicators` builds must be the
//! group `memberships` names (members gathered over MPI, in order; rank =
//! key), pipeline neighbours must be the layout's, processes outside a
//! smaller layout get none; a re-layout's split plan, run over the
//! survivors' communicator (exactly the survivors, or more processes
//! after them) or over the old world, builds exactly its new
//! and shrunk groups (a process alone gets `MPI_COMM_SELF`), and with the
//! old communicators of the kept groups every group of the new layout
//! all-reduces right; a process owns its communicators (`take`,
//! `into_iter`), and kinds of the same member lists share a split; the
//! launcher example checks its communicators,
//! refuses a layout larger than the world on every rank, and a rank that
//! panics ends the whole job with a non-zero status instead of a hang.
//!
//! Run by `cargo test --features mpi,serde --test mpi`: this binary starts
//! itself under `mpirun` (Open MPI) for each scenario and checks what the
//! job printed and how it ended. Every job runs under a deadline of its
//! own, so a hang fails the test. Without `mpirun` it fails; it never skips.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

use std::process::ExitCode;
use std::time::Duration;

use rank_layout::modules::{BridgeKind, ColocatedMode, Direction, Spans};
use rank_layout::mpi::prelude::*;
use rank_layout::mpi::rsmpi::collective::SystemOperation;
use rank_layout::mpi::rsmpi::topology::Color;
use rank_layout::mpi::{
    Communicator, GroupComm, Numbering, RelayoutCommunicators, SimpleCommunicator,
};
use rank_layout::relayout::{Change, Failure, Policy, Relayout, RelayoutOptions, relayout};
use rank_layout::*;

#[allow(dead_code)]
#[path = "../examples/mpi_launcher.rs"]
mod launcher;
mod mpirun;

use mpirun::{Launcher, Scenario, everywhere, run_scenarios, suite_end};

/// Which child a process of a job is (`suite` or `launcher`), and the
/// longest a job may take before it counts as hung.
const MPIRUN: Launcher = Launcher {
    mode_var: "RANK_LAYOUT_MPI_MODE",
    deadline: Duration::from_secs(300),
};

fn folded(c: Config) -> Config {
    c.expert_layout(ExpertLayout::Folded)
}

/// The membership suite for a job of `processes` processes: a dense layout
/// with every axis > 1 (from 16 processes), folded with distributed-optimizer
/// instances and hierarchical cp, encoder + decoder fan-out and fan-in, and
/// layouts smaller than the world (the processes past them get nothing).
fn layouts(processes: u32) -> Vec<(&'static str, Config)> {
    let mut out = vec![
        (
            "encoder+decoder fan-out tp2 etp1 cp2",
            Config::new()
                .tp(2)
                .cp(2)
                .encoder_tp(Some(1))
                .encoder_pp(Some(1))
                .expert_layout(ExpertLayout::Nested),
        ),
        (
            "encoder+decoder fan-in tp1 etp3 pp2",
            Config::new()
                .tp(1)
                .pp(2)
                .encoder_tp(Some(3))
                .encoder_pp(Some(1))
                .expert_layout(ExpertLayout::Nested),
        ),
        (
            "half the world, tp2, offset 1",
            Config::new()
                .tp(2)
                .world_size(Some(processes / 2))
                .rank_offset(1)
                .expert_layout(ExpertLayout::Nested),
        ),
    ];
    match processes {
        8 => out.extend([
            (
                "dense tp2 cp2 pp2, order pp-tp-cp-dp",
                Config::new()
                    .tp(2)
                    .cp(2)
                    .pp(2)
                    .world_size(Some(8))
                    .order("pp-tp-cp-dp".parse().unwrap())
                    .expert_layout(ExpertLayout::Nested),
            ),
            (
                "folded cp2 dp4 ep2 etp1, dist-opt 2, hcp [2]",
                folded(
                    Config::new()
                        .cp(2)
                        .dp(Some(4))
                        .ep(2)
                        .etp(Some(1))
                        .dist_opt_instances(2)
                        .hierarchical_cp(vec![2]),
                ),
            ),
        ]),
        16 => out.extend([
            (
                "dense tp2 cp2 ep2 pp2 dp2",
                Config::new()
                    .tp(2)
                    .cp(2)
                    .ep(2)
                    .pp(2)
                    .world_size(Some(16))
                    .expert_layout(ExpertLayout::Nested),
            ),
            (
                "folded tp2 cp2 dp4 ep4 etp1, dist-opt 2, hcp [2]",
                folded(
                    Config::new()
                        .tp(2)
                        .cp(2)
                        .dp(Some(4))
                        .ep(4)
                        .etp(Some(1))
                        .dist_opt_instances(2)
                        .hierarchical_cp(vec![2]),
                ),
            ),
            (
                "encoder+decoder fan-in tp1 etp3 dp2 pp2",
                Config::new()
                    .tp(1)
                    .dp(Some(2))
                    .pp(2)
                    .encoder_tp(Some(3))
                    .encoder_pp(Some(1))
                    .expert_layout(ExpertLayout::Nested),
            ),
        ]),
        _ => out.extend([
            (
                "dense tp2 cp2 ep2 pp2 dp4",
                Config::new()
                    .tp(2)
                    .cp(2)
                    .ep(2)
                    .pp(2)
                    .world_size(Some(32))
                    .expert_layout(ExpertLayout::Nested),
            ),
            (
                "folded tp2 cp2 dp8 ep4 etp1, dist-opt 2, hcp [2]",
                folded(
                    Config::new()
                        .tp(2)
                        .cp(2)
                        .dp(Some(8))
                        .ep(4)
                        .etp(Some(1))
                        .dist_opt_instances(2)
                        .hierarchical_cp(vec![2]),
                ),
            ),
            (
                "encoder+decoder fan-out tp4 etp2 cp2 dp2",
                Config::new()
                    .tp(4)
                    .cp(2)
                    .dp(Some(2))
                    .encoder_tp(Some(2))
                    .encoder_pp(Some(1))
                    .expert_layout(ExpertLayout::Nested),
            ),
            (
                "encoder+decoder fan-in tp2 etp5 pp2 dp2, order dp-tp-pp",
                Config::new()
                    .tp(2)
                    .dp(Some(2))
                    .pp(2)
                    .encoder_tp(Some(5))
                    .encoder_pp(Some(1))
                    .order("dp-tp-pp".parse().unwrap())
                    .expert_layout(ExpertLayout::Nested),
            ),
        ]),
    }
    out
}

/// Meshes for a job of `processes` processes: torchtitan's dims with their
/// expert view and names, a DeviceMesh-order mesh with a view and a
/// flatten smaller than the world, and a mesh with a rank map.
fn meshes(processes: u32) -> Vec<(&'static str, Mesh)> {
    let reversed: Vec<u32> = (0..processes / 2).rev().collect();
    vec![
        (
            "torchtitan dp_replicate 2, tp 2, ep 2",
            rank_layout::torchtitan_mesh(2, None, 1, 2, 1, 2, processes).unwrap(),
        ),
        (
            "device mesh (2, 2, n/8) at offset 1, a view and a flatten",
            MeshSpec::parse_device_mesh(&format!("pp=2,dp={},tp=2", processes / 8))
                .unwrap()
                .rank_offset(1)
                .view(&format!("expert:pp,ep={},etp=1", processes / 4))
                .unwrap()
                .flatten("dp_tp=dp,tp")
                .unwrap()
                .build()
                .unwrap(),
        ),
        (
            "rank map reversed, half the world",
            Mesh::new([("a", 2), ("b", processes / 4)])
                .unwrap()
                .with_rank_map(reversed)
                .unwrap(),
        ),
    ]
}

/// Every dim set of `mesh`: each subset of its dims, of each view's, and
/// its flattens.
fn dim_sets(mesh: &Mesh) -> Vec<String> {
    let mut out = Vec::new();
    let mut add = |prefix: &str, dims: Vec<String>| {
        for bits in 1u32..(1 << dims.len()) {
            let chosen: Vec<&str> = dims
                .iter()
                .enumerate()
                .filter(|(i, _)| bits & (1 << i) != 0)
                .map(|(_, d)| d.as_str())
                .collect();
            out.push(format!("{prefix}{}", chosen.join("-")));
        }
    };
    add("", mesh.dims().map(|(n, _)| n.to_owned()).collect());
    for view in mesh.views() {
        let dims = mesh
            .view_dims(view)
            .unwrap()
            .map(|(n, _)| n.to_owned())
            .collect();
        add(&format!("{view}:"), dims);
    }
    out.extend(mesh.flattens().map(|(n, _)| n.to_owned()));
    out
}

/// Checks this process's communicator of every dim set of `mesh`.
fn check_mesh(world: &SimpleCommunicator, mesh: &Mesh) -> Result<(), String> {
    let me = world.rank() as u32;
    let sets = dim_sets(mesh);
    let specs: Vec<&str> = sets.iter().map(String::as_str).collect();
    let comms = mesh
        .communicators(world, &specs)
        .map_err(|e| e.to_string())?;
    let inside = me >= mesh.rank_offset() && u64::from(me) < mesh.rank_end();
    for spec in &specs {
        let got = comms.get(spec).map_err(|e| e.to_string())?;
        match (got, inside) {
            (None, false) => {}
            (Some(g), true) => {
                let want = mesh.split(me, spec).map_err(|e| e.to_string())?;
                let members = mesh
                    .groups(spec)
                    .unwrap()
                    .nth(want.color as usize)
                    .unwrap()
                    .to_vec();
                if (g.color, g.key, g.world_ranks()) != (want.color, want.key, members.clone()) {
                    return Err(format!(
                        "{spec}: built {:?}",
                        (g.color, g.key, g.world_ranks())
                    ));
                }
                let mut gathered = vec![0i32; members.len()];
                g.comm.all_gather_into(&world.rank(), &mut gathered[..]);
                let gathered: Vec<u32> = gathered.into_iter().map(|r| r as u32).collect();
                if gathered != members || g.comm.rank() as u32 != g.key {
                    return Err(format!("{spec}: gathered {gathered:?}, group {members:?}"));
                }
            }
            (got, _) => return Err(format!("{spec}: inside {inside}, built {got:?}")),
        }
    }
    Ok(())
}

/// Multi-module layouts of `processes` ranks at most: separate spans with
/// fan-in, destination cp and source gtp and cp; colocated modules with a
/// gather plan and with the leader plan.
fn modules(processes: u32) -> Vec<(&'static str, Modules)> {
    let m = |text: &str| MeshSpec::parse(text).unwrap().build().unwrap();
    let mut out = Vec::new();
    if processes >= 16 {
        out.push((
            "modules: enc tp2 dp4 -> llm tp2 cp2 dp2 (fan-in 2, dst cp)",
            Modules::new(
                [("enc", m("tp=2,dp=4")), ("llm", m("tp=2,cp=2,dp=2"))],
                Spans::Consecutive,
            )
            .unwrap()
            .edge("enc", "llm")
            .unwrap(),
        ));
        out.push((
            "modules: colocated tp2 dp8 -> tp4 dp4 (gather plan)",
            Modules::new(
                [("a", m("tp=2,dp=8")), ("b", m("tp=4,dp=4"))],
                Spans::Colocated,
            )
            .unwrap()
            .edge("a", "b")
            .unwrap(),
        ));
        out.push((
            "modules: colocated tp2 dp8 -> dp4 tp4 (lanes do not line up: leader plan)",
            Modules::new(
                [("a", m("tp=2,dp=8")), ("b", m("dp=4,tp=4"))],
                Spans::Colocated,
            )
            .unwrap()
            .edge("a", "b")
            .unwrap(),
        ));
    }
    if processes >= 32 {
        out.push((
            "modules: vision gtp2 cp2 dp2 + audio dp8 -> llm tp2 cp2 dp2 pp2",
            Modules::new(
                [
                    ("vision", m("gtp=2,cp=2,dp=2")),
                    ("audio", m("dp=8")),
                    ("llm", m("tp=2,cp=2,dp=2,pp=2")),
                ],
                Spans::Consecutive,
            )
            .unwrap()
            .edges_from([("vision", "llm"), ("audio", "llm")])
            .unwrap(),
        ));
    }
    out
}

/// The test's own data lane of `rank` in `mesh`: its gtp and dp
/// coordinates, the first listed fastest.
fn lane_of(mesh: &Mesh, rank: u32) -> u32 {
    let c = mesh.placement(rank).unwrap();
    let (mut lane, mut weight) = (0, 1);
    for (name, size) in mesh.dims() {
        if name == "gtp" || name == "dp" {
            lane += c.get(name).unwrap() * weight;
            weight *= size;
        }
    }
    lane
}

/// The members of `comm`, gathered over it.
fn gathered(world: &SimpleCommunicator, comm: &SimpleCommunicator) -> Vec<u32> {
    let mut out = vec![0i32; comm.size() as usize];
    comm.all_gather_into(&world.rank(), &mut out[..]);
    out.into_iter().map(|r| r as u32).collect()
}

/// Every module and bridge communicator against the plan, then a tensor
/// along every edge: each destination rank must receive exactly the source
/// lanes of its lane's block.
fn check_modules(world: &SimpleCommunicator, modules: &Modules) -> Result<(), String> {
    let me = world.rank() as u32;
    let dim_sets = ["tp", "cp", "dp", "pp", "tp-cp"];
    let comms = modules
        .communicators(world, &dim_sets)
        .map_err(|e| e.to_string())?;
    let inside = u64::from(me) < modules.rank_end();
    if comms.rank().is_some() != inside {
        return Err(format!("rank {:?}", comms.rank()));
    }
    let names: Vec<String> = modules.names().map(str::to_owned).collect();
    for name in &names {
        let mesh = modules.module(name).unwrap();
        let mine = me >= mesh.rank_offset() && u64::from(me) < mesh.rank_end();
        for dims in dim_sets {
            let got = comms.module(name, dims);
            if !mine {
                if got.is_some() && !modules.is_colocated() {
                    return Err(format!("{name} {dims}: built outside the module"));
                }
                continue;
            }
            let got = got.ok_or_else(|| format!("{name} {dims}: not built"))?;
            // The ranks of the module agreeing with me off the dim set.
            let c = mesh.placement(me).unwrap();
            let want: Vec<u32> = (mesh.rank_offset()..mesh.rank_end() as u32)
                .filter(|&r| {
                    let o = mesh.placement(r).unwrap();
                    c.iter()
                        .all(|(d, v)| dims.split('-').any(|x| x == d) || o.get(d) == Some(v))
                })
                .collect();
            let members = gathered(world, &got.comm);
            if members != want || got.comm.rank() as u32 != got.split.key {
                return Err(format!("{name} {dims}: members {members:?}, want {want:?}"));
            }
        }
    }
    for (s, d) in modules
        .edges()
        .map(|(s, d)| (s.to_owned(), d.to_owned()))
        .collect::<Vec<_>>()
    {
        let plan = modules.bridge(&s, &d).unwrap();
        for kind in modules.bridge_kinds(&s, &d).unwrap() {
            let lists = plan
                .groups(kind)
                .ok_or_else(|| format!("{s}->{d}: no {kind} groups in the plan"))?
                .to_vecs();
            let want = lists.into_iter().find(|g| g.contains(&me));
            let got = comms.bridge(&s, &d, kind).map(|g| gathered(world, &g.comm));
            if got != want {
                return Err(format!("{s}->{d} {kind}: built {got:?}, plan {want:?}"));
            }
        }
        // Along the edge.
        let (src, dst) = (modules.module(&s).unwrap(), modules.module(&d).unwrap());
        let in_dst = me >= dst.rank_offset() && u64::from(me) < dst.rank_end();
        let k = plan.scale;
        let expected = |j: u32| -> Vec<i32> {
            match plan.direction {
                Direction::FanIn => (j * k..j * k + k).map(|l| l as i32).collect(),
                Direction::FanOut => vec![(j / k) as i32],
                _ => vec![j as i32],
            }
        };
        if !inside {
            continue;
        }
        let collective = plan
            .colocated
            .as_ref()
            .is_some_and(|c| c.mode == ColocatedMode::Collective);
        if collective {
            if plan.direction == Direction::Equal {
                continue;
            }
            let gather = comms
                .bridge(&s, &d, BridgeKind::Gather)
                .ok_or_else(|| format!("{s}->{d}: no gather group"))?;
            let (mine, want) = if plan.direction == Direction::FanIn {
                (lane_of(src, me), expected(lane_of(dst, me)))
            } else {
                let ls = lane_of(src, me);
                (
                    lane_of(dst, me),
                    (ls * k..ls * k + k).map(|l| l as i32).collect(),
                )
            };
            let mut got = vec![0i32; gather.comm.size() as usize];
            gather.comm.all_gather_into(&(mine as i32), &mut got[..]);
            if got != want {
                return Err(format!("{s}->{d}: gathered lanes {got:?}, want {want:?}"));
            }
            continue;
        }
        let role = modules.role(me, &s, &d).unwrap();
        for &to in &role.sends_to {
            world
                .process_at_rank(to as i32)
                .send(&(lane_of(src, me) as i32));
        }
        let mut received: Vec<i32> = Vec::new();
        for &from in &role.receives_from {
            let (v, _) = world.process_at_rank(from as i32).receive::<i32>();
            received.push(v);
        }
        if in_dst && dst.placement(me).unwrap().get("pp").unwrap_or(0) == 0 {
            let bcast = comms
                .bridge(&s, &d, BridgeKind::DstBroadcast)
                .ok_or_else(|| format!("{s}->{d}: no broadcast group"))?;
            let want = expected(lane_of(dst, me));
            let mut buf = vec![0i32; want.len()];
            if role.dst_leader {
                buf.copy_from_slice(&received);
            }
            bcast.comm.process_at_rank(0).broadcast_into(&mut buf[..]);
            if buf != want {
                return Err(format!("{s}->{d}: received lanes {buf:?}, want {want:?}"));
            }
        }
    }
    Ok(())
}

/// Checks every communicator of this process against the layout.
fn check_layout(world: &SimpleCommunicator, layout: &Layout) -> Result<(), String> {
    let me = world.rank() as u32;
    let comms = layout.communicators(world).map_err(|e| e.to_string())?;
    let inside = me >= layout.rank_offset() && u64::from(me) < layout.rank_end();
    if comms.rank() != inside.then_some(me) {
        return Err(format!("rank() is {:?}", comms.rank()));
    }
    for &kind in layout.kinds() {
        let got = comms.get(kind).map_err(|e| e.to_string())?;
        let want = if inside {
            layout.memberships(me, kind).map_err(|e| e.to_string())?
        } else {
            Vec::new()
        };
        let got_slots: Vec<(u32, u32, Vec<u32>)> = got
            .iter()
            .map(|g| (g.color, g.key, g.world_ranks()))
            .collect();
        let want_slots: Vec<(u32, u32, Vec<u32>)> = want
            .iter()
            .map(|m| (m.color, m.key, m.group.to_vec()))
            .collect();
        if got_slots != want_slots {
            return Err(format!(
                "{kind}: built {got_slots:?}, memberships {want_slots:?}"
            ));
        }
        for g in got {
            let members = g.world_ranks();
            if g.comm.size() as usize != members.len() || g.comm.rank() as u32 != g.key {
                return Err(format!(
                    "{kind}: size {} rank {} for key {} of {members:?}",
                    g.comm.size(),
                    g.comm.rank(),
                    g.key
                ));
            }
            let mut gathered = vec![0i32; members.len()];
            g.comm.all_gather_into(&world.rank(), &mut gathered[..]);
            let gathered: Vec<u32> = gathered.into_iter().map(|r| r as u32).collect();
            if gathered != members {
                return Err(format!("{kind}: gathered {gathered:?}, group {members:?}"));
            }
        }
    }
    if inside {
        let sorted = |mut v: Vec<u32>| {
            v.sort_unstable();
            v
        };
        let peers = |p: rank_layout::Result<Vec<rank_layout::mpi::Peer<'_>>>| {
            sorted(p.unwrap_or_default().iter().map(|p| p.world_rank).collect())
        };
        let next = peers(comms.pipeline_next());
        let prev = peers(comms.pipeline_prev());
        let want_next = sorted(layout.pipeline_next(me).map_err(|e| e.to_string())?);
        let want_prev = sorted(layout.pipeline_prev(me).map_err(|e| e.to_string())?);
        if next != want_next || prev != want_prev {
            return Err(format!(
                "neighbours next {next:?} prev {prev:?}, layout {want_next:?} {want_prev:?}"
            ));
        }
        // The neighbour's rank in its communicator is its key there.
        for p in comms.pipeline_next().unwrap_or_default() {
            let g = comms
                .get(rank_layout::Kind::PP)
                .unwrap_or_default()
                .iter()
                .find(|g| std::ptr::eq(&g.comm, p.comm));
            let at = g.and_then(|g| g.group.get(p.rank as usize));
            if at != Some(p.world_rank) {
                return Err(format!(
                    "peer {p:?} is not member {} of its pipeline",
                    p.rank
                ));
            }
        }
    }
    Ok(())
}

/// The re-layouts of the suite: three layouts of the world, every policy
/// but `spare` (the world has no spare process), and next-grid with a
/// minimum dp the survivors cannot keep (pp shrinks to 1: every pp group
/// is a process alone).
fn relayouts(n: u32) -> Vec<(String, Layout, Policy, u32)> {
    let configs = [
        Config::new().tp(2).pp(2).world_size(Some(n)),
        Config::new()
            .tp(2)
            .cp(2)
            .world_size(Some(n))
            .order("tp-dp-cp-pp".parse().unwrap()),
        // An encoder of tp 1 feeding decoder tp 2: its pp groups overlap
        // (fan-out), so their splits take two rounds.
        Config::new()
            .tp(2)
            .encoder_tp(1)
            .encoder_pp(2)
            .world_size(Some(n)),
    ];
    let mut out = Vec::new();
    for config in configs {
        let layout = Layout::new(&config).expect("a valid layout");
        for policy in Policy::ALL {
            if policy != Policy::Spare {
                out.push((
                    format!("relayout {policy} {config}"),
                    layout.clone(),
                    policy,
                    1,
                ));
            }
        }
    }
    let layout = Layout::new(&Config::new().tp(2).pp(2).world_size(Some(n))).unwrap();
    let min_dp = n / 4;
    out.push((
        format!(
            "relayout next-grid, min dp {min_dp}: pp 2 -> 1, {}",
            layout.config()
        ),
        layout,
        Policy::NextGrid,
        min_dp,
    ));
    out
}

/// The failed process of the re-layout scenarios.
const FAILED: u32 = 3;

/// The plan of `policy` after process [`FAILED`] fails, every kind
/// classified.
fn plan_of(layout: &Layout, policy: Policy, min_dp: u32) -> Result<Relayout, String> {
    let options = RelayoutOptions::default()
        .kinds(layout.kinds().to_vec())
        .min_dp(min_dp);
    relayout(layout, &Failure::new(2, [FAILED]), policy, &options).map_err(|e| e.to_string())
}

/// The survivors' communicator: every process but [`FAILED`] (which gets
/// none), in process order; `with_failed_last`, the "failed" process too,
/// after them: a survivors' communicator larger than the survivors.
fn survivors(world: &SimpleCommunicator, with_failed_last: bool) -> Option<SimpleCommunicator> {
    let me = world.rank() as u32;
    let (color, key) = match (me == FAILED, with_failed_last) {
        (false, _) => (Color::with_value(0), me as i32),
        (true, true) => (Color::with_value(0), i32::MAX),
        (true, false) => (Color::undefined(), 0),
    };
    world.split_by_color_with_key(color, key)
}

/// The communicator a re-layout's split plan runs over.
#[derive(Clone, Copy, Debug)]
enum Over {
    /// The survivors' communicator, exactly the survivors.
    Survivors,
    /// The survivors, then the "failed" process, which takes part with
    /// the undefined color and gets none.
    SurvivorsAndMore,
    /// The old world, numbered as the old layout, the "failed" process
    /// still running: it takes part with the undefined color.
    OldWorld,
}

impl Over {
    const ALL: [Over; 3] = [Over::Survivors, Over::SurvivorsAndMore, Over::OldWorld];
}

/// After process [`FAILED`] "fails", every survivor computes the plan of
/// `policy` and runs its split plan over the communicator `over` names.
/// Each communicator built is the new layout's group (size, rank = key,
/// and the members' new ranks gathered in order), and exactly the groups
/// the plan calls new or shrunk are split, those of one process alone get
/// `MPI_COMM_SELF`, and a kept group gets none. The survivors'
/// communicator read as numbered by the old layout is too small: the same
/// error on every survivor, before any communication.
fn check_relayout(
    world: &SimpleCommunicator,
    layout: &Layout,
    policy: Policy,
    min_dp: u32,
    over: Over,
) -> Result<(), String> {
    let me = world.rank() as u32;
    let plan = plan_of(layout, policy, min_dp)?;
    let comms = match over {
        Over::OldWorld => plan.communicators(world, Numbering::OldLayout),
        Over::Survivors | Over::SurvivorsAndMore => {
            let more = matches!(over, Over::SurvivorsAndMore);
            let Some(survivors) = survivors(world, more) else {
                return Ok(());
            };
            if !more {
                let e = plan
                    .communicators(&survivors, Numbering::OldLayout)
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                if !e.contains("numbered as the old layout has") {
                    return Err(format!("the survivors as the old layout: {e:?}"));
                }
            }
            plan.communicators(&survivors, Numbering::Survivors)
        }
    }
    .map_err(|e| e.to_string())?;
    if me == FAILED {
        let built: usize = comms.sets.iter().map(|(_, c)| c.len()).sum();
        return if (comms.process, comms.rank, built) == (None, None, 0) {
            Ok(())
        } else {
            Err(format!("the failed process got {comms:?}"))
        };
    }
    if (comms.process, comms.rank) != (Some(me), plan.rank_map().new_rank(me)) {
        return Err(format!("process {:?} rank {:?}", comms.process, comms.rank));
    }
    check_built(&plan, me, &comms)
}

/// The communicators `comms` of process `process` are those its fates
/// call for, with the members in order.
fn check_built(plan: &Relayout, process: u32, comms: &RelayoutCommunicators) -> Result<(), String> {
    for (kind, built) in &comms.sets {
        let fates = plan.fates_of(process, *kind).map_err(|e| e.to_string())?;
        let wanted: Vec<(u32, u32)> = fates
            .iter()
            .filter(|f| !matches!(f.change, Change::Kept { .. }))
            .map(|f| (f.membership.color, f.membership.key))
            .collect();
        let got: Vec<(u32, u32)> = built.iter().map(|g| (g.color, g.key)).collect();
        if got != wanted {
            return Err(format!("{kind}: built {got:?}, plan {wanted:?}"));
        }
        for g in built {
            let members = g.group.to_vec();
            if g.comm.size() as usize != members.len() || g.comm.rank() as u32 != g.key {
                return Err(format!(
                    "{kind}: built {} {} of size {}, group {members:?}",
                    g.color,
                    g.key,
                    g.comm.size()
                ));
            }
            let mut gathered = vec![0i32; members.len()];
            g.comm
                .all_gather_into(&(comms.rank.unwrap_or(0) as i32), &mut gathered[..]);
            let gathered: Vec<u32> = gathered.into_iter().map(|r| r as u32).collect();
            if gathered != members {
                return Err(format!("{kind}: gathered {gathered:?}, group {members:?}"));
            }
        }
    }
    Ok(())
}

/// From Rust, after a failure: the old layout's communicators are built
/// first; after process [`FAILED`] fails, each survivor asks the plan what
/// becomes of each of its groups (`fate_of`) and uses the old
/// communicator of a kept group, the new one of a new or shrunk group,
/// `MPI_COMM_SELF` alone: an all-reduce of the new ranks over each is the
/// sum of the group's members, on every group of every kind.
fn check_after_a_failure(
    world: &SimpleCommunicator,
    layout: &Layout,
    policy: Policy,
    min_dp: u32,
) -> Result<(), String> {
    let me = world.rank() as u32;
    let old = layout.communicators(world).map_err(|e| e.to_string())?;
    let Some(survivors) = survivors(world, false) else {
        return Ok(());
    };
    let plan = plan_of(layout, policy, min_dp)?;
    let new = plan
        .communicators(&survivors, Numbering::Survivors)
        .map_err(|e| e.to_string())?;
    let Some(rank) = new.rank else {
        return Ok(());
    };
    for &kind in layout.kinds() {
        for fate in plan.fates_of(me, kind).map_err(|e| e.to_string())? {
            let color = fate.membership.color;
            let comm: &SimpleCommunicator = match &fate.change {
                Change::Kept { old_color } => {
                    let olds = old.get(kind).map_err(|e| e.to_string())?;
                    &olds
                        .iter()
                        .find(|g| g.color == *old_color)
                        .ok_or(format!("{kind}: no old group {old_color}"))?
                        .comm
                }
                _ => {
                    &new.get(kind)
                        .unwrap_or_default()
                        .iter()
                        .find(|g| g.color == color)
                        .ok_or(format!("{kind}: group {color} not built"))?
                        .comm
                }
            };
            let members = fate.membership.group.to_vec();
            let mut sum = 0u64;
            comm.all_reduce_into(&u64::from(rank), &mut sum, SystemOperation::sum());
            let want: u64 = members.iter().map(|&m| u64::from(m)).sum();
            if sum != want || comm.rank() as u32 != fate.membership.key {
                return Err(format!(
                    "{kind} {}: all-reduce {sum} over {members:?} (sum {want}), rank {} for key {}",
                    fate.change.name(),
                    comm.rank(),
                    fate.membership.key
                ));
            }
        }
    }
    Ok(())
}

/// Owning the communicators: `take` and `take_one` give what `get` lent
/// and leave the kind as one not built; `into_iter` gives every one, as
/// many as `iter` lent; kinds of the same member lists share one split
/// (a duplicate: congruent, not identical).
fn check_owning(world: &SimpleCommunicator, layout: &Layout) -> Result<(), String> {
    use rank_layout::mpi::rsmpi::topology::CommunicatorRelation;
    let mut comms = layout.communicators(world).map_err(|e| e.to_string())?;
    let lent: Vec<(Kind, u32, u32)> = comms.iter().map(|(k, g)| (k, g.color, g.key)).collect();
    let slots = |v: &[GroupComm]| v.iter().map(|g| (g.color, g.key)).collect::<Vec<_>>();
    // Kinds whose group here is the same member list: congruent.
    let kinds = layout.kinds().to_vec();
    for (i, &a) in kinds.iter().enumerate() {
        for &b in &kinds[i + 1..] {
            if let (Ok(Some(x)), Ok(Some(y))) = (comms.one(a), comms.one(b)) {
                if x.group.to_vec() == y.group.to_vec() && x.group.len() > 1 {
                    let relation = x.comm.compare(&y.comm);
                    if relation != CommunicatorRelation::Congruent {
                        return Err(format!("{a} and {b}: {relation:?}"));
                    }
                }
            }
        }
    }
    let tp_before = slots(comms.get(Kind::TP).map_err(|e| e.to_string())?);
    let tp = comms.take(Kind::TP).map_err(|e| e.to_string())?;
    if slots(&tp) != tp_before || comms.get(Kind::TP).is_ok() || comms.take(Kind::TP).is_ok() {
        return Err("take(tp)".to_string());
    }
    let dp_before = slots(comms.get(Kind::DP).map_err(|e| e.to_string())?);
    let dp = comms.take_one(Kind::DP).map_err(|e| e.to_string())?;
    if dp.iter().map(|g| (g.color, g.key)).collect::<Vec<_>>() != dp_before {
        return Err("take_one(dp)".to_string());
    }
    let left = comms.into_iter();
    let n = left.len();
    let owned: Vec<(Kind, GroupComm)> = left.collect();
    let want = lent.len() - tp.len() - usize::from(dp.is_some());
    if owned.len() != want || n != want {
        return Err(format!(
            "into_iter gave {} ({n} announced), want {want}",
            owned.len()
        ));
    }
    Ok(())
}

fn suite(world: &SimpleCommunicator) -> ExitCode {
    let mut outcomes = Vec::new();
    for (name, config) in layouts(world.size() as u32) {
        let layout = Layout::new(&config).expect("a valid layout");
        outcomes.push(everywhere(world, name, &check_layout(world, &layout)));
    }
    for (name, mesh) in meshes(world.size() as u32) {
        outcomes.push(everywhere(world, name, &check_mesh(world, &mesh)));
    }
    for (name, modules) in modules(world.size() as u32) {
        outcomes.push(everywhere(world, name, &check_modules(world, &modules)));
    }
    for (name, layout, policy, min_dp) in relayouts(world.size() as u32) {
        for over in Over::ALL {
            outcomes.push(everywhere(
                world,
                &format!("{name}, over {over:?}"),
                &check_relayout(world, &layout, policy, min_dp, over),
            ));
        }
        outcomes.push(everywhere(
            world,
            &format!("{name}, kept old and new communicators"),
            &check_after_a_failure(world, &layout, policy, min_dp),
        ));
    }
    let owned = Layout::new(
        &Config::new()
            .tp(2)
            .pp(2)
            .ep(2)
            .world_size(Some(world.size() as u32)),
    )
    .unwrap();
    outcomes.push(everywhere(
        world,
        "owned communicators",
        &check_owning(world, &owned),
    ));
    suite_end(world, &outcomes)
}

fn scenarios() -> Vec<Scenario> {
    let mut out: Vec<Scenario> = Vec::new();
    for n in [8u32, 16, 32] {
        out.push((
            format!("membership suite on {n} processes"),
            Box::new(move || {
                let j = MPIRUN.job(n, "suite", &[], &[])?;
                let want = format!(
                    "suite: {} passed, 0 failed",
                    layouts(n).len()
                        + meshes(n).len()
                        + modules(n).len()
                        + (Over::ALL.len() + 1) * relayouts(n).len()
                        + 1
                );
                if j.code == Some(0) && j.stdout.contains(&want) {
                    Ok(())
                } else {
                    Err(format!("exit {:?}\n{}\n{}", j.code, j.stdout, j.stderr))
                }
            }),
        ));
    }
    let dense = "--tp 2 --cp 2 --ep 2 --pp 2 --world-size 32";
    out.push((
        "launcher, dense tp2 cp2 ep2 pp2 dp4 on 32 processes, --verbose".into(),
        Box::new(move || {
            let args: Vec<&str> = dense.split(' ').chain(["--verbose"]).collect();
            let j = MPIRUN.job(32, "launcher", &args, &[])?;
            let lines = j.stdout.lines().filter(|l| l.starts_with("rank ")).count();
            if j.code == Some(0) && lines == 32 && j.stdout.contains(" 0 mismatches") {
                Ok(())
            } else {
                Err(format!(
                    "exit {:?}, {lines} rank lines\n{}\n{}",
                    j.code, j.stdout, j.stderr
                ))
            }
        }),
    ));
    out.push((
        "launcher, encoder+decoder fan-in on 16 processes".into(),
        Box::new(|| {
            let args = [
                "--tp",
                "1",
                "--pp",
                "2",
                "--dp",
                "2",
                "--encoder-tp",
                "3",
                "--order",
                "tp-dp-pp",
            ];
            let j = MPIRUN.job(16, "launcher", &args, &[])?;
            if j.code == Some(0) && j.stdout.contains("(10 in the layout of 10 ranks") {
                Ok(())
            } else {
                Err(format!("exit {:?}\n{}\n{}", j.code, j.stdout, j.stderr))
            }
        }),
    ));
    out.push((
        "launcher, a layout of 64 ranks on 32 processes fails on every rank".into(),
        Box::new(|| {
            let j = MPIRUN.job(32, "launcher", &["--tp", "2", "--world-size", "64"], &[])?;
            let said = "the communicator has 32 processes but the layout needs 64";
            if j.code.is_some_and(|c| c != 0)
                && j.stderr.contains(said)
                && j.took < Duration::from_secs(120)
            {
                Ok(())
            } else {
                Err(format!(
                    "exit {:?} after {:?}\n{}\n{}",
                    j.code, j.took, j.stdout, j.stderr
                ))
            }
        }),
    ));
    out.push((
        "launcher, a layout of 16 ranks on 32 processes: the others get none".into(),
        Box::new(|| {
            let j = MPIRUN.job(
                32,
                "launcher",
                &["--tp", "2", "--pp", "2", "--world-size", "16", "--verbose"],
                &[],
            )?;
            let outside = j
                .stdout
                .lines()
                .filter(|l| l.contains("outside the layout"))
                .count();
            if j.code == Some(0)
                && outside == 16
                && j.stdout.contains("(16 in the layout of 16 ranks")
            {
                Ok(())
            } else {
                Err(format!(
                    "exit {:?}, {outside} outside\n{}\n{}",
                    j.code, j.stdout, j.stderr
                ))
            }
        }),
    ));
    out.push((
        "launcher, rank 5 panics after its communicators: the job ends non-zero".into(),
        Box::new(|| {
            let args = [
                "--tp",
                "2",
                "--cp",
                "2",
                "--ep",
                "2",
                "--pp",
                "2",
                "--world-size",
                "16",
            ];
            let j = MPIRUN.job(16, "launcher", &args, &[("RANK_LAYOUT_FAULT_RANK", "5")])?;
            if j.code.is_some_and(|c| c != 0)
                && j.stderr.contains("injected fault on rank 5")
                && j.took < Duration::from_secs(120)
            {
                Ok(())
            } else {
                Err(format!(
                    "exit {:?} after {:?}\n{}\n{}",
                    j.code, j.took, j.stdout, j.stderr
                ))
            }
        }),
    ));
    out
}

fn main() -> ExitCode {
    match std::env::var(MPIRUN.mode_var).as_deref() {
        Ok("suite") => {
            let universe = rank_layout::mpi::initialize().expect("MPI initializes");
            launcher::abort_on_panic();
            let code = suite(&universe.world());
            drop(universe);
            code
        }
        Ok("launcher") => {
            let universe = rank_layout::mpi::initialize().expect("MPI initializes");
            launcher::abort_on_panic();
            let args: Vec<String> = std::env::args().skip(1).collect();
            let code = launcher::run(&universe.world(), &args);
            drop(universe);
            ExitCode::from(code)
        }
        _ => run_scenarios("mpi", scenarios()),
    }
}
