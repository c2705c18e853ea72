//! The layout on the real machine: the hosts a job got ([`Hosts`], read
//! from any of the formats clusters have by [`Hosts::parse`] and
//! [`HostsReader`]), the node order that keeps the groups that must stay
//! inside an NVLink domain inside one and the other kinds' groups under few
//! parents of the topology tree ([`place`]), how every kind's groups then
//! fall on each level of the topology, placed and in the table's order
//! ([`NodePlan::kinds`], [`NodePlan::crossing`]), the launcher files that
//! start each rank where it was placed ([`Launcher`]), and what fails when
//! hosts fail ([`HostFailure`]). [`Placed`] holds a placement whole: the
//! command line and the Python bindings read every answer from it.
//!
//! The unit of placement is a whole node: every GPU of a node is in the
//! node's domain, so a permutation of nodes (logical node -> host) with GPU
//! = local rank is enough. The semantics are in
//! [`semantics`](crate::semantics), section "Placement".
//!
//! ```
//! use rank_layout::machine::{place, Hosts, KindGroups, PlaceOptions};
//! use rank_layout::{Config, Kind, Layout};
//! // Two racks of 2 nodes of 4 GPUs, listed interleaved.
//! let hosts = Hosts::parse_plain("n0 rackA 4\nn1 rackB 4\nn2 rackA 4\nn3 rackB 4\n")?;
//! let layout = Layout::new(&Config::new().tp(8).world_size(16))?;
//! let tp = KindGroups::of_layout(&layout, Kind::TP)?;
//! let plan = place(16, &[tp.clone()], &[], &hosts, &PlaceOptions::default())?;
//! assert_eq!(plan.crossing(&hosts, &tp).domain_crossing(), 0);
//! let plain = rank_layout::machine::NodePlan::plain(16, &hosts, 4)?;
//! assert_eq!(plain.crossing(&hosts, &tp).domain_crossing(), 2);
//! # Ok::<(), rank_layout::Error>(())
//! ```

mod fill;
mod gpus_per_node;
mod host_failure;
mod hostlist;
mod hosts;
mod hosts_format;
mod hosts_reader;
mod launcher;
mod layout_place;
mod names;
mod nodelist;
mod place;
mod placed;
mod read;
mod straddle;
mod tree;

pub use host_failure::HostFailure;
pub use hostlist::{MAX_HOSTS, expand_hostlist};
pub use hosts::{Host, Hosts};
pub use hosts_format::HostsFormat;
pub use hosts_reader::{HostsRead, HostsReader};
pub use launcher::Launcher;
pub use layout_place::{default_must_fit, place_layout};
pub use place::{Crossing, KindCrossing, KindGroups, NodePlan, PlaceOptions, Shortfall, place};
pub use placed::{Placed, Shrunk};
#[cfg(feature = "serde")]
pub use read::DEFAULT_CLIQUE_LABEL;

use crate::error::Result;
use crate::kind::Kind;
use crate::layout::Layout;
use crate::mesh::Mesh;
use crate::plan::groups::Groups;

impl KindGroups {
    /// `kind`'s groups of `layout`, as ranks of the job (the layout's ranks
    /// minus its `rank_offset`), named by the kind.
    ///
    /// # Errors
    /// The layout's error for a kind it does not have.
    pub fn of_layout(layout: &Layout, kind: Kind) -> Result<KindGroups> {
        Ok(KindGroups::of_job(
            kind.to_string(),
            layout.groups(kind)?,
            layout.rank_offset(),
        ))
    }

    /// The groups of `mesh`'s dim set `spec` (`tp`, `cp-dp`, `expert:ep`,
    /// a flatten's name), as ranks of the job (the mesh's ranks minus its
    /// `rank_offset`), named `spec`.
    ///
    /// # Errors
    /// The mesh's error for a dim set it does not have.
    pub fn of_mesh(mesh: &Mesh, spec: &str) -> Result<KindGroups> {
        Ok(KindGroups::of_job(
            spec.to_string(),
            mesh.groups(spec)?,
            mesh.rank_offset(),
        ))
    }

    /// `groups`, named `name`, as ranks of a job whose first rank is
    /// `offset` (every member is at least `offset`: the groups are the
    /// job's own).
    fn of_job(name: String, groups: Groups<'_>, offset: u32) -> KindGroups {
        KindGroups {
            name,
            groups: groups
                .map(|g| g.iter().map(|r| r - offset).collect())
                .collect(),
        }
    }
}
