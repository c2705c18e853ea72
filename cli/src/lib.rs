//! The library half of the `rank-layout` command: the parts that need no
//! command line, kept apart so that the fuzz targets (`fuzz/`) and tests
//! can call them: the configuration file's reader ([`config_file`]: text
//! in, keys and values out, before any key is judged) and the host table's
//! ([`hosts_file`]). The binary (`src/main.rs`) does everything else.
#![forbid(unsafe_code)]

pub mod config_file;
pub mod hosts_file;
