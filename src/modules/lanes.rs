//! A module's grid as its bridges see it: the model dims `tp`, `cp`, `pp`
//! and the data dims `gtp`, `dp` of a mesh, and the data lanes they make.

use crate::error::{Error, Result};
use crate::mesh::Mesh;

/// The dims a module's mesh may have, in MIMO's order.
pub(crate) const MODULE_DIMS: [&str; 5] = ["tp", "gtp", "cp", "dp", "pp"];

/// One dim of a module grid: its size and stride (size 1, stride 0 when the
/// mesh lacks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct Dim {
    pub size: u32,
    pub stride: u32,
}

impl Dim {
    const ABSENT: Dim = Dim { size: 1, stride: 0 };

    /// The coordinate along this dim of position `p`.
    fn coord(self, p: u32) -> u32 {
        if self.size == 1 {
            0
        } else {
            (p / self.stride) % self.size
        }
    }

    /// The last coordinate.
    pub fn last(self) -> u32 {
        self.size - 1
    }
}

/// A rank's coordinates in a module grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct LaneCoord {
    pub tp: u32,
    pub cp: u32,
    pub pp: u32,
    /// The data lane: the (gtp, dp) coordinates as one number.
    pub lane: u32,
}

/// A module's grid: offset, world and the five dims, with the data lane
/// order (the data dims in the mesh's order, first fastest).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct LaneGrid {
    pub offset: u32,
    pub world: u32,
    pub tp: Dim,
    pub cp: Dim,
    pub pp: Dim,
    /// The data dims, the one numbered fastest first.
    pub data: [Dim; 2],
}

impl LaneGrid {
    /// The grid of `module`'s mesh.
    ///
    /// # Errors
    /// [`Error::ModuleDim`] for a dim other than tp, gtp, cp, dp, pp;
    /// [`Error::BadRankMap`] for a mesh with a rank map.
    pub fn new(module: &str, mesh: &Mesh) -> Result<LaneGrid> {
        if mesh.rank_map().is_some() {
            return Err(Error::BadRankMap {
                problem: format!(
                    "is not supported in a module (module {module}): bridges pair ranks by their grid coordinates"
                ),
            });
        }
        let mut found = [Dim::ABSENT; 5];
        let mut data_order: Vec<usize> = Vec::with_capacity(2);
        let mut stride = 1u32;
        for (name, size) in mesh.dims() {
            let i =
                MODULE_DIMS
                    .iter()
                    .position(|d| *d == name)
                    .ok_or_else(|| Error::ModuleDim {
                        module: module.to_owned(),
                        dim: name.to_owned(),
                    })?;
            if let Some(slot) = found.get_mut(i) {
                *slot = Dim { size, stride };
            }
            if i == 1 || i == 3 {
                data_order.push(i);
            }
            stride = stride.wrapping_mul(size);
        }
        let get = |i: usize| found.get(i).copied().unwrap_or(Dim::ABSENT);
        let data = match data_order.as_slice() {
            [3, 1] => [get(3), get(1)],
            _ => [get(1), get(3)],
        };
        Ok(LaneGrid {
            offset: mesh.rank_offset(),
            world: mesh.world_size(),
            tp: get(0),
            cp: get(2),
            pp: get(4),
            data,
        })
    }

    /// The number of data lanes (gtp * dp).
    pub fn lanes(&self) -> u32 {
        self.data[0].size * self.data[1].size
    }

    /// One past the last rank.
    pub fn end(&self) -> u64 {
        u64::from(self.offset) + u64::from(self.world)
    }

    /// The grid's ranks, ascending.
    pub fn ranks(&self) -> std::ops::RangeInclusive<u32> {
        // offset + world - 1 fits: the mesh checked offset + world <= 2^32.
        self.offset..=self.offset.saturating_add(self.world.saturating_sub(1))
    }

    /// Whether `rank` is one of the grid's.
    pub fn contains(&self, rank: u32) -> bool {
        rank >= self.offset && u64::from(rank) < self.end()
    }

    /// The coordinates of `rank`, or `None` outside the grid.
    pub fn coord(&self, rank: u32) -> Option<LaneCoord> {
        if !self.contains(rank) {
            return None;
        }
        let p = rank - self.offset;
        let [a, b] = self.data;
        Some(LaneCoord {
            tp: self.tp.coord(p),
            cp: self.cp.coord(p),
            pp: self.pp.coord(p),
            lane: a.coord(p) + a.size * b.coord(p),
        })
    }

    /// The rank at data lane `lane` and model coordinates `tp`, `cp`, `pp`
    /// (all in range).
    pub fn rank(&self, lane: u32, tp: u32, cp: u32, pp: u32) -> u32 {
        self.lane_base(lane)
            .wrapping_add(tp.wrapping_mul(self.tp.stride))
            .wrapping_add(cp.wrapping_mul(self.cp.stride))
            .wrapping_add(pp.wrapping_mul(self.pp.stride))
    }

    /// The rank at data lane `lane` with every model coordinate 0 (the
    /// others are added to it: a rank of the grid never passes `u32`).
    pub fn lane_base(&self, lane: u32) -> u32 {
        let [a, b] = self.data;
        let (low, high) = if b.size == 1 {
            (lane, 0)
        } else {
            (lane % a.size, lane / a.size)
        };
        self.offset
            .wrapping_add(low.wrapping_mul(a.stride))
            .wrapping_add(high.wrapping_mul(b.stride))
    }

    /// The (tp, cp) positions' count.
    pub fn positions(&self) -> u32 {
        self.tp.size * self.cp.size
    }

    /// The position of (tp, cp) among the ranks of one lane and stage,
    /// ascending: the coordinate of the dim with the smaller stride first.
    pub fn ascending_position(&self, tp: u32, cp: u32) -> u32 {
        if self.tp.stride <= self.cp.stride || self.cp.size == 1 {
            tp + self.tp.size * cp
        } else {
            cp + self.cp.size * tp
        }
    }

    /// The ranks of `lane` at stage `pp`, every tp and cp, ascending.
    pub fn stage_ranks(&self, lane: u32, pp: u32, out: &mut Vec<u32>) {
        let tp_first = self.tp.stride <= self.cp.stride || self.cp.size == 1;
        let (inner, outer) = if tp_first {
            (self.tp, self.cp)
        } else {
            (self.cp, self.tp)
        };
        let base = self.rank(lane, 0, 0, pp);
        for o in 0..outer.size {
            let row = base.wrapping_add(o.wrapping_mul(outer.stride));
            out.extend((0..inner.size).map(|i| row.wrapping_add(i.wrapping_mul(inner.stride))));
        }
    }
}
