//! Named N-D meshes: any dims, several views of the same ranks, named
//! flattened dim sets, on the same engine as the Megatron layouts.
//!
//! A [`Mesh`] is named dims listed first-fastest (Megatron's and
//! HyperCommGrid's order: `rank = rank_offset + sum(coord[d] * stride[d])`,
//! the first dim's stride 1), optionally a rank map (a permutation of its
//! positions, as a DeviceMesh's custom mesh tensor), views (other
//! factorisations of the same ranks, HyperCommGrid's `register_view`,
//! DeviceMesh's `_unflatten`, torchtitan's expert mesh) and flattens (named
//! dim sets, DeviceMesh's `_flatten`). The groups of any set of dims are the
//! ranks that agree on every other dim: boxes of ranks, so they enumerate,
//! fill and locate exactly as a layout's kinds do.
//!
//! ```
//! use rank_layout::Mesh;
//! let mesh = Mesh::new([("tp", 2), ("cp", 2), ("dp", 4)])?;
//! assert_eq!(mesh.groups("cp-dp")?.to_vecs()[1], vec![1, 3, 5, 7, 9, 11, 13, 15]);
//! assert_eq!(mesh.groups("dp")?.next().unwrap().to_vec(), vec![0, 4, 8, 12]);
//! let c = mesh.placement(13)?;
//! assert_eq!((c.get("tp"), c.get("cp"), c.get("dp")), (Some(1), Some(0), Some(3)));
//! // An expert view over the same ranks, sharing nothing: ep groups of 4.
//! let mesh = mesh.view("expert", &[("ep", 4), ("edp", 4)], &[])?;
//! assert_eq!(mesh.groups("expert:ep")?.next().unwrap().to_vec(), vec![0, 1, 2, 3]);
//! assert!(Mesh::new([("tp", 2), ("tp", 2)]).is_err()); // a name twice
//! # Ok::<(), rank_layout::Error>(())
//! ```

mod factors;
mod selection;
mod spec;
mod splits;
mod torchtitan;

use crate::cast::{low32, to_u64, to_usize};
use std::borrow::Cow;
use std::sync::Arc;

pub use selection::Selection;
pub use spec::{FlattenSpec, MeshSpec, ViewSpec};
pub use splits::{MeshSplits, MeshSplitsIter};
pub use torchtitan::torchtitan_mesh;

use crate::coord::Part;
use crate::error::{Error, Result};
use crate::group::RankMap;
use crate::plan::boxes::{Boxes, dot};
use crate::plan::groups::Groups;
use crate::plan::spread::{Spread, spread};
use crate::plan::view::{GridId, View};
use crate::plan::{Mapped, Plan};
use crate::split::Split;
use crate::topology::Topology;
pub(crate) use factors::is_name;
use factors::{DimCoords, Factors, MAX_DIMS};

/// A rank map and its inverse: position -> rank - offset, and back.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Permutation {
    forward: Arc<[u32]>,
    inverse: Arc<[u32]>,
}

/// A named dim set: dims of the base or of one view, by mask.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Flatten {
    name: String,
    selection: Selection,
}

/// A named N-D mesh of ranks with views and flattened dim sets.
///
/// A plain value (`Clone + Eq + Debug`), built with [`Mesh::new`] or a
/// constructor for another system's order ([`Mesh::from_device_mesh`],
/// [`Mesh::from_hyper_comm_grid`], [`torchtitan_mesh`]), then extended by
/// value ([`with_rank_offset`](Mesh::with_rank_offset),
/// [`with_rank_map`](Mesh::with_rank_map), [`view`](Mesh::view),
/// [`flatten`](Mesh::flatten)), every check made there. Per-rank answers
/// are O(dims); groups enumerate lazily or fill a buffer at memory speed.
/// What a mesh means is written down in [`semantics`](crate::semantics).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mesh {
    base: Factors,
    offset: u32,
    map: Option<Permutation>,
    views: Vec<(String, Factors)>,
    flattens: Vec<Flatten>,
}

/// A rank's coordinates in one factorisation of a mesh, by dim name.
///
/// Created by [`Mesh::placement`] and [`Mesh::placement_in`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshCoord<'a> {
    factors: &'a Factors,
    values: DimCoords,
}

impl MeshCoord<'_> {
    /// The coordinate along the dim named `name`.
    pub fn get(&self, name: &str) -> Option<u32> {
        let i = self.factors.position(name)?;
        self.values.get(i).copied()
    }

    /// Every dim's name and coordinate, first dim first.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> + '_ {
        self.factors
            .dims
            .iter()
            .zip(self.values)
            .map(|(d, v)| (d.name.as_str(), v))
    }
}

/// Most views of one mesh.
const MAX_VIEWS: usize = 16;

/// The grid name of mesh plans (they are never located through a layout's
/// rank view).
const MESH_GRID: GridId = GridId {
    part: Part::Decoder,
    view: View::Attention,
};

impl Mesh {
    /// A mesh of the named dims, first fastest, from rank 0.
    ///
    /// # Errors
    /// [`Error::NoDims`] for no dims (a mesh of one rank is `[("dp", 1)]`);
    /// [`Error::BadName`] for an empty name or one with other characters
    /// than letters, digits and `_`; [`Error::DuplicateName`];
    /// [`Error::ZeroDim`]; [`Error::TooManyDims`] past eight dims;
    /// [`Error::Overflow`] past `u32` ranks.
    pub fn new<N: Into<String>>(dims: impl IntoIterator<Item = (N, u32)>) -> Result<Mesh> {
        let dims: Vec<(String, u32)> = dims.into_iter().map(|(n, s)| (n.into(), s)).collect();
        Ok(Mesh {
            base: Factors::new(&dims, "the mesh")?,
            offset: 0,
            map: None,
            views: Vec::new(),
            flattens: Vec::new(),
        })
    }

    /// A mesh in PyTorch DeviceMesh's order: `shape[i]` is the size of
    /// `names[i]`, and the **last** dim varies fastest (`init_device_mesh`'s
    /// row-major rank tensor). The dims are kept in first-fastest order
    /// (reversed); their names keep their meaning.
    ///
    /// ```
    /// use rank_layout::Mesh;
    /// // init_device_mesh("cuda", (2, 4), mesh_dim_names=("dp", "tp")): tp neighbours are consecutive.
    /// let mesh = Mesh::from_device_mesh(&[2, 4], &["dp", "tp"])?;
    /// assert_eq!(mesh.groups("tp")?.next().unwrap().to_vec(), vec![0, 1, 2, 3]);
    /// assert_eq!(mesh.groups("dp")?.next().unwrap().to_vec(), vec![0, 4]);
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Mesh::new`], and [`Error::BadSpec`] when `shape` and `names`
    /// differ in length.
    pub fn from_device_mesh(shape: &[u32], names: &[&str]) -> Result<Mesh> {
        if shape.len() != names.len() {
            return Err(Error::BadSpec {
                what: "device mesh",
                text: format!("{shape:?} {names:?}"),
                problem: format!("{} sizes but {} names", shape.len(), names.len()),
            });
        }
        Mesh::new(names.iter().copied().zip(shape.iter().copied()).rev())
    }

    /// A mesh in Megatron-Core `HyperCommGrid`'s order: `shape[i]` is the
    /// size of `dim_names[i]`, the first dim fastest, from `rank_offset`.
    ///
    /// # Errors
    /// As [`Mesh::from_device_mesh`] and [`Mesh::with_rank_offset`].
    pub fn from_hyper_comm_grid(
        shape: &[u32],
        dim_names: &[&str],
        rank_offset: u32,
    ) -> Result<Mesh> {
        if shape.len() != dim_names.len() {
            return Err(Error::BadSpec {
                what: "hyper comm grid",
                text: format!("{shape:?} {dim_names:?}"),
                problem: format!("{} sizes but {} names", shape.len(), dim_names.len()),
            });
        }
        Mesh::new(dim_names.iter().copied().zip(shape.iter().copied()))?
            .with_rank_offset(rank_offset)
    }

    /// The same mesh starting at rank `offset`.
    ///
    /// # Errors
    /// [`Error::Overflow`] when its last rank passes `u32`.
    pub fn with_rank_offset(mut self, offset: u32) -> Result<Mesh> {
        if u64::from(offset) + u64::from(self.base.world) > 1 << 32 {
            return Err(Error::Overflow {
                what: format!("rank_offset ({offset}) + mesh world ({})", self.base.world),
            });
        }
        self.offset = offset;
        Ok(self)
    }

    /// The same mesh with its positions mapped to ranks: position `p` (the
    /// number of its coordinates, first fastest) is rank
    /// `rank_offset + map[p]`, as a DeviceMesh's custom mesh tensor.
    ///
    /// ```
    /// use rank_layout::Mesh;
    /// let mesh = Mesh::new([("x", 2), ("y", 2)])?.with_rank_map(vec![0, 2, 1, 3])?;
    /// assert_eq!(mesh.groups("x")?.to_vecs(), vec![vec![0, 2], vec![1, 3]]);
    /// assert_eq!(mesh.placement(2)?.get("x"), Some(1));
    /// assert!(Mesh::new([("x", 2)])?.with_rank_map(vec![0, 0]).is_err());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::BadRankMap`] unless `map` is a permutation of `0..world`.
    pub fn with_rank_map(mut self, map: Vec<u32>) -> Result<Mesh> {
        let world = self.base.world;
        if to_u64(map.len()) != u64::from(world) {
            return Err(Error::BadRankMap {
                problem: format!("has {} entries, the mesh {world} ranks", map.len()),
            });
        }
        let mut inverse = vec![u32::MAX; map.len()];
        for (p, r) in map.iter().enumerate() {
            let slot = inverse
                .get_mut(to_usize(*r))
                .ok_or_else(|| Error::BadRankMap {
                    problem: format!(
                        "entry {p} is {r}, not a rank of 0..{}",
                        world.saturating_sub(1)
                    ),
                })?;
            if *slot != u32::MAX {
                return Err(Error::BadRankMap {
                    problem: format!("holds {r} twice (entries {} and {p})", *slot),
                });
            }
            // p < map.len() = world <= u32::MAX.
            *slot = low32(to_u64(p));
        }
        self.map = Some(Permutation {
            forward: map.into(),
            inverse: inverse.into(),
        });
        Ok(self)
    }

    /// Every name used in the mesh: base dims, views, flattens.
    fn taken(&self, name: &str) -> bool {
        self.base.position(name).is_some()
            || self.views.iter().any(|(v, _)| v == name)
            || self.flattens.iter().any(|f| f.name == name)
    }

    /// The same mesh with a view: another factorisation `dims` (name and
    /// size, first fastest) of the same ranks. Each dim named in `shared`
    /// must be a dim of both and enumerate exactly as in the mesh, which is
    /// decided from sizes and strides in O(dims): the same size, and the
    /// same stride unless the size is 1.
    ///
    /// # Errors
    /// [`Error::BadName`], [`Error::DuplicateName`] (the view's name taken,
    /// or a dim twice), [`Error::ZeroDim`], [`Error::ViewWorld`] when the
    /// view covers another number of ranks, [`Error::UnknownName`] for a
    /// shared dim missing on either side, [`Error::SharedDimDiffers`].
    pub fn view(mut self, name: &str, dims: &[(&str, u32)], shared: &[&str]) -> Result<Mesh> {
        if !is_name(name) {
            return Err(Error::BadName {
                what: "view",
                name: name.to_owned(),
            });
        }
        if self.taken(name) {
            return Err(Error::DuplicateName {
                name: name.to_owned(),
                place: "the mesh".into(),
            });
        }
        if self.views.len() >= MAX_VIEWS {
            return Err(Error::TooManyDims {
                count: self.views.len() + 1,
                place: "views of the mesh".into(),
                max: MAX_VIEWS,
            });
        }
        let place = format!("view {name}");
        let owned: Vec<(String, u32)> = dims.iter().map(|(n, s)| ((*n).to_owned(), *s)).collect();
        let factors = Factors::new(&owned, &place)?;
        if factors.world != self.base.world {
            return Err(Error::ViewWorld {
                view: name.to_owned(),
                dims: factors::spelled(&owned),
                view_world: u64::from(factors.world),
                world: self.base.world,
            });
        }
        for dim in shared {
            let unknown = |place: &str, known: String| Error::UnknownName {
                what: "dim",
                name: (*dim).to_owned(),
                place: place.to_owned(),
                known,
            };
            let base = self
                .base
                .dims
                .get(
                    self.base
                        .position(dim)
                        .ok_or_else(|| unknown("the mesh", self.base.names()))?,
                )
                .map(|d| d.digit);
            let view = factors
                .dims
                .get(
                    factors
                        .position(dim)
                        .ok_or_else(|| unknown(&place, factors.names()))?,
                )
                .map(|d| d.digit);
            if let (Some(b), Some(v)) = (base, view) {
                let same = b.size == v.size && (b.size == 1 || b.stride == v.stride);
                if !same {
                    return Err(Error::SharedDimDiffers {
                        view: name.to_owned(),
                        dim: (*dim).to_owned(),
                        size: b.size,
                        stride: b.stride,
                        view_size: v.size,
                        view_stride: v.stride,
                    });
                }
            }
        }
        self.views.push((name.to_owned(), factors));
        Ok(self)
    }

    /// The same mesh with `name` naming the dim set `dims` (a selection:
    /// `"dp-cp"`, `"expert:ep-edp"`), usable wherever a dim set is, as
    /// DeviceMesh's `_flatten` and torchtitan's `loss` and `fsdp` meshes.
    ///
    /// ```
    /// use rank_layout::Mesh;
    /// let mesh = Mesh::new([("tp", 2), ("cp", 2), ("dp", 2)])?.flatten("dp_cp", "dp-cp")?;
    /// assert_eq!(mesh.groups("dp_cp")?.next().unwrap().to_vec(), vec![0, 2, 4, 6]);
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::BadName`], [`Error::DuplicateName`], and the errors of
    /// [`select`](Self::select).
    pub fn flatten(mut self, name: &str, dims: &str) -> Result<Mesh> {
        if !is_name(name) {
            return Err(Error::BadName {
                what: "flatten",
                name: name.to_owned(),
            });
        }
        if self.taken(name) {
            return Err(Error::DuplicateName {
                name: name.to_owned(),
                place: "the mesh".into(),
            });
        }
        let selection = self.select(dims)?;
        self.flattens.push(Flatten {
            name: name.to_owned(),
            selection,
        });
        Ok(self)
    }

    /// The number of ranks.
    pub fn world_size(&self) -> u32 {
        self.base.world
    }

    /// The first rank.
    pub fn rank_offset(&self) -> u32 {
        self.offset
    }

    /// One past the last rank (a `u64`: it may be 2^32).
    pub fn rank_end(&self) -> u64 {
        u64::from(self.offset) + u64::from(self.base.world)
    }

    /// The rank map, if there is one (position -> rank - rank_offset).
    pub fn rank_map(&self) -> Option<&[u32]> {
        self.map.as_ref().map(|m| &*m.forward)
    }

    /// The dims, first fastest: name and size.
    pub fn dims(&self) -> impl Iterator<Item = (&str, u32)> + '_ {
        self.base
            .dims
            .iter()
            .map(|d| (d.name.as_str(), d.digit.size))
    }

    /// The views' names, in the order they were registered.
    pub fn views(&self) -> impl Iterator<Item = &str> + '_ {
        self.views.iter().map(|(n, _)| n.as_str())
    }

    /// The dims of view `view`, first fastest.
    ///
    /// # Errors
    /// [`Error::UnknownName`] for a view the mesh lacks.
    pub fn view_dims(&self, view: &str) -> Result<impl Iterator<Item = (&str, u32)> + '_> {
        let i = self.view_index(view)?;
        let f = self.factors(Some(i));
        Ok(f.dims.iter().map(|d| (d.name.as_str(), d.digit.size)))
    }

    /// The flattens' names and the dim sets they name.
    pub fn flattens(&self) -> impl Iterator<Item = (&str, Selection)> + '_ {
        self.flattens.iter().map(|f| (f.name.as_str(), f.selection))
    }

    fn view_index(&self, view: &str) -> Result<usize> {
        self.views
            .iter()
            .position(|(n, _)| n == view)
            .ok_or_else(|| Error::UnknownName {
                what: "view",
                name: view.to_owned(),
                place: "the mesh".into(),
                known: names_or_none(self.views.iter().map(|(n, _)| n.as_str())),
            })
    }

    /// The base (`None`) or view `i`.
    fn factors(&self, view: Option<usize>) -> &Factors {
        view.and_then(|i| self.views.get(i))
            .map_or(&self.base, |(_, f)| f)
    }

    /// The position of `rank` (its coordinates' number, first fastest).
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`].
    #[inline]
    fn position(&self, rank: u32) -> Result<u32> {
        if rank < self.offset || u64::from(rank) >= self.rank_end() {
            return Err(Error::RankOutOfRange {
                rank: rank.into(),
                first: self.offset,
                last: self.rank_end().saturating_sub(1),
            });
        }
        let local = rank - self.offset;
        Ok(match &self.map {
            Some(m) => m.inverse.get(to_usize(local)).copied().unwrap_or(local),
            None => local,
        })
    }

    /// Where `rank` sits: its coordinates in the mesh's dims (the mesh's
    /// [`Layout::placement`](crate::Layout::placement)).
    ///
    /// ```
    /// use rank_layout::Mesh;
    /// let mesh = Mesh::new([("tp", 2), ("dp", 4)])?;
    /// assert_eq!(mesh.placement(5)?.get("dp"), Some(2));
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`].
    pub fn placement(&self, rank: u32) -> Result<MeshCoord<'_>> {
        Ok(MeshCoord {
            factors: &self.base,
            values: self.base.decode(self.position(rank)?),
        })
    }

    /// Where `rank` sits in view `view`: its coordinates in the view's dims.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`], [`Error::UnknownName`] for an unknown view.
    pub fn placement_in(&self, rank: u32, view: &str) -> Result<MeshCoord<'_>> {
        let factors = self.factors(Some(self.view_index(view)?));
        Ok(MeshCoord {
            factors,
            values: factors.decode(self.position(rank)?),
        })
    }

    /// `rank`'s coordinates in the mesh's dims.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`].
    #[deprecated(since = "1.1.0", note = "use `placement`, as `Layout::placement`")]
    pub fn coord(&self, rank: u32) -> Result<MeshCoord<'_>> {
        self.placement(rank)
    }

    /// `rank`'s coordinates in view `view`'s dims.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`], [`Error::UnknownName`] for an unknown view.
    #[deprecated(since = "1.1.0", note = "use `placement_in`")]
    pub fn coord_in(&self, rank: u32, view: &str) -> Result<MeshCoord<'_>> {
        self.placement_in(rank, view)
    }

    /// The dim set named by `spec`: dims of the mesh joined by `-` in any
    /// order (`"cp-dp"`), dims of a view after its name and `:`
    /// (`"expert:ep"`), or a flatten's name (`"dp_cp"`).
    ///
    /// # Errors
    /// [`Error::UnknownName`] for a name that is no dim, view or flatten;
    /// [`Error::DuplicateName`] for a dim named twice; [`Error::BadSpec`]
    /// for an empty spec.
    pub fn select(&self, spec: &str) -> Result<Selection> {
        selection::select(self, spec)
    }

    /// The dim set of the dims `names` (any order) of the mesh, or of view
    /// `view`.
    ///
    /// # Errors
    /// As [`select`](Self::select).
    pub fn select_dims(&self, view: Option<&str>, names: &[&str]) -> Result<Selection> {
        selection::select_names(self, view.map(|v| self.view_index(v)).transpose()?, names)
    }

    /// The groups of the dim set `spec` (see [`select`](Self::select)):
    /// the ranks that agree on every other dim, members ordered by the
    /// selected dims' coordinates (first fastest: ascending ranks without a
    /// rank map), groups by the other dims' coordinates (first fastest: by
    /// first member without a rank map). Lazy, or filled at memory speed.
    ///
    /// # Errors
    /// As [`select`](Self::select).
    pub fn groups(&self, spec: &str) -> Result<Groups<'static>> {
        self.groups_selected(self.select(spec)?)
    }

    /// The groups of a selection of this mesh (a dim set parsed once by
    /// [`select`](Self::select)).
    ///
    /// # Errors
    /// [`Error::UnknownName`] for a selection of another mesh's view.
    pub fn groups_selected(&self, selection: Selection) -> Result<Groups<'static>> {
        Ok(Groups::new(Cow::Owned(self.plan(selection)?)))
    }

    /// The groups of a selection of this mesh.
    ///
    /// # Errors
    /// [`Error::UnknownName`] for a selection of another mesh's view.
    #[deprecated(
        since = "1.1.0",
        note = "use `groups_selected`: `_of` names a rank's answer (`group_of`, `module_of`)"
    )]
    pub fn groups_of(&self, selection: Selection) -> Result<Groups<'static>> {
        self.groups_selected(selection)
    }

    /// The plan of a selection.
    fn plan(&self, selection: Selection) -> Result<Plan> {
        let factors = self.checked_factors(selection)?;
        let digits = factors.digits(selection.mask);
        let offset = if self.map.is_some() { 0 } else { self.offset };
        let boxes = Boxes::of_digits(MESH_GRID, offset, &digits).ok_or(Error::TooManyDims {
            count: digits.len(),
            place: "one dim set".into(),
            max: MAX_DIMS,
        })?;
        Ok(match &self.map {
            None => Plan::Boxes(boxes),
            Some(m) => Plan::Mapped(Box::new(Mapped {
                boxes,
                map: RankMap {
                    offset: self.offset,
                    ranks: m.forward.clone(),
                },
            })),
        })
    }

    /// The factorisation of `selection`, checked to be this mesh's.
    fn checked_factors(&self, selection: Selection) -> Result<&Factors> {
        match selection.view {
            Some(i) if usize::from(i) >= self.views.len() => Err(Error::UnknownName {
                what: "view",
                name: format!("#{i}"),
                place: "the mesh".into(),
                known: names_or_none(self.views()),
            }),
            view => Ok(self.factors(view.map(usize::from))),
        }
    }

    /// `rank`'s group number (color) and position (key) in the dim set
    /// `spec`: O(dims), no enumeration.
    ///
    /// ```
    /// use rank_layout::{Mesh, Split};
    /// let mesh = Mesh::new([("tp", 2), ("cp", 2), ("dp", 4)])?;
    /// assert_eq!(mesh.split(13, "cp-dp")?, Split { color: 1, key: 6 });
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`] and the errors of [`select`](Self::select).
    pub fn split(&self, rank: u32, spec: &str) -> Result<Split> {
        self.split_selected(rank, self.select(spec)?)
    }

    /// `rank`'s split in a selection of this mesh (a dim set parsed once by
    /// [`select`](Self::select)).
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`].
    pub fn split_selected(&self, rank: u32, selection: Selection) -> Result<Split> {
        let factors = self.checked_factors(selection)?;
        let coords = factors.decode(self.position(rank)?);
        Ok(dot(&coords, &factors.weights(selection.mask)))
    }

    /// `rank`'s split in a selection of this mesh.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`].
    #[deprecated(since = "1.1.0", note = "use `split_selected`")]
    pub fn split_of(&self, rank: u32, selection: Selection) -> Result<Split> {
        self.split_selected(rank, selection)
    }

    /// How the groups of the dim set `spec` fall on the nodes (and
    /// domains) of `topology`, counted from strides (by listing with a rank
    /// map).
    ///
    /// ```
    /// use rank_layout::{Mesh, Topology};
    /// let mesh = Mesh::new([("tp", 16), ("dp", 4)])?;
    /// let tp = mesh.spread("tp", &Topology::new(8, None)?)?;
    /// assert_eq!((tp.cross_node_groups, tp.max_nodes_per_group), (4, 2));
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// The errors of [`select`](Self::select).
    pub fn spread(&self, spec: &str, topology: &Topology) -> Result<Spread> {
        Ok(spread(&self.plan(self.select(spec)?)?, topology))
    }

    /// A plan to answer every split of a rank in the dim sets `specs` in
    /// one pass (coordinates decoded once per factorisation).
    ///
    /// # Errors
    /// The errors of [`select`](Self::select).
    pub fn split_plan(&self, specs: &[&str]) -> Result<MeshSplits<'_>> {
        let selections = specs
            .iter()
            .map(|s| self.select(s))
            .collect::<Result<Vec<_>>>()?;
        Ok(MeshSplits::new(self, &selections))
    }

    /// The name of a selection: `dp-cp`, `expert:ep` (dims in the mesh's
    /// order).
    pub fn name_of(&self, selection: Selection) -> String {
        let prefix = selection
            .view
            .and_then(|i| self.views.get(usize::from(i)))
            .map(|(n, _)| format!("{n}:"))
            .unwrap_or_default();
        let factors = self.factors(selection.view.map(usize::from));
        let names: Vec<&str> = factors
            .dims
            .iter()
            .enumerate()
            .filter(|(i, _)| selection.mask & (1 << i) != 0)
            .map(|(_, d)| d.name.as_str())
            .collect();
        format!("{prefix}{}", names.join("-"))
    }
}

/// Names joined for a message, or `none`.
fn names_or_none<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let all: Vec<&str> = names.collect();
    if all.is_empty() {
        "none".into()
    } else {
        all.join(", ")
    }
}
