//! A plan's locate reduced to multiply-adds of the rank's coordinates.
//!
//! For every plan made of box families (the masked groups of a grid, a
//! stack of an encoder's and a decoder's, their concatenation, their
//! pipeline ends) a rank's group index and position are dot products of
//! its coordinates with fixed weights. [`Dot`] keeps those weights so that
//! [`Layout::splits`](crate::Layout::splits) answers each kind with a few
//! multiply-adds and no dispatch through the plan.

use crate::plan::boxes::{Weights, dot};
use crate::plan::{Boxes, Plan, RankView};
use crate::split::Split;

/// How the ranks of one part find their group: the dot product of the
/// coordinates of view `view` with `weights`, then the shifts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
struct Side {
    present: bool,
    view: usize,
    weights: Weights,
    color_shift: u32,
    key_shift: u32,
}

impl Side {
    fn of(b: &Boxes, color_shift: u32, key_shift: u32) -> Option<Side> {
        Some(Side {
            present: true,
            view: b.grid().view as usize,
            weights: b.weights()?,
            color_shift,
            key_shift,
        })
    }
}

/// The locate of a one-round plan as dot products, per part of the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Dot {
    /// Indexed by [`Part::index`](crate::coord::Part): encoder, decoder.
    sides: [Side; 2],
    /// Pipeline ends: the last position of a pipeline (`u32::MAX`: all
    /// members, no ends) and whether the last stage is kept.
    last_key: u32,
    keep_last: bool,
}

impl Dot {
    /// The dot form of `plan`, when it has one.
    pub fn of(plan: &Plan) -> Option<Dot> {
        let mut dot = Dot {
            sides: [Side::default(); 2],
            last_key: u32::MAX,
            keep_last: false,
        };
        let mut put = |b: &Boxes, color_shift, key_shift| -> Option<()> {
            *dot.sides.get_mut(b.grid().part.index())? = Side::of(b, color_shift, key_shift)?;
            Some(())
        };
        let mut ends = None;
        match plan {
            Plan::Boxes(b) => put(b, 0, 0)?,
            Plan::Ends(e) => {
                let Plan::Boxes(b) = &e.pipelines else {
                    return None;
                };
                put(b, 0, 0)?;
                ends = Some((b.size() - 1, e.last));
            }
            Plan::Stack(p) => {
                let (Plan::Boxes(a), Plan::Boxes(b)) = (&p.first, &p.second) else {
                    return None;
                };
                put(a, 0, 0)?;
                put(b, a.count(), 0)?;
            }
            Plan::Concat(p) => {
                put(&p.first, 0, 0)?;
                put(&p.second, 0, p.first.size())?;
            }
            Plan::Slices(_) | Plan::Joined(_) => return None,
        }
        if let Some((last_key, keep_last)) = ends {
            dot.last_key = last_key;
            dot.keep_last = keep_last;
        }
        Some(dot)
    }

    /// The group and position of the rank seen by `view`, if any.
    #[inline]
    pub fn locate(&self, view: &RankView) -> Option<Split> {
        let side = self.sides.get(view.part.index())?;
        if !side.present {
            return None;
        }
        let coords = view.coords.get(side.view)?;
        let s = dot(coords, &side.weights);
        let color = s.color.wrapping_add(side.color_shift);
        let key = s.key.wrapping_add(side.key_shift);
        if self.last_key == u32::MAX || key == 0 {
            Some(Split { color, key })
        } else if self.keep_last && key == self.last_key {
            Some(Split { color, key: 1 })
        } else {
            None
        }
    }
}
