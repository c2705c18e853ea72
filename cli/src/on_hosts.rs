//! `check --hosts` and `rank --hosts`: the job on the hosts it got, in the
//! table's order or in `place`'s, as the library's [`Placed`].

use rank_layout::Topology;
use rank_layout::machine::{Placed, Shortfall};

use crate::args::MachineArgs;
use crate::config::Setup;
use crate::error::Failure;
use crate::hosts_file;
use crate::target::Target;

/// The job on its hosts: the placement and the order's name (`table` or
/// `placed`).
pub struct OnHosts {
    /// The job on the host table.
    pub placed: Placed,
    /// `table` (the hosts in the table's order) or `placed` (`place`'s).
    pub order: &'static str,
    /// The file, for reports.
    pub file: String,
}

impl OnHosts {
    /// The job of `target` on `--hosts`, `None` without the flag; the GPUs
    /// per node are the setup's as given, else the table's.
    ///
    /// # Errors
    /// The host table's errors; the GPU count's; too few usable hosts; no
    /// placement.
    pub fn load(
        machine: &MachineArgs,
        target: &Target,
        setup: &Setup,
    ) -> Result<Option<OnHosts>, Failure> {
        let Some(path) = &machine.hosts else {
            return Ok(None);
        };
        let hosts = hosts_file::read(path, machine.hosts_read.reader())?;
        let (placed, order) = if machine.placed {
            let options = setup.place_options(&hosts, Shortfall::Straddle)?;
            let placed = match target {
                Target::Layout { layout, .. } => Placed::layout(layout, None, hosts, &options)?,
                Target::Mesh(m) => Placed::mesh(&m.mesh, None, hosts, &options)?,
            };
            (placed, "placed")
        } else {
            let g = setup.gpus_on(&hosts)?;
            let placed =
                Placed::table_order(target.world_size(), target.rank_offset(), hosts, Some(g))?;
            (placed, "table")
        };
        Ok(Some(OnHosts {
            placed,
            order,
            file: path.display().to_string(),
        }))
    }

    /// The machine of the job on these hosts: their GPUs per node, the
    /// setup's nodes per domain.
    ///
    /// # Errors
    /// The library's, for sizes that overflow.
    pub fn topology(&self, setup: &Setup) -> Result<Topology, Failure> {
        Ok(Topology::new(
            self.placed.gpus_per_node(),
            setup.topology.nodes_per_domain(),
        )?)
    }
}
