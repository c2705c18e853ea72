//! Shared by the tests that run themselves under `mpirun` (`tests/mpi.rs`,
//! `tests/mpi_reshard.rs`): starting a job of this test binary on `n`
//! processes under a deadline (a hang fails the test, it never blocks
//! CI), running the parent's scenarios, and agreeing on a check's outcome
//! over every process of the job.

#![allow(dead_code)]

use std::io::Read;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use rank_layout::mpi::SimpleCommunicator;
use rank_layout::mpi::rsmpi::collective::SystemOperation;
use rank_layout::mpi::traits::*;

/// What a job printed and how it ended.
pub struct Job {
    /// Its exit code (`None` when a signal ended it).
    pub code: Option<i32>,
    /// Everything its processes printed on stdout.
    pub stdout: String,
    /// Everything its processes printed on stderr.
    pub stderr: String,
    /// How long it ran.
    pub took: Duration,
}

/// How a test binary starts its jobs: the environment variable that tells
/// a child which part it plays, and the longest a job may take before it
/// counts as hung (`mpirun --timeout` is set 20 s below it, so Open MPI
/// reports the hang first when it can).
pub struct Launcher {
    /// The environment variable set to the child's mode.
    pub mode_var: &'static str,
    /// The deadline past which the job is killed and the check fails.
    pub deadline: Duration,
}

impl Launcher {
    /// Runs this binary as `mode` on `n` processes under `mpirun`, with
    /// `args` and extra environment variables, killing it past the
    /// deadline.
    pub fn job(
        &self,
        n: u32,
        mode: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Job, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let timeout = self.deadline.as_secs().saturating_sub(20).max(1);
        let mut cmd = Command::new("mpirun");
        cmd.args(["--allow-run-as-root", "--oversubscribe", "--timeout"])
            .arg(timeout.to_string())
            .arg("-n")
            .arg(n.to_string())
            .args(["-x", self.mode_var]);
        for (k, _) in env {
            cmd.args(["-x", k]);
        }
        cmd.arg(&exe).args(args).env(self.mode_var, mode);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let start = Instant::now();
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                format!("cannot run mpirun ({e}): install Open MPI (apt-get install openmpi-bin libopenmpi-dev)")
            })?;
        let stdout = read_all(
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let stderr = read_all(
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let status = loop {
            if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                break status;
            }
            if start.elapsed() > self.deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{mode} {args:?} on {n} processes hung past {:?}",
                    self.deadline
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        Ok(Job {
            code: status.code(),
            stdout: stdout.join().unwrap_or_default(),
            stderr: stderr.join().unwrap_or_default(),
            took: start.elapsed(),
        })
    }
}

/// Reads a pipe to its end on a thread of its own (so neither pipe fills
/// while the other is read).
fn read_all(pipe: Option<Box<dyn Read + Send>>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_string(&mut s);
        }
        s
    })
}

/// One scenario of the parent: its name and a check of the job it runs.
pub type Scenario = (String, Box<dyn Fn() -> Result<(), String>>);

/// Runs the scenarios one after another, printing each outcome and time
/// and a `NAME: P passed, F failed` line; fails when any failed.
pub fn run_scenarios(name: &str, scenarios: Vec<Scenario>) -> ExitCode {
    let (mut passed, mut failed) = (0, 0);
    for (scenario, check) in scenarios {
        let start = Instant::now();
        let took = || start.elapsed().as_secs_f64();
        match check() {
            Ok(()) => {
                passed += 1;
                println!("ok     {scenario} ({:.1} s)", took());
            }
            Err(e) => {
                failed += 1;
                println!("FAILED {scenario} ({:.1} s)\n{e}", took());
            }
        }
    }
    println!("{name}: {passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Whether `result` is `Ok` on every process of `world`, reporting this
/// process's failure under `name`. Every process must call it (it
/// all-reduces).
pub fn everywhere<T>(world: &SimpleCommunicator, name: &str, result: &Result<T, String>) -> bool {
    if let Err(e) = result {
        eprintln!("FAILED {name}, process {}: {e}", world.rank());
    }
    let mut all_ok = 0i32;
    world.all_reduce_into(
        &i32::from(result.is_ok()),
        &mut all_ok,
        SystemOperation::min(),
    );
    all_ok == 1
}

/// The exit code of a suite whose checks' outcomes are `outcomes`,
/// printing `suite: P passed, F failed` on process 0 (the parent looks for
/// that line).
pub fn suite_end(world: &SimpleCommunicator, outcomes: &[bool]) -> ExitCode {
    let passed = outcomes.iter().filter(|ok| **ok).count();
    if world.rank() == 0 {
        println!("suite: {passed} passed, {} failed", outcomes.len() - passed);
    }
    if passed == outcomes.len() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
