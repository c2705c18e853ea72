//! The fuzz entry points of rank-layout, one `pub fn` per cargo-fuzz
//! target (`fuzz_targets/<target>.rs` calls its function).
//!
//! - `entries/`: the library's targets, a file per target. The library's
//!   replay test `tests/fuzz_corpus.rs` includes `entries/mod.rs` as a
//!   module, so it uses the library (and `serde_json`) only.
//! - `cli_config.rs`: the command line's configuration-file reader
//!   (`rank_layout_cli::config_file`). The CLI package's replay test
//!   `cli/tests/fuzz_corpus.rs` includes that file as a module.
//!
//! `replay.rs`, not a module of this crate, is the corpus replay of both
//! replay tests (each includes it as a module).

mod cli_config;
mod entries;

pub use cli_config::cli_config;
pub use entries::*;
