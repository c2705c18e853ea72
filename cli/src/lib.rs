//! The library half of the `rank-layout` command: the part that needs no
//! command line, kept apart so that the fuzz target `cli_config` (`fuzz/`)
//! and the tests can call it: the configuration file's reader
//! ([`config_file`]: text in, keys and values out, before any key is
//! judged). The host tables are the `rank-layout` library's
//! (`rank_layout::machine::HostsReader`). The binary (`src/main.rs`) does
//! everything else.
#![forbid(unsafe_code)]

pub mod config_file;
