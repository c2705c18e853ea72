//! Replays the committed fuzz seed corpus of the configuration-file reader
//! (`fuzz/corpus/cli_config/`) through the `cli_config` target's entry
//! function, so CI checks it without a fuzzer; the library's targets are
//! replayed by the library's `tests/fuzz_corpus.rs`. See `fuzz/README.md`.
// Test code: the workspace's lints on unwrap, expect, panic and indexing do not apply.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../fuzz/src/cli_config.rs"]
mod cli_config;

use std::path::Path;

/// Every file of `fuzz/corpus/<target>/` through `entry`; fails when the
/// directory is missing or empty, so the test cannot pass vacuously.
fn replay(target: &str, entry: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    for path in &files {
        let data = std::fs::read(path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if let Err(panic) = std::panic::catch_unwind(|| entry(&data)) {
            eprintln!("{target}: corpus file {name} ({} bytes) failed", data.len());
            std::panic::resume_unwind(panic);
        }
    }
    eprintln!("{target}: {} corpus files replayed", files.len());
}

#[test]
fn corpus_cli_config() {
    replay("cli_config", cli_config::cli_config);
}

// Regression tests: one per bug, with the input.

/// `{"tp": [[[...]]]}` 10,000 deep overflowed the stack: the reader
/// recursed once per level (and parsed the rest again at each). Now it
/// stops at the 65th level, in one pass.
#[test]
fn deep_nesting_is_refused_in_one_pass() {
    for depth in [10_000, 100_000] {
        let text = format!("{{\"tp\": {}{}}}", "[".repeat(depth), "]".repeat(depth));
        let start = std::time::Instant::now();
        cli_config::cli_config(text.as_bytes());
        assert!(
            start.elapsed().as_secs_f64() < 5.0,
            "{depth}: {:?}",
            start.elapsed()
        );
    }
}
