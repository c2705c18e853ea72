//! Modules written down: the `--modules` file of the command line (TOML or
//! JSON, with the `serde` feature) and its value in code.

use crate::config::Config;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::mesh::MeshSpec;
use crate::modules::{Modules, Spans};

/// One module of a [`ModulesSpec`]: its name and either a mesh (the text
/// of [`MeshSpec::parse`], first fastest, with views) or a Megatron
/// [`Config`] (its dense grid and expert view, [`Layout::mesh`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ModuleSpec {
    /// The module's name.
    pub name: String,
    /// Its mesh, first fastest: `"tp=2,cp=2,dp=4,pp=1"`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub mesh: Option<String>,
    /// Or its dims, first fastest, as (name, size) pairs.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub dims: Vec<(String, u32)>,
    /// Its views: `"expert:ep=4,edp=2,pp"`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub views: Vec<String>,
    /// Or a Megatron configuration (rank-layout's keys).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub megatron: Option<Config>,
}

impl ModuleSpec {
    /// A module of mesh text `mesh`.
    pub fn mesh(name: &str, mesh: &str) -> ModuleSpec {
        ModuleSpec {
            name: name.to_owned(),
            mesh: Some(mesh.to_owned()),
            dims: Vec::new(),
            views: Vec::new(),
            megatron: None,
        }
    }

    /// A module of the dims `dims` (name, size), first fastest.
    pub fn dims<N: Into<String>>(
        name: &str,
        dims: impl IntoIterator<Item = (N, u32)>,
    ) -> ModuleSpec {
        ModuleSpec {
            name: name.to_owned(),
            mesh: None,
            dims: dims.into_iter().map(|(n, s)| (n.into(), s)).collect(),
            views: Vec::new(),
            megatron: None,
        }
    }

    /// A module of a Megatron configuration.
    pub fn megatron(name: &str, config: Config) -> ModuleSpec {
        ModuleSpec {
            name: name.to_owned(),
            mesh: None,
            dims: Vec::new(),
            views: Vec::new(),
            megatron: Some(config),
        }
    }
}

/// An edge of a [`ModulesSpec`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
#[non_exhaustive]
pub struct EdgeSpec {
    /// The source module (`from` in a file too).
    #[cfg_attr(feature = "serde", serde(alias = "from"))]
    pub src: String,
    /// The destination module (`to` in a file too).
    #[cfg_attr(feature = "serde", serde(alias = "to"))]
    pub dst: String,
}

/// Modules written down: what `--modules mimo.toml` holds.
///
/// ```toml
/// colocated = false        # default: consecutive spans from rank_offset
/// [[modules]]
/// name = "vision"
/// mesh = "tp=2,dp=4"       # first fastest
/// [[modules]]
/// name = "audio"
/// dp = 4                   # or its dims as keys (MIMO's order tp, gtp, cp, dp, pp,
/// tp = 2                   # unless `order = "dp-tp"` says another)
/// [[modules]]
/// name = "llm"
/// megatron = { tp = 2, cp = 2, pp = 2, world_size = 16 }
/// [[edges]]
/// src = "vision"           # or from / to
/// dst = "llm"
/// ```
///
/// With the `serde` feature a file may also give `dims` as text, as
/// `[[name, size], ...]` pairs or as a table in order; `modules` as a table
/// of tables by name (`[modules.vision]`, in the order written: TOML needs
/// an order-keeping map, as the command line's has); and edges as
/// Megatron-Core's `topology = { vision = ["llm"], llm = [] }`, which must
/// name every module. Each module gives exactly one of `mesh`, `dims`, dim
/// keys and `megatron`.
///
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ModulesSpec {
    /// All modules on the same ranks.
    pub colocated: bool,
    /// The first rank.
    pub rank_offset: u32,
    /// The modules, in declaration order.
    pub modules: Vec<ModuleSpec>,
    /// The edges.
    pub edges: Vec<EdgeSpec>,
}

impl ModulesSpec {
    /// The modules `modules` on consecutive spans from rank 0, no edge.
    pub fn new(modules: Vec<ModuleSpec>) -> ModulesSpec {
        ModulesSpec {
            modules,
            ..ModulesSpec::default()
        }
    }

    /// The same with the edge `src -> dst`.
    pub fn edge(mut self, src: &str, dst: &str) -> ModulesSpec {
        self.edges.push(EdgeSpec {
            src: src.to_owned(),
            dst: dst.to_owned(),
        });
        self
    }

    /// Builds the modules.
    ///
    /// # Errors
    /// [`Error::BadSpec`] for a module with none or several of `mesh`,
    /// `dims` and `megatron`, or a view on a Megatron module; the errors of
    /// [`MeshSpec::parse`], [`Layout::new`], [`Layout::mesh`],
    /// [`Modules::new`] and [`Modules::edge`].
    pub fn build(&self) -> Result<Modules> {
        let mut modules = Vec::with_capacity(self.modules.len());
        for m in &self.modules {
            let bad = |problem: &str| Error::BadSpec {
                what: "module",
                text: m.name.clone(),
                problem: problem.to_owned(),
            };
            let mesh = match (&m.mesh, m.dims.is_empty(), &m.megatron) {
                (Some(text), true, None) => {
                    let mut spec = MeshSpec::parse(text)?;
                    for v in &m.views {
                        spec = spec.view(v)?;
                    }
                    spec.build()?
                }
                (None, false, None) => {
                    let mut spec = MeshSpec::default();
                    spec.dims.clone_from(&m.dims);
                    for v in &m.views {
                        spec = spec.view(v)?;
                    }
                    spec.build()?
                }
                (None, true, Some(config)) => {
                    if !m.views.is_empty() {
                        return Err(bad(
                            "a Megatron module has its expert view already; views are for meshes",
                        ));
                    }
                    Layout::new(config)?.mesh()?
                }
                (None, true, None) => {
                    return Err(bad("needs a mesh, dims or a megatron configuration"));
                }
                (_, _, Some(_)) => {
                    return Err(bad("has both a mesh and a megatron configuration"));
                }
                (Some(_), false, None) => return Err(bad("has both a mesh and dims")),
            };
            modules.push((m.name.clone(), mesh.with_rank_offset(0)?));
        }
        if let Some((name, first)) = modules.first_mut() {
            *first = first
                .clone()
                .with_rank_offset(self.rank_offset)
                .map_err(|e| match e {
                    Error::Overflow { what } => Error::Overflow {
                        what: format!("module {name}: {what}"),
                    },
                    e => e,
                })?;
        }
        let spans = if self.colocated {
            Spans::Colocated
        } else {
            Spans::Consecutive
        };
        Modules::new(modules, spans)?
            .edges_from(self.edges.iter().map(|e| (e.src.as_str(), e.dst.as_str())))
    }
}
