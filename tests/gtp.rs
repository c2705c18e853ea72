//! Megatron-Core 0.19's weight-shard (GTP) axes against an independent
//! reference: Megatron-Core's `_inject_gtp_remat_axis` and `RankGenerator`
//! transcribed over lists (`masked_groups` of `tests/common`), every GTP
//! kind and every other kind of random layouts with `gtp_remat` and
//! `expert_gtp_remat` > 1, shuffled orders and orders that write the
//! `gtp_remat` token; per-rank answers against the enumeration; the
//! refusals; and the worked example of `docs/semantics.md` section 3.5.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use std::collections::BTreeMap;

use proptest::prelude::*;
use rank_layout::{Config, Error, ExpertLayout, Kind, Layout, Part};

use common::{Groups, masked_groups};

/// Megatron-Core 0.19's `_inject_gtp_remat_axis(order, after)`, on tokens.
fn inject(order: &[&str], after: &str) -> Vec<String> {
    let mut toks: Vec<String> = order.iter().map(|s| s.to_string()).collect();
    if toks.iter().any(|t| t == "gtp_remat") {
        return toks;
    }
    let anchor = if toks.iter().any(|t| t == after) {
        after
    } else {
        "tp"
    };
    let pos = toks.iter().position(|t| t == anchor).map_or(0, |p| p + 1);
    toks.insert(pos, "gtp_remat".into());
    toks
}

/// Megatron-Core 0.19's `RankGenerator(...).get_ranks(token)`: missing
/// tokens appended (size 1), then the masked groups.
fn get_ranks(order: &[String], sizes: &BTreeMap<&str, u64>, token: &str, offset: u64) -> Groups {
    let mut order = order.to_vec();
    for name in ["tp", "pp", "dp", "ep", "cp", "gtp_remat"] {
        if !order.iter().any(|t| t == name) {
            assert_eq!(sizes[name], 1, "{name} left out with a size");
            order.push(name.into());
        }
    }
    let ordered: Vec<u64> = order.iter().map(|t| sizes[t.as_str()]).collect();
    let world: u64 = ordered.iter().product();
    let wanted: Vec<&str> = token.split('-').collect();
    let mask: Vec<bool> = order.iter().map(|t| wanted.contains(&t.as_str())).collect();
    masked_groups(world, &ordered, &mask, offset)
}

/// Every kind of a weight-shard layout, as Megatron-Core 0.19 builds it:
/// rank-layout's name, then the generator (dense or expert) and its token.
fn reference(c: &Config, order: &[&str]) -> Vec<(String, Groups)> {
    let (tp, cp, pp, ep) = (
        u64::from(c.tp),
        u64::from(c.cp),
        u64::from(c.pp),
        u64::from(c.ep),
    );
    let (gtp, egtp) = (u64::from(c.gtp_remat), u64::from(c.expert_gtp_remat));
    let etp = u64::from(c.etp.unwrap_or(c.tp));
    let world = u64::from(c.world_size.unwrap());
    let dp = world / (tp * cp * pp * gtp);
    let edp = world / (etp * ep * pp * egtp);
    let offset = u64::from(c.rank_offset);
    let dense_sizes = BTreeMap::from([
        ("tp", tp),
        ("cp", cp),
        ("ep", 1),
        ("dp", dp),
        ("pp", pp),
        ("gtp_remat", gtp),
    ]);
    let expert_sizes = BTreeMap::from([
        ("tp", etp),
        ("cp", 1),
        ("ep", ep),
        ("dp", edp),
        ("pp", pp),
        ("gtp_remat", egtp),
    ]);
    let dense_order = inject(order, "tp");
    let expert_order = inject(order, "ep");
    let dense = |token: &str| get_ranks(&dense_order, &dense_sizes, token, offset);
    let expert = |token: &str| get_ranks(&expert_order, &expert_sizes, token, offset);
    let mut out = vec![];
    for token in [
        "tp", "pp", "dp", "cp", "dp-cp", "tp-pp", "tp-cp", "tp-dp", "tp-dp-cp",
    ] {
        // With weight shards, Megatron-Core 0.19's model-parallel and
        // tensor + data groups span them (below) instead.
        if gtp == 1 || !["tp-pp", "tp-dp", "tp-dp-cp"].contains(&token) {
            out.push((token.to_string(), dense(token)));
        }
    }
    if gtp > 1 {
        for token in [
            "gtp_remat",
            "gtp_remat-dp",
            "gtp_remat-dp-cp",
            "tp-gtp_remat-pp",
            "tp-gtp_remat-dp",
            "tp-gtp_remat-dp-cp",
        ] {
            out.push((token.to_string(), dense(token)));
        }
    }
    let pipelines = dense("pp");
    let ends = |last: bool| -> Groups {
        pipelines
            .iter()
            .map(|p| {
                if last && p.len() > 1 {
                    vec![p[0], p[p.len() - 1]]
                } else {
                    vec![p[0]]
                }
            })
            .collect()
    };
    out.push(("embd".into(), ends(true)));
    out.push(("pos-embd".into(), ends(false)));
    for (name, token) in [
        ("ep", "ep"),
        ("etp", "tp"),
        ("etp-ep", "tp-ep"),
        ("etp-ep-pp", "tp-ep-pp"),
        ("edp", "dp"),
    ] {
        out.push((name.into(), expert(token)));
    }
    if egtp > 1 {
        for (name, token) in [
            ("egtp_remat", "gtp_remat"),
            ("egtp_remat-edp", "gtp_remat-dp"),
            ("etp-ep-egtp_remat-pp", "tp-ep-gtp_remat-pp"),
        ] {
            out.push((name.into(), expert(token)));
        }
    }
    out
}

/// Random weight-shard layouts: sizes with the expert grid fitting the
/// world, a shuffled order (some with `gtp_remat` written), pp moved last
/// when Megatron-Core's pp-last rule would refuse it.
fn gtp_config() -> impl Strategy<Value = (Config, Vec<&'static str>)> {
    (
        prop_oneof![Just(1u32), Just(2), Just(4)],
        prop_oneof![Just(1u32), Just(2)],
        prop_oneof![Just(1u32), Just(2), Just(3)],
        prop_oneof![Just(1u32), Just(2), Just(3), Just(4)],
        prop_oneof![Just(1u32), Just(2), Just(4)],
        prop_oneof![Just(1u32), Just(2)],
        prop_oneof![Just(1u32), Just(2), Just(4)],
        1..=3u32,
        Just(vec!["tp", "cp", "ep", "dp", "pp"]).prop_shuffle(),
        0..7usize,
        0..3u32,
    )
        .prop_map(
            |(tp, cp, pp, gtp, ep, etp, egtp, k, mut order, gtp_at, off)| {
                // A world both grids divide: a multiple of both model sizes.
                let dense = tp * cp * pp * gtp;
                let expert = etp * ep * pp * egtp;
                let lcm = dense / gcd(dense, expert) * expert;
                let world = lcm * k;
                if gtp_at < order.len() {
                    order.insert(gtp_at, "gtp_remat");
                }
                let mut c = Config::new()
                    .tp(tp)
                    .cp(cp)
                    .pp(pp)
                    .ep(ep)
                    .etp(Some(etp))
                    .gtp_remat(gtp)
                    .expert_gtp_remat(egtp)
                    .world_size(world)
                    .rank_offset(off * 3)
                    .order(order.join("-").parse().unwrap());
                if Layout::new(&c).is_err() {
                    order.retain(|t| *t != "pp");
                    order.push("pp");
                    c.order = order.join("-").parse().unwrap();
                }
                (c, order)
            },
        )
        .prop_filter("a valid layout", |(c, _)| Layout::new(c).is_ok())
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Every kind equals Megatron-Core 0.19's construction, kinds in the
    /// same order.
    #[test]
    fn kinds_equal_megatron_core_0_19((c, order) in gtp_config()) {
        let layout = Layout::new(&c).unwrap();
        let want = reference(&c, &order);
        let names: Vec<String> = layout.kinds().iter().map(Kind::to_string).collect();
        let want_names: Vec<String> = want.iter().map(|(k, _)| k.clone()).collect();
        prop_assert_eq!(names, want_names, "{}", c);
        for (name, groups) in want {
            let got = layout.groups(name.parse().unwrap()).unwrap().to_vecs();
            prop_assert_eq!(got, groups, "{} kind {}", c, name);
        }
    }

    /// Per-rank answers agree with the enumeration for every kind, and a
    /// rank's coordinates (weight shard included) lead back to it.
    #[test]
    fn per_rank_answers((c, _) in gtp_config()) {
        let layout = Layout::new(&c).unwrap();
        for kind in layout.kinds() {
            let mut want = BTreeMap::new();
            for (color, group) in layout.groups(*kind).unwrap().enumerate() {
                for (key, rank) in group.iter().enumerate() {
                    want.insert(rank, (color as u32, key as u32));
                }
            }
            for (rank, (color, key)) in want {
                let split = layout.split(rank, *kind).unwrap().unwrap();
                prop_assert_eq!((split.color, split.key), (color, key), "{} {} rank {}", c, kind, rank);
            }
        }
        let first = layout.rank_offset();
        for rank in first..first + layout.world_size() {
            let p = layout.placement(rank).unwrap();
            prop_assert!(p.gtp_remat < c.gtp_remat);
            prop_assert!(p.expert.egtp_remat < c.expert_gtp_remat);
            prop_assert_eq!(layout.rank_with_gtp_remat(Part::Decoder, p.coord, p.gtp_remat).unwrap(), rank);
        }
    }
}

/// Weight shards of size 1 change nothing: the same kinds and groups as
/// the layout without them.
#[test]
fn size_one_is_no_axis() {
    let base = Config::new().tp(2).cp(2).ep(2).pp(2).world_size(64);
    let with = base.clone().gtp_remat(1).expert_gtp_remat(1);
    let (a, b) = (Layout::new(&base).unwrap(), Layout::new(&with).unwrap());
    assert_eq!(a.kinds(), b.kinds());
    for kind in a.kinds() {
        assert_eq!(
            a.groups(*kind).unwrap().to_vecs(),
            b.groups(*kind).unwrap().to_vecs()
        );
    }
    assert!(matches!(
        a.groups(Kind::GTP_REMAT),
        Err(Error::KindNotInLayout { .. })
    ));
    let mesh = a.mesh().unwrap();
    assert!(!mesh.dims().any(|(name, _)| name.contains("gtp")));
}

/// The example that showed the axis was ignored: tp 2, pp 2, 64 ranks,
/// `--tensor-parallel-num-weight-shards 8`.
#[test]
fn worked_example() {
    let layout = Layout::new(&Config::new().tp(2).pp(2).gtp_remat(4).world_size(64)).unwrap();
    assert_eq!(layout.sizes().dp, 4);
    assert_eq!(
        layout.groups(Kind::DP).unwrap().to_vecs()[0],
        [0, 8, 16, 24]
    );
    let mesh = layout.mesh().unwrap();
    let names: Vec<&str> = mesh.dims().map(|(name, _)| name).collect();
    assert_eq!(names, ["tp", "gtp_remat", "cp", "dp", "pp"]);
}

/// What no Megatron version builds is refused, naming the option.
#[test]
fn refusals() {
    let gtp = Config::new().tp(2).gtp_remat(2).world_size(16);
    let cases = [
        (
            gtp.clone().expert_layout(ExpertLayout::Nested),
            "expert_layout = nested",
        ),
        (gtp.clone().encoder_pp(Some(1)), "an encoder"),
        (gtp.clone().dist_opt_instances(2), "dist_opt_instances"),
        (
            Config::new()
                .ep(2)
                .expert_gtp_remat(2)
                .dist_opt_instances(2)
                .world_size(16),
            "dist_opt_instances",
        ),
    ];
    for (c, with) in cases {
        let e = Layout::new(&c).unwrap_err();
        assert!(
            matches!(e, Error::GtpConflict { .. }) && e.to_string().contains(with),
            "{c}: {e}"
        );
    }
    let e = Layout::new(&Config::new().tp(2).gtp_remat(3).world_size(16)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "world_size (16) is not divisible by tp*cp*pp*gtp_remat = 6"
    );
    let e = Layout::new(&Config::new().ep(2).expert_gtp_remat(3).world_size(16)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "world_size (16) is not divisible by etp*ep*pp*expert_gtp_remat = 6"
    );
    let e = Layout::new(&Config::new().gtp_remat(0)).unwrap_err();
    assert!(matches!(e, Error::ZeroSize { what: "gtp_remat" }), "{e}");
    assert!(
        "tp-gtp_remat-cp-gtp_remat"
            .parse::<rank_layout::Order>()
            .is_err()
    );
}
