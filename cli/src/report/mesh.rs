//! A mesh described for JSON: its dims and strides, how it was written,
//! its views and flattens. Every mesh report carries it as `"mesh"`.

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::Entries;
use crate::target::MeshTarget;

/// Dims with sizes, first fastest, and their strides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Factorisation {
    /// Name and size, first fastest.
    pub dims: Vec<(String, u32)>,
    /// Name and stride: 1 for the first, then the product of the sizes
    /// before it.
    pub strides: Vec<(String, u64)>,
}

impl Factorisation {
    /// The dims `dims` (first fastest) with their strides.
    pub fn new<'a>(dims: impl Iterator<Item = (&'a str, u32)>) -> Factorisation {
        let dims: Vec<(String, u32)> = dims.map(|(n, s)| (n.to_owned(), s)).collect();
        let mut stride = 1u64;
        let strides = dims
            .iter()
            .map(|(n, s)| {
                let here = stride;
                stride = stride.saturating_mul(u64::from(*s));
                (n.clone(), here)
            })
            .collect();
        Factorisation { dims, strides }
    }
}

/// A view: its factorisation and the dims it shares with the mesh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewOut {
    /// Its name.
    pub name: String,
    /// Its dims and strides.
    pub factors: Factorisation,
    /// The dims it shares with the mesh.
    pub shared: Vec<String>,
}

/// The JSON description of a mesh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshOut {
    /// Its dims and strides.
    pub factors: Factorisation,
    /// `--mesh` or `--device-mesh`.
    pub device_order: bool,
    /// The dims as written.
    pub written: String,
    /// The first rank.
    pub rank_offset: u32,
    /// The number of ranks.
    pub world_size: u32,
    /// The views.
    pub views: Vec<ViewOut>,
    /// The flattens: name and the dim set each names.
    pub flattens: Vec<(String, String)>,
}

impl MeshOut {
    /// The description of `m`.
    pub fn new(m: &MeshTarget) -> MeshOut {
        let mesh = &m.mesh;
        let base: Vec<&str> = mesh.dims().map(|(n, _)| n).collect();
        let views = mesh
            .views()
            .filter_map(|view| {
                let factors = Factorisation::new(mesh.view_dims(view).ok()?);
                let shared = factors
                    .dims
                    .iter()
                    .filter(|(n, _)| base.contains(&n.as_str()))
                    .map(|(n, _)| n.clone())
                    .collect();
                Some(ViewOut {
                    name: view.to_owned(),
                    factors,
                    shared,
                })
            })
            .collect();
        MeshOut {
            factors: Factorisation::new(mesh.dims()),
            device_order: m.device_order,
            written: m.written(),
            rank_offset: mesh.rank_offset(),
            world_size: mesh.world_size(),
            views,
            flattens: mesh
                .flattens()
                .map(|(n, s)| (n.to_owned(), mesh.name_of(s)))
                .collect(),
        }
    }
}

impl Serialize for Factorisation {
    /// `{"dims": {NAME: size}, "strides": {NAME: stride}}`, first fastest.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("dims", &Entries(&self.dims))?;
        map.serialize_entry("strides", &Entries(&self.strides))?;
        map.end()
    }
}

impl Serialize for MeshOut {
    /// `{"dims": {NAME: size}, "strides": {NAME: stride}` (first fastest),
    /// `"written": "tp=2,cp=2,dp=4", "device_mesh": bool` (written last
    /// fastest), `"rank_offset", "world_size", "views": {VIEW: {"dims",
    /// "strides", "shared": [..]}}, "flattens": {NAME: "cp-dp"}}`.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("dims", &Entries(&self.factors.dims))?;
        map.serialize_entry("strides", &Entries(&self.factors.strides))?;
        map.serialize_entry("written", &self.written)?;
        map.serialize_entry("device_mesh", &self.device_order)?;
        map.serialize_entry("rank_offset", &self.rank_offset)?;
        map.serialize_entry("world_size", &self.world_size)?;
        let views: Vec<(String, ViewJson<'_>)> = self
            .views
            .iter()
            .map(|v| (v.name.clone(), ViewJson(v)))
            .collect();
        map.serialize_entry("views", &Entries(&views))?;
        map.serialize_entry("flattens", &Entries(&self.flattens))?;
        map.end()
    }
}

/// A view's JSON.
struct ViewJson<'a>(&'a ViewOut);

impl Serialize for ViewJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("dims", &Entries(&self.0.factors.dims))?;
        map.serialize_entry("strides", &Entries(&self.0.factors.strides))?;
        map.serialize_entry("shared", &self.0.shared)?;
        map.end()
    }
}
