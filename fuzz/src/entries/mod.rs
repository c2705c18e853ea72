//! The fuzz entry points of rank-layout, one per cargo-fuzz target.
//!
//! Each `pub fn` takes arbitrary bytes, drives the public API with them and
//! panics on a wrong answer, not only on a crash: the library must never
//! panic, and what it answers must agree with itself (per-rank answers with
//! the enumeration, `fill` with iterating, splits with memberships, ...).
//!
//! These files are the library of the fuzz crate (`fuzz/`, used by the
//! targets in `fuzz/fuzz_targets/`) and a module of the replay test
//! `tests/fuzz_corpus.rs`, which runs the committed seed corpus through
//! these functions without a fuzzer. The bytes are decoded by hand, so the
//! test needs no dependency beyond the main crate's (`serde_json`).
//!
//! Every input's work is bounded: nothing iterates a group, a kind or a
//! world larger than the limits in `shared.rs`, whatever the sizes decoded.
//!
//! One file per target, named after it (its entry function and what only it
//! uses); `shared.rs` has the limits, the decoder of the bytes and the
//! layout checks that several targets use.

mod host_table;
mod inference_shards;
mod json_config;
mod kind;
mod kubectl_nodes;
mod layout;
mod megatron_args;
mod mesh_spec;
mod modules_file;
mod nvidia_smi;
mod order;
mod rank_list;
mod reshard_tensors;
mod scontrol_topology;
mod shared;
mod slurm_topology_addr;
mod topology_conf;
mod topology_yaml;

pub use host_table::host_table;
pub use inference_shards::inference_shards;
pub use json_config::json_config;
pub use kind::kind;
pub use kubectl_nodes::kubectl_nodes;
pub use layout::{layout, layout_config};
pub use megatron_args::megatron_args;
pub use mesh_spec::mesh_spec;
pub use modules_file::modules_file;
pub use nvidia_smi::nvidia_smi;
pub use order::order;
pub use rank_list::rank_list;
pub use reshard_tensors::reshard_tensors;
pub use scontrol_topology::scontrol_topology;
pub use slurm_topology_addr::slurm_topology_addr;
pub use topology_conf::topology_conf;
pub use topology_yaml::topology_yaml;
