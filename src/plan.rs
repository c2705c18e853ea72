//! How the groups of one kind are enumerated and located: the resolved form
//! of a [`Kind`](crate::Kind) in a given layout.

use crate::grid::{Grid, Mask, Partition};
use crate::group::{Group, Segment};
use crate::math::Digit;
use crate::pp_group_mapper::{Joined, PpGroupMapper};

/// `(group index, position in group)`: one membership of a rank.
pub(crate) type Slot = (u32, u32);

/// A kind resolved against a layout. Every operation is O(axes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Plan {
    /// The masked groups of a grid (SPEC 2).
    Grid {
        grid: Grid,
        mask: Mask,
        groups: Partition,
    },
    /// Per pipeline (`pp` mask) the first stage, and the last one if `last`:
    /// `embd` and `pos-embd`.
    Ends { grid: Grid, pp: Mask, last: bool },
    /// Each group of `mask` with positions `p = a + b*unit + c*unit*span`
    /// refined into groups that fix `(a, c)` and run over `b`, listed per
    /// group with `c` slower than `a`: hierarchical cp and the
    /// distributed-optimizer intra/inter groups.
    Refine {
        grid: Grid,
        mask: Mask,
        unit: u32,
        span: u32,
    },
    /// Consecutive groups of `mask`, `blocks` at a time, concatenated; the
    /// groups are numbered by the single `outer` axis.
    Merge {
        grid: Grid,
        mask: Mask,
        blocks: u32,
        outer: Digit,
    },
    /// All groups of `first` (the encoder), then all of `second`.
    Stack { first: Box<Plan>, second: Box<Plan> },
    /// Encoder and decoder joined by coordinates (SPEC 3.3).
    Joined {
        mapper: Box<PpGroupMapper>,
        what: Joined,
    },
}

impl Plan {
    /// The masked groups of `grid`.
    pub fn grid(grid: &Grid, mask: Mask) -> Plan {
        Plan::Grid {
            groups: grid.partition(mask),
            grid: grid.clone(),
            mask,
        }
    }

    /// Number of groups.
    pub fn count(&self) -> u32 {
        match self {
            Plan::Grid { groups, .. } => groups.count(),
            Plan::Ends { grid, pp: mask, .. } => grid.group_count(*mask),
            Plan::Refine {
                grid, mask, span, ..
            } => grid.group_count(*mask) * (grid.group_size(*mask) / span),
            Plan::Merge {
                grid, mask, blocks, ..
            } => grid.group_count(*mask) / blocks,
            Plan::Stack { first, second } => first.count() + second.count(),
            Plan::Joined { mapper, what } => mapper.count(*what),
        }
    }

    /// Group `index < count()`.
    pub fn group(&self, index: u32) -> Group {
        match self {
            Plan::Grid { groups, .. } => Group::new(groups.segment(index)),
            Plan::Ends { grid, pp, last } => {
                let pipeline = grid.group_segment(*pp, index);
                let stages = pipeline.len();
                let first = pipeline.at(0);
                if *last && stages > 1 {
                    let stride = pipeline.at(stages - 1) - first;
                    Group::new(Segment::boxed(first, [Digit { size: 2, stride }]))
                } else {
                    Group::new(Segment::single(first))
                }
            }
            Plan::Refine {
                grid,
                mask,
                unit,
                span,
            } => {
                let per_group = grid.group_size(*mask) / span;
                let (g, r) = (index / per_group, index % per_group);
                let (a, c) = (r % unit, r / unit);
                let segment = grid.group_segment(*mask, g);
                Group::new(segment.strided(a + c * unit * span, *unit, *span))
            }
            Plan::Merge {
                grid,
                mask,
                blocks,
                outer,
            } => {
                let segment = grid.group_segment(*mask, index * blocks);
                Group::new(segment.extended(Digit {
                    size: *blocks,
                    stride: outer.stride,
                }))
            }
            Plan::Stack { first, second } => {
                let n = first.count();
                if index < n {
                    first.group(index)
                } else {
                    second.group(index - n)
                }
            }
            Plan::Joined { mapper, what } => mapper.group(*what, index),
        }
    }

    /// Every group holding `rank`, as `(index, position)`; empty when the
    /// rank is in none (or outside the plan's ranks).
    pub fn locate(&self, rank: u32) -> Vec<Slot> {
        match self {
            Plan::Grid { grid, mask, .. } => grid.locate(*mask, rank).into_iter().collect(),
            Plan::Ends { grid, pp, last } => {
                let Some((g, stage)) = grid.locate(*pp, rank) else {
                    return Vec::new();
                };
                let stages = grid.group_size(*pp);
                if stage == 0 {
                    vec![(g, 0)]
                } else if *last && stage == stages - 1 {
                    vec![(g, 1)]
                } else {
                    Vec::new()
                }
            }
            Plan::Refine {
                grid,
                mask,
                unit,
                span,
            } => grid
                .locate(*mask, rank)
                .map(|(g, p)| {
                    let per_group = grid.group_size(*mask) / span;
                    let (a, b, c) = (p % unit, (p / unit) % span, p / (unit * span));
                    (g * per_group + a + c * unit, b)
                })
                .into_iter()
                .collect(),
            Plan::Merge {
                grid, mask, blocks, ..
            } => grid
                .locate(*mask, rank)
                .map(|(g, p)| (g / blocks, (g % blocks) * grid.group_size(*mask) + p))
                .into_iter()
                .collect(),
            Plan::Stack { first, second } => {
                if first.covers(rank) {
                    first.locate(rank)
                } else {
                    let n = first.count();
                    second
                        .locate(rank)
                        .into_iter()
                        .map(|(i, k)| (i + n, k))
                        .collect()
                }
            }
            Plan::Joined { mapper, what } => mapper.locate(*what, rank),
        }
    }

    /// Whether `rank` is one of the ranks this plan's groups are drawn from.
    fn covers(&self, rank: u32) -> bool {
        match self {
            Plan::Grid { grid, .. }
            | Plan::Ends { grid, .. }
            | Plan::Refine { grid, .. }
            | Plan::Merge { grid, .. } => grid.contains(rank),
            Plan::Stack { first, second } => first.covers(rank) || second.covers(rank),
            Plan::Joined { mapper, .. } => mapper.covers(rank),
        }
    }

    /// How many rounds of disjoint groups build this kind: 1 unless groups overlap.
    pub fn rounds(&self) -> u32 {
        match self {
            Plan::Joined { mapper, what } => mapper.rounds(*what),
            _ => 1,
        }
    }

    /// The round group `index` is built in.
    pub fn round_of(&self, index: u32) -> u32 {
        match self {
            Plan::Joined { mapper, what } => mapper.round_of(*what, index),
            _ => 0,
        }
    }
}

/// An iterator over the groups of one kind, in Megatron-LM's order.
///
/// Created by [`Layout::groups`](crate::Layout::groups) and
/// [`RankGenerator::groups`](crate::RankGenerator::groups).
#[derive(Debug, Clone)]
#[must_use = "iterators are lazy and do nothing unless consumed"]
pub struct Groups {
    plan: Plan,
    next: u32,
    end: u32,
}

impl Groups {
    pub(crate) fn new(plan: Plan) -> Groups {
        let end = plan.count();
        Groups { plan, next: 0, end }
    }

    /// Every group collected into vectors of ranks.
    pub fn to_vecs(self) -> Vec<Vec<u32>> {
        self.map(|g| g.to_vec()).collect()
    }
}

impl Iterator for Groups {
    type Item = Group;

    fn next(&mut self) -> Option<Group> {
        (self.next < self.end).then(|| {
            self.next += 1;
            self.plan.group(self.next - 1)
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = (self.end - self.next) as usize;
        (n, Some(n))
    }

    fn nth(&mut self, n: usize) -> Option<Group> {
        let skip = u32::try_from(n).unwrap_or(u32::MAX);
        self.next = self.next.saturating_add(skip).min(self.end);
        self.next()
    }
}

impl DoubleEndedIterator for Groups {
    fn next_back(&mut self) -> Option<Group> {
        (self.next < self.end).then(|| {
            self.end -= 1;
            self.plan.group(self.end)
        })
    }
}

impl ExactSizeIterator for Groups {}
impl std::iter::FusedIterator for Groups {}
