//! Megatron-Core 0.19's inference shards (`--inference-shards`): the world
//! cut into contiguous shards, each an inference model of its own
//! parallelism and, for disaggregated serving, a role (prefill or decode).
//!
//! Each shard is a [`Layout`] at its rank offset: the folded layout of its
//! `tp`, `pp`, `ep`, `expt_tp` and `dp` (cp 1), in order `tp-cp-ep-dp-pp`,
//! or `tp-cp-ep-pp-dp` with `--use-tp-pp-dp-mapping` ([`ShardMapping`]).
//! Its decoder grid is Megatron-Core's `[tp, cp, dp, pp]` (`[tp, cp, pp,
//! dp]`) HyperCommGrid and its expert grid `[expt_tp, ep, expt_dp, pp]`
//! (`[expt_tp, ep, pp, expt_dp]`), with `embd` and `pos-embd` from each
//! pipeline's first and last stage: every group of
//! `build_inference_pg_collections_for_shards`, members in its order.
//!
//! A shard is a whole layout rather than a module of [`Modules`]: the
//! layout answers every kind Megatron-Core builds for a shard, the
//! pipeline ends (`embd`, `pos-embd`) included, which a module's mesh does
//! not have. [`InferenceShards::modules`] gives the same shards as modules
//! without edges (each the mesh of its layout, on consecutive spans) for
//! what the multi-module engine does with them (MPI communicators of
//! every module, bridges); their dim sets' colors are the ones
//! [`InferenceShards::split`] numbers.

mod python_text;
mod spec;

pub use spec::{ShardRole, ShardSpec};

use crate::config::Config;
use crate::error::{Error, Result, ShardProblem};
use crate::kind::Kind;
use crate::layout::Layout;
use crate::mesh::Mesh;
use crate::modules::{Modules, Spans};
use crate::order::Order;
use crate::split::Split;

/// How a shard's ranks are ordered: Megatron-LM's `--use-tp-pp-dp-mapping`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ShardMapping {
    /// Decoder grid `[tp, cp, dp, pp]`, expert grid `[expt_tp, ep,
    /// expt_dp, pp]` (order `tp-cp-ep-dp-pp`): the default.
    #[default]
    TpDpPp,
    /// Decoder grid `[tp, cp, pp, dp]`, expert grid `[expt_tp, ep, pp,
    /// expt_dp]` (order `tp-cp-ep-pp-dp`): `--use-tp-pp-dp-mapping`.
    TpPpDp,
}

impl ShardMapping {
    /// The mapping of Megatron-LM's switch `--use-tp-pp-dp-mapping`.
    pub fn from_flag(use_tp_pp_dp_mapping: bool) -> ShardMapping {
        if use_tp_pp_dp_mapping {
            ShardMapping::TpPpDp
        } else {
            ShardMapping::TpDpPp
        }
    }

    /// Whether this is `--use-tp-pp-dp-mapping`.
    pub fn is_tp_pp_dp(self) -> bool {
        self == ShardMapping::TpPpDp
    }

    /// The order of each shard's layout.
    pub fn order(self) -> Order {
        let text = match self {
            ShardMapping::TpDpPp => "tp-cp-ep-dp-pp",
            ShardMapping::TpPpDp => "tp-cp-ep-pp-dp",
        };
        // Both parse; the default order is tp-cp-ep-dp-pp.
        text.parse().unwrap_or_default()
    }
}

/// One shard of [`InferenceShards`]: its spec, its number and its layout
/// (at its rank offset).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InferenceShard {
    index: usize,
    spec: ShardSpec,
    layout: Layout,
}

impl InferenceShard {
    /// Its number, from 0, in rank order.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Its spec as given (`expt_tp` left out stays `None`).
    pub fn spec(&self) -> &ShardSpec {
        &self.spec
    }

    /// Its role, if the spec gives one.
    pub fn role(&self) -> Option<ShardRole> {
        self.spec.role
    }

    /// Its first rank.
    pub fn rank_offset(&self) -> u32 {
        self.layout.rank_offset()
    }

    /// Its number of ranks, `tp * pp * dp`.
    pub fn world_size(&self) -> u32 {
        self.layout.world_size()
    }

    /// Its layout: every group of every kind, every rank's answers (ranks
    /// global, colors numbered within the shard).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
}

/// The number of kinds of a shard.
const KIND_COUNT: usize = 15;

/// Inference shards: the world cut into contiguous shards, each a
/// [`Layout`] at its rank offset with its role; what Megatron-Core 0.19.2's
/// `build_inference_pg_collections_for_shards` builds, checked as it checks
/// it. A plain value; every check is made when it is built.
///
/// ```
/// use rank_layout::megatron::{InferenceShards, ShardMapping, ShardRole};
/// use rank_layout::{Kind, Split};
/// let shards = InferenceShards::parse(
///     "tp=2,pp=2,role=prefill + tp=1,dp=4,role=decode",
///     8,
///     ShardMapping::TpDpPp,
/// )?;
/// let decode = &shards.shards()[1];
/// assert_eq!((decode.rank_offset(), decode.world_size()), (4, 4));
/// assert_eq!(shards.role_of(5)?, Some(ShardRole::Decode));
/// assert_eq!(shards.shards()[0].layout().groups(Kind::PP)?.to_vecs(), vec![vec![0, 2], vec![1, 3]]);
/// assert_eq!(decode.layout().groups(Kind::DP)?.to_vecs(), vec![vec![4, 5, 6, 7]]);
/// // One color per group of the whole world: the prefill shard's two tp
/// // groups are colors 0 and 1, the decode shard's four 2 to 5.
/// assert_eq!(shards.split(6, Kind::TP)?, Some(Split { color: 4, key: 0 }));
/// assert_eq!(shards.split(3, Kind::EMBD)?, Some(Split { color: 1, key: 1 }));
/// assert!(InferenceShards::parse("tp=2+tp=1,dp=2", 5, ShardMapping::TpDpPp).is_err()); // 4 ranks, not 5
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InferenceShards {
    shards: Vec<InferenceShard>,
    mapping: ShardMapping,
    world_size: u32,
    /// For each shard, for each of [`KINDS`](Self::KINDS), the number of
    /// groups the shards before it have.
    color_bases: Vec<[u32; KIND_COUNT]>,
}

impl InferenceShards {
    /// The kinds of every shard, in the order of rank-layout's interface:
    /// `tp`, `cp`, `pp`, `dp`, `tp-pp`, `tp-cp`, `dp-cp`, `tp-dp-cp`, `ep`,
    /// `etp`, `edp`, `etp-ep`, `etp-ep-pp`, `embd`, `pos-embd`. They are
    /// the groups of Megatron-Core's `ProcessGroupCollection` of a shard:
    /// `tp`, `cp`, `pp`, `dp`, `mp`, `tp_cp`, `dp_cp`, `tp_dp_cp`, `ep`,
    /// `expt_tp`, `expt_dp`, `tp_ep`, `tp_ep_pp`, `embd`, `pos_embd`.
    pub const KINDS: [Kind; KIND_COUNT] = [
        Kind::TP,
        Kind::CP,
        Kind::PP,
        Kind::DP,
        Kind::TP_PP,
        Kind::TP_CP,
        Kind::DP_CP,
        Kind::TP_DP_CP,
        Kind::EP,
        Kind::ETP,
        Kind::EDP,
        Kind::ETP_EP,
        Kind::ETP_EP_PP,
        Kind::EMBD,
        Kind::POS_EMBD,
    ];

    /// The shards of the `--inference-shards` text `text` over
    /// `world_size` ranks (`None`: as many as the shards hold), read and
    /// checked exactly as Megatron-Core 0.19.2 reads and checks them
    /// ([`ShardSpec::parse_all`], then [`new`](Self::new)).
    ///
    /// # Errors
    /// Those of [`ShardSpec::parse_all`] and [`new`](Self::new); every
    /// text Megatron-Core refuses is refused (`python/tests` checks it on
    /// random texts against megatron-core 0.19.2).
    pub fn parse(
        text: &str,
        world_size: impl Into<Option<u32>>,
        mapping: ShardMapping,
    ) -> Result<InferenceShards> {
        InferenceShards::new(ShardSpec::parse_all(text)?, world_size, mapping)
    }

    /// The shards `specs`, in rank order from rank 0, over `world_size`
    /// ranks (`None`: as many as the shards hold), as Megatron-Core's
    /// `normalize_shard_specs` and `build_inference_pg_collections_for_shards`
    /// check them.
    ///
    /// # Errors
    /// - [`Error::InferenceShard`] naming the first shard that fails
    ///   [`ShardSpec::check`], or, with [`ShardMapping::TpPpDp`], whose
    ///   expert grid's pipelines differ from its decoder grid's
    ///   ([`ShardProblem::Pipelines`]: `pp > 1` and `expt_tp * ep != tp`);
    /// - [`Error::NoInferenceShards`] for no spec;
    /// - [`Error::InferenceShardsWorld`] when the shards do not hold
    ///   exactly `world_size` ranks;
    /// - [`Error::Overflow`] when, without a world size, they hold more
    ///   than 4294967295.
    pub fn new(
        specs: impl IntoIterator<Item = ShardSpec>,
        world_size: impl Into<Option<u32>>,
        mapping: ShardMapping,
    ) -> Result<InferenceShards> {
        let specs: Vec<ShardSpec> = specs.into_iter().collect();
        for (i, spec) in specs.iter().enumerate() {
            spec.check(i)?;
        }
        if specs.is_empty() {
            return Err(Error::NoInferenceShards);
        }
        let shard_ranks: Vec<u128> = specs.iter().map(ShardSpec::world_size).collect();
        let total: u128 = shard_ranks.iter().sum();
        let world_size = match world_size.into() {
            Some(world) if u128::from(world) == total => world,
            Some(world) => {
                return Err(Error::InferenceShardsWorld {
                    shard_ranks,
                    world_size: world,
                });
            }
            None => u32::try_from(total).map_err(|_| Error::Overflow {
                what: format!("the inference shards' ranks {total}"),
            })?,
        };
        let mut shards: Vec<InferenceShard> = Vec::with_capacity(specs.len());
        let mut color_bases: Vec<[u32; KIND_COUNT]> = Vec::with_capacity(specs.len());
        let mut next = [0u32; KIND_COUNT];
        let mut offset = 0u32;
        for (index, spec) in specs.into_iter().enumerate() {
            let layout = shard_layout(index, &spec, offset, mapping)?;
            color_bases.push(next);
            for (base, kind) in next.iter_mut().zip(InferenceShards::KINDS) {
                // At most one group per rank of the world: fits a u32.
                let groups = u32::try_from(layout.groups(kind)?.len()).unwrap_or(u32::MAX);
                *base = base.saturating_add(groups);
            }
            // The shards hold world_size ranks in all: no overflow.
            offset = offset.saturating_add(layout.world_size());
            shards.push(InferenceShard {
                index,
                spec,
                layout,
            });
        }
        Ok(InferenceShards {
            shards,
            mapping,
            world_size,
            color_bases,
        })
    }

    /// The shards, in rank order.
    pub fn shards(&self) -> &[InferenceShard] {
        &self.shards
    }

    /// The number of shards.
    pub fn len(&self) -> usize {
        self.shards.len()
    }

    /// Always `false`: there is at least one shard.
    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }

    /// The number of ranks of all shards.
    pub fn world_size(&self) -> u32 {
        self.world_size
    }

    /// The rank order of every shard.
    pub fn mapping(&self) -> ShardMapping {
        self.mapping
    }

    /// Whether any shard has a role (Megatron-Core's
    /// `spec_declares_disaggregation`).
    pub fn has_roles(&self) -> bool {
        self.shards.iter().any(|s| s.role().is_some())
    }

    /// The shard holding `rank`; O(log shards).
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`] for a rank at or past the world size.
    pub fn shard_of(&self, rank: u32) -> Result<&InferenceShard> {
        let i = self
            .shards
            .partition_point(|s| s.layout.rank_end() <= u64::from(rank));
        self.shards.get(i).ok_or(Error::RankOutOfRange {
            rank: u64::from(rank),
            first: 0,
            last: u64::from(self.world_size.saturating_sub(1)),
        })
    }

    /// The role of `rank`'s shard.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`].
    pub fn role_of(&self, rank: u32) -> Result<Option<ShardRole>> {
        Ok(self.shard_of(rank)?.role())
    }

    /// `rank`'s color and key in the `kind` groups of all shards, numbered
    /// shard after shard (shard 0's groups first, each shard's in its
    /// layout's order): one comm-split of the whole world builds every
    /// shard's groups of a kind. `None` where the rank is in no group
    /// (`embd` and `pos-embd` leave ranks out). O(axes).
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`]; [`Error::KindNotInLayout`] for a kind not
    /// among [`KINDS`](Self::KINDS).
    pub fn split(&self, rank: u32, kind: Kind) -> Result<Option<Split>> {
        let shard = self.shard_of(rank)?;
        let at = InferenceShards::KINDS
            .iter()
            .position(|k| *k == kind)
            .ok_or(Error::KindNotInLayout {
                kind,
                layout: shard.layout.shape(),
                hint: ": an inference shard has tp, cp, pp, dp, tp-pp, tp-cp, dp-cp, tp-dp-cp, ep, etp, edp, etp-ep, etp-ep-pp, embd and pos-embd",
            })?;
        let base = self.color_base(shard.index, at);
        Ok(shard.layout.split(rank, kind)?.map(|s| global(s, base)))
    }

    /// `rank`'s split in every kind of [`KINDS`](Self::KINDS), in that
    /// order, numbered as [`split`](Self::split) numbers them: the rank's
    /// coordinates decoded once, O(kinds).
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`].
    pub fn splits(&self, rank: u32) -> Result<Vec<(Kind, Option<Split>)>> {
        let shard = self.shard_of(rank)?;
        let splits = shard.layout.splits_of(rank, &InferenceShards::KINDS)?;
        Ok(splits
            .enumerate()
            .map(|(at, s)| {
                let base = self.color_base(shard.index, at);
                (s.kind, s.split.map(|s| global(s, base)))
            })
            .collect())
    }

    /// The number of groups of kind `KINDS[at]` before shard `index`.
    fn color_base(&self, index: usize, at: usize) -> u32 {
        self.color_bases
            .get(index)
            .and_then(|b| b.get(at))
            .copied()
            .unwrap_or(0)
    }

    /// The shards as [`Modules`] without edges, on consecutive spans from
    /// rank 0: module `shard<i>` is shard `i`'s layout's mesh
    /// ([`Layout::mesh`]: dims `tp`, `cp`, `dp`, `pp` in the shard's order,
    /// the view `expert` of `etp`, `ep`, `edp`, `pp`). A dim set's colors
    /// there ([`Modules::split`]) are [`split`](Self::split)'s of the same
    /// kind.
    ///
    /// ```
    /// use rank_layout::megatron::{InferenceShards, ShardMapping};
    /// use rank_layout::Kind;
    /// let shards = InferenceShards::parse("tp=2,dp=2,ep=2;dp=2", 6, ShardMapping::TpDpPp)?;
    /// let modules = shards.modules()?;
    /// assert_eq!(modules.module_of(5)?, "shard1");
    /// assert_eq!(modules.split(3, "expert:ep", 0)?, shards.split(3, Kind::EP)?);
    /// assert_eq!(modules.split(5, "dp", 0)?, shards.split(5, Kind::DP)?);
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// Those of [`Layout::mesh`] and [`Modules::new`] (none for shards
    /// built here).
    pub fn modules(&self) -> Result<Modules> {
        let modules = self
            .shards
            .iter()
            .map(|s| Ok((format!("shard{}", s.index), s.layout.mesh()?)))
            .collect::<Result<Vec<(String, Mesh)>>>()?;
        Modules::new(modules, Spans::AsGiven)
    }
}

/// A shard's split numbered among all shards' groups.
fn global(split: Split, base: u32) -> Split {
    Split {
        // The colors of all shards count groups of the world: no overflow.
        color: split.color.saturating_add(base),
        key: split.key,
    }
}

/// The layout of shard `index` at rank `offset`.
///
/// # Errors
/// [`ShardProblem::Pipelines`] with the tp-pp-dp mapping when the two
/// grids' pipelines differ (Megatron-Core's `PP groups must match`); the
/// layout's own errors otherwise (none for a checked spec).
fn shard_layout(
    index: usize,
    spec: &ShardSpec,
    offset: u32,
    mapping: ShardMapping,
) -> Result<Layout> {
    let expt_tp = spec.expt_tp_size();
    // Decoder pp stride tp (cp = 1), expert pp stride expt_tp * ep: with
    // the default mapping both are world / pp.
    let expert_stride = u64::from(expt_tp) * u64::from(spec.ep);
    if mapping.is_tp_pp_dp() && spec.pp > 1 && expert_stride != u64::from(spec.tp) {
        return Err(Error::InferenceShard {
            shard: index,
            problem: ShardProblem::Pipelines {
                tp: spec.tp,
                expt_tp,
                ep: spec.ep,
                pp: spec.pp,
            },
        });
    }
    let world = u32::try_from(spec.world_size()).map_err(|_| Error::Overflow {
        what: format!("inference shard {index}: tp*pp*dp = {}", spec.world_size()),
    })?;
    let config = Config::new()
        .tp(spec.tp)
        .pp(spec.pp)
        .ep(spec.ep)
        .etp(spec.expt_tp.filter(|e| *e != spec.tp))
        .world_size(world)
        .order(mapping.order())
        .rank_offset(offset);
    Layout::new(&config)
}
