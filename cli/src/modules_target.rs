//! The modules of a `--modules` file (the library's [`Modules`]: named
//! modules on rank spans, the edges between them and their bridges), read
//! from TOML or JSON, each module as a mesh [`Target`]; and what every
//! modules report prints of them: the title, a module's heading, span and
//! stages, and its JSON object.

use std::path::{Path, PathBuf};

use rank_layout::{MeshSpec, Modules, modules::ModulesSpec};
use serde_json::{Map, Value};

use crate::error::Failure;
use crate::format::count;
use crate::target::{DimSet, MeshTarget, Target};

/// The modules of a file, and each module as a mesh target.
pub struct ModulesTarget {
    /// The file, for the headings.
    pub path: PathBuf,
    /// The modules.
    pub modules: Modules,
    /// Each module's name and mesh, in declaration order.
    pub parts: Vec<(String, Target)>,
}

impl ModulesTarget {
    /// Reads the modules file `path`: TOML when its name ends in `.toml`,
    /// else JSON, straight into a [`ModulesSpec`], then built.
    ///
    /// # Errors
    /// [`Failure::Message`] naming the file and the problem: unreadable,
    /// invalid TOML or JSON (an unknown key, a missing one, a wrong type), or
    /// modules the library rejects.
    pub fn load(path: &Path) -> Result<ModulesTarget, Failure> {
        let file = path.display();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::Message(format!("cannot read the modules file {file}: {e}")))?;
        let is_toml = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
        let spec: ModulesSpec = if is_toml {
            toml::from_str(&text).map_err(|e| {
                Failure::Message(format!(
                    "{file}: invalid modules TOML: {}",
                    e.to_string().trim_end()
                ))
            })?
        } else {
            serde_json::from_str(&text)
                .map_err(|e| Failure::Message(format!("{file}: invalid modules JSON: {e}")))?
        };
        let modules = spec
            .build()
            .map_err(|e| Failure::Message(format!("{file}: {e}")))?;
        let parts = modules
            .names()
            .map(|name| Ok((name.to_owned(), Target::Mesh(mesh_target(&modules, name)?))))
            .collect::<Result<Vec<_>, Failure>>()?;
        Ok(ModulesTarget {
            path: path.to_owned(),
            modules,
            parts,
        })
    }

    /// Each module's sets of `names` (those it has); every module's own
    /// sets when `names` is empty and `all`, else none.
    ///
    /// # Errors
    /// [`Failure::Message`] for a name that no module has.
    pub fn sets(&self, names: &[String], all: bool) -> Result<Vec<Vec<DimSet>>, Failure> {
        let mut out: Vec<Vec<DimSet>> = self
            .parts
            .iter()
            .map(|(_, t)| {
                if names.is_empty() && all {
                    t.all_sets()
                } else {
                    Vec::new()
                }
            })
            .collect();
        for name in names {
            let mut first_error = None;
            let mut found = false;
            for ((_, target), sets) in self.parts.iter().zip(out.iter_mut()) {
                let set = target
                    .parse_set(name)
                    .and_then(|s| target.groups(&s).map(|_| s));
                match set {
                    Ok(set) => {
                        found = true;
                        if !sets.contains(&set) {
                            sets.push(set);
                        }
                    }
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            if !found {
                let why = first_error.map(|e| format!(": {e}")).unwrap_or_default();
                return Err(Failure::Message(format!(
                    "--kind {name}: no module has this dim set{why}"
                )));
            }
        }
        Ok(out)
    }

    /// The first line of every table: the file, the modules, their ranks.
    pub fn title(&self) -> String {
        let m = &self.modules;
        let first = m.rank_offset();
        let last = m.rank_end().saturating_sub(1);
        format!(
            "modules of {}: {} on ranks {first}..{last} ({}), {}; {} stages",
            self.path.display(),
            count(m.len() as u64, "module", "modules"),
            count(m.world_size(), "rank", "ranks"),
            if m.is_colocated() {
                "colocated (every module on the same ranks)"
            } else {
                "on consecutive spans"
            },
            m.total_stages()
        )
    }

    /// `first_stage..last_stage` of module `name`.
    pub fn stages(&self, name: &str, target: &Target) -> (u32, u32) {
        let first = self.modules.first_stage(name).unwrap_or(0);
        let pp = match target {
            Target::Mesh(m) => m
                .mesh
                .dims()
                .find(|(d, _)| *d == "pp")
                .map_or(1, |(_, s)| s),
            Target::Layout { .. } => 1,
        };
        (first, first + pp.max(1) - 1)
    }
}

/// Module `name` as a mesh target (its dims as written, first fastest).
fn mesh_target(modules: &Modules, name: &str) -> Result<MeshTarget, Failure> {
    let mesh = modules.module(name)?.clone();
    let mut spec = MeshSpec::default();
    spec.dims = mesh.dims().map(|(n, s)| (n.to_owned(), s)).collect();
    spec.rank_offset = mesh.rank_offset();
    Ok(MeshTarget {
        mesh,
        spec,
        device_order: false,
    })
}

/// `first..last` of a target's ranks.
pub fn span(target: &Target) -> (u32, u64) {
    (target.rank_offset(), target.rank_end().saturating_sub(1))
}

/// The heading of a module: `module llm: ranks 8..15 (8 ranks)`.
pub fn heading(name: &str, target: &Target) -> String {
    let (first, last) = span(target);
    format!(
        "module {name}: ranks {first}..{last} ({})",
        count(u64::from(target.world_size()), "rank", "ranks")
    )
}

/// A module's object: `name`, `first_rank`, `last_rank`, then `rest`'s
/// keys (those of a mesh's report, without the ones given here).
pub fn module_object(name: &str, target: &Target, rest: Value) -> Value {
    let (first, last) = span(target);
    let mut object = Map::new();
    object.insert("name".into(), name.into());
    object.insert("first_rank".into(), first.into());
    object.insert("last_rank".into(), last.into());
    if let Value::Object(rest) = rest {
        for (k, v) in rest {
            if !matches!(k.as_str(), "name" | "first_rank" | "last_rank" | "rank") {
                object.insert(k, v);
            }
        }
    }
    Value::Object(object)
}
