//! Megatron-Core's extra group families: hierarchical context parallel and
//! distributed-optimizer instances.
//!
//! Both cut existing groups by position:
//!
//! - `hcp-l`: in each cp group `g`, with `U = s0*...*s(l-1)` and `S = s(l)`,
//!   position `i = a + b*U + c*U*S`; a group fixes `(a, c)` and runs over
//!   `b`. With cp = 16 and levels `[2, 2, 4]`: `hcp-0` is `[0,1],[2,3],...`,
//!   `hcp-1` is `[0,2],[1,3],[4,6],...`, `hcp-2` is `[0,4,8,12],...`.
//! - With `N` instances and `m = edp / N`: `dp-cp-intra` cuts each dp-cp group
//!   into `N` contiguous slices; `edp-intra` cuts each edp group into `N`
//!   contiguous slices of `m`; `dp-cp-inter` takes, in each edp group, the
//!   positions `a, a+m, ..., a+(N-1)m`; `dist-opt-instance` concatenates the
//!   etp-ep-pp groups `m` at a time.

use crate::axis::{Axis, AxisSet};
use crate::error::{DistOptProblem, Error, Result};
use crate::kind::{Kind, Repr};
use crate::layout::shape::Dense;
use crate::math::saturating_product;
use crate::plan::boxes::Boxes;
use crate::plan::view::View;
use crate::plan::{Plan, Slices};
use crate::segment::Digit;

/// Most hierarchical context-parallel levels.
const MAX_LEVELS: usize = 64;

/// The families configured on top of a layout's shape.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub(crate) struct Families {
    /// Hierarchical context-parallel level sizes, innermost first (empty: none).
    pub hierarchical_cp: Vec<u32>,
    /// Distributed-optimizer instances (1: none).
    pub dist_opt_instances: u32,
}

/// Checks that the levels multiply to `cp` (no levels: no hcp kinds).
///
/// # Errors
/// [`Error::HierarchicalCpProduct`]; [`Error::InvalidConfig`] past 64 levels.
pub(crate) fn check_hierarchical_cp(levels: &[u32], cp: u32) -> Result<()> {
    if levels.is_empty() {
        return Ok(());
    }
    if levels.len() > MAX_LEVELS {
        return Err(Error::InvalidConfig {
            message: format!(
                "hierarchical_cp has {} levels, at most {MAX_LEVELS} are supported",
                levels.len()
            ),
        });
    }
    let product = saturating_product(levels.iter().copied());
    if product != u64::from(cp) {
        return Err(Error::HierarchicalCpProduct {
            levels: levels.to_vec(),
            product,
            cp,
        });
    }
    Ok(())
}

/// The masked groups of `axes` in one view of `dense`, if it has them all.
pub(crate) fn masked(dense: &Dense, view: View, axes: &[Axis]) -> Option<Boxes> {
    let grid = dense.grid(view);
    let mask = grid.mask(AxisSet::of(axes))?;
    Some(Boxes::masked(grid, dense.id(view), mask))
}

/// `boxes` refined by position (see [`Boxes::refine`]): boxes again when
/// the cuts fall on digit boundaries (hcp and the edp families always cut
/// one axis at divisors of its size), strided slices otherwise (a dp-cp
/// group whose cut falls inside a run of contiguous dp and cp digits).
fn refined(boxes: Boxes, unit: u32, span: u32) -> Plan {
    match boxes.refine(unit, span) {
        Some(b) => Plan::Boxes(b),
        None => Plan::Slices(Slices { boxes, unit, span }),
    }
}

/// The plan of `hcp-level` over the cp groups of `dense`, or `None` when
/// there is no such level.
pub(crate) fn hierarchical_cp(dense: &Dense, levels: &[u32], level: u8) -> Option<Plan> {
    let l = usize::from(level);
    let span = *levels.get(l)?;
    let unit = levels.get(..l)?.iter().product();
    Some(refined(
        masked(dense, View::Attention, &[Axis::Cp])?,
        unit,
        span,
    ))
}

/// A digit of a grid as the place values `[lo, hi)` it covers: its value is
/// `(r / lo) % (hi / lo)`; a size-1 digit has `hi = lo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    lo: u64,
    hi: u64,
}

impl Span {
    fn of(d: Option<Digit>) -> Span {
        let d = d.unwrap_or(Digit { size: 1, stride: 1 });
        let lo = u64::from(d.stride.max(1));
        Span {
            lo,
            hi: lo * u64::from(d.size.max(1)),
        }
    }

    fn trivial(self) -> bool {
        self.hi <= self.lo
    }

    /// The low `size` values of this digit.
    fn low(self, size: u64) -> Span {
        Span {
            lo: self.lo,
            hi: self.lo * size,
        }
    }

    /// Whether the value of `other` never changes when only this digit's
    /// value does (and the other way round): one lies wholly below the
    /// other at a boundary that divides (`hi | other.lo` or `other.hi | lo`).
    fn independent(self, other: Span) -> bool {
        self.trivial() || other.trivial() || other.lo % self.hi == 0 || self.lo % other.hi == 0
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Checks divisibility and consistency of distributed-optimizer instances.
///
/// With `N` instances and `m = edp / N`, instance `i` is the ranks whose
/// expert-grid edp coordinate lies in `[i*m, (i+1)*m)`, that is the digit
/// `[U, V)` of the local rank with `V = stride(edp) * edp` and `U = V / N`.
/// The layout is consistent when every dp-cp-intra and edp-intra group lies
/// in one instance, every dp-cp-inter group lies in one dp-cp group with one
/// member per instance, and the inter groups are exactly the strided slices
/// `g[a::len(g)/N]` of the dp-cp groups. That holds exactly when the
/// attention grid's top dp-cp digit `y` (the upper of dp and cp, merged with
/// the lower one when nothing of size > 1 lies between them) ends at `V`
/// and `N` divides its size: then `[U, V)` is a piece of `y`, and slicing
/// the dp-cp groups cuts exactly at instance boundaries. When it fails, the
/// first failing condition is named; each is decided from the digits'
/// place values (a digit leaves another unchanged exactly when one lies
/// below the other at a dividing boundary). O(axes).
///
/// # Errors
/// [`Error::DistOptNotDivisible`], [`Error::DistOptInconsistent`].
pub(crate) fn check_dist_opt(instances: u32, dense: &Dense) -> Result<()> {
    if instances <= 1 {
        return Ok(());
    }
    let sizes = dense.sizes;
    let dp_cp = sizes.dp * sizes.cp;
    let edp = sizes.edp;
    if dp_cp % instances != 0 || edp % instances != 0 {
        return Err(Error::DistOptNotDivisible {
            instances,
            dp_cp,
            edp,
        });
    }
    let n = u64::from(instances);
    let attention = &dense.attention;
    let v = Span::of(dense.expert.digit(Axis::Edp)).hi;
    let instance = Span { lo: v / n, hi: v };
    // The dp and cp digits of the attention grid, lower first, merged into
    // `y` when one is trivial or they are contiguous.
    let (dp, cp) = (
        Span::of(attention.digit(Axis::Dp)),
        Span::of(attention.digit(Axis::Cp)),
    );
    let (x, y) = if cp.lo < dp.lo { (cp, dp) } else { (dp, cp) };
    let (x, y) = if x.trivial() {
        (y.low(1), y)
    } else if y.trivial() || x.hi == y.lo {
        let top = if y.trivial() { x.hi } else { y.hi };
        (x.low(1), Span { lo: x.lo, hi: top })
    } else {
        (x, y)
    };
    let (nx, ny) = (x.hi / x.lo, y.hi / y.lo);
    let problem = if y.hi == v && ny % n == 0 {
        return Ok(());
    } else {
        // The length of a dp-cp-intra slice, in positions of the dp-cp group.
        let q = u64::from(dp_cp / instances);
        let intra_inside = if q % nx == 0 {
            x.independent(instance) && y.low(q / nx).independent(instance)
        } else if nx % q == 0 {
            x.low(q).independent(instance)
        } else {
            x.independent(instance) && y.low(q / gcd(q, nx)).independent(instance)
        };
        let inter_inside = [Axis::Tp, Axis::Pp]
            .into_iter()
            .all(|a| Span::of(attention.digit(a)).independent(instance));
        if !intra_inside {
            DistOptProblem::IntraSpansInstances
        } else if !inter_inside {
            DistOptProblem::InterLeavesDpCp
        } else {
            DistOptProblem::InterNotStrided
        }
    };
    Err(Error::DistOptInconsistent {
        instances,
        order: dense.order.to_string(),
        problem,
        dp_cp_end: y.hi,
        edp_end: v,
    })
}

/// Checks distributed-optimizer instances as Megatron-LM 5a3b6bcf1f does
/// for an encoder + decoder layout: `N` divides `dp * cp` (the intra and
/// inter groups are then the contiguous and the strided slices of each
/// dp-cp group, which never join tensor or pipeline shards).
///
/// # Errors
/// [`Error::DistOptSlicesNotDivisible`].
pub(crate) fn check_dist_opt_slices(instances: u32, dense: &Dense) -> Result<()> {
    let dp_cp = dense.sizes.dp * dense.sizes.cp;
    if instances > 1 && dp_cp % instances != 0 {
        return Err(Error::DistOptSlicesNotDivisible { instances, dp_cp });
    }
    Ok(())
}

/// The plan of a distributed-optimizer kind of an encoder + decoder layout
/// in one of its grids, as Megatron-LM 5a3b6bcf1f builds it: `dp-cp-intra`
/// cuts each dp-cp group into `N` contiguous slices, `dp-cp-inter` takes
/// its strided slices `g[a::len(g)/N]`; `None` for another kind.
pub(crate) fn dist_opt_slices(kind: Kind, instances: u32, dense: &Dense) -> Option<Plan> {
    let dp_cp = masked(dense, View::Attention, &[Axis::Dp, Axis::Cp])?;
    let span = dp_cp.size() / instances.max(1);
    Some(match kind.repr() {
        Repr::DpCpIntra => refined(dp_cp, 1, span),
        Repr::DpCpInter => refined(dp_cp, span, instances),
        _ => return None,
    })
}

/// The plan of a distributed-optimizer kind over a folded `dense` grid
/// (checked by [`check_dist_opt`]); `None` for another kind.
pub(crate) fn dist_opt(kind: Kind, instances: u32, dense: &Dense) -> Option<Plan> {
    let per_instance = dense.sizes.edp / instances.max(1);
    let edp = || masked(dense, View::Expert, &[Axis::Edp]);
    Some(match kind.repr() {
        Repr::DpCpIntra => {
            let dp_cp = masked(dense, View::Attention, &[Axis::Dp, Axis::Cp])?;
            let span = dp_cp.size() / instances.max(1);
            refined(dp_cp, 1, span)
        }
        Repr::EdpIntra => refined(edp()?, 1, per_instance),
        Repr::DpCpInter => refined(edp()?, per_instance, instances),
        Repr::DistOptInstance => {
            let shards = masked(dense, View::Expert, &[Axis::Etp, Axis::Ep, Axis::Pp])?;
            Plan::Boxes(shards.merge(per_instance)?)
        }
        _ => return None,
    })
}
