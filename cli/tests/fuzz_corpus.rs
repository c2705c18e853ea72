//! Replays the committed fuzz seed corpus of the configuration-file reader
//! (`fuzz/corpus/cli_config/`) through the `cli_config` target's entry
//! function, so CI checks it without a fuzzer; the library's targets (the
//! host tables among them) are replayed by the library's
//! `tests/fuzz_corpus.rs`. See `fuzz/README.md`.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

#[path = "../../fuzz/src/cli_config.rs"]
mod cli_config;
#[path = "../../fuzz/src/replay.rs"]
mod replay;

use replay::replay;

/// The fuzz seed corpus, a directory per target.
const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus");

#[test]
fn corpus_cli_config() {
    replay(CORPUS, "cli_config", cli_config::cli_config);
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
