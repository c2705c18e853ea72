//! A plan's locate reduced to multiply-adds of the rank's coordinates.
//!
//! For every plan made of box families (the masked groups of a grid, a
//! stack of an encoder's and a decoder's, their concatenation, their
//! pipeline ends) a rank's group index and position are dot products of
//! its coordinates with fixed weights. [`Dot`] keeps those weights, per part
//! of the layout, so that [`Layout::splits`](crate::Layout::splits) answers
//! each kind with a few multiply-adds and no dispatch through the plan.

use crate::cast::low32;
use crate::coord::Part;
use crate::grid::MAX_AXES;
use crate::plan::Plan;
use crate::plan::boxes::Boxes;
use crate::plan::boxes::{Weights, dot_packed};
use crate::plan::view::{RankView, View};
use crate::split::Split;

/// How the ranks of one part find their group: the dot product of their
/// coordinates in view `view` with `weights`, then the shifts; for
/// pipeline ends, only the first position (and the last, `last_key`, if
/// kept) is a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Side {
    view: View,
    weights: Weights,
    /// The color shift (high 32 bits) and the key shift (low 32 bits),
    /// packed like the weights: added to the packed dot product in one
    /// addition. A shifted key is a key, below 2^32, so the low half never
    /// carries into the high half, and the high half wraps like a `u32`.
    shift: u64,
    /// Pipeline ends: the last position of a pipeline (`u32::MAX`: every
    /// position is a member) and whether the last stage is kept.
    last_key: u32,
    keep_last: bool,
}

impl Side {
    fn of(b: &Boxes, color_shift: u32, key_shift: u32) -> Option<Side> {
        Some(Side {
            view: b.grid().view,
            weights: b.weights()?,
            shift: (u64::from(color_shift) << 32) | u64::from(key_shift),
            last_key: u32::MAX,
            keep_last: false,
        })
    }

    /// Whether only a pipeline's ends are members (every position is
    /// otherwise).
    #[inline]
    pub fn ends_only(&self) -> bool {
        self.last_key != u32::MAX
    }

    /// The group and position of the rank seen by `view` (of this part)
    /// when every position is a member (not [`ends_only`](Self::ends_only)).
    #[inline]
    pub fn position(&self, view: &RankView) -> Split {
        // Looked up by the view's number (0 or 1, always there; the
        // fallback is never taken), not matched: a match here hides the
        // coordinates' length from the optimizer.
        let coords = view
            .coords
            .get(self.view as usize)
            .unwrap_or(&[0; MAX_AXES]);
        let packed = dot_packed(coords, &self.weights).wrapping_add(self.shift);
        Split {
            color: (packed >> 32) as u32,
            key: low32(packed),
        }
    }

    /// The group and position of the rank seen by `view` (of this part), if any.
    #[inline]
    pub fn locate(&self, view: &RankView) -> Option<Split> {
        let Split { color, key } = self.position(view);
        if !self.ends_only() || key == 0 {
            Some(Split { color, key })
        } else if self.keep_last && key == self.last_key {
            Some(Split { color, key: 1 })
        } else {
            None
        }
    }
}

/// The locate of a one-round plan as dot products, per part of the layout
/// (`None`: the part's ranks are in no group).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Dot {
    encoder: Option<Side>,
    decoder: Option<Side>,
}

impl Dot {
    /// The dot form of `plan`, when it has one.
    pub fn of(plan: &Plan) -> Option<Dot> {
        let mut dot = Dot {
            encoder: None,
            decoder: None,
        };
        let mut put = |b: &Boxes, color_shift, key_shift, ends: Option<bool>| -> Option<()> {
            let mut side = Side::of(b, color_shift, key_shift)?;
            if let Some(keep_last) = ends {
                side.last_key = b.size() - 1;
                side.keep_last = keep_last;
            }
            let slot = match b.grid().part {
                Part::Encoder => &mut dot.encoder,
                Part::Decoder => &mut dot.decoder,
            };
            *slot = Some(side);
            Some(())
        };
        match plan {
            Plan::Boxes(b) => put(b, 0, 0, None)?,
            Plan::Ends(e) => {
                let Plan::Boxes(b) = &e.pipelines else {
                    return None;
                };
                put(b, 0, 0, Some(e.last))?;
            }
            Plan::Stack(p) => {
                let (Plan::Boxes(a), Plan::Boxes(b)) = (&p.first, &p.second) else {
                    return None;
                };
                put(a, 0, 0, None)?;
                put(b, a.count(), 0, None)?;
            }
            Plan::Concat(p) => {
                put(&p.first, 0, 0, None)?;
                put(&p.second, 0, p.first.size(), None)?;
            }
            Plan::Slices(_) | Plan::Joined(_) | Plan::Mapped(_) => return None,
        }
        Some(dot)
    }

    /// How the ranks of `part` are located.
    pub fn side(&self, part: Part) -> Option<&Side> {
        match part {
            Part::Encoder => self.encoder.as_ref(),
            Part::Decoder => self.decoder.as_ref(),
        }
    }

    /// The group and position of the rank seen by `view`, if any.
    #[inline]
    pub fn locate(&self, view: &RankView) -> Option<Split> {
        self.side(view.part)?.locate(view)
    }
}
