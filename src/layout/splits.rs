//! A rank's comm-split color and key for every kind, in one pass.

use std::borrow::Cow;
use std::iter::FusedIterator;

use crate::coord::Part;
use crate::kind::Kind;
use crate::plan::Resolved;
use crate::plan::dot::Side;
use crate::plan::view::RankView;
use crate::split::Split;

/// One step of [`Splits`]: a kind, one of its split rounds, and the rank's
/// color and key there (`None`: the rank is in no group of this round;
/// pass MPI's undefined color).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct SplitRound {
    /// The kind.
    pub kind: Kind,
    /// The round, below `rounds`.
    pub round: u32,
    /// How many rounds the kind is built in (1 unless its groups overlap).
    pub rounds: u32,
    /// The rank's color and key in this round.
    pub split: Option<Split>,
}

/// How one step is answered for the ranks of one part. A tag of its own
/// (`repr(u8)`, not a niche in [`Side`]): the walk tests it with one
/// compare, the usual case first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
enum How {
    /// Multiply-adds of the coordinates; every position is a member.
    Dot(Side),
    /// Multiply-adds of the coordinates, then only the pipeline's ends
    /// are members.
    Ends(Side),
    /// The part's ranks are in no group of the kind.
    Nothing,
    /// Through plan `plans[i]`.
    Plan(usize),
}

/// One kind to answer, in all its rounds, for the ranks of one part, and
/// how (the dot form inline, so that the walk touches one array). One step
/// per kind, whatever the rounds: a layout with a million split rounds
/// costs no more to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Step {
    kind: Kind,
    rounds: u32,
    how: How,
}

/// One step per kind of `plans` for the ranks of `part`, kinds in order.
pub(crate) fn steps<'p>(
    part: Part,
    plans: impl IntoIterator<Item = (Kind, &'p Resolved)>,
) -> Vec<Step> {
    let mut out = Vec::new();
    for (i, (kind, plan)) in plans.into_iter().enumerate() {
        let rounds = plan.rounds();
        // A dot form has one round (checked here: the walk's fast path
        // relies on it).
        let how = match plan.dot() {
            Some(dot) if rounds == 1 => match dot.side(part) {
                Some(side) if side.ends_only() => How::Ends(*side),
                Some(side) => How::Dot(*side),
                None => How::Nothing,
            },
            Some(_) | None => How::Plan(i),
        };
        out.push(Step { kind, rounds, how });
    }
    out
}

/// The plans of a [`Splits`]: the layout's own, or chosen ones.
#[derive(Debug, Clone)]
pub(crate) enum Plans<'a> {
    Layout(&'a [Resolved]),
    Chosen(Vec<Cow<'a, Resolved>>),
}

impl Plans<'_> {
    #[inline]
    fn get(&self, i: usize) -> Option<&Resolved> {
        match self {
            Plans::Layout(plans) => plans.get(i),
            Plans::Chosen(plans) => plans.get(i).map(|p| &**p),
        }
    }
}

/// An iterator over one rank's comm-splits: every kind, every round of it.
///
/// The rank's coordinates are decoded once when it is created; each step
/// is then a few multiply-adds. It allocates nothing (except the list of
/// kinds of [`Layout::splits_of`](crate::Layout::splits_of)).
///
/// Created by [`Layout::splits`](crate::Layout::splits) and
/// [`Layout::splits_of`](crate::Layout::splits_of).
#[derive(Debug, Clone)]
#[must_use = "iterators are lazy and do nothing unless consumed"]
pub struct Splits<'a> {
    steps: Cow<'a, [Step]>,
    plans: Plans<'a>,
    view: RankView,
    /// The next step and the next round of it.
    next: usize,
    round: u32,
}

impl<'a> Splits<'a> {
    #[inline]
    pub(crate) fn new(steps: Cow<'a, [Step]>, plans: Plans<'a>, view: RankView) -> Splits<'a> {
        Splits {
            steps,
            plans,
            view,
            next: 0,
            round: 0,
        }
    }
}

impl Splits<'_> {
    /// The answer of round `round` of `step` (any step; `next` answers
    /// [`How::Dot`] steps itself).
    #[inline]
    fn locate_other(&self, step: &Step, round: u32) -> Option<Split> {
        match &step.how {
            How::Dot(side) => Some(side.position(&self.view)),
            How::Ends(side) => side.locate(&self.view),
            How::Nothing => None,
            How::Plan(i) => self
                .plans
                .get(*i)
                .and_then(|plan| plan.locate(&self.view, round)),
        }
    }
}

impl Iterator for Splits<'_> {
    type Item = SplitRound;

    #[inline]
    fn next(&mut self) -> Option<SplitRound> {
        let step = self.steps.get(self.next)?;
        // The usual case first, apart: one compare of the tag, one round
        // (`steps` makes dot steps only of one-round plans, so `round` is
        // 0 here), then the multiply-adds.
        if let How::Dot(side) = &step.how {
            self.next += 1;
            return Some(SplitRound {
                kind: step.kind,
                round: 0,
                rounds: 1,
                split: Some(side.position(&self.view)),
            });
        }
        let round = self.round;
        if round + 1 < step.rounds {
            self.round += 1;
        } else {
            self.next += 1;
            self.round = 0;
        }
        Some(SplitRound {
            kind: step.kind,
            round,
            rounds: step.rounds,
            split: self.locate_other(step, round),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left: u64 = self
            .steps
            .iter()
            .skip(self.next)
            .map(|s| u64::from(s.rounds))
            .sum::<u64>()
            - u64::from(self.round);
        let n = usize::try_from(left).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl ExactSizeIterator for Splits<'_> {}
impl FusedIterator for Splits<'_> {}
