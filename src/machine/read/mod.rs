//! Readers of the host tables users already have, one file per format,
//! each a pure text parser ending in a [`Hosts`](crate::machine::Hosts)
//! (the methods are `Hosts::from_*` and `Hosts::parse_*`):
//!
//! - `nvidia_smi.rs`: `nvidia-smi -q` per host (the `Fabric` block);
//! - `topology_conf.rs`: Slurm's `topology.conf` (blocks or a switch tree);
//! - `topology_yaml.rs`: Slurm's `topology.yaml` (its block or tree
//!   topologies), read by the YAML subset of `yaml.rs`;
//! - `scontrol.rs`: `scontrol show topology`;
//! - `slurm_topology_addr.rs`: `SLURM_TOPOLOGY_ADDR` lines of the tasks;
//! - `kubectl.rs` (feature `serde`): `kubectl get nodes -o json`;
//! - `json_table.rs` (feature `serde`): the JSON host table.
//!
//! `slurm.rs` builds the table of Slurm's blocks and switch trees (each a
//! `Unit`, `unit.rs`) that three of them read; `block_levels.rs` forms the
//! higher-level blocks of `BlockSizes=` as Slurm does. The plain table is
//! `hosts.rs`'s; `HostsReader` (`hosts_reader.rs`) picks the reader by
//! format. The rules are in [`semantics`](crate::semantics),
//! section "Placement".

mod block_levels;
#[cfg(feature = "serde")]
mod json_table;
#[cfg(feature = "serde")]
mod kubectl;
mod nvidia_smi;
mod scontrol;
mod slurm;
mod slurm_topology_addr;
mod topology_conf;
mod topology_yaml;
mod unit;
mod yaml;

#[cfg(feature = "serde")]
pub use kubectl::DEFAULT_CLIQUE_LABEL;
pub(crate) use nvidia_smi::{host_of as nvidia_smi_host_of, read_named as nvidia_smi_named};
pub(crate) use scontrol::with_notes as scontrol_with_notes;
pub(crate) use topology_conf::with_notes as topology_conf_with_notes;
pub(crate) use topology_yaml::with_notes as topology_yaml_with_notes;
