//! A rank's comm-split color and key for every kind, in one pass.

use std::borrow::Cow;
use std::iter::FusedIterator;

use crate::kind::Kind;
use crate::plan::{RankView, Resolved};
use crate::split::Split;

/// One step of [`Splits`]: a kind, one of its split rounds, and the rank's
/// color and key there (`None`: the rank is in no group of this round;
/// pass MPI's undefined color).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

/// One (kind, round) to answer, and the plan that answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Step {
    kind: Kind,
    round: u32,
    rounds: u32,
    plan: usize,
}

/// Every (kind, round) of `plans`, kinds in order, rounds ascending.
pub(crate) fn steps<'p>(plans: impl IntoIterator<Item = (Kind, &'p Resolved)>) -> Vec<Step> {
    let mut out = Vec::new();
    for (i, (kind, plan)) in plans.into_iter().enumerate() {
        let rounds = plan.rounds();
        out.extend((0..rounds).map(|round| Step {
            kind,
            round,
            rounds,
            plan: i,
        }));
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
    next: usize,
}

impl<'a> Splits<'a> {
    pub(crate) fn new(steps: Cow<'a, [Step]>, plans: Plans<'a>, view: RankView) -> Splits<'a> {
        Splits {
            steps,
            plans,
            view,
            next: 0,
        }
    }
}

impl Iterator for Splits<'_> {
    type Item = SplitRound;

    #[inline]
    fn next(&mut self) -> Option<SplitRound> {
        let step = *self.steps.get(self.next)?;
        self.next += 1;
        let split = self
            .plans
            .get(step.plan)
            .and_then(|plan| plan.locate(&self.view, step.round));
        Some(SplitRound {
            kind: step.kind,
            round: step.round,
            rounds: step.rounds,
            split,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.steps.len() - self.next;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Splits<'_> {}
impl FusedIterator for Splits<'_> {}
