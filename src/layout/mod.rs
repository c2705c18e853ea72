//! A whole layout: one of the three shapes plus the extra families,
//! validated once, then asked questions.

mod build;
mod families;
mod folded;
mod nested;
mod pipeline;
mod resolve;
mod shape;
mod sizes;
mod splits;
mod spread;

use std::borrow::Cow;
use std::fmt;

pub use pipeline::Stage;
pub use sizes::Sizes;
pub use splits::{SplitRound, Splits};

use crate::axis::Axis;
use crate::config::Config;
use crate::config::ExpertLayout;
use crate::coord::{Coord, ExpertCoord, Part, Placement};
use crate::error::{Error, Result};
use crate::group::Group;
use crate::kind::Kind;
use crate::layout_shape::LayoutShape;
use crate::mesh::Mesh;
use crate::plan::Resolved;
use crate::plan::groups::Groups;
use crate::plan::view::{RankView, View};
use crate::split::Split;
use families::Families;
use shape::{Dense, Shape};

/// One membership of a rank: the group, its color (its number among the
/// kind's groups, the comm-split color) and the rank's key (its position in
/// the group).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Membership {
    /// The group's number: its position in [`Layout::groups`], the comm-split color.
    pub color: u32,
    /// The rank's position in the group.
    pub key: u32,
    /// The group.
    pub group: Group,
}

impl Membership {
    /// The comm-split pair of this membership.
    pub fn split(&self) -> Split {
        Split {
            color: self.color,
            key: self.key,
        }
    }
}

/// A validated rank layout: every kind's groups, and every rank's answers.
///
/// Built once from a [`Config`]; a plain value (`Clone + Eq + Debug`), no
/// global state. Per-rank questions are answered arithmetically in O(axes)
/// (plus O(group size) to list members); enumeration is lazy, or written
/// into a buffer at memory speed ([`Groups::fill`]). What every kind means
/// is written down in [`semantics`](crate::semantics).
///
/// ```
/// use rank_layout::{Config, Kind, Layout, Split};
/// // 16 ranks, tp=2, pp=4, order tp-dp-pp (Megatron-LM's docstring example).
/// let layout = Layout::new(&Config::new().tp(2).pp(4).world_size(16).order("tp-dp-pp".parse()?))?;
/// assert_eq!(layout.groups(Kind::PP)?.to_vecs()[0], vec![0, 4, 8, 12]);
/// assert_eq!(layout.split(13, Kind::PP)?, Some(Split { color: 1, key: 3 }));
/// assert_eq!(layout.pipeline_next(8)?, vec![12]);
/// assert!(layout.placement(16).is_err());
/// // 10 ranks cannot hold tp*pp = 8 per replica:
/// assert!(Layout::new(&Config::new().tp(2).pp(4).world_size(Some(10))).is_err());
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Clone)]
pub struct Layout {
    config: Config,
    shape: Shape,
    families: Families,
    /// The layout's kinds and their plans, resolved once.
    kinds: Vec<Kind>,
    plans: Vec<Resolved>,
    /// Every (kind, round), for [`Layout::splits`]: for encoder ranks, then
    /// for decoder ranks.
    steps: [Vec<splits::Step>; 2],
}

impl PartialEq for Layout {
    /// Layouts are equal when their resolved configurations are (everything
    /// else derives from it).
    fn eq(&self, other: &Layout) -> bool {
        self.config == other.config
    }
}

impl Eq for Layout {}

impl std::hash::Hash for Layout {
    /// The resolved configuration's hash, consistent with `==`.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.config.hash(state);
    }
}

impl fmt::Debug for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Layout")
            .field("shape", &self.shape.name())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Layout {
    /// Validates `config` and builds its layout. O(axes + kinds): nothing
    /// is enumerated.
    ///
    /// # Errors
    /// Every invalid configuration, among them:
    /// - [`Error::ZeroSize`] for a size of 0;
    /// - [`Error::WorldNotDivisible`], [`Error::WorldSizeMismatch`] when the
    ///   world size does not fit the sizes;
    /// - [`Error::MissingAxis`], [`Error::EpNotAdjacentToDp`] for a bad order;
    /// - [`Error::DpNotDivisibleByEp`] (nested experts);
    /// - [`Error::ExpertWorldNotDivisible`], [`Error::FoldedDpMismatch`],
    ///   [`Error::FoldedPpMismatch`] (folded experts);
    /// - [`Error::HierarchicalCpProduct`], [`Error::DistOptNotDivisible`],
    ///   [`Error::DistOptInconsistent`], [`Error::DistOptSlicesNotDivisible`], [`Error::NeedsFolded`];
    /// - [`Error::Overflow`] when a size product or the last rank exceeds `u32`.
    pub fn new(config: &Config) -> Result<Layout> {
        let (shape, families) = build::build(config)?;
        let kinds = resolve::kinds(&shape, &families);
        let plans = kinds
            .iter()
            .map(|kind| resolve::resolve(&shape, &families, *kind).map(Resolved::new))
            .collect::<Result<Vec<_>>>()?;
        let steps = [Part::Encoder, Part::Decoder]
            .map(|part| splits::steps(part, kinds.iter().copied().zip(&plans)));
        Ok(Layout {
            config: build::resolved(config, &shape),
            shape,
            families,
            kinds,
            plans,
            steps,
        })
    }

    /// The configuration with derived sizes filled in (`dp`, `world_size`,
    /// and `etp` or `encoder_tp`/`encoder_pp` where the layout has them).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Which of the three shapes this layout has.
    pub fn shape(&self) -> LayoutShape {
        self.shape.name()
    }

    /// The sizes of the decoder (or only) grid, derived ones included.
    pub fn sizes(&self) -> Sizes {
        self.shape.main().sizes
    }

    /// The encoder grid's sizes, in an encoder + decoder layout.
    pub fn encoder_sizes(&self) -> Option<Sizes> {
        self.shape.encoder().map(|e| e.sizes)
    }

    /// The hierarchical context-parallel levels (empty when not configured).
    pub fn hierarchical_cp(&self) -> &[u32] {
        &self.families.hierarchical_cp
    }

    /// The number of distributed-optimizer instances (1 when not configured).
    pub fn dist_opt_instances(&self) -> u32 {
        self.families.dist_opt_instances
    }

    /// The number of ranks.
    pub fn world_size(&self) -> u32 {
        self.shape.world()
    }

    /// The first rank.
    pub fn rank_offset(&self) -> u32 {
        self.shape.offset()
    }

    /// One past the last rank (a `u64`: it may be 2^32).
    pub fn rank_end(&self) -> u64 {
        u64::from(self.rank_offset()) + u64::from(self.world_size())
    }

    /// Whether this is an encoder + decoder layout.
    pub fn has_encoder(&self) -> bool {
        self.shape.encoder().is_some()
    }

    /// The number of encoder ranks (0 without an encoder).
    pub fn encoder_world_size(&self) -> u32 {
        self.shape.encoder().map_or(0, |e| e.attention.world())
    }

    /// Every kind of this layout, in listing order: the dense kinds, the
    /// expert kinds, `embd`, `pos-embd` (before the expert kinds in the
    /// folded layout, as Megatron-Core lists them), then `hcp-*` and the
    /// distributed-optimizer kinds when configured.
    pub fn kinds(&self) -> &[Kind] {
        &self.kinds
    }

    /// The plan of `kind`: the one resolved when the layout was built, or
    /// resolved now for a kind outside [`kinds`](Self::kinds) (any set of
    /// axes is a kind).
    pub(crate) fn plan(&self, kind: Kind) -> Result<Cow<'_, Resolved>> {
        match self.kinds.iter().position(|k| *k == kind) {
            Some(i) => self
                .plans
                .get(i)
                .map(Cow::Borrowed)
                .ok_or_else(|| Error::KindNotInLayout {
                    kind,
                    layout: self.shape(),
                    hint: "",
                }),
            None => resolve::resolve(&self.shape, &self.families, kind)
                .map(|plan| Cow::Owned(Resolved::new(plan))),
        }
    }

    /// The groups of `kind`, in Megatron-LM's order.
    ///
    /// # Errors
    /// [`Error::KindNotInLayout`] for a kind this layout does not have.
    ///
    /// # Example
    /// ```
    /// use rank_layout::{Config, Kind, Layout};
    /// // [tp, dp, pp] = [2, 3, 4], order tp-dp-pp (Megatron-LM's docstring).
    /// let layout = Layout::new(&Config::new().tp(2).dp(Some(3)).pp(4).order("tp-dp-pp".parse()?))?;
    /// let dp = layout.groups(Kind::DP)?;
    /// assert_eq!(dp.len(), 8);
    /// assert_eq!(dp.last().unwrap().to_vec(), vec![19, 21, 23]);
    /// assert!(layout.groups(Kind::DP_MOD_EP).is_err()); // a nested-layout kind
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn groups(&self, kind: Kind) -> Result<Groups<'_>> {
        Ok(Groups::new(match self.plan(kind)? {
            Cow::Borrowed(r) => Cow::Borrowed(&r.plan),
            Cow::Owned(r) => Cow::Owned(r.plan),
        }))
    }

    /// `rank`'s coordinates, decoded once, in the grids of its part.
    #[inline]
    pub(crate) fn view(&self, rank: u32) -> Result<RankView> {
        let dense = self.shape.dense_of(rank);
        let decode = |view: View| {
            dense
                .grid(view)
                .decode(rank)
                .ok_or_else(|| self.out_of_range(rank.into()))
        };
        Ok(RankView {
            part: dense.part,
            coords: [decode(View::Attention)?, decode(View::Expert)?],
        })
    }

    /// The error for a rank outside the layout (out of line: the answers
    /// that check ranks are inlined into callers).
    #[cold]
    #[inline(never)]
    pub(crate) fn out_of_range(&self, rank: u64) -> Error {
        Error::RankOutOfRange {
            rank,
            first: self.rank_offset(),
            last: self.rank_end() - 1,
        }
    }

    /// Every group of `kind` that holds `rank`, by ascending color: one for a
    /// partition kind, none where the rank is in no group (`embd`,
    /// `pos-embd`), several where groups overlap (encoder + decoder fan-out
    /// and fan-in).
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`], [`Error::KindNotInLayout`].
    ///
    /// # Example
    /// ```
    /// use rank_layout::{Config, Kind, Layout};
    /// // tp=4 decoder, encoder tp=2, cp=2: encoder rank 0 feeds decoder ranks 4 and 5.
    /// let layout = Layout::new(&Config::new().tp(4).cp(2).encoder_tp(Some(2)))?;
    /// let pp: Vec<Vec<u32>> = layout.memberships(0, Kind::PP)?.iter().map(|m| m.group.to_vec()).collect();
    /// assert_eq!(pp, vec![vec![0, 4], vec![0, 5]]);
    /// assert!(layout.memberships(12, Kind::PP).is_err());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn memberships(&self, rank: u32, kind: Kind) -> Result<Vec<Membership>> {
        let plan = self.plan(kind)?;
        let view = self.view(rank)?;
        let mut splits = plan.plan.locate_all(&view);
        splits.sort_unstable();
        Ok(splits
            .into_iter()
            .map(|s| Membership {
                color: s.color,
                key: s.key,
                group: plan.plan.group(s.color),
            })
            .collect())
    }

    /// The error for a single answer asked of a kind whose groups overlap.
    fn single<T>(
        &self,
        kind: Kind,
        plan: &Resolved,
        instead: &'static str,
        then: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let rounds = plan.rounds();
        if rounds > 1 {
            return Err(Error::OverlappingKind {
                kind,
                rounds,
                instead,
            });
        }
        then()
    }

    /// The one group of `kind` holding `rank`, for a kind whose groups do not
    /// overlap; `None` where the rank is in no group (`embd`, `pos-embd`).
    ///
    /// # Errors
    /// [`Error::OverlappingKind`] when groups overlap (use
    /// [`memberships`](Self::memberships)); [`Error::RankOutOfRange`];
    /// [`Error::KindNotInLayout`].
    ///
    /// # Example
    /// ```
    /// use rank_layout::{Config, Kind, Layout};
    /// let layout = Layout::new(&Config::new().tp(4).cp(2).world_size(Some(8)))?;
    /// let cp = layout.group_of(6, Kind::CP)?.unwrap();
    /// assert_eq!((cp.color, cp.key, cp.group.to_vec()), (2, 1, vec![2, 6]));
    /// assert!(layout.group_of(8, Kind::CP).is_err());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn group_of(&self, rank: u32, kind: Kind) -> Result<Option<Membership>> {
        let plan = self.plan(kind)?;
        self.single(kind, &plan, "memberships", || {
            Ok(self.memberships(rank, kind)?.into_iter().next())
        })
    }

    /// The comm-split color and key of `rank` for a kind whose groups do not
    /// overlap: the group's number and the rank's position; `None` when the
    /// rank is in no group (pass MPI's undefined color).
    ///
    /// # Errors
    /// [`Error::OverlappingKind`] when the kind's groups overlap (use
    /// [`split_in_round`](Self::split_in_round) or [`splits`](Self::splits));
    /// [`Error::RankOutOfRange`]; [`Error::KindNotInLayout`].
    pub fn split(&self, rank: u32, kind: Kind) -> Result<Option<Split>> {
        let plan = self.plan(kind)?;
        self.single(kind, &plan, "split_in_round or splits", || {
            Ok(plan.locate(&self.view(rank)?, 0))
        })
    }

    /// How many rounds of disjoint groups build `kind`'s communicators: 1 for
    /// a partition, the largest fan-out or fan-in for joined encoder +
    /// decoder pipelines.
    ///
    /// # Errors
    /// [`Error::KindNotInLayout`].
    pub fn split_rounds(&self, kind: Kind) -> Result<u32> {
        Ok(self.plan(kind)?.rounds())
    }

    /// The comm-split color and key of `rank` in round `round`: every rank
    /// calls split once per round; the groups of one round are disjoint.
    /// `None`: the rank is in no group of this round.
    ///
    /// # Errors
    /// [`Error::RoundOutOfRange`], [`Error::RankOutOfRange`], [`Error::KindNotInLayout`].
    ///
    /// # Example
    /// ```
    /// use rank_layout::{Config, Kind, Layout, Split};
    /// let layout = Layout::new(&Config::new().tp(4).cp(2).encoder_tp(Some(2)))?;
    /// assert_eq!(layout.split_rounds(Kind::PP)?, 2);
    /// // Encoder rank 0 is in joined pipeline 0 ([0, 4]) then 1 ([0, 5]).
    /// assert_eq!(layout.split_in_round(0, Kind::PP, 0)?, Some(Split { color: 0, key: 0 }));
    /// assert_eq!(layout.split_in_round(0, Kind::PP, 1)?, Some(Split { color: 1, key: 0 }));
    /// // Decoder rank 5 only in round 1, as the second member of [0, 5].
    /// assert_eq!(layout.split_in_round(5, Kind::PP, 0)?, None);
    /// assert_eq!(layout.split_in_round(5, Kind::PP, 1)?, Some(Split { color: 1, key: 1 }));
    /// assert!(layout.split_in_round(5, Kind::PP, 2).is_err());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn split_in_round(&self, rank: u32, kind: Kind, round: u32) -> Result<Option<Split>> {
        let plan = self.plan(kind)?;
        let rounds = plan.rounds();
        if round >= rounds {
            return Err(Error::RoundOutOfRange {
                kind,
                round,
                rounds,
            });
        }
        Ok(plan.locate(&self.view(rank)?, round))
    }

    /// Every comm-split of `rank`: for each kind of [`kinds`](Self::kinds)
    /// and each of its rounds, the color and key (or none). The rank's
    /// coordinates are decoded once; each answer is then a few
    /// multiply-adds. Allocates nothing.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`].
    ///
    /// # Example
    /// ```
    /// use rank_layout::{Config, Kind, Layout, Split};
    /// let layout = Layout::new(&Config::new().tp(4).cp(2).encoder_tp(Some(2)))?;
    /// let pp: Vec<_> = layout.splits(0)?.filter(|s| s.kind == Kind::PP).map(|s| s.split).collect();
    /// assert_eq!(pp, vec![Some(Split { color: 0, key: 0 }), Some(Split { color: 1, key: 0 })]);
    /// assert_eq!(layout.splits(5)?.count(), 16 + 2); // pp and embd in 2 rounds
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    #[inline]
    pub fn splits(&self, rank: u32) -> Result<Splits<'_>> {
        let view = self.view(rank)?;
        let [encoder, decoder] = &self.steps;
        let steps = match view.part {
            Part::Encoder => encoder,
            Part::Decoder => decoder,
        };
        Ok(Splits::new(
            Cow::Borrowed(steps),
            splits::Plans::Layout(&self.plans),
            view,
        ))
    }

    /// The comm-splits of `rank` for `kinds` only (each once, in the order
    /// given), like [`splits`](Self::splits).
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`], [`Error::KindNotInLayout`].
    pub fn splits_of(&self, rank: u32, kinds: &[Kind]) -> Result<Splits<'_>> {
        let mut chosen: Vec<Kind> = Vec::with_capacity(kinds.len());
        let mut plans: Vec<Cow<'_, Resolved>> = Vec::with_capacity(kinds.len());
        for kind in kinds {
            if !chosen.contains(kind) {
                chosen.push(*kind);
                plans.push(self.plan(*kind)?);
            }
        }
        let view = self.view(rank)?;
        let steps = splits::steps(
            view.part,
            chosen.into_iter().zip(plans.iter().map(|p| &**p)),
        );
        Ok(Splits::new(
            Cow::Owned(steps),
            splits::Plans::Chosen(plans),
            view,
        ))
    }

    fn dense(&self, part: Part) -> Result<&Dense> {
        match part {
            Part::Encoder => self.shape.encoder().ok_or(Error::NeedsEncoder),
            Part::Decoder => Ok(self.shape.main()),
        }
    }

    /// Where `rank` sits: its grid and its coordinates.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`].
    ///
    /// # Example
    /// ```
    /// use rank_layout::{Config, Coord, Layout, Part};
    /// let layout = Layout::new(&Config::new().tp(4).cp(2).encoder_tp(Some(2)))?;
    /// let p = layout.placement(9)?; // decoder ranks 4..12: tp fastest, then cp
    /// assert_eq!((p.part, p.coord), (Part::Decoder, Coord { tp: 1, cp: 1, dp: 0, pp: 0 }));
    /// assert_eq!(layout.rank(p.part, p.coord)?, 9);
    /// assert!(layout.placement(12).is_err());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn placement(&self, rank: u32) -> Result<Placement> {
        let view = self.view(rank)?;
        let dense = self.dense(view.part)?;
        let read = |v: View, axis: Axis| {
            dense
                .grid(v)
                .position(axis)
                .and_then(|i| view.of(v).get(i).copied())
                .unwrap_or(0)
        };
        let tensor = match dense.experts {
            crate::config::ExpertLayout::Nested => Axis::Tp,
            crate::config::ExpertLayout::Folded => Axis::Etp,
        };
        Ok(Placement {
            rank,
            part: view.part,
            coord: Coord {
                tp: read(View::Attention, Axis::Tp),
                cp: read(View::Attention, Axis::Cp),
                dp: read(View::Attention, Axis::Dp),
                pp: read(View::Attention, Axis::Pp),
            },
            expert: ExpertCoord {
                etp: read(View::Expert, tensor),
                ep: read(View::Expert, Axis::Ep),
                edp: read(View::Expert, Axis::Edp),
                pp: read(View::Expert, Axis::Pp),
                egtp_remat: read(View::Expert, Axis::EgtpRemat),
            },
            gtp_remat: read(View::Attention, Axis::GtpRemat),
        })
    }

    /// The layout's grid as a [`Mesh`]: its dims (`tp`, `cp`, `dp`, `pp`
    /// in the layout's order, size-1 ones kept) and its expert grid as the
    /// view `expert` (folded: `etp`, `ep`, `edp`, `pp`, sharing `pp`;
    /// nested: `tp`, `cp`, `ep`, `edp`, `pp`, sharing `tp`, `cp` and `pp`).
    /// A kind of axes is the mesh's dim set of the same names: `dp-cp` is
    /// `"dp-cp"`, folded `etp-ep` is `"expert:etp-ep"`, nested `dp-mod-ep`
    /// is `"expert:edp"`.
    ///
    /// ```
    /// use rank_layout::{Config, Kind, Layout};
    /// let layout = Layout::new(&Config::new().tp(2).cp(2).ep(2).pp(2).world_size(16))?;
    /// let mesh = layout.mesh()?;
    /// assert_eq!(mesh.groups("dp-cp")?.to_vecs(), layout.groups(Kind::DP_CP)?.to_vecs());
    /// assert_eq!(mesh.groups("expert:ep")?.to_vecs(), layout.groups(Kind::EP)?.to_vecs());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::NotAMesh`] for an encoder + decoder layout, whose pipelines
    /// join two grids.
    pub fn mesh(&self) -> Result<Mesh> {
        let Shape::Single(d) = &self.shape else {
            return Err(Error::NotAMesh {
                layout: self.shape(),
            });
        };
        let named =
            |grid: &crate::grid::Grid, keep: &dyn Fn(Axis) -> bool| -> Vec<(&'static str, u32)> {
                grid.axes()
                    .iter()
                    .filter(|a| keep(a.axis))
                    .map(|a| (a.axis.name(), a.digit.size))
                    .collect()
            };
        let base = named(&d.attention, &|_| true);
        let (expert, shared): (Vec<(&str, u32)>, &[&str]) = match d.experts {
            ExpertLayout::Nested => (named(&d.expert, &|_| true), &["tp", "cp", "pp"]),
            _ => (named(&d.expert, &|a| a != Axis::Cp), &["pp"]),
        };
        Mesh::new(base)?
            .with_rank_offset(d.attention.offset())?
            .view("expert", &expert, shared)
    }

    /// The rank at `coord` of grid `part` (the inverse of [`placement`](Self::placement)).
    ///
    /// # Errors
    /// - [`Error::CoordOutOfRange`] for a coordinate past its axis;
    /// - [`Error::NeedsEncoder`] for [`Part::Encoder`] in a layout without one.
    ///
    /// In a layout with weight shards (`gtp_remat` > 1) this is the rank
    /// of shard 0; [`rank_with_gtp_remat`](Self::rank_with_gtp_remat) names
    /// the shard.
    pub fn rank(&self, part: Part, coord: Coord) -> Result<u32> {
        self.rank_with_gtp_remat(part, coord, 0)
    }

    /// The rank at expert coordinates `expert` of grid `part`: the inverse
    /// of [`placement`](Self::placement)'s `expert`. `cp` is the
    /// context-parallel index, which only the nested layout's expert grid
    /// keeps (Megatron-LM 2024 carves experts out of dp, beside cp); the
    /// folded expert grid has no cp (pass 0).
    ///
    /// ```
    /// use rank_layout::{Config, ExpertLayout, Layout, Part};
    /// let folded = Layout::new(&Config::new().tp(2).ep(4).etp(1).world_size(Some(16)))?;
    /// let p = folded.placement(13)?;
    /// assert_eq!((p.expert.etp, p.expert.ep, p.expert.edp), (0, 1, 3));
    /// assert_eq!(folded.expert_rank(Part::Decoder, p.expert, 0)?, 13);
    /// let nested = Layout::new(
    ///     &Config::new().tp(2).cp(2).ep(2).world_size(Some(16)).expert_layout(ExpertLayout::Nested),
    /// )?;
    /// let p = nested.placement(11)?;
    /// assert_eq!(nested.expert_rank(Part::Decoder, p.expert, p.coord.cp)?, 11);
    /// assert!(folded.expert_rank(Part::Decoder, p.expert, 1).is_err()); // no cp there
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// - [`Error::CoordOutOfRange`] for a coordinate past its axis;
    /// - [`Error::NeedsEncoder`] for [`Part::Encoder`] in a layout without one.
    pub fn expert_rank(&self, part: Part, expert: ExpertCoord, cp: u32) -> Result<u32> {
        let dense = self.dense(part)?;
        dense.expert.rank_with(|a| match a {
            Axis::Tp | Axis::Etp => expert.etp,
            Axis::Ep => expert.ep,
            Axis::Edp | Axis::Dp => expert.edp,
            Axis::GtpRemat | Axis::EgtpRemat => expert.egtp_remat,
            Axis::Cp => cp,
            Axis::Pp => expert.pp,
        })
    }

    /// The rank at `coord` and weight shard `gtp_remat` of grid `part`: the
    /// inverse of [`placement`](Self::placement) (`coord` and `gtp_remat`).
    ///
    /// ```
    /// use rank_layout::{Config, Layout, Part};
    /// let layout = Layout::new(&Config::new().tp(2).gtp_remat(2).world_size(Some(8)))?;
    /// let p = layout.placement(7)?;
    /// assert_eq!(layout.rank_with_gtp_remat(Part::Decoder, p.coord, p.gtp_remat)?, 7);
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`rank`](Self::rank); a `gtp_remat` past the axis is
    /// [`Error::CoordOutOfRange`].
    pub fn rank_with_gtp_remat(&self, part: Part, coord: Coord, gtp_remat: u32) -> Result<u32> {
        let dense = self.dense(part)?;
        if gtp_remat > 0 && dense.attention.position(Axis::GtpRemat).is_none() {
            return Err(Error::CoordOutOfRange {
                axis: Axis::GtpRemat,
                value: gtp_remat,
                size: 1,
            });
        }
        dense.attention.rank_with(|a| match a {
            Axis::Tp => coord.tp,
            Axis::Cp => coord.cp,
            Axis::Dp => coord.dp,
            Axis::GtpRemat => gtp_remat,
            _ => coord.pp,
        })
    }
}
