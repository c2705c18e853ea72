//! What a command works on: a Megatron layout or a named mesh, and the dim
//! sets the reports are about (a layout's kinds, a mesh's dim sets: dims
//! joined by `-`, a view's dims after `view:`, a flatten's name).
//!
//! Everything a report asks of either (groups, spreads, sizes, names) is
//! answered here by the library, so that the reports do not tell the two
//! apart except where they print different things.

use std::fmt;

use rank_layout::machine::KindGroups;
use rank_layout::{Config, Error, Groups, Kind, Layout, Mesh, MeshSpec, Spread, Topology};

use crate::config::{MeshInput, Setup};
use crate::error::{Failure, build_layout};
use crate::format::experts;

/// A layout or a mesh.
// A command builds one target (suggest: one per candidate order, a few
// hundred at most), so the size of the larger variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Target {
    /// A Megatron layout.
    Layout {
        /// The layout.
        layout: Layout,
        /// Its configuration as given (to tell given sizes from derived ones).
        given: Config,
    },
    /// A named mesh.
    Mesh(MeshTarget),
}

/// A mesh, its specification and how it was written.
#[derive(Debug, Clone)]
pub struct MeshTarget {
    /// The mesh.
    pub mesh: Mesh,
    /// Its specification with every view and flatten (rebuilt in other
    /// orders by `suggest`).
    pub spec: MeshSpec,
    /// Written in DeviceMesh's order (`--device-mesh`).
    pub device_order: bool,
}

/// A set of dims: a layout's kind, or a mesh's dim set by its canonical
/// name (`cp-dp` in the mesh's order, `expert:ep`, a flatten's name).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DimSet {
    /// A kind of a layout.
    Kind(Kind),
    /// A dim set of a mesh.
    Mesh(String),
}

impl fmt::Display for DimSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DimSet::Kind(kind) => write!(f, "{kind}"),
            DimSet::Mesh(name) => f.write_str(name),
        }
    }
}

/// The library's error about `text` (given by `origin`), naming both.
fn about(origin: &str, text: &str, e: &Error) -> Failure {
    let message = e.to_string();
    if message.contains(text) {
        Failure::Message(format!("{origin}: {message}"))
    } else {
        Failure::Message(format!("{origin} {text:?}: {message}"))
    }
}

impl Target {
    /// The layout or the mesh of `setup`.
    ///
    /// # Errors
    /// [`Failure::Input`] for an invalid layout; [`Failure::Message`] for an
    /// invalid mesh, view or flatten, naming the flag (or key) and its text.
    pub fn build(setup: &Setup) -> Result<Target, Failure> {
        match &setup.mesh {
            None => Ok(Target::Layout {
                layout: build_layout(&setup.config)?,
                given: setup.config.clone(),
            }),
            Some(input) => Ok(Target::Mesh(MeshTarget::build(input)?)),
        }
    }

    /// The number of ranks.
    pub fn world_size(&self) -> u32 {
        match self {
            Target::Layout { layout, .. } => layout.world_size(),
            Target::Mesh(m) => m.mesh.world_size(),
        }
    }

    /// The first rank.
    pub fn rank_offset(&self) -> u32 {
        match self {
            Target::Layout { layout, .. } => layout.rank_offset(),
            Target::Mesh(m) => m.mesh.rank_offset(),
        }
    }

    /// One past the last rank.
    pub fn rank_end(&self) -> u64 {
        match self {
            Target::Layout { layout, .. } => layout.rank_end(),
            Target::Mesh(m) => m.mesh.rank_end(),
        }
    }

    /// Whether this is a mesh.
    pub fn is_mesh(&self) -> bool {
        matches!(self, Target::Mesh(_))
    }

    /// Every set: a layout's kinds; a mesh's dims, each view's dims and
    /// each flatten.
    pub fn all_sets(&self) -> Vec<DimSet> {
        match self {
            Target::Layout { layout, .. } => {
                layout.kinds().iter().copied().map(DimSet::Kind).collect()
            }
            Target::Mesh(m) => m.all_sets(),
        }
    }

    /// The sets named (without repeats), parsed: kinds of a layout (not
    /// yet checked to be the layout's), dim sets of a mesh (checked).
    ///
    /// # Errors
    /// [`Failure::Input`] for a name that is no kind, or no dim set of the
    /// mesh.
    pub fn parse_sets(&self, names: &[String]) -> Result<Vec<DimSet>, Failure> {
        let mut sets: Vec<DimSet> = Vec::with_capacity(names.len());
        for name in names {
            let set = self.parse_set(name)?;
            if !sets.contains(&set) {
                sets.push(set);
            }
        }
        Ok(sets)
    }

    /// One set named: a kind, or a mesh's dim set by its canonical name.
    ///
    /// # Errors
    /// As [`parse_sets`](Self::parse_sets).
    pub fn parse_set(&self, name: &str) -> Result<DimSet, Failure> {
        match self {
            Target::Layout { .. } => Ok(DimSet::Kind(name.parse()?)),
            Target::Mesh(m) => Ok(DimSet::Mesh(m.canonical(name)?)),
        }
    }

    /// `sets`, or every set when empty; each checked to be one of the
    /// target's.
    ///
    /// # Errors
    /// [`Failure::Input`] for a set the target does not have.
    pub fn sets_or_all(&self, sets: &[DimSet]) -> Result<Vec<DimSet>, Failure> {
        if sets.is_empty() {
            return Ok(self.all_sets());
        }
        for set in sets {
            let _ = self.groups(set)?;
        }
        Ok(sets.to_vec())
    }

    /// The groups of `set`.
    ///
    /// # Errors
    /// [`Failure::Input`] for a set the target does not have.
    pub fn groups(&self, set: &DimSet) -> Result<Groups<'_>, Failure> {
        match (self, set) {
            (Target::Layout { layout, .. }, DimSet::Kind(kind)) => Ok(layout.groups(*kind)?),
            (Target::Mesh(m), DimSet::Mesh(name)) => Ok(m.mesh.groups(name)?),
            _ => Err(mismatch(set)),
        }
    }

    /// `set`'s groups as ranks of the job (counted from the first rank),
    /// for the placement.
    ///
    /// # Errors
    /// A set it does not have.
    pub fn kind_groups(&self, set: &DimSet) -> Result<KindGroups, Failure> {
        match (self, set) {
            (Target::Layout { layout, .. }, DimSet::Kind(kind)) => {
                Ok(KindGroups::of_layout(layout, *kind)?)
            }
            (Target::Mesh(m), DimSet::Mesh(name)) => Ok(KindGroups::of_mesh(&m.mesh, name)?),
            _ => Err(mismatch(set)),
        }
    }

    /// Whether the target has `set`.
    pub fn has(&self, set: &DimSet) -> bool {
        self.groups(set).is_ok()
    }

    /// How the groups of `set` fall on `topology`.
    ///
    /// # Errors
    /// [`Failure::Input`] for a set the target does not have.
    pub fn spread(&self, set: &DimSet, topology: &Topology) -> Result<Spread, Failure> {
        match (self, set) {
            (Target::Layout { layout, .. }, DimSet::Kind(kind)) => {
                Ok(layout.spread(*kind, topology)?)
            }
            (Target::Mesh(m), DimSet::Mesh(name)) => Ok(m.mesh.spread(name, topology)?),
            _ => Err(mismatch(set)),
        }
    }

    /// The one axis or dim of `set` and its size, when it has one (a
    /// layout's `tp`, `etp`; a mesh's `tp` or `expert:ep`).
    pub fn single_dim(&self, set: &DimSet) -> Option<(String, u32)> {
        match (self, set) {
            (Target::Layout { layout, .. }, DimSet::Kind(kind)) => {
                let mut axes = kind.axis_set()?.iter();
                let first = axes.next()?;
                axes.next()
                    .is_none()
                    .then(|| (first.name().to_owned(), layout.sizes()[first]))
            }
            (Target::Mesh(m), DimSet::Mesh(name)) => m.single_dim(name),
            _ => None,
        }
    }

    /// The fastest axis or dim of size > 1 as given (a layout: the first
    /// written in its order).
    pub fn fastest(&self) -> Option<String> {
        match self {
            Target::Layout { layout, .. } => layout
                .config()
                .order
                .written()
                .first()
                .map(|a| a.name().to_owned()),
            Target::Mesh(m) => m
                .mesh
                .dims()
                .find(|(_, size)| *size > 1)
                .map(|(name, _)| name.to_owned()),
        }
    }

    /// Where the fastest axis or dim is written: `first in the order`,
    /// `first in the mesh`, `last in the device mesh`.
    pub fn fastest_place(&self) -> &'static str {
        match self {
            Target::Layout { .. } => "first in the order",
            Target::Mesh(m) if m.device_order => "last in the device mesh",
            Target::Mesh(_) => "first in the mesh",
        }
    }

    /// The words for the target's own axes or dims: `axes` or `dims`.
    pub fn dims_word(&self) -> &'static str {
        if self.is_mesh() { "dims" } else { "axes" }
    }

    /// One line naming the target: `order tp-cp-ep-dp-pp, experts folded
    /// (Megatron-Core)`, or the mesh with its views and flattens.
    pub fn title(&self) -> String {
        match self {
            Target::Layout { layout, .. } => format!(
                "order {}, {}",
                layout.config().order,
                experts(layout.config().expert_layout)
            ),
            Target::Mesh(m) => m.header().join("; "),
        }
    }

    /// The sets that should stay inside a node by default: a layout's tp,
    /// cp (hcp-0 with hierarchical cp), ep, etp and the weight shards
    /// (gtp_remat, egtp_remat: an all-gather every forward and backward
    /// pass); a mesh's dims of those names, in the mesh or a view (not
    /// those a view shares with the mesh, which are the mesh's).
    pub fn critical(&self) -> Vec<DimSet> {
        match self {
            Target::Layout { layout, .. } => {
                let cp = if layout.hierarchical_cp().is_empty() {
                    Kind::CP
                } else {
                    Kind::hcp(0)
                };
                [
                    Kind::TP,
                    cp,
                    Kind::EP,
                    Kind::ETP,
                    Kind::GTP_REMAT,
                    Kind::EGTP_REMAT,
                ]
                .into_iter()
                .filter(|k| layout.kinds().contains(k))
                .map(DimSet::Kind)
                .collect()
            }
            Target::Mesh(m) => m
                .own_dims()
                .into_iter()
                .filter(|(_, dim)| {
                    matches!(
                        dim.as_str(),
                        "tp" | "cp" | "ep" | "etp" | "gtp_remat" | "egtp_remat"
                    )
                })
                .map(|(set, _)| DimSet::Mesh(set))
                .collect(),
        }
    }
}

/// A set of the other kind of target (not expected: sets are parsed by
/// the target they are used with).
fn mismatch(set: &DimSet) -> Failure {
    Failure::Message(format!("{set} is not a set of this layout or mesh"))
}

impl MeshTarget {
    /// The mesh of `input`, built one view and one flatten at a time so
    /// that an error names the one that fails.
    ///
    /// # Errors
    /// [`Failure::Message`] naming the flag (or key), its text and the
    /// library's reason.
    pub fn build(input: &MeshInput) -> Result<MeshTarget, Failure> {
        let parsed = if input.device_order {
            MeshSpec::parse_device_mesh(&input.text)
        } else {
            MeshSpec::parse(&input.text)
        };
        let mut spec = parsed
            .map_err(|e| about(&input.origin, &input.text, &e))?
            .rank_offset(input.rank_offset);
        let mut mesh = spec
            .build()
            .map_err(|e| about(&input.origin, &input.text, &e))?;
        for (text, origin) in &input.views {
            spec = spec.view(text).map_err(|e| about(origin, text, &e))?;
            mesh = spec.build().map_err(|e| about(origin, text, &e))?;
        }
        for (text, origin) in &input.flattens {
            spec = spec.flatten(text).map_err(|e| about(origin, text, &e))?;
            mesh = spec.build().map_err(|e| about(origin, text, &e))?;
        }
        Ok(MeshTarget {
            mesh,
            spec,
            device_order: input.device_order,
        })
    }

    /// The same mesh with its dims written in `dims`' order (views and
    /// flattens re-applied as written).
    ///
    /// # Errors
    /// The library's error when a view or flatten no longer builds.
    pub fn reordered(&self, dims: Vec<(String, u32)>) -> Result<MeshTarget, Error> {
        let mut spec = self.spec.clone();
        spec.dims = dims;
        Ok(MeshTarget {
            mesh: spec.build()?,
            spec,
            device_order: self.device_order,
        })
    }

    /// The dims as written: `tp=2,cp=2,dp=4`.
    pub fn written(&self) -> String {
        written(&self.spec.dims)
    }

    /// The flag that gives this mesh: `--mesh tp=2,cp=2,dp=4` or
    /// `--device-mesh pp=2,dp=4,tp=2`.
    pub fn flag(&self) -> String {
        let flag = if self.device_order {
            "--device-mesh"
        } else {
            "--mesh"
        };
        format!("{flag} {}", self.written())
    }

    /// The canonical name of the dim set `spec`: a flatten's name as is,
    /// else the selection's name (dims in the mesh's order).
    ///
    /// # Errors
    /// [`Failure::Input`] for a name that is no dim set of the mesh.
    pub fn canonical(&self, spec: &str) -> Result<String, Failure> {
        let spec = spec.trim();
        if self.mesh.flattens().any(|(name, _)| name == spec) {
            return Ok(spec.to_owned());
        }
        let selection = self.mesh.select(spec)?;
        Ok(self.mesh.name_of(selection))
    }

    /// Every dim set: the mesh's dims, each view's dims, each flatten.
    pub fn all_sets(&self) -> Vec<DimSet> {
        let mut sets: Vec<DimSet> = self
            .mesh
            .dims()
            .map(|(name, _)| DimSet::Mesh(name.to_owned()))
            .collect();
        for view in self.mesh.views() {
            if let Ok(dims) = self.mesh.view_dims(view) {
                sets.extend(dims.map(|(name, _)| DimSet::Mesh(format!("{view}:{name}"))));
            }
        }
        sets.extend(
            self.mesh
                .flattens()
                .map(|(name, _)| DimSet::Mesh(name.to_owned())),
        );
        sets
    }

    /// The single dims with groups of their own: the mesh's, and each
    /// view's that it does not share with the mesh; as (set name, dim).
    pub fn own_dims(&self) -> Vec<(String, String)> {
        let base: Vec<&str> = self.mesh.dims().map(|(n, _)| n).collect();
        let mut out: Vec<(String, String)> = base
            .iter()
            .map(|n| ((*n).to_owned(), (*n).to_owned()))
            .collect();
        for view in self.mesh.views() {
            if let Ok(dims) = self.mesh.view_dims(view) {
                out.extend(
                    dims.filter(|(n, _)| !base.contains(n))
                        .map(|(n, _)| (format!("{view}:{n}"), n.to_owned())),
                );
            }
        }
        out
    }

    /// The dim of a single-dim set and its size.
    fn single_dim(&self, name: &str) -> Option<(String, u32)> {
        if name.contains('-') || self.mesh.flattens().any(|(n, _)| n == name) {
            return None;
        }
        match name.split_once(':') {
            Some((view, dim)) => {
                let mut dims = self.mesh.view_dims(view).ok()?;
                dims.find(|(n, _)| *n == dim)
                    .map(|(n, s)| (n.to_owned(), s))
            }
            None => self
                .mesh
                .dims()
                .find(|(n, _)| *n == name)
                .map(|(n, s)| (n.to_owned(), s)),
        }
    }

    /// The lines that name the mesh: its dims (first fastest; as written
    /// too for a DeviceMesh order), each view, each flatten.
    pub fn header(&self) -> Vec<String> {
        let m = &self.mesh;
        let dims: Vec<String> = m.dims().map(|(n, s)| format!("{n}={s}")).collect();
        let mut first = format!("mesh {} (first fastest", dims.join(" "));
        if self.device_order {
            first.push_str(&format!("; --device-mesh {}, last fastest", self.written()));
        }
        first.push(')');
        let mut lines = vec![first];
        let base: Vec<&str> = m.dims().map(|(n, _)| n).collect();
        for view in m.views() {
            let Ok(dims) = m.view_dims(view) else {
                continue;
            };
            let dims: Vec<(&str, u32)> = dims.collect();
            let shared: Vec<&str> = dims
                .iter()
                .map(|(n, _)| *n)
                .filter(|n| base.contains(n))
                .collect();
            let text: Vec<String> = dims.iter().map(|(n, s)| format!("{n}={s}")).collect();
            let mut line = format!("view {view}: {}", text.join(" "));
            if !shared.is_empty() {
                line.push_str(&format!(" (shares {} with the mesh)", shared.join(", ")));
            }
            lines.push(line);
        }
        for (name, selection) in m.flattens() {
            lines.push(format!("flatten {name} = {}", m.name_of(selection)));
        }
        lines
    }
}

/// Dims as written: `tp=2,cp=2,dp=4`.
pub fn written(dims: &[(String, u32)]) -> String {
    dims.iter()
        .map(|(n, s)| format!("{n}={s}"))
        .collect::<Vec<_>>()
        .join(",")
}
