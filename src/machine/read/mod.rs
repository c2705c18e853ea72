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
//! - `kubectl.rs` (feature `serde`): `kubectl get nodes -o json`.
//!
//! `slurm.rs` builds the table of Slurm's blocks and switch trees that
//! three of them read; `block_levels.rs` forms the higher-level blocks of
//! `BlockSizes=` as Slurm does. The rules are in [`semantics`](crate::semantics),
//! section "Placement".

mod block_levels;
#[cfg(feature = "serde")]
mod kubectl;
mod nvidia_smi;
mod scontrol;
mod slurm;
mod slurm_topology_addr;
mod topology_conf;
mod topology_yaml;
mod yaml;

#[cfg(feature = "serde")]
pub use kubectl::DEFAULT_CLIQUE_LABEL;
