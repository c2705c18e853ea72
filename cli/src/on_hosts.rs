//! `check --hosts` and `rank --hosts`: the job on the hosts it got, in the
//! table's order or in `place`'s.

use rank_layout::machine::{
    Hosts, NodePlan, PlaceOptions, Shortfall, default_must_fit, place_layout,
};
use rank_layout_cli::hosts_file;

use crate::args::MachineArgs;
use crate::error::Failure;
use crate::target::Target;

/// The job on its hosts: the table, the node -> host plan and the order's
/// name (`table` or `placed`).
pub struct OnHosts {
    /// The host table.
    pub hosts: Hosts,
    /// Logical node -> host.
    pub plan: NodePlan,
    /// `table` (the hosts in the table's order) or `placed` (`place`'s).
    pub order: &'static str,
    /// The file, for reports.
    pub file: String,
}

impl OnHosts {
    /// The job of `target` on `--hosts`, `None` without the flag.
    /// `gpus_per_node`: the flag's, when given.
    ///
    /// # Errors
    /// The host table's errors; too few usable hosts; `--placed` for a
    /// mesh, or no placement.
    pub fn load(
        machine: &MachineArgs,
        target: &Target,
        gpus_per_node: Option<u32>,
    ) -> Result<Option<OnHosts>, Failure> {
        let Some(path) = &machine.hosts else {
            return Ok(None);
        };
        let hosts =
            hosts_file::read_with(path, &machine.hosts_read.options()).map_err(Failure::Message)?;
        let g = match gpus_per_node {
            Some(g) => g,
            None => common_gpus(&hosts).ok_or_else(|| {
                Failure::Message(format!(
                    "--hosts {}: the hosts do not all give one GPU count: give --gpus-per-node",
                    path.display()
                ))
            })?,
        };
        let (plan, order) = if machine.placed {
            let Target::Layout { layout, .. } = target else {
                return Err(Failure::Message(
                    "--placed takes a layout (place's must-fit kinds); for a mesh, place it with `place --emit` and check the table in that order".to_string(),
                ));
            };
            let options = PlaceOptions::default()
                .gpus_per_node(g)
                .shortfall(Shortfall::Straddle);
            let (_, plan) = place_layout(layout, &default_must_fit(layout), &hosts, &options)?;
            (plan, "placed")
        } else {
            (NodePlan::plain(target.world_size(), &hosts, g)?, "table")
        };
        Ok(Some(OnHosts {
            hosts,
            plan,
            order,
            file: path.display().to_string(),
        }))
    }
}

/// The GPU count every host gives, when they agree.
fn common_gpus(hosts: &Hosts) -> Option<u32> {
    let mut counts = hosts.iter().filter_map(|h| h.gpus);
    let first = counts.next()?;
    counts.all(|c| c == first).then_some(first)
}
