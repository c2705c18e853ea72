//! Meshes, views and flattens written as text: the command line's
//! `--mesh "tp=2,cp=2,dp=4"`, `--view "expert:etp=1,ep=4,edp=2,pp"` and
//! `--flatten dp_cp=dp,cp`, and the same keys in configuration files.

use crate::error::{Error, Result};
use crate::mesh::Mesh;

/// A view written as text: `name:dim=size,dim,...`; a dim without a size
/// is one of the mesh's, shared (its size is the mesh's).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ViewSpec {
    /// The view's name.
    pub name: String,
    /// Its dims in the order written, with their sizes (`None`: shared).
    pub dims: Vec<(String, Option<u32>)>,
}

/// A flatten written as text: `name=dim,dim` (or `name=view:dim,dim`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct FlattenSpec {
    /// The flatten's name.
    pub name: String,
    /// The view whose dims it flattens (`None`: the mesh's).
    pub view: Option<String>,
    /// The dims.
    pub dims: Vec<String>,
}

/// A whole mesh written as text or configuration keys: its dims, in
/// Megatron's first-fastest order or DeviceMesh's last-fastest one, its
/// rank offset and map, its views and flattens.
///
/// ```
/// use rank_layout::MeshSpec;
/// let spec = MeshSpec::parse("tp=2,cp=2,dp=4")?
///     .view("expert:ep=4,edp=4")?
///     .flatten("dp_cp=dp,cp")?;
/// let mesh = spec.build()?;
/// assert_eq!(mesh.groups("dp_cp")?.len(), 2);
/// assert!(MeshSpec::parse("tp=2,cp").is_err()); // every mesh dim needs a size
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct MeshSpec {
    /// The dims in the order written.
    pub dims: Vec<(String, u32)>,
    /// Written in DeviceMesh's order (the last dim fastest; views too).
    pub device_order: bool,
    /// The first rank.
    pub rank_offset: u32,
    /// The rank map, if any.
    pub rank_map: Option<Vec<u32>>,
    /// The views.
    pub views: Vec<ViewSpec>,
    /// The flattens.
    pub flattens: Vec<FlattenSpec>,
}

/// Splits `name=size` or `name`; `what` and `text` name the whole
/// specification in errors.
fn dim(part: &str, what: &'static str, text: &str) -> Result<(String, Option<u32>)> {
    let bad = |problem: String| Error::BadSpec {
        what,
        text: text.to_owned(),
        problem,
    };
    let (name, size) = match part.split_once('=') {
        Some((n, s)) => (n.trim(), Some(s.trim())),
        None => (part.trim(), None),
    };
    if name.is_empty() {
        return Err(bad(format!("an empty dim name in {part:?}")));
    }
    let size = match size {
        Some(s) => Some(s.parse::<u32>().map_err(|_| {
            bad(format!(
                "the size of {name} is {s:?}, not an integer from 0 to 4294967295"
            ))
        })?),
        None => None,
    };
    Ok((name.to_owned(), size))
}

impl MeshSpec {
    /// Parses `name=size,name=size,...` (first dim fastest).
    ///
    /// # Errors
    /// [`Error::NoDims`] for blank text, as [`Mesh::new`] for no dims;
    /// [`Error::BadSpec`] naming the text: an empty part, a dim without a
    /// size, a size that is not an integer. Names and sizes are checked
    /// by [`build`](Self::build).
    pub fn parse(text: &str) -> Result<MeshSpec> {
        if text.trim().is_empty() {
            return Err(Error::NoDims {
                place: "the mesh".into(),
            });
        }
        let mut dims = Vec::new();
        for part in text.split(',') {
            let (name, size) = dim(part, "mesh", text)?;
            let size = size.ok_or_else(|| Error::BadSpec {
                what: "mesh",
                text: text.to_owned(),
                problem: format!("dim {name} has no size (write {name}=N)"),
            })?;
            dims.push((name, size));
        }
        Ok(MeshSpec {
            dims,
            ..MeshSpec::default()
        })
    }

    /// Parses `name=size,...` in DeviceMesh's order (the last dim fastest).
    ///
    /// # Errors
    /// As [`parse`](Self::parse).
    pub fn parse_device_mesh(text: &str) -> Result<MeshSpec> {
        Ok(MeshSpec {
            device_order: true,
            ..MeshSpec::parse(text)?
        })
    }

    /// The same with the rank offset `offset`.
    #[must_use]
    pub fn rank_offset(mut self, offset: u32) -> MeshSpec {
        self.rank_offset = offset;
        self
    }

    /// The same with a view parsed from `text` (`expert:etp=1,ep=4,edp=2,pp`).
    ///
    /// # Errors
    /// [`Error::BadSpec`]: no `:`, an empty part, a size that is not an integer.
    pub fn view(mut self, text: &str) -> Result<MeshSpec> {
        self.views.push(ViewSpec::parse(text)?);
        Ok(self)
    }

    /// The same with a flatten parsed from `text` (`dp_cp=dp,cp`).
    ///
    /// # Errors
    /// [`Error::BadSpec`]: no `=`, an empty part.
    pub fn flatten(mut self, text: &str) -> Result<MeshSpec> {
        self.flattens.push(FlattenSpec::parse(text)?);
        Ok(self)
    }

    /// The mesh. A view's dim without a size, or named like a dim of the
    /// mesh, is shared with the mesh: it must enumerate the same ranks.
    ///
    /// # Errors
    /// Every error of [`Mesh::new`], [`Mesh::with_rank_offset`],
    /// [`Mesh::with_rank_map`], [`Mesh::view`] and [`Mesh::flatten`].
    pub fn build(&self) -> Result<Mesh> {
        let ordered = |mut dims: Vec<(String, u32)>| {
            if self.device_order {
                dims.reverse();
            }
            dims
        };
        let mut mesh = Mesh::new(ordered(self.dims.clone()))?.with_rank_offset(self.rank_offset)?;
        if let Some(map) = &self.rank_map {
            mesh = mesh.with_rank_map(map.clone())?;
        }
        for v in &self.views {
            let mut shared: Vec<&str> = Vec::new();
            let mut dims: Vec<(String, u32)> = Vec::new();
            for (name, size) in &v.dims {
                let base = mesh.dims().find(|(n, _)| n == name).map(|(_, s)| s);
                let size = match (size, base) {
                    (Some(s), _) => *s,
                    (None, Some(s)) => s,
                    (None, None) => {
                        return Err(Error::UnknownName {
                            what: "dim",
                            name: name.clone(),
                            place: format!("the mesh (view {} shares it without a size)", v.name),
                            known: mesh.base.names(),
                        });
                    }
                };
                if base.is_some() {
                    shared.push(name);
                }
                dims.push((name.clone(), size));
            }
            let dims = ordered(dims);
            let refs: Vec<(&str, u32)> = dims.iter().map(|(n, s)| (n.as_str(), *s)).collect();
            mesh = mesh.view(&v.name, &refs, &shared)?;
        }
        for f in &self.flattens {
            let spec = match &f.view {
                Some(view) => format!("{view}:{}", f.dims.join("-")),
                None => f.dims.join("-"),
            };
            mesh = mesh.flatten(&f.name, &spec)?;
        }
        Ok(mesh)
    }
}

impl ViewSpec {
    /// Parses `name:dim=size,dim,...`.
    ///
    /// # Errors
    /// [`Error::BadSpec`] naming the text.
    pub fn parse(text: &str) -> Result<ViewSpec> {
        let bad = |problem: &str| Error::BadSpec {
            what: "view",
            text: text.to_owned(),
            problem: problem.to_owned(),
        };
        let (name, dims) = text
            .split_once(':')
            .ok_or_else(|| bad("write NAME:dim=size,... (a ':' after the view's name)"))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(bad("the view has no name before ':'"));
        }
        let dims = dims
            .split(',')
            .map(|part| dim(part, "view", text))
            .collect::<Result<Vec<_>>>()?;
        Ok(ViewSpec {
            name: name.to_owned(),
            dims,
        })
    }
}

impl FlattenSpec {
    /// Parses `name=dim,dim` or `name=view:dim,dim`.
    ///
    /// # Errors
    /// [`Error::BadSpec`] naming the text.
    pub fn parse(text: &str) -> Result<FlattenSpec> {
        let bad = |problem: &str| Error::BadSpec {
            what: "flatten",
            text: text.to_owned(),
            problem: problem.to_owned(),
        };
        let (name, rest) = text
            .split_once('=')
            .ok_or_else(|| bad("write NAME=dim,dim (an '=' after the flatten's name)"))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(bad("the flatten has no name before '='"));
        }
        let (view, dims) = match rest.split_once(':') {
            Some((v, d)) => (Some(v.trim().to_owned()), d),
            None => (None, rest),
        };
        let dims: Vec<String> = dims
            .split([',', '-'])
            .map(|d| d.trim().to_owned())
            .collect();
        if dims.iter().any(String::is_empty) {
            return Err(bad("an empty dim name"));
        }
        Ok(FlattenSpec {
            name: name.to_owned(),
            view,
            dims,
        })
    }
}
