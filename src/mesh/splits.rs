//! A rank's color and key in many dim sets of a mesh, in one pass.

use std::iter::FusedIterator;

use crate::error::Result;
use crate::mesh::factors::{DimCoords, MAX_DIMS};
use crate::mesh::{Mesh, Selection};
use crate::plan::boxes::dot;
use crate::split::Split;

/// One dim set to answer: which factorisation (0 the mesh, `1 + v` view
/// `v`) and the weights of its coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Step {
    factors: usize,
    weights: [u64; MAX_DIMS],
}

/// Every split of a rank in chosen dim sets, prepared once: a rank's
/// coordinates are decoded once per factorisation used, then each dim set
/// is one dot product.
///
/// Created by [`Mesh::split_plan`].
///
/// ```
/// use rank_layout::{Mesh, Split};
/// let mesh = Mesh::new([("tp", 2), ("cp", 2), ("dp", 4)])?;
/// let plan = mesh.split_plan(&["tp", "cp-dp", "dp"])?;
/// let got: Vec<Split> = plan.splits(13)?.collect();
/// assert_eq!(got, vec![mesh.split(13, "tp")?, mesh.split(13, "cp-dp")?, mesh.split(13, "dp")?]);
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct MeshSplits<'a> {
    mesh: &'a Mesh,
    steps: Vec<Step>,
    /// Which factorisations the steps use (bit `f`).
    used: u64,
}

impl<'a> MeshSplits<'a> {
    pub(crate) fn new(mesh: &'a Mesh, selections: &[Selection]) -> MeshSplits<'a> {
        let mut used = 0u64;
        let steps = selections
            .iter()
            .map(|s| {
                let f = s.view.map_or(0, |v| usize::from(v) + 1);
                used |= 1 << f;
                Step {
                    factors: f,
                    weights: mesh.factors(s.view.map(usize::from)).weights(s.mask),
                }
            })
            .collect();
        MeshSplits { mesh, steps, used }
    }

    /// The number of dim sets.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether there is no dim set.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// `rank`'s split in every dim set, in the order given: O(dims) to
    /// decode, then one dot product each; allocates nothing.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`](crate::Error::RankOutOfRange).
    pub fn splits(&self, rank: u32) -> Result<MeshSplitsIter<'_>> {
        let p = self.mesh.position(rank)?;
        let mut coords = [[0u32; MAX_DIMS]; 4];
        let mut decoded = 0u64;
        for f in 0..coords.len() {
            if self.used & (1 << f) != 0 {
                if let Some(slot) = coords.get_mut(f) {
                    *slot = self.mesh.factors(f.checked_sub(1)).decode(p);
                    decoded |= 1 << f;
                }
            }
        }
        Ok(MeshSplitsIter {
            plan: self,
            position: p,
            coords,
            decoded,
            next: 0,
        })
    }
}

/// The splits of one rank, one per dim set of a [`MeshSplits`].
///
/// Created by [`MeshSplits::splits`].
#[derive(Debug, Clone)]
#[must_use = "iterators are lazy and do nothing unless consumed"]
pub struct MeshSplitsIter<'a> {
    plan: &'a MeshSplits<'a>,
    position: u32,
    /// The coordinates of the first four factorisations, decoded at once.
    coords: [DimCoords; 4],
    decoded: u64,
    next: usize,
}

impl Iterator for MeshSplitsIter<'_> {
    type Item = Split;

    #[inline]
    fn next(&mut self) -> Option<Split> {
        let step = self.plan.steps.get(self.next)?;
        self.next += 1;
        if self.decoded & (1 << step.factors) != 0 {
            if let Some(coords) = self.coords.get(step.factors) {
                return Some(dot(coords, &step.weights));
            }
        }
        // A view past the fourth: decoded now.
        let coords = self
            .plan
            .mesh
            .factors(step.factors.checked_sub(1))
            .decode(self.position);
        Some(dot(&coords, &step.weights))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.plan.steps.len() - self.next;
        (n, Some(n))
    }
}

impl ExactSizeIterator for MeshSplitsIter<'_> {}
impl FusedIterator for MeshSplitsIter<'_> {}
