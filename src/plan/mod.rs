//! How the groups of one kind are enumerated and located: the resolved form
//! of a [`Kind`](crate::Kind) in a given layout.
//!
//! A plan answers every question about a kind's groups in O(axes): how many
//! groups, group `i`, the group and position of a rank in each split round,
//! and it writes all members into a buffer at memory speed. Enumeration,
//! per-rank answers, comm-split colours, the command line and the MPI
//! splits all go through it, so they cannot disagree.

pub(crate) mod boxes;
pub(crate) mod dot;
mod fill;
pub(crate) mod groups;
pub(crate) mod pp_group_mapper;
mod shared_digit;
pub(crate) mod spread;
pub(crate) mod table;
pub(crate) mod view;

use std::ops::Range;

use arrayvec::ArrayVec;

use crate::grid::Coords;
use crate::group::{Group, RankMap};
use crate::plan::boxes::Boxes;
use crate::plan::dot::Dot;
use crate::plan::pp_group_mapper::PpGroupMapper;
use crate::plan::view::RankView;
use crate::segment::{Digit, Segment};
use crate::split::Split;

/// Each group of a [`Boxes`] with positions `p = a + b*unit + c*unit*span`
/// refined into groups that fix `(a, c)` and run over `b`, listed per group
/// with `c` slower than `a`: the refinements whose cuts do not fall on digit
/// boundaries (see [`Boxes::refine`]), which are not boxes themselves. With
/// dp = 3 after cp = 2 and two distributed-optimizer instances, the dp-cp
/// group `[0, 1, 2, 3, 4, 5]` is cut into `[0, 1, 2]` and `[3, 4, 5]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Slices {
    pub boxes: Boxes,
    pub unit: u32,
    pub span: u32,
}

impl Slices {
    fn per_group(&self) -> u32 {
        self.boxes.size() / self.span
    }

    fn segment(&self, index: u32) -> Segment {
        let per_group = self.per_group();
        let (g, r) = (index / per_group, index % per_group);
        let (a, c) = (r % self.unit, r / self.unit);
        self.boxes
            .segment(g)
            .strided(a + c * self.unit * self.span, self.unit, self.span)
    }

    fn locate(&self, coords: &Coords) -> Split {
        let s = self.boxes.locate(coords);
        let p = s.key;
        let (a, b, c) = (
            p % self.unit,
            (p / self.unit) % self.span,
            p / (self.unit * self.span),
        );
        Split {
            color: s.color * self.per_group() + a + c * self.unit,
            key: b,
        }
    }
}

/// The first stage, and the last one if `last`, of every group of a
/// pipeline plan: `embd` and `pos-embd`.
///
/// When `last` is false the resolver only builds ends over pipelines whose
/// first ranks are distinct, so the groups never overlap.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Ends {
    pub pipelines: Plan,
    pub last: bool,
}

/// A kind resolved against a layout. Every operation is O(axes), except
/// `fill`, which is O(members written).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Plan {
    /// Equal boxes of ranks (masked grid groups and their refinements).
    Boxes(Boxes),
    /// Strided slices of boxes.
    Slices(Slices),
    /// Pipeline ends.
    Ends(Box<Ends>),
    /// All groups of the first plan (the encoder's), then all of the second.
    Stack(Box<Pair<Plan>>),
    /// Group `i` is group `i` of the first family followed by group `i` of
    /// the second (both have as many groups).
    Concat(Box<Pair<Boxes>>),
    /// Encoder and decoder pipelines joined by coordinates.
    Joined(Box<PpGroupMapper>),
    /// Boxes of mesh positions, mapped to ranks by a mesh's rank map.
    Mapped(Box<Mapped>),
}

/// The groups of a mesh with a rank map: boxes of positions (from 0),
/// each position `p` the rank `map.rank(p)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Mapped {
    pub boxes: Boxes,
    pub map: RankMap,
}

impl Ends {
    /// Whether the rank seen by `view` can be an end of its pipelines: false
    /// only when it is known to sit inside them (joined pipelines, where
    /// a rank can be in very many, all at the same place), so that a rank
    /// in no end group is answered without listing its pipelines.
    fn is_end(&self, view: &RankView) -> bool {
        match &self.pipelines {
            Plan::Joined(j) => j
                .key(view)
                .is_some_and(|k| k == 0 || (self.last && k + 1 == j.len())),
            _ => true,
        }
    }
}

/// A plan with what per-rank answers need computed once: its rounds and,
/// when it has one, its dot form.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Resolved {
    pub plan: Plan,
    dot: Option<Dot>,
    rounds: u32,
}

impl Resolved {
    pub fn new(plan: Plan) -> Resolved {
        Resolved {
            dot: Dot::of(&plan),
            rounds: plan.rounds(),
            plan,
        }
    }

    pub fn rounds(&self) -> u32 {
        self.rounds
    }

    /// The dot form, if the plan has one (then it has one round).
    pub fn dot(&self) -> Option<&Dot> {
        self.dot.as_ref()
    }

    /// [`Plan::locate`], through the dot form when there is one.
    #[inline]
    pub fn locate(&self, view: &RankView, round: u32) -> Option<Split> {
        match &self.dot {
            Some(dot) if round == 0 => dot.locate(view),
            Some(_) => None,
            None => self.plan.locate(view, round),
        }
    }
}

/// Two plans, the encoder's first.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Pair<T> {
    pub first: T,
    pub second: T,
}

/// `count` consecutive groups of `len` members each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Run {
    pub count: u32,
    pub len: u32,
}

impl Plan {
    /// The pipeline ends of `pipelines`.
    pub fn ends(pipelines: Plan, last: bool) -> Plan {
        Plan::Ends(Box::new(Ends { pipelines, last }))
    }

    /// Number of groups.
    pub fn count(&self) -> u32 {
        match self {
            Plan::Boxes(b) => b.count(),
            Plan::Slices(s) => s.boxes.count() * s.per_group(),
            Plan::Ends(e) => e.pipelines.count(),
            Plan::Stack(p) => p.first.count() + p.second.count(),
            Plan::Concat(p) => p.first.count(),
            Plan::Joined(j) => j.count(),
            Plan::Mapped(m) => m.boxes.count(),
        }
    }

    /// Members per group, for plans whose groups all have one size (every
    /// plan but a stack of two different grids).
    pub fn len(&self) -> u32 {
        match self {
            Plan::Boxes(b) => b.size(),
            Plan::Slices(s) => s.span,
            Plan::Ends(e) => {
                if e.last && e.pipelines.len() > 1 {
                    2
                } else {
                    1
                }
            }
            Plan::Stack(p) => p.second.len(),
            Plan::Concat(p) => p.first.size() + p.second.size(),
            Plan::Joined(j) => j.len(),
            Plan::Mapped(m) => m.boxes.size(),
        }
    }

    /// Group sizes: one run, or two for a stack.
    pub fn runs(&self) -> ArrayVec<Run, 2> {
        let mut out = ArrayVec::new();
        let parts: [Option<&Plan>; 2] = match self {
            Plan::Stack(p) => [Some(&p.first), Some(&p.second)],
            other => [Some(other), None],
        };
        for p in parts.into_iter().flatten() {
            let run = Run {
                count: p.count(),
                len: p.len(),
            };
            match out.last_mut() {
                Some(Run { count, len }) if *len == run.len => *count += run.count,
                _ => {
                    let _ = out.try_push(run);
                }
            }
        }
        out
    }

    /// The runs of groups `range`.
    pub fn runs_in(&self, range: Range<u32>) -> ArrayVec<Run, 2> {
        let mut out = ArrayVec::new();
        let mut first = 0u32;
        for run in self.runs() {
            let end = first + run.count;
            let (a, b) = (range.start.max(first), range.end.min(end));
            if a < b {
                let _ = out.try_push(Run {
                    count: b - a,
                    len: run.len,
                });
            }
            first = end;
        }
        out
    }

    /// Members of groups `range`.
    pub fn members(&self, range: Range<u32>) -> u64 {
        self.runs_in(range)
            .iter()
            .map(|r| u64::from(r.count) * u64::from(r.len))
            .sum()
    }

    /// Group `index < count()`.
    pub fn group(&self, index: u32) -> Group {
        match self {
            Plan::Boxes(b) => Group::new(b.segment(index)),
            Plan::Slices(s) => Group::new(s.segment(index)),
            Plan::Ends(e) => {
                let pipeline = e.pipelines.group(index);
                let first = pipeline.first().unwrap_or(0);
                match pipeline.last() {
                    Some(last) if e.last && pipeline.len() > 1 => {
                        Group::joined(Segment::single(first), Segment::single(last))
                    }
                    _ => Group::new(Segment::single(first)),
                }
            }
            Plan::Stack(p) => {
                let n = p.first.count();
                if index < n {
                    p.first.group(index)
                } else {
                    p.second.group(index - n)
                }
            }
            Plan::Concat(p) => Group::joined(p.first.segment(index), p.second.segment(index)),
            Plan::Joined(j) => j.group(index),
            Plan::Mapped(m) => Group::mapped(m.boxes.segment(index), m.map.clone()),
        }
    }

    /// How many rounds of disjoint groups build this kind: 1 unless groups overlap.
    pub fn rounds(&self) -> u32 {
        match self {
            Plan::Ends(e) if e.last => e.pipelines.rounds(),
            Plan::Joined(j) => j.rounds(),
            _ => 1,
        }
    }

    /// The group of round `round` holding the rank seen by `view`, and its
    /// position there; `None` when it is in no group of that round.
    #[inline]
    pub fn locate(&self, view: &RankView, round: u32) -> Option<Split> {
        match self {
            Plan::Boxes(b) => {
                let coords = view.coords(b.grid())?;
                (round == 0).then(|| b.locate(coords))
            }
            Plan::Slices(s) => {
                let coords = view.coords(s.boxes.grid())?;
                (round == 0).then(|| s.locate(coords))
            }
            Plan::Ends(e) => {
                let stages = e.pipelines.len();
                let end = |s: Split| match s.key {
                    0 => Some(Split { key: 0, ..s }),
                    k if e.last && k + 1 == stages => Some(Split { key: 1, ..s }),
                    _ => None,
                };
                if e.last {
                    e.pipelines.locate(view, round).and_then(end)
                } else if round == 0 && e.is_end(view) {
                    e.pipelines.locate_all(view).into_iter().find_map(end)
                } else {
                    None
                }
            }
            Plan::Stack(p) => p
                .first
                .locate(view, round)
                .or_else(|| Some(p.second.locate(view, round)?.shifted(p.first.count()))),
            Plan::Concat(p) => {
                if round != 0 {
                    return None;
                }
                if let Some(coords) = view.coords(p.first.grid()) {
                    return Some(p.first.locate(coords));
                }
                let s = p.second.locate(view.coords(p.second.grid())?);
                Some(Split {
                    key: s.key + p.first.size(),
                    ..s
                })
            }
            Plan::Joined(j) => j.locate(view, round),
            // A mesh answers its ranks itself.
            Plan::Mapped(_) => None,
        }
    }

    /// Every group holding the rank seen by `view`, in any order: one per
    /// round at most, found without going through the rounds one by one.
    pub fn locate_all(&self, view: &RankView) -> Vec<Split> {
        match self {
            Plan::Ends(e) => {
                let stages = e.pipelines.len();
                if !e.is_end(view) {
                    return Vec::new();
                }
                let mut out: Vec<Split> = e
                    .pipelines
                    .locate_all(view)
                    .into_iter()
                    .filter_map(|s| match s.key {
                        0 => Some(Split { key: 0, ..s }),
                        k if e.last && k + 1 == stages => Some(Split { key: 1, ..s }),
                        _ => None,
                    })
                    .collect();
                if !e.last {
                    // First stages of distinct pipelines: at most one (see `Ends`).
                    out.truncate(1);
                }
                out
            }
            Plan::Stack(p) => {
                let first = p.first.locate_all(view);
                if !first.is_empty() {
                    return first;
                }
                let n = p.first.count();
                p.second
                    .locate_all(view)
                    .into_iter()
                    .map(|s| s.shifted(n))
                    .collect()
            }
            Plan::Joined(j) => j.locate_all(view),
            _ => self.locate(view, 0).into_iter().collect(),
        }
    }

    /// Writes the members of groups `range` into `out`, which holds exactly
    /// [`members(range)`](Self::members) places.
    pub fn fill(&self, range: Range<u32>, out: &mut [u32]) {
        let whole = range.start == 0 && range.end == self.count();
        match self {
            Plan::Boxes(b) => b.fill(range, out),
            Plan::Ends(e) if whole => match &e.pipelines {
                Plan::Boxes(b) => {
                    // Every pipeline of a box family spans the same distance.
                    let span = b.span();
                    let ends = [Digit {
                        size: 2,
                        stride: span,
                    }];
                    let members: &[Digit] = if e.last && span > 0 { &ends } else { &[] };
                    b.fill_with_members(members, range, out);
                }
                Plan::Joined(j) => j.fill_ends(e.last, out),
                _ => fill::each_group(self, range, out),
            },
            Plan::Stack(p) => {
                let n = p.first.count();
                let first = range.start.min(n)..range.end.min(n);
                let split = usize::try_from(p.first.members(first.clone())).unwrap_or(usize::MAX);
                let (a, b) = out.split_at_mut(split.min(out.len()));
                p.first.fill(first, a);
                p.second
                    .fill(range.start.max(n) - n..range.end.max(n) - n, b);
            }
            Plan::Concat(p) if whole && fill::concat(&p.first, &p.second, out).is_some() => {}
            Plan::Joined(j) if whole => j.fill(out),
            Plan::Mapped(m) => {
                m.boxes.fill(range, out);
                for r in out.iter_mut() {
                    *r = m.map.rank(*r);
                }
            }
            _ => fill::each_group(self, range, out),
        }
    }
}
