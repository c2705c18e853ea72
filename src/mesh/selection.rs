//! A set of dims of one factorisation of a mesh, named in text.

use crate::error::{Error, Result};
use crate::mesh::Mesh;

/// A set of dims of a mesh: of its own dims or of one of its views.
///
/// Created by [`Mesh::select`] and [`Mesh::select_dims`]; printed by
/// [`Mesh::name_of`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Selection {
    /// The view (`None`: the mesh's own dims).
    pub(crate) view: Option<u8>,
    /// Bit `i`: dim `i` of that factorisation.
    pub(crate) mask: u32,
}

/// The selection named by `spec`: `a-b`, `view:a-b` or a flatten's name.
pub(crate) fn select(mesh: &Mesh, spec: &str) -> Result<Selection> {
    let spec = spec.trim();
    if spec.is_empty() {
        return Err(Error::BadSpec {
            what: "dim set",
            text: spec.to_owned(),
            problem: "empty (name one or more dims joined by '-')".into(),
        });
    }
    if let Some(f) = mesh.flattens.iter().find(|f| f.name == spec) {
        return Ok(f.selection);
    }
    let (view, dims) = match spec.split_once(':') {
        Some((view, dims)) => (Some(mesh.view_index(view.trim())?), dims),
        None => (None, spec),
    };
    let names: Vec<&str> = dims.split('-').map(str::trim).collect();
    select_names(mesh, view, &names)
}

/// The selection of the dims `names` of the base (`view` = `None`) or of
/// view `view`.
pub(crate) fn select_names(mesh: &Mesh, view: Option<usize>, names: &[&str]) -> Result<Selection> {
    let factors = mesh.factors(view);
    let place = match view.and_then(|i| mesh.views.get(i)) {
        Some((name, _)) => format!("view {name}"),
        None => "the mesh".to_owned(),
    };
    if names.is_empty() {
        return Err(Error::BadSpec {
            what: "dim set",
            text: String::new(),
            problem: "no dims (name one or more)".into(),
        });
    }
    let mut mask = 0u32;
    for name in names {
        let i = factors.position(name).ok_or_else(|| Error::UnknownName {
            what: "dim",
            name: (*name).to_owned(),
            place: place.clone(),
            known: factors.names(),
        })?;
        if mask & (1 << i) != 0 {
            return Err(Error::DuplicateName {
                name: (*name).to_owned(),
                place: format!("the dim set {}", names.join("-")),
            });
        }
        mask |= 1 << i;
    }
    Ok(Selection {
        // An unknown view number stays unknown (`u8::MAX`) rather than wrapping.
        view: view.map(|v| u8::try_from(v).unwrap_or(u8::MAX)),
        mask,
    })
}
