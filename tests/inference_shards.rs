//! Inference shards (`--inference-shards`, Megatron-Core 0.19): the parser
//! reads what Megatron-Core's reads and refuses what it refuses, naming the
//! shard; every shard's every kind is the enumeration of Megatron-Core's
//! HyperCommGrids (re-implemented here from `hyper_comm_grid.py`, by
//! coordinates); a rank's global splits number every shard's groups in
//! turn, agree with the groups and with the shards as modules. The same
//! groups against megatron-core 0.19.2 itself: python/tests/test_inference_shards.py.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

use proptest::prelude::*;
use rank_layout::megatron::{
    InferenceShards, MegatronArgs, MegatronValue, ShardMapping, ShardProblem, ShardRole, ShardSpec,
};
use rank_layout::{Error, Kind, Split};

/// HyperCommGrid's `_gen_rank_enum_for(shape, dim_names, dims)` at
/// `offset`, from its definition: the rank of coordinates `c` is `offset +
/// sum c[i] * prod(shape[..i])` (the first name fastest); the requested
/// dims, reordered by the reversed names, are moved to the last axes and
/// the array cut into rows. So a group's members run over the requested
/// dims, the first named fastest; the groups over the others, likewise.
fn hyper_enum(shape: &[u32], names: &[&str], dims: &[&str], offset: u32) -> Vec<Vec<u32>> {
    let strides: Vec<u32> = shape
        .iter()
        .scan(1u32, |acc, s| {
            let stride = *acc;
            *acc *= s;
            Some(stride)
        })
        .collect();
    let member_axes: Vec<usize> = (0..names.len())
        .filter(|i| dims.contains(&names[*i]))
        .collect();
    let group_axes: Vec<usize> = (0..names.len())
        .filter(|i| !dims.contains(&names[*i]))
        .collect();
    let walk = |axes: &[usize]| -> Vec<u32> {
        // Every combination of the axes' coordinates, the first fastest,
        // as an offset.
        let mut out = vec![0u32];
        for &a in axes {
            let step = strides[a];
            out = (0..shape[a])
                .flat_map(|c| out.iter().map(move |o| o + c * step))
                .collect();
        }
        out
    };
    let (starts, members) = (walk(&group_axes), walk(&member_axes));
    starts
        .iter()
        .map(|s| members.iter().map(|m| offset + s + m).collect())
        .collect()
}

/// Megatron-Core 0.19.2's groups of one shard, kind by kind, as
/// `build_inference_pg_collection` makes them: the decoder grid `[tp, cp,
/// dp, pp]` (`[tp, cp, pp, dp]`), the expert grid `[expt_tp, ep, expt_dp,
/// pp]` (`[expt_tp, ep, pp, expt_dp]`), embd and pos-embd from the decoder
/// grid's pp enumeration.
fn megatron_groups(
    spec: &ShardSpec,
    offset: u32,
    mapping: ShardMapping,
) -> Vec<(Kind, Vec<Vec<u32>>)> {
    let (tp, pp, ep, dp, etp) = (spec.tp, spec.pp, spec.ep, spec.dp, spec.expt_tp_size());
    let world = tp * pp * dp;
    let edp = world / (etp * ep * pp);
    let tp_pp_dp = mapping == ShardMapping::TpPpDp;
    let (dshape, dnames): (Vec<u32>, Vec<&str>) = if tp_pp_dp {
        (vec![tp, 1, pp, dp], vec!["tp", "cp", "pp", "dp"])
    } else {
        (vec![tp, 1, dp, pp], vec!["tp", "cp", "dp", "pp"])
    };
    let (eshape, enames): (Vec<u32>, Vec<&str>) = if tp_pp_dp {
        (vec![etp, ep, pp, edp], vec!["tp", "ep", "pp", "dp"])
    } else {
        (vec![etp, ep, edp, pp], vec!["tp", "ep", "dp", "pp"])
    };
    let d = |dims: &[&str]| hyper_enum(&dshape, &dnames, dims, offset);
    let e = |dims: &[&str]| hyper_enum(&eshape, &enames, dims, offset);
    let pipelines = d(&["pp"]);
    let embd = pipelines
        .iter()
        .map(|p| {
            if p.len() == 1 {
                vec![p[0]]
            } else {
                vec![p[0], *p.last().unwrap()]
            }
        })
        .collect();
    let pos_embd = pipelines.iter().map(|p| vec![p[0]]).collect();
    vec![
        (Kind::TP, d(&["tp"])),
        (Kind::CP, d(&["cp"])),
        (Kind::PP, pipelines.clone()),
        (Kind::DP, d(&["dp"])),
        (Kind::TP_PP, d(&["tp", "pp"])),
        (Kind::TP_CP, d(&["tp", "cp"])),
        (Kind::DP_CP, d(&["cp", "dp"])),
        (Kind::TP_DP_CP, d(&["tp", "cp", "dp"])),
        (Kind::EP, e(&["ep"])),
        (Kind::ETP, e(&["tp"])),
        (Kind::EDP, e(&["dp"])),
        (Kind::ETP_EP, e(&["tp", "ep"])),
        (Kind::ETP_EP_PP, e(&["tp", "ep", "pp"])),
        (Kind::EMBD, embd),
        (Kind::POS_EMBD, pos_embd),
    ]
}

fn mapping() -> impl Strategy<Value = ShardMapping> {
    prop_oneof![Just(ShardMapping::TpDpPp), Just(ShardMapping::TpPpDp)]
}

/// A shard whose expert grid tiles it: tp, pp, dp in 1..=4, expt_tp * ep
/// dividing tp * dp (then expt_tp * ep * pp divides tp * pp * dp), and
/// with the tp-pp-dp mapping equal to tp when pp > 1.
fn shard(mapping: ShardMapping) -> impl Strategy<Value = ShardSpec> {
    (
        1u32..=4,
        1u32..=3,
        1u32..=4,
        any::<u16>(),
        prop::option::of(prop_oneof![
            Just(ShardRole::Prefill),
            Just(ShardRole::Decode)
        ]),
    )
        .prop_map(move |(tp, pp, dp, pick, role)| {
            let model = tp * dp;
            let pairs: Vec<(u32, u32)> = (1..=model)
                .flat_map(|etp| (1..=model).map(move |ep| (etp, ep)))
                .filter(|(etp, ep)| model % (etp * ep) == 0)
                .filter(|(etp, ep)| mapping == ShardMapping::TpDpPp || pp == 1 || etp * ep == tp)
                .collect();
            let (etp, ep) = pairs[usize::from(pick) % pairs.len()];
            let mut spec = ShardSpec::new().tp(tp).pp(pp).dp(dp).ep(ep);
            if etp != tp || pick % 2 == 0 {
                spec = spec.expt_tp(etp);
            }
            spec.role = role;
            spec
        })
}

fn shards() -> impl Strategy<Value = (Vec<ShardSpec>, ShardMapping)> {
    mapping().prop_flat_map(|m| (prop::collection::vec(shard(m), 1..=4), Just(m)))
}

proptest! {
    /// Every shard's every kind is Megatron-Core's enumeration, members
    /// and group order; shards follow one another from rank 0.
    #[test]
    fn every_kind_is_megatron_cores((specs, mapping) in shards()) {
        let shards = InferenceShards::new(specs.clone(), None, mapping).unwrap();
        let mut offset = 0;
        for (shard, spec) in shards.shards().iter().zip(&specs) {
            prop_assert_eq!(shard.rank_offset(), offset);
            prop_assert_eq!(shard.spec(), spec);
            for (kind, want) in megatron_groups(spec, offset, mapping) {
                prop_assert_eq!(shard.layout().groups(kind).unwrap().to_vecs(), want, "{} {}", spec, kind);
            }
            offset += shard.world_size();
        }
        prop_assert_eq!(shards.world_size(), offset);
    }

    /// A rank's global split names its group among every shard's groups
    /// of the kind, listed shard after shard, at its key; `splits` gives
    /// every kind's; `shard_of` is the shard whose span holds the rank;
    /// the shards as modules number their dim sets alike.
    #[test]
    fn splits_number_every_shard_s_groups((specs, mapping) in shards()) {
        let shards = InferenceShards::new(specs, None, mapping).unwrap();
        let modules = shards.modules().unwrap();
        let all: Vec<Vec<Vec<u32>>> = InferenceShards::KINDS
            .iter()
            .map(|k| shards.shards().iter().flat_map(|s| s.layout().groups(*k).unwrap().to_vecs()).collect())
            .collect();
        for rank in 0..shards.world_size() {
            let shard = shards.shard_of(rank).unwrap();
            prop_assert!(shard.rank_offset() <= rank && rank < shard.rank_offset() + shard.world_size());
            prop_assert_eq!(shards.role_of(rank).unwrap(), shard.role());
            let splits = shards.splits(rank).unwrap();
            prop_assert_eq!(splits.len(), InferenceShards::KINDS.len());
            for ((kind, split), groups) in splits.into_iter().zip(&all) {
                prop_assert_eq!(split, shards.split(rank, kind).unwrap());
                let holding: Vec<Split> = groups
                    .iter()
                    .enumerate()
                    .filter_map(|(c, g)| g.iter().position(|r| *r == rank).map(|k| Split { color: c as u32, key: k as u32 }))
                    .collect();
                prop_assert_eq!(split.into_iter().collect::<Vec<_>>(), holding, "rank {} {}", rank, kind);
                if let Some(dims) = mesh_dims(kind) {
                    prop_assert_eq!(modules.split(rank, dims, 0).unwrap(), split, "rank {} {}", rank, kind);
                }
            }
        }
        prop_assert!(shards.shard_of(shards.world_size()).is_err());
    }

    /// A spec prints as text that parses back to it (expt_tp then given).
    #[test]
    fn display_parses_back((specs, mapping) in shards()) {
        let text: Vec<String> = specs.iter().map(ShardSpec::to_string).collect();
        let back = ShardSpec::parse_all(&text.join("+")).unwrap();
        for (a, b) in specs.iter().zip(&back) {
            prop_assert_eq!(a.expt_tp(a.expt_tp_size()), *b);
        }
        let world: u32 = back.iter().map(|s| u32::try_from(s.world_size()).unwrap()).sum();
        prop_assert_eq!(
            InferenceShards::parse(&text.join(";"), world, mapping).unwrap().shards().len(),
            specs.len()
        );
    }
}

/// The dim set of a module's mesh that is `kind` ([`rank_layout::Layout::mesh`]).
fn mesh_dims(kind: Kind) -> Option<&'static str> {
    Some(match kind {
        Kind::TP => "tp",
        Kind::CP => "cp",
        Kind::PP => "pp",
        Kind::DP => "dp",
        Kind::TP_PP => "tp-pp",
        Kind::TP_CP => "tp-cp",
        Kind::DP_CP => "dp-cp",
        Kind::TP_DP_CP => "tp-dp-cp",
        Kind::EP => "expert:ep",
        Kind::ETP => "expert:etp",
        Kind::EDP => "expert:edp",
        Kind::ETP_EP => "expert:etp-ep",
        Kind::ETP_EP_PP => "expert:etp-ep-pp",
        _ => return None,
    })
}

/// The problem of shard `shard` the text is refused with.
fn problem(text: &str, shard: usize) -> ShardProblem {
    match ShardSpec::parse_all(text) {
        Err(Error::InferenceShard { shard: s, problem }) if s == shard => problem,
        other => panic!("{text:?}: {other:?}"),
    }
}

/// Megatron-Core's own tests of the spec
/// (tests/unit_tests/inference/test_inference_shards.py, d98e8a64dd).
#[test]
fn megatron_cores_examples() {
    let specs = ShardSpec::parse_all("tp=2,role=prefill+tp=1,dp=2,role=decode").unwrap();
    assert_eq!(specs[0], ShardSpec::new().tp(2).role(ShardRole::Prefill));
    assert_eq!(
        specs[1],
        ShardSpec::new().tp(1).dp(2).role(ShardRole::Decode)
    );
    // to_dict: {"tp": 2, "pp": 1, "ep": 1, "dp": 1, "expt_tp": 2, "role": "prefill"}
    assert_eq!(
        specs[0].to_string(),
        "tp=2,pp=1,ep=1,dp=1,expt_tp=2,role=prefill"
    );
    let text = "tp=2,role=prefill+tp=1,dp=2,role=decode";
    assert!(InferenceShards::parse(text, 4, ShardMapping::TpDpPp).is_ok());
    assert_eq!(
        InferenceShards::parse(text, 5, ShardMapping::TpDpPp).unwrap_err(),
        Error::InferenceShardsWorld {
            shard_ranks: vec![2, 2],
            world_size: 5
        }
    );
    assert!(
        matches!(problem("tp=1,role=both", 0), ShardProblem::UnknownRole { role } if role == "both")
    );
    assert!(matches!(problem("tp=1,foo=2", 0), ShardProblem::UnknownKey { key } if key == "foo"));
    assert_eq!(
        ShardSpec::parse_all("tp=2,role=prefill+tp=1,role=decode").unwrap(),
        ShardSpec::parse_all("tp=2,role=prefill;tp=1,role=decode").unwrap()
    );
    assert_eq!(
        ShardSpec::parse_all("tp=2,cp=1").unwrap(),
        vec![ShardSpec::new().tp(2)]
    );
    assert!(matches!(problem("tp=1,cp=2", 0), ShardProblem::ContextParallel { cp } if cp == "2"));
}

/// What Python's `strip()`, `lower()` and `int()` accept, Megatron-Core
/// accepts: spaces of any kind around entries, keys and values, roles in
/// any case, digits of any script, underscores between digits, leading
/// zeros, a plus sign (no: `+` separates shards), empty pieces and
/// entries, a key given twice (the last wins), a shard of no entries.
#[test]
fn text_is_read_as_python_reads_it() {
    let read = |t: &str| ShardSpec::parse_all(t).unwrap();
    assert_eq!(
        read(" tp = 2 , dp=\u{663} ,role= PreFill\u{3000}"),
        vec![ShardSpec::new().tp(2).dp(3).role(ShardRole::Prefill)]
    );
    assert_eq!(
        read("tp=0_0_4,\u{1c}pp=02\u{1f}"),
        vec![ShardSpec::new().tp(4).pp(2)]
    );
    assert_eq!(
        read(";;tp=2; ;+tp=1"),
        vec![ShardSpec::new().tp(2), ShardSpec::new()]
    );
    assert_eq!(read("tp=2;, ,;tp=1").len(), 3); // `, ,` is a shard of one rank
    assert_eq!(
        read("tp=4,tp=2,role=decode,role=prefill"),
        vec![ShardSpec::new().tp(2).role(ShardRole::Prefill)]
    );
    assert_eq!(read(","), vec![ShardSpec::new()]);
    assert_eq!(read("cp=1,cp=2,cp=01"), vec![ShardSpec::new()]);
    // `+8` is `;8`: the value of tp is empty.
    assert!(
        matches!(problem("tp=+8", 0), ShardProblem::NotAnInteger { key: "tp", value } if value.is_empty())
    );
}

/// Each refusal names the shard (numbered among the non-empty pieces) and
/// the value.
#[test]
fn refusals_name_the_shard_and_the_value() {
    assert!(matches!(problem("tp=2;;dp", 1), ShardProblem::NotKeyValue { entry } if entry == "dp"));
    assert!(matches!(problem("tp=2; TP=2", 1), ShardProblem::UnknownKey { key } if key == "TP"));
    assert!(
        matches!(problem("tp=2+tp=1_", 1), ShardProblem::NotAnInteger { key: "tp", value } if value == "1_")
    );
    assert!(matches!(
        problem("tp=2+tp=\u{b2}", 1),
        ShardProblem::NotAnInteger { .. }
    ));
    assert!(
        matches!(problem("tp=1+dp=0", 1), ShardProblem::OutOfRange { key: "dp", value } if value == "0")
    );
    assert!(matches!(
        problem("ep=-1", 0),
        ShardProblem::OutOfRange { key: "ep", .. }
    ));
    assert!(matches!(
        problem("expt_tp=4294967296", 0),
        ShardProblem::OutOfRange { key: "expt_tp", .. }
    ));
    assert!(matches!(
        problem("cp=0", 0),
        ShardProblem::ContextParallel { .. }
    ));
    assert_eq!(
        problem("tp=2;tp=2,ep=4", 1),
        ShardProblem::ExpertGrid {
            ranks: 2,
            expt_tp: 2,
            ep: 4,
            pp: 1
        }
    );
    assert_eq!(
        ShardSpec::parse_all(" ;+, ").unwrap(),
        vec![ShardSpec::new()]
    );
    assert_eq!(
        ShardSpec::parse_all(" ;+ ").unwrap_err(),
        Error::NoInferenceShards
    );
    let err = InferenceShards::parse("tp=1,pp=2;tp=2,pp=2,dp=2,ep=2", 10, ShardMapping::TpPpDp)
        .unwrap_err();
    assert_eq!(
        err,
        Error::InferenceShard {
            shard: 1,
            problem: ShardProblem::Pipelines {
                tp: 2,
                expt_tp: 2,
                ep: 2,
                pp: 2
            }
        }
    );
    assert!(
        err.to_string()
            .starts_with("inference shard 1: with --use-tp-pp-dp-mapping"),
        "{err}"
    );
    // The default mapping keeps both grids' pipelines at stride world / pp.
    assert!(
        InferenceShards::parse("tp=1,pp=2;tp=2,pp=2,dp=2,ep=2", 10, ShardMapping::TpDpPp).is_ok()
    );
    assert_eq!(
        InferenceShards::parse("tp=2", 3, ShardMapping::TpDpPp)
            .unwrap_err()
            .to_string(),
        "the inference shards hold 2 ranks, but the world has 3: they must partition it exactly"
    );
    assert!(InferenceShards::parse("tp=65536,dp=65536", None, ShardMapping::TpDpPp).is_err());
    let shards = InferenceShards::parse("tp=2", None, ShardMapping::TpDpPp).unwrap();
    assert!(matches!(
        shards.split(0, Kind::TP_DP),
        Err(Error::KindNotInLayout { .. })
    ));
    assert!(matches!(
        shards.split(2, Kind::TP),
        Err(Error::RankOutOfRange { rank: 2, .. })
    ));
}

/// Megatron-LM's arguments give the shards: `--inference-shards` and
/// `--use-tp-pp-dp-mapping`, over their world; one configuration of them
/// is an error naming the flag.
#[test]
fn megatron_arguments_give_the_shards() {
    let line = "pretrain_gpt.py --tensor-model-parallel-size 2 --world-size 6 --inference-shards 'tp=2,pp=2,role=prefill+tp=2,role=decode' --use-tp-pp-dp-mapping";
    let args = MegatronArgs::parse_command_line(line).unwrap();
    let shards = args.inference_shards().unwrap().unwrap();
    assert_eq!(shards.mapping(), ShardMapping::TpPpDp);
    assert_eq!(shards.world_size(), 6);
    assert_eq!(
        shards.shards()[1]
            .layout()
            .groups(Kind::TP)
            .unwrap()
            .to_vecs(),
        vec![vec![4, 5]]
    );
    let err = args.config().unwrap_err();
    assert_eq!(err, Error::InferenceShardsNotOneLayout);
    assert!(err.to_string().starts_with("--inference-shards"));
    // Refused by Megatron-Core, refused when the line is read.
    let bad = MegatronArgs::parse_command_line("x.py --inference-shards tp=2,cp=2").unwrap_err();
    assert!(matches!(
        bad,
        Error::InferenceShard {
            shard: 0,
            problem: ShardProblem::ContextParallel { .. }
        }
    ));
    // From Python or a file: the spec as text; the world checked when read.
    let mut args = MegatronArgs::new();
    assert!(
        args.set("inference_shards", MegatronValue::Text("tp=2;dp=2".into()))
            .unwrap()
    );
    assert_eq!(args.inference_shards().unwrap().unwrap().world_size(), 4);
    args.set("world_size", MegatronValue::Int(8)).unwrap();
    assert!(matches!(
        args.inference_shards(),
        Err(Error::InferenceShardsWorld { .. })
    ));
    assert!(args.set("inference_shards", MegatronValue::Int(2)).is_err());
    assert_eq!(MegatronArgs::new().inference_shards().unwrap(), None);
}
