//! A job placed on its hosts, whole: the one value the command line's
//! `place` (and `check --hosts`, `rank --hosts`, `relayout --hosts`) and
//! Python's `place` read their answers from.

use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::kind::Kind;
use crate::layout::Layout;
use crate::machine::host_failure::HostFailure;
use crate::machine::hosts::Hosts;
use crate::machine::launcher::Launcher;
use crate::machine::layout_place::{default_must_fit, place_layout};
use crate::machine::place::{
    KindCrossing, KindGroups, NodePlan, PlaceOptions, Shortfall, place_with,
};
use crate::mesh::Mesh;

/// The dims of a mesh kept inside a domain unless told, those it has.
const MESH_MUST_FIT: [&str; 3] = ["tp", "cp", "ep"];

/// A job placed on a host table: the table, the node order
/// ([`NodePlan`], with every kind placed and how it falls by level, placed
/// and in the table's order), the plain order of the table for comparison,
/// the must-fit kinds' groups, and the smaller layout of
/// [`Shortfall::Shrink`]. Built once; every answer (crossings by level,
/// host names, launcher files, the failure of hosts) is read from it.
///
/// ```
/// use rank_layout::machine::{Hosts, Launcher, PlaceOptions, Placed};
/// use rank_layout::{Config, Layout};
/// // Two racks of 2 nodes of 4 GPUs, listed interleaved; tp 8 is 2 nodes.
/// let hosts = Hosts::parse_plain("n0 rackA 4\nn1 rackB 4\nn2 rackA 4\nn3 rackB 4\n")?;
/// let layout = Layout::new(&Config::new().tp(8).world_size(16))?;
/// let placed = Placed::layout(&layout, None, hosts, &PlaceOptions::default())?;
/// assert_eq!(placed.node_hosts(), ["n0", "n2", "n1", "n3"]);
/// let tp = &placed.crossings()[0];
/// assert_eq!((tp.placed.domain_crossing(), tp.plain.as_ref().map(|p| p.domain_crossing())), (0, Some(2)));
/// assert_eq!(placed.file(Launcher::Torchrun).lines().nth(1), Some("n2 1"));
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    hosts: Hosts,
    rank_offset: u32,
    layout: Option<Layout>,
    shrunk: Option<Shrunk>,
    plan: NodePlan,
    plain: Option<NodePlan>,
    must_fit: Vec<KindGroups>,
}

/// The smaller job of [`Shortfall::Shrink`]: its data-parallel and world
/// sizes, and those asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Shrunk {
    /// Its data-parallel size.
    pub dp: u32,
    /// Its world size.
    pub world_size: u32,
    /// The data-parallel size asked.
    pub from_dp: u32,
    /// The world size asked.
    pub from_world_size: u32,
}

impl Placed {
    /// `layout` placed on `hosts`, its `must_fit` kinds (default:
    /// [`default_must_fit`]) inside domains, as [`place_layout`] places it;
    /// the GPUs per node are [`Hosts::gpus_per_node`] of
    /// `options.gpus_per_node`.
    ///
    /// # Errors
    /// The GPU count's ([`Hosts::gpus_per_node`]), the layout's for a kind
    /// it does not have, and [`place_layout`]'s.
    pub fn layout(
        layout: &Layout,
        must_fit: Option<&[Kind]>,
        hosts: Hosts,
        options: &PlaceOptions,
    ) -> Result<Placed> {
        let options = resolved(&hosts, options)?;
        let kinds = must_fit.map_or_else(|| default_must_fit(layout), <[Kind]>::to_vec);
        let (placed, plan) = place_layout(layout, &kinds, &hosts, &options)?;
        let shrunk = (placed.world_size() != layout.world_size()).then(|| Shrunk {
            dp: placed.sizes().dp,
            world_size: placed.world_size(),
            from_dp: layout.sizes().dp,
            from_world_size: layout.world_size(),
        });
        let must_fit = kinds
            .iter()
            .map(|&k| KindGroups::of_layout(&placed, k))
            .collect::<Result<Vec<_>>>()?;
        Ok(Placed::new(
            hosts,
            placed.rank_offset(),
            Some(placed),
            shrunk,
            plan,
            must_fit,
        ))
    }

    /// `mesh` placed on `hosts`, the groups of its `must_fit` dim sets
    /// (default: its `tp`, `cp` and `ep` dims, those it has) inside
    /// domains and those of its other dim sets (its dims, its views' dims
    /// and its flattens) under few parents of the topology tree, as
    /// [`place`](crate::machine::place) places them.
    ///
    /// # Errors
    /// The GPU count's; [`Error::NoPlacement`] for [`Shortfall::Shrink`]
    /// (a mesh has no data-parallel size to lower); the mesh's for a dim
    /// set it does not have; [`place`](crate::machine::place)'s.
    pub fn mesh(
        mesh: &Mesh,
        must_fit: Option<&[&str]>,
        hosts: Hosts,
        options: &PlaceOptions,
    ) -> Result<Placed> {
        if options.shortfall == Shortfall::Shrink {
            return Err(Error::NoPlacement {
                problem: "the shrink policy lowers a layout's data-parallel size: a mesh has none (give a layout, or the straddle or fail policy)".to_string(),
            });
        }
        let names: Vec<&str> = match must_fit {
            Some(names) => names.to_vec(),
            None => MESH_MUST_FIT
                .into_iter()
                .filter(|n| mesh.groups(n).is_ok())
                .collect(),
        };
        let kinds = names
            .iter()
            .map(|n| KindGroups::of_mesh(mesh, n))
            .collect::<Result<Vec<_>>>()?;
        let others = || {
            mesh_sets(mesh)
                .iter()
                .filter(|set| !names.contains(&set.as_str()))
                .map(|set| KindGroups::of_mesh(mesh, set))
                .collect::<Result<Vec<_>>>()
                .map(Cow::Owned)
        };
        let options = resolved(&hosts, options)?;
        let plan = place_with(mesh.world_size(), &kinds, others, &hosts, &options)?;
        Ok(Placed::new(
            hosts,
            mesh.rank_offset(),
            None,
            None,
            plan,
            kinds,
        ))
    }

    /// A job of `world` ranks (counted from 0) placed on `hosts`, the
    /// groups of `must_fit` inside domains and those of `others` under few
    /// parents of the topology tree, as [`place`](crate::machine::place)
    /// places them.
    ///
    /// # Errors
    /// The GPU count's and [`place`](crate::machine::place)'s.
    pub fn groups(
        world: u32,
        must_fit: Vec<KindGroups>,
        others: &[KindGroups],
        hosts: Hosts,
        options: &PlaceOptions,
    ) -> Result<Placed> {
        let options = resolved(&hosts, options)?;
        let plan = place_with(
            world,
            &must_fit,
            || Ok(Cow::Borrowed(others)),
            &hosts,
            &options,
        )?;
        Ok(Placed::new(hosts, 0, None, None, plan, must_fit))
    }

    /// A job of `world` ranks from `rank_offset` in the table's plain
    /// order: node after node on the first usable hosts of the table's
    /// canonical order, the order a launcher that knows no topology (and
    /// `srun` over the nodelist) starts ranks in; `gpus_per_node` as
    /// [`Hosts::gpus_per_node`] gives it.
    ///
    /// # Errors
    /// The GPU count's; [`Error::NoPlacement`] when the usable hosts are
    /// too few.
    pub fn table_order(
        world: u32,
        rank_offset: u32,
        hosts: Hosts,
        gpus_per_node: Option<u32>,
    ) -> Result<Placed> {
        let g = hosts.gpus_per_node(gpus_per_node)?;
        let plan = NodePlan::plain(world, &hosts, g)?;
        Ok(Placed::new(
            hosts,
            rank_offset,
            None,
            None,
            plan,
            Vec::new(),
        ))
    }

    fn new(
        hosts: Hosts,
        rank_offset: u32,
        layout: Option<Layout>,
        shrunk: Option<Shrunk>,
        plan: NodePlan,
        must_fit: Vec<KindGroups>,
    ) -> Placed {
        let world = nodes_ranks(&plan);
        let plain = NodePlan::plain(world, &hosts, plan.gpus_per_node).ok();
        Placed {
            hosts,
            rank_offset,
            layout,
            shrunk,
            plan,
            plain,
            must_fit,
        }
    }

    /// The host table.
    pub fn hosts(&self) -> &Hosts {
        &self.hosts
    }

    /// The node order.
    pub fn plan(&self) -> &NodePlan {
        &self.plan
    }

    /// The table's plain order (the job on the first usable hosts of the
    /// table's order), `None` when the table cannot hold the job so.
    pub fn plain(&self) -> Option<&NodePlan> {
        self.plain.as_ref()
    }

    /// The layout placed (the smaller one after [`Shortfall::Shrink`]);
    /// `None` for a mesh or groups.
    pub fn placed_layout(&self) -> Option<&Layout> {
        self.layout.as_ref()
    }

    /// The smaller job of [`Shortfall::Shrink`], when the layout shrank.
    pub fn shrunk(&self) -> Option<Shrunk> {
        self.shrunk
    }

    /// The must-fit kinds' groups, as ranks of the job.
    pub fn must_fit(&self) -> &[KindGroups] {
        &self.must_fit
    }

    /// The job's ranks.
    pub fn world_size(&self) -> u32 {
        nodes_ranks(&self.plan)
    }

    /// The job's first rank (a layout's or mesh's `rank_offset`).
    pub fn rank_offset(&self) -> u32 {
        self.rank_offset
    }

    /// GPUs (ranks) per node.
    pub fn gpus_per_node(&self) -> u32 {
        self.plan.gpus_per_node
    }

    /// How each must-fit kind's groups fall, placed and plain (as the
    /// placement compared them: [`NodePlan::kinds`]).
    pub fn crossings(&self) -> Vec<KindCrossing> {
        self.plan
            .kinds
            .iter()
            .filter(|k| k.must_fit)
            .cloned()
            .collect()
    }

    /// How every kind placed falls, placed and plain: the must-fit kinds,
    /// then the others in the order of the comparison
    /// ([`NodePlan::kinds`]); empty for [`Placed::table_order`].
    pub fn kinds(&self) -> &[KindCrossing] {
        &self.plan.kinds
    }

    /// How `kind`'s groups (as ranks of the job) fall, placed and plain;
    /// a kind named as a must-fit kind is marked so.
    pub fn crossing(&self, kind: &KindGroups) -> KindCrossing {
        KindCrossing {
            placed: self.plan.crossing(&self.hosts, kind),
            plain: self.plain.as_ref().map(|p| p.crossing(&self.hosts, kind)),
            must_fit: self.must_fit.iter().any(|m| m.name == kind.name),
        }
    }

    /// Whether the group of `members` (ranks of the job, from 0) sits on
    /// hosts of more than one domain in the placed order (a host of an
    /// unknown domain is a domain of its own).
    pub fn crosses_domains(&self, members: &[u32]) -> bool {
        let one = KindGroups::new(String::new(), vec![members.to_vec()]);
        self.plan.crossing(&self.hosts, &one).domain_crossing() > 0
    }

    /// The name of host `i` of the table (`""` for an index it lacks).
    pub fn host_name(&self, i: usize) -> &str {
        self.hosts.get(i).map_or("", |h| h.name.as_str())
    }

    /// The host of each logical node, by name.
    pub fn node_hosts(&self) -> Vec<&str> {
        self.names(&self.plan.node_hosts)
    }

    /// The healthy hosts the job does not use, by name.
    pub fn idle_hosts(&self) -> Vec<&str> {
        self.names(&self.plan.idle)
    }

    /// The hosts not healthy, by name.
    pub fn unhealthy_hosts(&self) -> Vec<&str> {
        self.names(&self.plan.unhealthy)
    }

    fn names(&self, indices: &[usize]) -> Vec<&str> {
        indices.iter().map(|&i| self.host_name(i)).collect()
    }

    /// The logical node and the host (its index in the table) of `rank`
    /// (a rank of the layout or mesh, from its `rank_offset`); `None`
    /// outside the job.
    pub fn node_of(&self, rank: u32) -> Option<(u32, usize)> {
        let job = rank.checked_sub(self.rank_offset)?;
        let node = job / self.plan.gpus_per_node.max(1);
        Some((node, self.plan.host_of(job)?))
    }

    /// `launcher`'s file for this placement.
    pub fn file(&self, launcher: Launcher) -> String {
        launcher.file(&self.plan, &self.hosts)
    }

    /// The command line that uses `launcher`'s file saved as `path`.
    pub fn command(&self, launcher: Launcher, path: &str) -> String {
        launcher.command(&self.plan, &self.hosts, path)
    }

    /// The failure of this job when the hosts named `failed_hosts` fail
    /// and, besides, the ranks `failed_ranks` (of the layout, from its
    /// `rank_offset`): see [`HostFailure::new`].
    ///
    /// # Errors
    /// [`Error::NoRelayout`] naming a failed host the table does not
    /// have.
    pub fn fail(&self, failed_hosts: &[&str], failed_ranks: &[u32]) -> Result<HostFailure> {
        HostFailure::new(
            &self.plan,
            &self.hosts,
            self.rank_offset,
            failed_hosts,
            failed_ranks,
        )
    }
}

/// The ranks of `plan`'s nodes: the job's world, which fits a `u32` (the
/// plan was made for it).
fn nodes_ranks(plan: &NodePlan) -> u32 {
    let nodes = u32::try_from(plan.node_hosts.len()).unwrap_or(u32::MAX);
    nodes.saturating_mul(plan.gpus_per_node)
}

/// The dim sets of `mesh` with groups: its dims, each view's dims (as
/// `view:dim`) and its flattens.
fn mesh_sets(mesh: &Mesh) -> Vec<String> {
    let mut sets: Vec<String> = mesh.dims().map(|(name, _)| name.to_owned()).collect();
    for view in mesh.views() {
        if let Ok(dims) = mesh.view_dims(view) {
            sets.extend(dims.map(|(name, _)| format!("{view}:{name}")));
        }
    }
    sets.extend(mesh.flattens().map(|(name, _)| name.to_owned()));
    sets
}

/// `options` with the GPUs per node of [`Hosts::gpus_per_node`].
fn resolved(hosts: &Hosts, options: &PlaceOptions) -> Result<PlaceOptions> {
    let mut options = options.clone();
    options.gpus_per_node = Some(hosts.gpus_per_node(options.gpus_per_node)?);
    Ok(options)
}
