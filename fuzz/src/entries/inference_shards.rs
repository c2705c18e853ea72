//! The `inference_shards` target: Megatron-Core 0.19's `--inference-shards`.

use rank_layout::megatron::{InferenceShards, ShardMapping, ShardProblem, ShardSpec};
use rank_layout::{Error, Kind};

/// Shards holding more ranks than this are checked as specs only.
const MAX_RANKS: u128 = 4096;

/// Ranks checked against the groups in each world.
const SAMPLED_RANKS: u32 = 64;

/// The `--inference-shards` parser (`ShardSpec::parse_all`,
/// `InferenceShards::parse`): the first byte's low bit picks the mapping
/// (`--use-tp-pp-dp-mapping`), the rest is the text (lossy UTF-8).
///
/// Nothing panics; a refusal is `InferenceShard` naming a shard that
/// exists in the text, or `NoInferenceShards`, with a message. Specs read
/// print as text that reads back to them (`expt_tp` then given). Shards of
/// up to 4096 ranks build over their own total and are refused over any
/// other (`InferenceShardsWorld`), or are refused for their pipelines with
/// the tp-pp-dp mapping only; every shard starts where the previous ends,
/// and sampled ranks find their shard, and in every kind the group their
/// global split names, at their key.
pub fn inference_shards(data: &[u8]) {
    let Some((first, rest)) = data.split_first() else {
        return;
    };
    let mapping = ShardMapping::from_flag(first & 1 == 1);
    let text = String::from_utf8_lossy(rest);
    let specs = match ShardSpec::parse_all(&text) {
        Ok(specs) => specs,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            match e {
                Error::InferenceShard { shard, .. } => {
                    let pieces = text.replace('+', ";").split(';').count();
                    assert!(shard < pieces, "{text:?}: shard {shard} of {pieces} pieces");
                }
                Error::NoInferenceShards => {}
                other => panic!("{text:?}: {other:?}"),
            }
            return;
        }
    };
    let written: Vec<String> = specs.iter().map(ShardSpec::to_string).collect();
    let again =
        ShardSpec::parse_all(&written.join("+")).unwrap_or_else(|e| panic!("{written:?}: {e}"));
    for (a, b) in specs.iter().zip(&again) {
        assert_eq!(a.expt_tp(a.expt_tp_size()), *b, "{text:?}");
    }
    let total: u128 = specs.iter().map(ShardSpec::world_size).sum();
    if total > MAX_RANKS {
        return;
    }
    let world = u32::try_from(total).unwrap_or(u32::MAX);
    assert!(matches!(
        InferenceShards::new(specs.clone(), world + 1, mapping),
        Err(Error::InferenceShardsWorld { .. } | Error::InferenceShard { .. })
    ));
    let shards = match InferenceShards::new(specs.clone(), world, mapping) {
        Ok(shards) => shards,
        Err(Error::InferenceShard {
            problem:
                ShardProblem::Pipelines {
                    tp,
                    expt_tp,
                    ep,
                    pp,
                },
            ..
        }) => {
            assert!(
                mapping.is_tp_pp_dp() && pp > 1 && expt_tp * ep != tp,
                "{text:?}"
            );
            return;
        }
        Err(e) => panic!("{text:?}: {e}"),
    };
    assert_eq!(shards.world_size(), world);
    let mut next = 0;
    for shard in shards.shards() {
        assert_eq!(shard.rank_offset(), next, "{text:?}");
        next += shard.world_size();
    }
    assert_eq!(next, world);
    let step = (world / SAMPLED_RANKS).max(1);
    for rank in (0..world).step_by(step as usize) {
        let shard = shards
            .shard_of(rank)
            .unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert!(shard.rank_offset() <= rank && rank - shard.rank_offset() < shard.world_size());
        let splits = shards
            .splits(rank)
            .unwrap_or_else(|e| panic!("{text:?}: {e}"));
        for (kind, split) in splits {
            let Some(split) = split else {
                assert!(
                    matches!(kind, Kind::EMBD | Kind::POS_EMBD),
                    "{text:?} {kind}"
                );
                continue;
            };
            let before: u32 = shards.shards()[..shard.index()]
                .iter()
                .map(|s| s.layout().groups(kind).map_or(0, |g| g.len() as u32))
                .sum();
            let local = split
                .color
                .checked_sub(before)
                .unwrap_or_else(|| panic!("{text:?} {kind}"));
            let group = shard
                .layout()
                .groups(kind)
                .ok()
                .and_then(|mut g| g.nth(local as usize));
            let member = group.and_then(|g| g.get(split.key as usize));
            assert_eq!(member, Some(rank), "{text:?} rank {rank} {kind}");
        }
    }
    assert!(shards.shard_of(world).is_err());
}
