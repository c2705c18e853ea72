//! Megatron-Core 0.19's inference shards (`--inference-shards`, the
//! library's [`InferenceShards`]), each shard a layout [`Target`] at its
//! rank offset; and what every shards report prints of them: the title, a
//! shard's heading and JSON object, the kinds reported (the 15 of
//! [`InferenceShards::KINDS`] by default), and the groups the placement
//! keeps (every shard's groups of a kind together, as ranks of the world).

use rank_layout::Kind;
use rank_layout::machine::{KindGroups, default_must_fit};
use rank_layout::megatron::{InferenceShard, InferenceShards, ShardMapping};
use serde_json::{Map, Value};

use crate::config::ShardsInput;
use crate::error::Failure;
use crate::format::count;
use crate::target::{DimSet, Target};

/// The inference shards, and each shard as a layout target.
pub struct ShardsTarget {
    /// The shards.
    pub shards: InferenceShards,
    /// Where the spec came from (`--inference-shards tp=2+dp=2`).
    pub origin: String,
    /// Each shard's layout (at its rank offset), in rank order.
    pub parts: Vec<Target>,
}

impl ShardsTarget {
    /// The shards of `input` over `world_size` ranks (`None`: as many as
    /// they hold), read and checked by the library as Megatron-Core 0.19.2
    /// reads and checks them.
    ///
    /// # Errors
    /// [`Failure::Message`] naming where the spec came from, with the
    /// library's error (the shard and the reason).
    pub fn build(input: &ShardsInput, world_size: Option<u32>) -> Result<ShardsTarget, Failure> {
        let shards = InferenceShards::parse(&input.text, world_size, input.mapping)
            .map_err(|e| Failure::Message(format!("{}: {e}", input.origin)))?;
        let parts = shards
            .shards()
            .iter()
            .map(|s| Target::Layout {
                layout: s.layout().clone(),
                given: s.layout().config().clone(),
            })
            .collect();
        Ok(ShardsTarget {
            shards,
            origin: input.origin.clone(),
            parts,
        })
    }

    /// Each shard with its layout target.
    pub fn each(&self) -> impl Iterator<Item = (&InferenceShard, &Target)> {
        self.shards.shards().iter().zip(&self.parts)
    }

    /// The first line of every table: the spec, the shards, their ranks
    /// and rank order.
    pub fn title(&self) -> String {
        let s = &self.shards;
        format!(
            "inference shards of {}: {} on ranks 0..{} ({}), rank order {}",
            self.origin,
            count(s.len() as u64, "shard", "shards"),
            s.world_size().saturating_sub(1),
            count(u64::from(s.world_size()), "rank", "ranks"),
            mapping_name(s.mapping())
        )
    }

    /// The kinds named (each checked to be every shard's), or the 15 kinds
    /// of a shard ([`InferenceShards::KINDS`]) when none is.
    ///
    /// # Errors
    /// [`Failure::Input`] for a name that is no kind, or a kind a shard
    /// does not have.
    pub fn sets(&self, names: &[String]) -> Result<Vec<DimSet>, Failure> {
        if names.is_empty() {
            return Ok(InferenceShards::KINDS.map(DimSet::Kind).to_vec());
        }
        let mut sets = Vec::new();
        for target in &self.parts {
            sets = target.sets_or_all(&target.parse_sets(names)?)?;
        }
        Ok(sets)
    }

    /// `kind`'s groups of every shard, shard after shard, as ranks of the
    /// world (the shards start at rank 0), named by the kind: what the
    /// placement keeps together.
    ///
    /// # Errors
    /// A kind a shard does not have.
    pub fn world_groups(&self, kind: Kind) -> Result<KindGroups, Failure> {
        let mut groups = Vec::new();
        for shard in self.shards.shards() {
            groups.extend(shard.layout().groups(kind)?.to_vecs());
        }
        Ok(KindGroups::new(kind.to_string(), groups))
    }

    /// Each shard's groups of each of `sets`, as ranks of the world, named
    /// `shard<i> <kind>`: the rows of a host table's report.
    ///
    /// # Errors
    /// A kind a shard does not have.
    pub fn shard_groups(&self, sets: &[DimSet]) -> Result<Vec<KindGroups>, Failure> {
        let mut out = Vec::new();
        for (shard, target) in self.each() {
            for set in sets {
                let groups = target.groups(set)?.to_vecs();
                out.push(KindGroups::new(
                    format!("shard{} {set}", shard.index()),
                    groups,
                ));
            }
        }
        Ok(out)
    }

    /// The kinds to keep inside a domain, with every shard's groups of
    /// each (`must`, or the library's default for a layout,
    /// [`default_must_fit`], of every shard: tp, cp, etp-ep), and those of
    /// the other kinds of [`InferenceShards::KINDS`], to keep under few
    /// parents of the topology tree.
    ///
    /// # Errors
    /// A kind a shard does not have.
    pub fn placement_groups(
        &self,
        must: Option<&[Kind]>,
    ) -> Result<(Vec<KindGroups>, Vec<KindGroups>), Failure> {
        let must: Vec<Kind> = match must {
            Some(kinds) => kinds.to_vec(),
            None => {
                let mut kinds: Vec<Kind> = Vec::new();
                for shard in self.shards.shards() {
                    for kind in default_must_fit(shard.layout()) {
                        if !kinds.contains(&kind) {
                            kinds.push(kind);
                        }
                    }
                }
                kinds
            }
        };
        let fit = must
            .iter()
            .map(|k| self.world_groups(*k))
            .collect::<Result<Vec<_>, Failure>>()?;
        let others = InferenceShards::KINDS
            .iter()
            .filter(|k| !must.contains(k))
            .map(|k| self.world_groups(*k))
            .collect::<Result<Vec<_>, Failure>>()?;
        Ok((fit, others))
    }
}

/// `tp-cp-ep-dp-pp (Megatron-Core's default)` or `tp-cp-ep-pp-dp
/// (--use-tp-pp-dp-mapping)`.
pub fn mapping_name(mapping: ShardMapping) -> String {
    let why = if mapping.is_tp_pp_dp() {
        "--use-tp-pp-dp-mapping"
    } else {
        "Megatron-Core's default"
    };
    format!("{} ({why})", mapping.order())
}

/// The heading of a shard: `shard 1: ranks 4..7 (4 ranks),
/// tp=1,pp=1,ep=1,dp=4,expt_tp=1,role=decode`.
pub fn heading(shard: &InferenceShard) -> String {
    let first = shard.rank_offset();
    let last = u64::from(first) + u64::from(shard.world_size()) - 1;
    format!(
        "shard {}: ranks {first}..{last} ({}), {}",
        shard.index(),
        count(u64::from(shard.world_size()), "rank", "ranks"),
        shard.spec()
    )
}

/// A shard's object: `shard` (its number), `role` (`prefill`, `decode` or
/// null), `rank_offset`, `world_size`, `spec` (as `--inference-shards`
/// writes it), then `rest`'s keys (a layout report's, without those given
/// here).
pub fn shard_object(shard: &InferenceShard, rest: Value) -> Value {
    let mut object = Map::new();
    object.insert("shard".into(), shard.index().into());
    object.insert(
        "role".into(),
        shard.role().map_or(Value::Null, |r| r.name().into()),
    );
    object.insert("rank_offset".into(), shard.rank_offset().into());
    object.insert("world_size".into(), shard.world_size().into());
    object.insert("spec".into(), shard.spec().to_string().into());
    if let Value::Object(rest) = rest {
        for (k, v) in rest {
            if !object.contains_key(&k) {
                object.insert(k, v);
            }
        }
    }
    Value::Object(object)
}
