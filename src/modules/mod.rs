//! Multi-module layouts: named modules (a vision encoder, an audio
//! encoder, a language model), each a mesh of `tp`, `gtp`, `cp`, `dp` and
//! `pp` at its own rank offset or all on the same ranks, joined by the
//! edges of a directed acyclic graph, and the bridge plan of every edge,
//! built by coordinates (Megatron-Core's MIMO, without its bugs).
//!
//! ```
//! use rank_layout::{Mesh, Modules, modules::Spans};
//! let modules = Modules::new(
//!     [
//!         ("vision", Mesh::new([("tp", 2), ("dp", 2)])?),            // ranks 0-3
//!         ("audio", Mesh::new([("dp", 4)])?),                        // ranks 4-7
//!         ("llm", Mesh::new([("tp", 2), ("dp", 2), ("pp", 2)])?),    // ranks 8-15
//!     ],
//!     Spans::Consecutive,
//! )?
//! .edge("vision", "llm")?
//! .edge("audio", "llm")?;
//! assert_eq!(modules.module_of(9)?, "llm");
//! assert_eq!(modules.total_stages(), 3); // max(1, 1) + 2
//! assert_eq!(modules.stage(13)?, 2);     // llm's second stage
//! let plan = modules.bridge("audio", "llm")?;
//! assert_eq!(plan.pairs, vec![(4, 8), (5, 8), (6, 10), (7, 10)]);
//! assert!(modules.edge("llm", "vision").is_err()); // a cycle
//! # Ok::<(), rank_layout::Error>(())
//! ```

mod alignment;
mod bridge;
mod colocated;
mod graph;
mod group_list;
mod lanes;
mod pairing;
mod role;
mod spec;
#[cfg(feature = "serde")]
mod spec_file;

pub use bridge::{Bridge, BridgeKind, EdgeInfo};
pub use colocated::{ColocatedMode, ColocatedPlan};
pub use group_list::GroupList;
pub use pairing::Direction;
pub use role::BridgeRole;
pub use spec::{EdgeSpec, ModuleSpec, ModulesSpec};

use crate::cast::to_u64;
use crate::error::{Error, Result};
use crate::mesh::{Mesh, Selection};
use crate::split::Split;
use bridge::Edge;
use graph::Graph;
use lanes::{LaneGrid, MODULE_DIMS};

/// Where the modules' ranks are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Spans {
    /// One after the other in declaration order, the first at its mesh's
    /// rank offset; a later mesh's offset must be 0 or the one it gets.
    Consecutive,
    /// All on the first module's ranks; every module has as many ranks.
    Colocated,
    /// At their meshes' own offsets, which must either tile one span in
    /// declaration order or all be the same span (Megatron-Core's
    /// HyperCommGrid `rank_offset`s).
    AsGiven,
}

/// Named modules on their rank spans, the edges between them, and their
/// bridges. A plain value (`Clone + Eq + Debug`); every check is made when
/// it is built. What it means is written in [`semantics`](crate::semantics)
/// (section 9).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Modules {
    names: Vec<String>,
    meshes: Vec<Mesh>,
    grids: Vec<LaneGrid>,
    colocated: bool,
    graph: Graph,
    edges: Vec<Edge>,
}

impl Modules {
    /// The modules `modules` (name, mesh), placed by `spans`, with no edge.
    /// Each mesh's dims are among `tp`, `gtp`, `cp`, `dp`, `pp` (any order;
    /// one left out has size 1); it may have views (an `expert` view). A
    /// Megatron [`Config`](crate::Config) is a module through
    /// [`Layout::mesh`](crate::Layout::mesh).
    ///
    /// # Errors
    /// [`Error::NoModules`]; [`Error::BadName`] and [`Error::DuplicateName`]
    /// for module names; [`Error::ModuleDim`]; [`Error::BadRankMap`] for a
    /// mesh with a rank map; [`Error::ModuleSpans`] for spans that neither
    /// tile one span nor coincide; [`Error::Overflow`].
    pub fn new<N: Into<String>>(
        modules: impl IntoIterator<Item = (N, Mesh)>,
        spans: Spans,
    ) -> Result<Modules> {
        let mut names: Vec<String> = Vec::new();
        let mut meshes: Vec<Mesh> = Vec::new();
        for (name, mesh) in modules {
            let name: String = name.into();
            if !crate::mesh::is_name(&name) {
                return Err(Error::BadName {
                    what: "module",
                    name,
                });
            }
            if names.contains(&name) {
                return Err(Error::DuplicateName {
                    name,
                    place: "the modules".into(),
                });
            }
            names.push(name);
            meshes.push(mesh);
        }
        let Some(first) = meshes.first() else {
            return Err(Error::NoModules);
        };
        let start = first.rank_offset();
        let colocated = match spans {
            Spans::Consecutive => false,
            Spans::Colocated => true,
            Spans::AsGiven => {
                meshes.len() > 1
                    && meshes
                        .iter()
                        .all(|m| m.rank_offset() == start && m.world_size() == first.world_size())
            }
        };
        let mut next = u64::from(start);
        for (name, mesh) in names.iter().zip(meshes.iter_mut()) {
            let want = if colocated { u64::from(start) } else { next };
            let given = mesh.rank_offset();
            let free = matches!(spans, Spans::Consecutive | Spans::Colocated) && given == 0;
            if u64::from(given) != want && !free {
                return Err(Error::ModuleSpans {
                    module: name.clone(),
                    first: u64::from(given),
                    last: u64::from(given) + u64::from(mesh.world_size()) - 1,
                    expected: want,
                    colocated,
                });
            }
            if u64::from(given) != want {
                *mesh = mesh
                    .clone()
                    .with_rank_offset(u32::try_from(want).map_err(|_| Error::Overflow {
                        what: format!("module {name} starting at rank {want}"),
                    })?)?;
            }
            next = mesh.rank_end();
        }
        if colocated {
            if let Some((name, mesh)) = names
                .iter()
                .zip(&meshes)
                .find(|(_, m)| m.world_size() != meshes.first().map_or(0, Mesh::world_size))
            {
                return Err(Error::ModuleSpans {
                    module: name.clone(),
                    first: u64::from(mesh.rank_offset()),
                    last: mesh.rank_end() - 1,
                    expected: u64::from(start),
                    colocated,
                });
            }
        }
        let grids = names
            .iter()
            .zip(&meshes)
            .map(|(n, m)| LaneGrid::new(n, m))
            .collect::<Result<Vec<_>>>()?;
        let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let pp: Vec<u32> = grids.iter().map(|g| g.pp.size).collect();
        let graph = Graph::new(&name_refs, &pp, &[])?;
        Ok(Modules {
            names,
            meshes,
            grids,
            colocated,
            graph,
            edges: Vec::new(),
        })
    }

    /// The same modules with the edge `src -> dst` (activations flow from
    /// `src`'s last stage to `dst`'s first).
    ///
    /// # Errors
    /// [`Error::UnknownName`] for a module that is not one;
    /// [`Error::ModuleCycle`] when the edge closes a cycle (an edge from a
    /// module to itself included); [`Error::DuplicateName`] for an edge
    /// given twice; [`Error::LanesNotPaired`] when neither module's lane
    /// count divides the other's.
    pub fn edge(mut self, src: &str, dst: &str) -> Result<Modules> {
        let (s, d) = (self.index(src)?, self.index(dst)?);
        let mut pairs: Vec<(usize, usize)> = self.edges.iter().map(|e| (e.src, e.dst)).collect();
        pairs.push((s, d));
        let name_refs: Vec<&str> = self.names.iter().map(String::as_str).collect();
        let pp: Vec<u32> = self.grids.iter().map(|g| g.pp.size).collect();
        let graph = Graph::new(&name_refs, &pp, &pairs)?;
        let grid = |i: usize| self.grids.get(i).ok_or(Error::NoModules);
        let edge = Edge::new((s, grid(s)?, src), (d, grid(d)?, dst), self.colocated)?;
        self.edges.push(edge);
        // Keep the edges in the graph's order: by source, then as given.
        let mut ordered = Vec::with_capacity(self.edges.len());
        for &(a, b) in &graph.edges {
            if let Some(e) = self.edges.iter().find(|e| e.src == a && e.dst == b) {
                ordered.push(e.clone());
            }
        }
        self.edges = ordered;
        self.graph = graph;
        Ok(self)
    }

    /// The same modules with every edge of `edges` added in turn.
    ///
    /// # Errors
    /// As [`edge`](Self::edge).
    pub fn edges_from<'a>(
        self,
        edges: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Modules> {
        edges.into_iter().try_fold(self, |m, (s, d)| m.edge(s, d))
    }

    fn index(&self, name: &str) -> Result<usize> {
        self.names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| Error::UnknownName {
                what: "module",
                name: name.to_owned(),
                place: "the modules".into(),
                known: self.names.join(", "),
            })
    }

    fn grid(&self, i: usize) -> Result<&LaneGrid> {
        self.grids.get(i).ok_or(Error::NoModules)
    }

    /// The modules' names, in declaration order.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.names.iter().map(String::as_str)
    }

    /// The number of modules.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Always `false`: there is at least one module.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The mesh of module `name`, at its own offset: every answer a mesh
    /// gives (groups of any dim set, coordinates, splits, `fill`).
    ///
    /// # Errors
    /// [`Error::UnknownName`].
    pub fn module(&self, name: &str) -> Result<&Mesh> {
        let i = self.index(name)?;
        self.meshes.get(i).ok_or(Error::NoModules)
    }

    /// Whether every module is on the same ranks.
    pub fn is_colocated(&self) -> bool {
        self.colocated
    }

    /// The first rank.
    pub fn rank_offset(&self) -> u32 {
        self.grids.first().map_or(0, |g| g.offset)
    }

    /// The number of ranks of all modules together.
    pub fn world_size(&self) -> u64 {
        self.rank_end() - u64::from(self.rank_offset())
    }

    /// One past the last rank.
    pub fn rank_end(&self) -> u64 {
        self.grids.iter().map(LaneGrid::end).max().unwrap_or(0)
    }

    /// The edges `(source, destination)`, by source's declaration order,
    /// then in the order added.
    pub fn edges(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.edges.iter().map(|e| {
            (
                self.names.get(e.src).map_or("", String::as_str),
                self.names.get(e.dst).map_or("", String::as_str),
            )
        })
    }

    /// The number of pipeline stages: the longest path through the graph,
    /// each module weighted by its pp (Megatron-Core's
    /// `MultiModulePipelineCommunicator.total_stages`).
    pub fn total_stages(&self) -> u32 {
        self.graph.total_stages
    }

    /// Module `name`'s first stage: the longest path into it.
    ///
    /// # Errors
    /// [`Error::UnknownName`].
    pub fn first_stage(&self, name: &str) -> Result<u32> {
        let i = self.index(name)?;
        Ok(self.graph.first_stage.get(i).copied().unwrap_or(0))
    }

    /// The modules `rank` belongs to, in declaration order (one for
    /// separate spans, every module when colocated).
    pub fn modules_of(&self, rank: u32) -> impl Iterator<Item = &str> + '_ {
        self.names
            .iter()
            .zip(&self.grids)
            .filter(move |(_, g)| g.contains(rank))
            .map(|(n, _)| n.as_str())
    }

    /// The first module `rank` belongs to.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`].
    pub fn module_of(&self, rank: u32) -> Result<&str> {
        self.modules_of(rank)
            .next()
            .ok_or_else(|| self.out_of_range(rank))
    }

    fn out_of_range(&self, rank: u32) -> Error {
        Error::RankOutOfRange {
            rank: u64::from(rank),
            first: self.rank_offset(),
            last: self.rank_end().saturating_sub(1),
        }
    }

    /// `rank`'s global pipeline stage in its first module: the module's
    /// first stage plus its pp coordinate (Megatron-Core's `current_stage`).
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`].
    pub fn stage(&self, rank: u32) -> Result<u32> {
        let name = self.module_of(rank)?;
        self.stage_in(rank, name)
    }

    /// `rank`'s global stage in module `name`.
    ///
    /// # Errors
    /// [`Error::UnknownName`]; [`Error::RankOutOfRange`] for a rank outside
    /// the module.
    pub fn stage_in(&self, rank: u32, name: &str) -> Result<u32> {
        let i = self.index(name)?;
        let c = self
            .grid(i)?
            .coord(rank)
            .ok_or_else(|| self.out_of_range(rank))?;
        Ok(self.graph.first_stage.get(i).copied().unwrap_or(0) + c.pp)
    }

    fn edge_index(&self, src: &str, dst: &str) -> Result<usize> {
        let (s, d) = (self.index(src)?, self.index(dst)?);
        self.edges
            .iter()
            .position(|e| e.src == s && e.dst == d)
            .ok_or_else(|| Error::UnknownName {
                what: "edge",
                name: format!("{src} -> {dst}"),
                place: "the modules".into(),
                known: self
                    .edges()
                    .map(|(a, b)| format!("{a} -> {b}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    fn edge_at(&self, e: usize) -> Result<(&Edge, &LaneGrid, &LaneGrid)> {
        let edge = self.edges.get(e).ok_or(Error::NoModules)?;
        Ok((edge, self.grid(edge.src)?, self.grid(edge.dst)?))
    }

    /// The bridge plan of the edge `src -> dst`, ranks global.
    ///
    /// # Errors
    /// [`Error::UnknownName`] for a module or an edge that is not one;
    /// [`Error::OutOfMemory`] for a plan the machine cannot hold.
    pub fn bridge(&self, src: &str, dst: &str) -> Result<Bridge> {
        let (edge, a, b) = self.edge_at(self.edge_index(src, dst)?)?;
        edge.plan(a, b, (src, dst))
    }

    /// The bridge plan of every edge, in [`edges`](Self::edges) order.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] for a plan the machine cannot hold.
    pub fn bridges(&self) -> Result<Vec<Bridge>> {
        self.edges().map(|(s, d)| self.bridge(s, d)).collect()
    }

    /// The edge `src -> dst` in brief, in O(1): direction, scale, and for
    /// colocated modules the mode and why (no plan is built).
    ///
    /// ```
    /// use rank_layout::{Mesh, Modules, modules::{ColocatedMode, Direction, Spans}};
    /// let m = Modules::new(
    ///     [("a", Mesh::new([("tp", 2), ("dp", 4)])?), ("b", Mesh::new([("dp", 2), ("tp", 4)])?)],
    ///     Spans::Colocated,
    /// )?
    /// .edge("a", "b")?;
    /// let e = m.edge_info("a", "b")?;
    /// assert_eq!((e.direction, e.scale, e.mode), (Direction::FanIn, 2, Some(ColocatedMode::P2p)));
    /// assert!(e.reason.unwrap().starts_with("rank 1 is on source lane 0"));
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::UnknownName`] for a module or an edge that is not one.
    pub fn edge_info(&self, src: &str, dst: &str) -> Result<EdgeInfo> {
        let (edge, _, _) = self.edge_at(self.edge_index(src, dst)?)?;
        Ok(EdgeInfo {
            src: src.to_owned(),
            dst: dst.to_owned(),
            direction: edge.direction,
            scale: edge.scale,
            mode: edge.colocated.as_ref().map(|c| {
                if c.collective() {
                    ColocatedMode::Collective
                } else {
                    ColocatedMode::P2p
                }
            }),
            reason: edge.colocated.as_ref().and_then(|c| c.reason.clone()),
        })
    }

    /// The communicator kinds the edge `src -> dst` needs, each one split
    /// (see [`bridge_split`](Self::bridge_split)).
    ///
    /// # Errors
    /// [`Error::UnknownName`].
    pub fn bridge_kinds(&self, src: &str, dst: &str) -> Result<Vec<BridgeKind>> {
        let (edge, a, b) = self.edge_at(self.edge_index(src, dst)?)?;
        Ok(edge.kinds(a, b))
    }

    /// `rank`'s color and key in the `kind` groups of the edge `src ->
    /// dst`, or `None` when it is in none of them; O(dims).
    ///
    /// # Errors
    /// [`Error::UnknownName`]; [`Error::NotInBridge`] for a kind the edge
    /// does not build; [`Error::RankOutOfRange`].
    pub fn bridge_split(
        &self,
        rank: u32,
        src: &str,
        dst: &str,
        kind: BridgeKind,
    ) -> Result<Option<Split>> {
        self.check_rank(rank)?;
        let (edge, a, b) = self.edge_at(self.edge_index(src, dst)?)?;
        if !edge.kinds(a, b).contains(&kind) {
            return Err(Error::NotInBridge {
                kind: kind.name(),
                src: src.to_owned(),
                dst: dst.to_owned(),
            });
        }
        Ok(role::split(edge, a, b, rank, kind))
    }

    /// The members of `rank`'s `kind` group on the edge `src -> dst`, in
    /// key order, or `None` when it is in none; O(group) (the bridge group:
    /// O(lanes)), not the whole plan.
    ///
    /// ```
    /// use rank_layout::{Mesh, Modules, modules::{BridgeKind, Spans}};
    /// let modules = Modules::new(
    ///     [("enc", Mesh::new([("tp", 2), ("dp", 2)])?), ("llm", Mesh::new([("tp", 4)])?)],
    ///     Spans::Consecutive,
    /// )?
    /// .edge("enc", "llm")?;
    /// assert_eq!(modules.bridge_group_of(2, "enc", "llm", BridgeKind::SrcBroadcast)?, Some(vec![2, 3]));
    /// assert_eq!(modules.bridge_group_of(2, "enc", "llm", BridgeKind::Bridge)?, None);
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`bridge_split`](Self::bridge_split).
    pub fn bridge_group_of(
        &self,
        rank: u32,
        src: &str,
        dst: &str,
        kind: BridgeKind,
    ) -> Result<Option<Vec<u32>>> {
        let Some(split) = self.bridge_split(rank, src, dst, kind)? else {
            return Ok(None);
        };
        let (edge, a, b) = self.edge_at(self.edge_index(src, dst)?)?;
        Ok(Some(role::members(edge, a, b, kind, split.color)))
    }

    /// `rank`'s role on the edge `src -> dst`: leader or not, its peers,
    /// its slot, its split in each of the edge's kinds; O(dims) plus its
    /// peers.
    ///
    /// # Errors
    /// [`Error::UnknownName`]; [`Error::RankOutOfRange`].
    pub fn role(&self, rank: u32, src: &str, dst: &str) -> Result<BridgeRole> {
        self.check_rank(rank)?;
        let (edge, a, b) = self.edge_at(self.edge_index(src, dst)?)?;
        Ok(role::role(edge, a, b, rank, (src, dst)))
    }

    /// `rank`'s role on every edge, in [`edges`](Self::edges) order.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`].
    pub fn roles(&self, rank: u32) -> Result<Vec<BridgeRole>> {
        self.check_rank(rank)?;
        self.edges().map(|(s, d)| self.role(rank, s, d)).collect()
    }

    fn check_rank(&self, rank: u32) -> Result<()> {
        if rank < self.rank_offset() || u64::from(rank) >= self.rank_end() {
            return Err(self.out_of_range(rank));
        }
        Ok(())
    }

    /// The rounds of a dim set's communicators: one when the modules are
    /// on separate spans (their groups never share a rank), one per module
    /// when colocated.
    pub fn rounds(&self) -> usize {
        if self.colocated { self.len() } else { 1 }
    }

    /// `rank`'s color and key in the groups of the dim set `dims` (names
    /// of `tp`, `gtp`, `cp`, `dp`, `pp`, or a view's or flatten's) in
    /// round `round` of [`rounds`](Self::rounds): on separate spans every
    /// module's groups in one round, numbered module after module; when
    /// colocated module `round`'s. A dim a module lacks has size 1 there.
    /// `None` for a rank outside the round's modules.
    ///
    /// ```
    /// use rank_layout::{Mesh, Modules, Split, modules::Spans};
    /// let modules = Modules::new(
    ///     [("enc", Mesh::new([("tp", 2), ("dp", 2)])?), ("llm", Mesh::new([("tp", 4)])?)],
    ///     Spans::Consecutive,
    /// )?;
    /// // enc's tp groups are colors 0 and 1; llm's one group is color 2.
    /// assert_eq!(modules.split(6, "tp", 0)?, Some(Split { color: 2, key: 2 }));
    /// assert_eq!(modules.split(3, "dp", 0)?, Some(Split { color: 1, key: 1 }));
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`]; [`Error::InvalidArgument`] for a round
    /// past the last; the errors
    /// of [`Mesh::select`] for a dim set none of the modules can answer.
    pub fn split(&self, rank: u32, dims: &str, round: usize) -> Result<Option<Split>> {
        self.check_rank(rank)?;
        let sets = self.selections(dims)?;
        if round >= self.rounds() {
            return Err(Error::InvalidArgument {
                name: "round".into(),
                value: round.to_string(),
                expected: "a round below Modules::rounds()",
            });
        }
        let mut shift = 0u64;
        for (i, (mesh, set)) in self.meshes.iter().zip(&sets).enumerate() {
            if self.colocated && i != round {
                continue;
            }
            if *set == ModuleSet::Missing {
                continue;
            }
            if u64::from(rank) < mesh.rank_end() && rank >= mesh.rank_offset() {
                let s = match set {
                    ModuleSet::Dims(sel) => mesh.split_selected(rank, *sel)?,
                    _ => Split {
                        color: rank - mesh.rank_offset(),
                        key: 0,
                    },
                };
                let color = u64::from(s.color) + shift;
                return Ok(Some(Split {
                    color: u32::try_from(color).map_err(|_| Error::Overflow {
                        what: format!("the {dims} groups' colors"),
                    })?,
                    key: s.key,
                }));
            }
            shift += set.groups_in(mesh);
        }
        Ok(None)
    }

    /// The dim set `dims` in each module.
    ///
    /// # Errors
    /// The first module's error when no module has the dim set.
    fn selections(&self, dims: &str) -> Result<Vec<ModuleSet>> {
        let names: Vec<&str> = dims.split('-').collect();
        if names.iter().all(|n| MODULE_DIMS.contains(n)) {
            return self
                .meshes
                .iter()
                .map(|m| {
                    let present: Vec<&str> = names
                        .iter()
                        .copied()
                        .filter(|n| m.dims().any(|(d, _)| d == *n))
                        .collect();
                    if present.is_empty() {
                        Ok(ModuleSet::PerRank)
                    } else {
                        m.select_dims(None, &present).map(ModuleSet::Dims)
                    }
                })
                .collect();
        }
        let mut first_err = None;
        let sets: Vec<ModuleSet> = self
            .meshes
            .iter()
            .map(|m| match m.select(dims) {
                Ok(s) => ModuleSet::Dims(s),
                Err(e) => {
                    first_err.get_or_insert(e);
                    ModuleSet::Missing
                }
            })
            .collect();
        match first_err {
            Some(e) if sets.iter().all(|s| *s == ModuleSet::Missing) => Err(e),
            _ => Ok(sets),
        }
    }
}

/// What a dim set is in one module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ModuleSet {
    /// The module lacks it (a view or flatten of another module's).
    Missing,
    /// Every dim is one of the module vocabulary the module lacks: size 1,
    /// one group per rank.
    PerRank,
    /// Its dims in the module.
    Dims(Selection),
}

impl ModuleSet {
    /// The number of its groups in `mesh`.
    fn groups_in(self, mesh: &Mesh) -> u64 {
        match self {
            ModuleSet::Missing => 0,
            ModuleSet::PerRank => u64::from(mesh.world_size()),
            ModuleSet::Dims(s) => mesh.groups_selected(s).map_or(0, |g| to_u64(g.len())),
        }
    }
}
