//! The leaf plan: a family of equal boxes of ranks, such as the masked
//! groups of a grid.

use crate::cast::low32;
use std::ops::Range;

use arrayvec::ArrayVec;

use crate::grid::{Coords, Grid, MAX_AXES};
use crate::math::Div;
use crate::plan::view::GridId;
use crate::segment::{Digit, MAX_DIGITS, Segment, fill_box, spread};
use crate::split::Split;

/// One digit of a [`Boxes`], read from a rank's grid coordinates as
/// `(coords[axis] / below) % size`: a whole grid axis, or a piece of one
/// (hierarchical context parallel and distributed-optimizer slices cut an
/// axis in two or three).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Term {
    digit: Digit,
    axis: usize,
    below: Div,
    size: Div,
    whole: bool,
}

impl Term {
    fn value(&self, coords: &Coords) -> u32 {
        let c = coords.get(self.axis).copied().unwrap_or(0);
        if self.whole {
            c
        } else {
            self.size.div_rem(self.below.div(c)).1
        }
    }

    /// The piece of this digit that starts at factor `from` and has `size`
    /// values: `size (a*b)` cut at `from = a` gives `(a, stride)` and
    /// `(b, stride * a)`.
    fn piece(self, from: u32, size: u32) -> Term {
        let below = self.below.divisor() * from;
        Term {
            digit: Digit {
                size,
                stride: self.digit.stride * from,
            },
            axis: self.axis,
            below: Div::new(below),
            size: Div::new(size),
            whole: from == 1 && size == self.digit.size && self.whole,
        }
    }
}

type Terms = ArrayVec<Term, MAX_DIGITS>;

/// Cuts a mixed radix (first digit fastest) at the position weight `cut`:
/// the digits below `cut` and those above it, splitting one digit when the
/// cut falls inside it. `None` when the cut is not on a digit boundary of
/// some refinement (`cut` does not divide along the digits).
fn cut_at(terms: &[Term], cut: u32) -> Option<(Terms, Terms)> {
    let (mut low, mut high) = (Terms::new(), Terms::new());
    let mut below = 1u32;
    for t in terms {
        let size = t.digit.size;
        if below >= cut {
            high.try_push(*t).ok()?;
        } else if u64::from(below) * u64::from(size) <= u64::from(cut) {
            low.try_push(*t).ok()?;
            below *= size;
        } else {
            // below < cut < below * size: cut this digit at `cut / below`.
            if cut % below != 0 || size % (cut / below) != 0 {
                return None;
            }
            let f = cut / below;
            low.try_push(t.piece(1, f)).ok()?;
            high.try_push(t.piece(f, size / f)).ok()?;
            below = cut;
        }
    }
    (below == cut).then_some((low, high))
}

/// Per grid axis, the weight of its coordinate in a group index (high 32
/// bits) and in a key (low 32 bits).
pub(crate) type Weights = [u64; MAX_AXES];

/// The group index and key of the rank at `coords`: one dot product with
/// packed weights (index in the high 32 bits, key in the low ones). Every
/// partial sum of key terms is at most the key, below 2^32, so the low half
/// never carries into the high half; the high half is the index modulo
/// 2^32, which is the index.
///
/// `N` is the number of coordinates: a grid's axes ([`Coords`]) or a mesh's
/// dims.
#[inline]
pub(crate) fn dot<const N: usize>(coords: &[u32; N], weights: &[u64; N]) -> Split {
    let packed = dot_packed(coords, weights);
    Split {
        color: (packed >> 32) as u32,
        key: low32(packed),
    }
}

/// [`dot`] before unpacking: the group index in the high 32 bits, the key
/// in the low 32 bits.
#[inline]
pub(crate) fn dot_packed<const N: usize>(coords: &[u32; N], weights: &[u64; N]) -> u64 {
    coords.iter().zip(weights).fold(0u64, |acc, (c, w)| {
        acc.wrapping_add(u64::from(*c).wrapping_mul(*w))
    })
}

/// Groups that are boxes of equal shape: member `k` of group `i` is
/// `offset + spread(i * size + k, digits)`, the member digits first (in
/// member order), then the group digits (in group-index order).
///
/// The masked groups of a grid are the simplest case: the masked axes are
/// the member digits and the other axes the group digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Boxes {
    grid: GridId,
    offset: u32,
    /// Member terms, then group terms; size-1 digits are left out.
    terms: Terms,
    members: usize,
    size: u32,
    count: u32,
    /// Per grid axis, the weights of its coordinate in the group index and
    /// in the key, when every term is a whole axis (the usual case).
    weights: Option<Weights>,
}

impl Boxes {
    fn new(grid: GridId, offset: u32, members: Terms, groups: Terms) -> Option<Boxes> {
        let n = members.len();
        let size = members.iter().map(|t| t.digit.size).product();
        let count = groups.iter().map(|t| t.digit.size).product();
        let mut terms = members;
        for t in groups {
            terms.try_push(t).ok()?;
        }
        let mut b = Boxes {
            grid,
            offset,
            terms,
            members: n,
            size,
            count,
            weights: None,
        };
        b.weights = b.axis_weights();
        Some(b)
    }

    fn axis_weights(&self) -> Option<Weights> {
        let mut weights = [0; MAX_AXES];
        let (mut wi, mut wk) = (1u32, 1u32);
        for (i, t) in self.terms.iter().enumerate() {
            if !t.whole {
                return None;
            }
            let w = weights.get_mut(t.axis)?;
            if i < self.members {
                *w = u64::from(wk);
                wk *= t.digit.size;
            } else {
                *w = u64::from(wi) << 32;
                wi *= t.digit.size;
            }
        }
        Some(weights)
    }

    /// The groups of `grid` spanned by the axes at the positions set in
    /// `mask` (the groups of a kind).
    pub fn masked(grid: &Grid, id: GridId, mask: u8) -> Boxes {
        let (mut members, mut groups) = (Terms::new(), Terms::new());
        for (i, a) in grid.axes().iter().enumerate() {
            if a.digit.size == 1 {
                continue;
            }
            let term = Term {
                digit: a.digit,
                axis: i,
                below: Div::new(1),
                size: a.size,
                whole: true,
            };
            // At most five axes: both lists have room.
            let list = if mask & (1 << i) != 0 {
                &mut members
            } else {
                &mut groups
            };
            let _ = list.try_push(term);
        }
        Boxes::new(id, grid.offset(), members, groups)
            .unwrap_or_else(|| unreachable!("five axes fit the eight digits of a box"))
    }

    /// The groups of a mesh over the digits `(digit, selected)`, first
    /// fastest: the selected digits are the members (in digit order), the
    /// others number the groups (in digit order); size-1 digits are left
    /// out. `grid` only names the plan: a mesh locates ranks itself, never
    /// through [`locate`](Self::locate). `None` past eight digits of size > 1.
    pub fn of_digits(grid: GridId, offset: u32, digits: &[(Digit, bool)]) -> Option<Boxes> {
        let (mut members, mut groups) = (Terms::new(), Terms::new());
        for (i, (digit, selected)) in digits.iter().enumerate() {
            if digit.size == 1 {
                continue;
            }
            let term = Term {
                digit: *digit,
                axis: i,
                below: Div::new(1),
                size: Div::new(digit.size),
                whole: true,
            };
            if *selected {
                members.try_push(term).ok()?;
            } else {
                groups.try_push(term).ok()?;
            }
        }
        if members.len() + groups.len() > MAX_DIGITS {
            return None;
        }
        Boxes::new(grid, offset, members, groups)
    }

    /// Each group's members at positions `p = a + b*unit + c*unit*span`
    /// refined into groups that fix `(a, c)` and run over `b`, listed per
    /// group with `c` slower than `a`. `None` when `unit` or `unit * span`
    /// does not fall on a digit boundary (then the slices are not boxes).
    pub fn refine(&self, unit: u32, span: u32) -> Option<Boxes> {
        let (members, groups) = self.terms.split_at(self.members);
        let (a, rest) = cut_at(members, unit)?;
        let (b, c) = cut_at(&rest, span)?;
        let mut outer = a;
        for t in c.into_iter().chain(groups.iter().copied()) {
            outer.try_push(t).ok()?;
        }
        Boxes::new(self.grid, self.offset, b, outer)
    }

    /// Consecutive groups, `blocks` at a time, concatenated into one.
    /// `None` when `blocks` does not fall on a digit boundary.
    pub fn merge(&self, blocks: u32) -> Option<Boxes> {
        let (members, groups) = self.terms.split_at(self.members);
        let (low, high) = cut_at(groups, blocks)?;
        let mut inner: Terms = members.iter().copied().collect();
        for t in low {
            inner.try_push(t).ok()?;
        }
        Boxes::new(self.grid, self.offset, inner, high)
    }

    /// Per grid axis, the weight of its coordinate in the group index and in
    /// the key, when every digit is a whole axis.
    pub fn weights(&self) -> Option<Weights> {
        self.weights
    }

    pub fn grid(&self) -> GridId {
        self.grid
    }

    /// Members per group.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Number of groups.
    pub fn count(&self) -> u32 {
        self.count
    }

    fn member_digits(&self) -> impl Iterator<Item = Digit> + '_ {
        self.terms.iter().take(self.members).map(|t| t.digit)
    }

    fn group_digits(&self) -> ArrayVec<Digit, MAX_DIGITS> {
        self.terms
            .iter()
            .skip(self.members)
            .map(|t| t.digit)
            .collect()
    }

    /// The group digits as (size, stride), in group-index order: the
    /// distance between consecutive groups along each.
    pub fn group_steps(&self) -> ArrayVec<Digit, MAX_DIGITS> {
        self.group_digits()
    }

    /// The member digits as (size, stride), in member order: the offsets of
    /// a group's members from its first.
    pub fn member_steps(&self) -> ArrayVec<Digit, MAX_DIGITS> {
        self.member_digits().collect()
    }

    /// The first member of group `index`.
    pub fn base(&self, index: u32) -> u32 {
        self.offset
            .wrapping_add(spread(u64::from(index), &self.group_digits()))
    }

    /// Group `index < count()`.
    pub fn segment(&self, index: u32) -> Segment {
        let members: ArrayVec<Digit, MAX_DIGITS> = self.member_digits().collect();
        Segment::boxed(self.base(index), &members)
    }

    /// The distance from a group's first member to its last.
    pub fn span(&self) -> u32 {
        self.member_digits()
            .fold(0u32, |acc, d| acc + (d.size - 1) * d.stride)
    }

    /// The group and position of the rank at `coords` of this plan's grid.
    #[inline]
    pub fn locate(&self, coords: &Coords) -> Split {
        if let Some(weights) = &self.weights {
            return dot(coords, weights);
        }
        let (mut color, mut key) = (0u32, 0u32);
        let (mut wi, mut wk) = (1u32, 1u32);
        for (i, t) in self.terms.iter().enumerate() {
            let v = t.value(coords);
            if i < self.members {
                key += v * wk;
                wk *= t.digit.size;
            } else {
                color += v * wi;
                wi *= t.digit.size;
            }
        }
        Split { color, key }
    }

    /// Writes the members of groups `range`, group after group.
    pub fn fill(&self, range: Range<u32>, out: &mut [u32]) {
        let digits: ArrayVec<Digit, MAX_DIGITS> = self.terms.iter().map(|t| t.digit).collect();
        let start = u64::from(range.start) * u64::from(self.size);
        fill_box(self.offset, &digits, start, out);
    }

    /// Writes groups `range` with every group's members replaced by
    /// `members` (digits relative to the group's first member).
    pub fn fill_with_members(&self, members: &[Digit], range: Range<u32>, out: &mut [u32]) {
        let mut digits: ArrayVec<Digit, MAX_DIGITS> = members.iter().copied().collect();
        let size: u64 = members.iter().map(|d| u64::from(d.size)).product();
        for d in self.group_digits() {
            let _ = digits.try_push(d);
        }
        fill_box(self.offset, &digits, u64::from(range.start) * size, out);
    }
}
