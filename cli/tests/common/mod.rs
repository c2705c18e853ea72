//! Helpers shared by the command-line tests: run the binary, read its
//! output, expect a failure.
#![allow(dead_code)]

use std::process::{Command, Output};

use serde_json::Value;

/// Runs the binary with `command` split on whitespace.
pub fn run(command: &str) -> Output {
    run_args(&command.split_whitespace().collect::<Vec<_>>())
}

/// Runs the binary with `args`.
pub fn run_args(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rank-layout"))
        .args(args)
        .output()
        .expect("the binary runs")
}

/// The stdout of a command that must succeed.
pub fn stdout(command: &str) -> String {
    let out = run(command);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{command:?}: {stderr}");
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// The JSON printed by a command that must succeed.
pub fn json(command: &str) -> Value {
    serde_json::from_str(&stdout(command)).expect("one JSON value")
}

/// Asserts that `command` exits with status 2, prints nothing on stdout and
/// `needle` on stderr; returns stderr.
pub fn fails_with(command: &str, needle: &str) -> String {
    let out = run(command);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{command:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{command:?} printed on stdout");
    assert!(
        stderr.contains(needle),
        "{command:?}: {stderr:?} lacks {needle:?}"
    );
    stderr
}

/// A fresh, empty directory of its own for each call: the tests of a file
/// run on threads of one process, so a directory named by the process
/// alone would be shared, and one test could read a file another is
/// writing. Each call's name holds the process, a counter of the calls and
/// the time; a directory left by an earlier process is emptied first.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!(
        "rank-layout-cli-{name}-{}-{call}-{nanos}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

/// The stdout of a command given as separate arguments, which must succeed.
pub fn stdout_args(args: &[&str]) -> String {
    let out = run_args(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Asserts that `args` exit with status 2, print nothing on stdout and
/// `needle` on stderr; returns stderr.
pub fn fails_with_args(args: &[&str], needle: &str) -> String {
    let out = run_args(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?} printed on stdout");
    assert!(
        stderr.contains(needle),
        "{args:?}: {stderr:?} lacks {needle:?}"
    );
    stderr
}
