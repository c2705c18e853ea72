//! A whole layout: one of the three shapes of SPEC 3 plus the families of 3.4,
//! validated once, then asked questions.

use crate::families;
use crate::folded::FoldedExpert;
use crate::group::Group;
use crate::math::checked_product;
use crate::plan::{Groups, Plan};
use crate::pp_group_mapper::{Joined, PpGroupMapper};
use crate::rank_generator::RankGenerator;
use crate::{Axis, Config, Coord, Error, ExpertLayout, Kind, Part, Placement, Result, Sizes};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Shape {
    /// SPEC 3.1.
    Nested(RankGenerator),
    /// SPEC 3.2: the attention grid has ep = 1.
    Folded {
        attention: RankGenerator,
        expert: FoldedExpert,
    },
    /// SPEC 3.3.
    EncoderDecoder {
        encoder: RankGenerator,
        decoder: RankGenerator,
        mapper: Box<PpGroupMapper>,
    },
}

/// One membership of a rank: the group, its index among the kind's groups
/// (the comm-split color) and the rank's position in it (the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// The group's position in [`Layout::groups`].
    pub index: u32,
    /// The rank's position in the group.
    pub key: u32,
    /// The group.
    pub group: Group,
}

/// A validated rank layout: every kind's groups, and every rank's answers.
///
/// Built once from a [`Config`]; a plain value (`Clone + Eq + Debug`), no
/// global state. Per-rank questions are answered arithmetically in O(axes)
/// (plus O(group size) to list members); enumeration is lazy.
///
/// ```
/// use rank_layout::{Config, Kind, Layout};
/// // 16 ranks, tp=2, pp=4, order tp-dp-pp (Megatron-LM's docstring example).
/// let layout = Layout::new(&Config {
///     tp: 2, pp: 4, world_size: Some(16), order: "tp-dp-pp".parse()?, ..Config::default()
/// })?;
/// assert_eq!(layout.groups(Kind::PP)?.to_vecs()[0], vec![0, 4, 8, 12]);
/// assert_eq!(layout.comm_split(13, Kind::PP)?, Some((1, 3)));
/// assert_eq!(layout.pipeline_next(8)?, vec![12]);
/// assert!(layout.placement(16).is_err());
/// // 10 ranks cannot hold tp*pp = 8 per replica:
/// assert!(Layout::new(&Config { tp: 2, pp: 4, world_size: Some(10), ..Config::default() }).is_err());
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    config: Config,
    shape: Shape,
    hierarchical_cp: Vec<u32>,
    dist_opt_instances: u32,
}

/// Checks the sizes a user gave are not zero.
fn check_nonzero(config: &Config) -> Result<()> {
    let sizes = [
        ("tp", Some(config.tp)),
        ("cp", Some(config.cp)),
        ("ep", Some(config.ep)),
        ("dp", config.dp),
        ("pp", Some(config.pp)),
        ("world_size", config.world_size),
        ("encoder_tp", config.encoder_tp),
        ("encoder_pp", config.encoder_pp),
        ("etp", config.etp),
        ("dist_opt_instances", config.dist_opt_instances),
    ];
    for (what, size) in sizes {
        if size == Some(0) {
            return Err(Error::ZeroSize { what });
        }
    }
    if config.hierarchical_cp.iter().flatten().any(|s| *s == 0) {
        return Err(Error::ZeroSize {
            what: "a hierarchical_cp level",
        });
    }
    Ok(())
}

/// The data-parallel size: given, derived from the world size, or 1.
/// `unit` is the number of ranks of one data-parallel replica.
fn resolve_dp(config: &Config, unit: u32, what: &'static str) -> Result<u32> {
    match (config.dp, config.world_size) {
        (Some(dp), Some(world_size)) => {
            let expected = u64::from(unit) * u64::from(dp);
            if expected != u64::from(world_size) {
                return Err(Error::WorldSizeMismatch {
                    world_size,
                    dp,
                    what,
                    expected,
                });
            }
            Ok(dp)
        }
        (Some(dp), None) => Ok(dp),
        (None, Some(world_size)) => {
            if world_size % unit != 0 {
                return Err(Error::WorldNotDivisible {
                    world_size,
                    what,
                    divisor: unit,
                });
            }
            Ok(world_size / unit)
        }
        (None, None) => Ok(1),
    }
}

/// The encoder + decoder shape (SPEC 3.3); fills in the derived sizes.
fn encoder_decoder(config: &Config, resolved: &mut Config) -> Result<Shape> {
    if config.expert_layout == ExpertLayout::Folded {
        return Err(Error::NotWithEncoder {
            what: "the folded expert layout",
        });
    }
    if config.hierarchical_cp.is_some() {
        return Err(Error::NotWithEncoder {
            what: "hierarchical_cp",
        });
    }
    let encoder_tp = config.encoder_tp.unwrap_or(config.tp);
    let encoder_pp = config.encoder_pp.unwrap_or(1);
    let unit = checked_product([encoder_tp, encoder_pp])
        .zip(checked_product([config.tp, config.pp]))
        .and_then(|(e, d)| e.checked_add(d))
        .and_then(|s| s.checked_mul(config.cp))
        .ok_or_else(|| Error::Overflow {
            what: format!(
                "(encoder_tp*encoder_pp + tp*pp)*cp = ({encoder_tp}*{encoder_pp} + {}*{})*{}",
                config.tp, config.pp, config.cp
            ),
        })?;
    let dp = resolve_dp(config, unit, "(encoder_tp*encoder_pp + tp*pp)*cp")?;
    let encoder = RankGenerator::new(
        Sizes {
            tp: encoder_tp,
            cp: config.cp,
            ep: 1,
            dp,
            pp: encoder_pp,
        },
        &config.order,
        config.rank_offset,
    )?;
    let decoder_offset = config
        .rank_offset
        .checked_add(encoder.world_size())
        .ok_or_else(|| Error::Overflow {
            what: format!(
                "rank_offset ({}) + encoder world ({})",
                config.rank_offset,
                encoder.world_size()
            ),
        })?;
    let decoder = RankGenerator::new(
        Sizes {
            tp: config.tp,
            cp: config.cp,
            ep: config.ep,
            dp,
            pp: config.pp,
        },
        &config.order,
        decoder_offset,
    )?;
    resolved.encoder_tp = Some(encoder_tp);
    resolved.encoder_pp = Some(encoder_pp);
    resolved.dp = Some(dp);
    let world_size = encoder
        .world_size()
        .checked_add(decoder.world_size())
        .ok_or_else(|| Error::Overflow {
            what: format!(
                "encoder world ({}) + decoder world ({})",
                encoder.world_size(),
                decoder.world_size()
            ),
        })?;
    resolved.world_size = Some(world_size);
    let mapper = Box::new(PpGroupMapper::new(
        encoder.attention().clone(),
        decoder.attention().clone(),
    ));
    Ok(Shape::EncoderDecoder {
        encoder,
        decoder,
        mapper,
    })
}

/// The nested or folded shape (SPEC 3.1, 3.2); fills in the derived sizes.
fn single_grid(config: &Config, resolved: &mut Config) -> Result<Shape> {
    let folded = config.expert_layout == ExpertLayout::Folded;
    let unit =
        checked_product([config.tp, config.cp, config.pp]).ok_or_else(|| Error::Overflow {
            what: format!("tp*cp*pp = {}*{}*{}", config.tp, config.cp, config.pp),
        })?;
    let dp = resolve_dp(config, unit, "tp*cp*pp")?;
    let sizes = Sizes {
        tp: config.tp,
        cp: config.cp,
        ep: if folded { 1 } else { config.ep },
        dp,
        pp: config.pp,
    };
    let generator = RankGenerator::build(sizes, &config.order, config.rank_offset, !folded)?;
    resolved.dp = Some(dp);
    resolved.world_size = Some(generator.world_size());
    if folded {
        let etp = config.etp.unwrap_or(config.tp);
        let expert = FoldedExpert::new(&generator, etp, config.ep)?;
        resolved.etp = Some(etp);
        Ok(Shape::Folded {
            attention: generator,
            expert,
        })
    } else {
        Ok(Shape::Nested(generator))
    }
}

impl Layout {
    /// Validates `config` and builds its layout. O(axes): nothing is enumerated.
    ///
    /// # Errors
    /// Every invalid configuration (SPEC 4), among them:
    /// - [`Error::ZeroSize`] for a size of 0;
    /// - [`Error::WorldNotDivisible`], [`Error::WorldSizeMismatch`] when the
    ///   world size does not fit the sizes;
    /// - [`Error::MissingAxis`], [`Error::EpNotAdjacentToDp`] for a bad order;
    /// - [`Error::DpNotDivisibleByEp`] (nested experts);
    /// - [`Error::ExpertWorldNotDivisible`], [`Error::FoldedDpMismatch`],
    ///   [`Error::FoldedPpMismatch`] (folded experts);
    /// - [`Error::HierarchicalCpProduct`], [`Error::DistOptNotDivisible`],
    ///   [`Error::DistOptOrder`], [`Error::NeedsFolded`], [`Error::NotWithEncoder`];
    /// - [`Error::Overflow`] when a size product or the last rank exceeds `u32`.
    pub fn new(config: &Config) -> Result<Layout> {
        check_nonzero(config)?;
        let mut resolved = config.clone();
        let folded = config.expert_layout == ExpertLayout::Folded;
        if config.etp.is_some() && !folded {
            return Err(Error::NeedsFolded { what: "etp" });
        }
        if config.dist_opt_instances.is_some_and(|n| n > 1) && !folded {
            return Err(Error::NeedsFolded {
                what: "dist_opt_instances",
            });
        }
        let shape = if config.has_encoder() {
            encoder_decoder(config, &mut resolved)?
        } else {
            single_grid(config, &mut resolved)?
        };
        let hierarchical_cp = config.hierarchical_cp.clone().unwrap_or_default();
        families::check_hierarchical_cp(&hierarchical_cp, config.cp)?;
        let dist_opt_instances = config.dist_opt_instances.unwrap_or(1);
        let layout = Layout {
            config: resolved,
            shape,
            hierarchical_cp,
            dist_opt_instances,
        };
        if let Shape::Folded { attention, expert } = &layout.shape {
            families::check_dist_opt(dist_opt_instances, attention, expert, &config.order)?;
        }
        Ok(layout)
    }

    /// The configuration with derived sizes filled in (`dp`, `world_size`,
    /// and `etp` or `encoder_tp`/`encoder_pp` where the layout has them).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The number of ranks.
    pub fn world_size(&self) -> u32 {
        self.main().world_size()
            + match &self.shape {
                Shape::EncoderDecoder { encoder, .. } => encoder.world_size(),
                _ => 0,
            }
    }

    /// The first rank.
    pub fn rank_offset(&self) -> u32 {
        self.config.rank_offset
    }

    /// Whether this is an encoder + decoder layout.
    pub fn has_encoder(&self) -> bool {
        matches!(self.shape, Shape::EncoderDecoder { .. })
    }

    /// The number of encoder ranks (0 without an encoder).
    pub fn encoder_world_size(&self) -> u32 {
        match &self.shape {
            Shape::EncoderDecoder { encoder, .. } => encoder.world_size(),
            _ => 0,
        }
    }

    /// The expert data-parallel size: `world / (etp*ep*pp)` in the folded
    /// layout, `dp / ep` in the nested one (of the decoder, with an encoder).
    pub fn expert_data_parallel_size(&self) -> u32 {
        match &self.shape {
            Shape::Folded { expert, .. } => expert.grid().size(Axis::Edp),
            _ => self.main().expert().size(Axis::Edp),
        }
    }

    /// The grid that is not the encoder: the decoder, or the only grid.
    fn main(&self) -> &RankGenerator {
        match &self.shape {
            Shape::Nested(g) => g,
            Shape::Folded { attention, .. } => attention,
            Shape::EncoderDecoder { decoder, .. } => decoder,
        }
    }

    fn name(&self) -> &'static str {
        match self.shape {
            Shape::Nested(_) => "nested",
            Shape::Folded { .. } => "folded",
            Shape::EncoderDecoder { .. } => "encoder+decoder",
        }
    }

    /// Every kind of this layout, in the order of SPEC 3: the dense kinds,
    /// the expert kinds, `embd`, `pos-embd` (before the expert kinds in the
    /// folded layout, as SPEC 3.2 lists them), then `hcp-*` and the
    /// distributed-optimizer kinds when configured.
    pub fn kinds(&self) -> Vec<Kind> {
        let mut kinds = Kind::ATTENTION.to_vec();
        if let Shape::Folded { .. } = self.shape {
            kinds.extend([Kind::Embd, Kind::PosEmbd]);
            kinds.extend(Kind::FOLDED_EXPERT);
        } else {
            kinds.extend(Kind::NESTED_EXPERT);
            kinds.extend([Kind::Embd, Kind::PosEmbd]);
        }
        kinds.extend((0..self.hierarchical_cp.len()).map(|l| Kind::Hcp(l as u8)));
        if self.dist_opt_instances > 1 {
            kinds.extend(Kind::DIST_OPT);
        }
        kinds
    }

    fn plan(&self, kind: Kind) -> Result<Plan> {
        let name = self.name();
        match kind {
            Kind::Hcp(level) => {
                return families::hierarchical_cp(
                    self.main().attention(),
                    &self.hierarchical_cp,
                    level,
                )
                .ok_or(Error::KindNotInLayout {
                    kind,
                    layout: name,
                    hint: ": set hierarchical_cp with one size per level",
                });
            }
            Kind::DpCpIntra | Kind::EdpIntra | Kind::DpCpInter | Kind::DistOptInstance => {
                let not_here = Error::KindNotInLayout {
                    kind,
                    layout: name,
                    hint: ": set dist_opt_instances > 1 with the folded expert layout",
                };
                let Shape::Folded { attention, expert } = &self.shape else {
                    return Err(not_here);
                };
                if self.dist_opt_instances <= 1 {
                    return Err(not_here);
                }
                return Ok(families::dist_opt(
                    kind,
                    self.dist_opt_instances,
                    attention,
                    expert,
                ));
            }
            _ => {}
        }
        match &self.shape {
            Shape::Nested(generator) => generator.plan(kind, name),
            Shape::Folded { attention, expert } => match expert.plan(kind) {
                Some(plan) => plan,
                None => attention.plan(kind, name),
            },
            Shape::EncoderDecoder {
                encoder,
                decoder,
                mapper,
            } => {
                let joined = match kind {
                    Kind::PP => Some(Joined::Pp),
                    Kind::TP_PP => Some(Joined::TpPp),
                    Kind::Embd => Some(Joined::Embd),
                    Kind::PosEmbd => Some(Joined::PosEmbd),
                    _ => None,
                };
                Ok(match joined {
                    Some(what) => Plan::Joined {
                        mapper: mapper.clone(),
                        what,
                    },
                    None => Plan::Stack {
                        first: Box::new(encoder.plan(kind, name)?),
                        second: Box::new(decoder.plan(kind, name)?),
                    },
                })
            }
        }
    }

    /// The groups of `kind`, in Megatron-LM's order (SPEC 2 and 3).
    ///
    /// # Errors
    /// [`Error::KindNotInLayout`] for a kind this layout does not have.
    ///
    /// # Example
    /// ```
    /// use rank_layout::{Config, Kind, Layout};
    /// // SPEC 2: [tp, dp, pp] = [2, 3, 4], order tp-dp-pp.
    /// let layout = Layout::new(&Config { tp: 2, dp: Some(3), pp: 4, order: "tp-dp-pp".parse()?, ..Config::default() })?;
    /// let dp = layout.groups(Kind::DP)?;
    /// assert_eq!(dp.len(), 8);
    /// assert_eq!(dp.last().unwrap().to_vec(), vec![19, 21, 23]);
    /// assert!(layout.groups(Kind::ETP).is_err()); // a folded-layout kind
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn groups(&self, kind: Kind) -> Result<Groups> {
        Ok(Groups::new(self.plan(kind)?))
    }

    fn check_rank(&self, rank: u32) -> Result<()> {
        let first = self.rank_offset();
        let end = u64::from(first) + u64::from(self.world_size());
        if rank < first || u64::from(rank) >= end {
            return Err(Error::RankOutOfRange {
                rank: rank.into(),
                first,
                end,
            });
        }
        Ok(())
    }

    /// Every group of `kind` that holds `rank`, by ascending index: one for a
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
    /// let layout = Layout::new(&Config { tp: 4, cp: 2, encoder_tp: Some(2), ..Config::default() })?;
    /// let pp: Vec<Vec<u32>> = layout.memberships(0, Kind::PP)?.iter().map(|m| m.group.to_vec()).collect();
    /// assert_eq!(pp, vec![vec![0, 4], vec![0, 5]]);
    /// assert!(layout.memberships(12, Kind::PP).is_err());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn memberships(&self, rank: u32, kind: Kind) -> Result<Vec<Membership>> {
        let plan = self.plan(kind)?;
        self.check_rank(rank)?;
        let mut slots = plan.locate(rank);
        slots.sort_unstable();
        Ok(slots
            .into_iter()
            .map(|(index, key)| Membership {
                index,
                key,
                group: plan.group(index),
            })
            .collect())
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
    /// let layout = Layout::new(&Config { tp: 4, cp: 2, world_size: Some(8), ..Config::default() })?;
    /// let cp = layout.group_of(6, Kind::CP)?.unwrap();
    /// assert_eq!((cp.index, cp.key, cp.group.to_vec()), (2, 1, vec![2, 6]));
    /// assert!(layout.group_of(8, Kind::CP).is_err());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn group_of(&self, rank: u32, kind: Kind) -> Result<Option<Membership>> {
        let rounds = self.comm_split_rounds(kind)?;
        if rounds > 1 {
            return Err(Error::OverlappingKind { kind, rounds });
        }
        Ok(self.memberships(rank, kind)?.into_iter().next())
    }

    /// The comm-split `(color, key)` of `rank` for a kind whose groups do not
    /// overlap: the group index and the rank's position; `None` when the rank
    /// is in no group (pass MPI's undefined color).
    ///
    /// # Errors
    /// [`Error::OverlappingKind`] when the kind's groups overlap (use
    /// [`comm_split_round`](Self::comm_split_round)); [`Error::RankOutOfRange`];
    /// [`Error::KindNotInLayout`].
    pub fn comm_split(&self, rank: u32, kind: Kind) -> Result<Option<(u32, u32)>> {
        let plan = self.plan(kind)?;
        let rounds = plan.rounds();
        if rounds > 1 {
            return Err(Error::OverlappingKind { kind, rounds });
        }
        self.check_rank(rank)?;
        Ok(plan.locate(rank).first().copied())
    }

    /// How many rounds of disjoint groups build `kind`'s communicators: 1 for
    /// a partition, the largest fan-out or fan-in for joined encoder +
    /// decoder pipelines.
    ///
    /// # Errors
    /// [`Error::KindNotInLayout`].
    pub fn comm_split_rounds(&self, kind: Kind) -> Result<u32> {
        Ok(self.plan(kind)?.rounds())
    }

    /// The comm-split `(color, key)` of `rank` in round `round`: every rank
    /// calls split once per round; the groups of one round are disjoint.
    /// `None`: the rank is in no group of this round.
    ///
    /// # Errors
    /// [`Error::RoundOutOfRange`], [`Error::RankOutOfRange`], [`Error::KindNotInLayout`].
    ///
    /// # Example
    /// ```
    /// use rank_layout::{Config, Kind, Layout};
    /// let layout = Layout::new(&Config { tp: 4, cp: 2, encoder_tp: Some(2), ..Config::default() })?;
    /// assert_eq!(layout.comm_split_rounds(Kind::PP)?, 2);
    /// // Encoder rank 0 is in joined pipeline 0 ([0, 4]) then 1 ([0, 5]).
    /// assert_eq!(layout.comm_split_round(0, Kind::PP, 0)?, Some((0, 0)));
    /// assert_eq!(layout.comm_split_round(0, Kind::PP, 1)?, Some((1, 0)));
    /// // Decoder rank 5 only in round 1, as the second member of [0, 5].
    /// assert_eq!(layout.comm_split_round(5, Kind::PP, 0)?, None);
    /// assert_eq!(layout.comm_split_round(5, Kind::PP, 1)?, Some((1, 1)));
    /// assert!(layout.comm_split_round(5, Kind::PP, 2).is_err());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn comm_split_round(
        &self,
        rank: u32,
        kind: Kind,
        round: u32,
    ) -> Result<Option<(u32, u32)>> {
        let plan = self.plan(kind)?;
        let rounds = plan.rounds();
        if round >= rounds {
            return Err(Error::RoundOutOfRange {
                kind,
                round,
                rounds,
            });
        }
        self.check_rank(rank)?;
        Ok(plan
            .locate(rank)
            .into_iter()
            .find(|(index, _)| plan.round_of(*index) == round))
    }

    fn generator_of(&self, rank: u32) -> (Part, &RankGenerator) {
        match &self.shape {
            Shape::EncoderDecoder { encoder, .. } if encoder.attention().contains(rank) => {
                (Part::Encoder, encoder)
            }
            _ => (Part::Decoder, self.main()),
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
    /// let layout = Layout::new(&Config { tp: 4, cp: 2, encoder_tp: Some(2), ..Config::default() })?;
    /// let p = layout.placement(9)?; // decoder ranks 4..12: tp fastest, then cp
    /// assert_eq!((p.part, p.coord), (Part::Decoder, Coord { tp: 1, cp: 1, dp: 0, pp: 0 }));
    /// assert_eq!(layout.rank(p.part, p.coord)?, 9);
    /// assert!(layout.placement(12).is_err());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn placement(&self, rank: u32) -> Result<Placement> {
        self.check_rank(rank)?;
        let (part, generator) = self.generator_of(rank);
        let outside = || self.out_of_range(rank);
        let coord = generator.coord(rank).ok_or_else(outside)?;
        let expert = match &self.shape {
            Shape::Folded { expert, .. } => expert.coord(rank),
            _ => generator.expert_coord(rank),
        }
        .ok_or_else(outside)?;
        Ok(Placement {
            rank,
            part,
            coord,
            expert,
        })
    }

    fn out_of_range(&self, rank: u32) -> Error {
        Error::RankOutOfRange {
            rank: rank.into(),
            first: self.rank_offset(),
            end: u64::from(self.rank_offset()) + u64::from(self.world_size()),
        }
    }

    /// The rank at `coord` of grid `part` (the inverse of [`placement`](Self::placement)).
    ///
    /// # Errors
    /// - [`Error::CoordOutOfRange`] for a coordinate past its axis;
    /// - [`Error::NeedsEncoder`] for [`Part::Encoder`] in a layout without one.
    pub fn rank(&self, part: Part, coord: Coord) -> Result<u32> {
        match (&self.shape, part) {
            (Shape::EncoderDecoder { encoder, .. }, Part::Encoder) => encoder.rank(coord),
            (_, Part::Encoder) => Err(Error::NeedsEncoder),
            (_, Part::Decoder) => self.main().rank(coord),
        }
    }

    /// Pipeline neighbours of `rank`: the next stage(s) if `forward`, else the previous.
    fn neighbours(&self, rank: u32, forward: bool) -> Result<Vec<u32>> {
        let mut out: Vec<u32> = Vec::new();
        for m in self.memberships(rank, Kind::PP)? {
            let key = m.key as usize;
            let other = if forward {
                m.group.get(key + 1)
            } else {
                key.checked_sub(1).and_then(|k| m.group.get(k))
            };
            if let Some(r) = other.filter(|r| !out.contains(r)) {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// The next pipeline stage(s) of `rank`: one rank inside a pipeline,
    /// every decoder rank fed by a last-stage encoder rank (fan-out), none at
    /// the last stage. Unlike Megatron-LM this does not wrap around.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`].
    pub fn pipeline_next(&self, rank: u32) -> Result<Vec<u32>> {
        self.neighbours(rank, true)
    }

    /// The previous pipeline stage(s) of `rank`: one rank inside a pipeline,
    /// every encoder rank feeding a first-stage decoder rank when
    /// `encoder_tp > tp` (fan-in: the receiving side averages their
    /// gradients), none at the first stage.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`].
    pub fn pipeline_prev(&self, rank: u32) -> Result<Vec<u32>> {
        self.neighbours(rank, false)
    }

    /// Whether `rank` is on the first stage of its (joined) pipeline.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`].
    pub fn is_first_stage(&self, rank: u32) -> Result<bool> {
        Ok(self.pipeline_prev(rank)?.is_empty())
    }

    /// Whether `rank` is on the last stage of its (joined) pipeline.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`].
    pub fn is_last_stage(&self, rank: u32) -> Result<bool> {
        Ok(self.pipeline_next(rank)?.is_empty())
    }

    /// Whether `rank` holds the word embedding (is in an `embd` group).
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`].
    pub fn is_embedding_rank(&self, rank: u32) -> Result<bool> {
        Ok(!self.memberships(rank, Kind::Embd)?.is_empty())
    }

    /// Whether `rank` holds the position embedding (is in a `pos-embd` group).
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`].
    pub fn is_position_embedding_rank(&self, rank: u32) -> Result<bool> {
        Ok(!self.memberships(rank, Kind::PosEmbd)?.is_empty())
    }
}
