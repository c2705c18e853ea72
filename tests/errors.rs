//! Every invalid configuration (docs/semantics.md, section 6) is a typed error whose
//! message names the offending values.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

use rank_layout::{Config, DistOptProblem, Error, ExpertLayout, Kind, Layout, Order};

fn err(c: Config) -> Error {
    Layout::new(&c).expect_err("invalid configuration")
}

fn folded(c: Config) -> Config {
    c.expert_layout(ExpertLayout::Folded)
}

fn order(s: &str) -> Order {
    s.parse().unwrap()
}

#[test]
fn order_errors() {
    assert!(
        matches!("tp-xp".parse::<Order>(), Err(Error::UnknownAxis { token, .. }) if token == "xp")
    );
    assert!(matches!(
        "tp--dp".parse::<Order>(),
        Err(Error::EmptyAxis { .. })
    ));
    assert!(matches!("".parse::<Order>(), Err(Error::EmptyAxis { .. })));
    assert!(matches!(
        "tp-dp-TP".parse::<Order>(),
        Err(Error::RepeatedAxis { .. })
    ));
    assert!(matches!(
        "etp-dp".parse::<Order>(),
        Err(Error::UnknownAxis { .. })
    ));
    let e = err(Config::new()
        .cp(2)
        .order(order("tp-dp-pp"))
        .expert_layout(ExpertLayout::Nested));
    assert_eq!(
        e.to_string(),
        "cp has size 2 but is missing from order \"tp-dp-pp\" (only size-1 axes may be left out)"
    );
}

#[test]
fn size_errors() {
    for (c, what) in [
        (
            Config::new().tp(0).expert_layout(ExpertLayout::Nested),
            "tp",
        ),
        (
            Config::new()
                .dp(Some(0))
                .expert_layout(ExpertLayout::Nested),
            "dp",
        ),
        (
            Config::new()
                .world_size(Some(0))
                .expert_layout(ExpertLayout::Nested),
            "world_size",
        ),
        (
            Config::new()
                .encoder_pp(Some(0))
                .expert_layout(ExpertLayout::Nested),
            "encoder_pp",
        ),
        (folded(Config::new().etp(Some(0))), "etp"),
    ] {
        assert_eq!(err(c), Error::ZeroSize { what });
    }
    assert_eq!(
        err(Config::new()
            .tp(4)
            .world_size(Some(10))
            .expert_layout(ExpertLayout::Nested))
        .to_string(),
        "world_size (10) is not divisible by tp*cp*pp = 4"
    );
    assert_eq!(
        err(Config::new()
            .tp(2)
            .dp(Some(2))
            .world_size(Some(6))
            .expert_layout(ExpertLayout::Nested))
        .to_string(),
        "world_size (6) disagrees with dp (2): tp*cp*pp * dp = 4"
    );
    assert!(matches!(
        err(Config::new()
            .tp(1 << 20)
            .cp(1 << 12)
            .expert_layout(ExpertLayout::Nested)),
        Error::Overflow { .. }
    ));
}

#[test]
fn nested_expert_errors() {
    assert_eq!(
        err(Config::new()
            .ep(4)
            .dp(Some(6))
            .expert_layout(ExpertLayout::Nested)),
        Error::DpNotDivisibleByEp { dp: 6, ep: 4 }
    );
    // ep written away from dp, even with ep = 1.
    assert!(matches!(
        err(Config::new()
            .order(order("ep-tp-dp-pp"))
            .expert_layout(ExpertLayout::Nested)),
        Error::EpNotAdjacentToDp { .. }
    ));
    assert!(matches!(
        err(Config::new()
            .etp(Some(2))
            .expert_layout(ExpertLayout::Nested)),
        Error::NeedsFolded { what: "etp" }
    ));
}

#[test]
fn folded_errors() {
    assert_eq!(
        err(folded(Config::new().tp(2).dp(Some(3)).ep(4).etp(Some(1)))),
        Error::ExpertWorldNotDivisible {
            world_size: 6,
            etp: 1,
            ep: 4,
            pp: 1
        }
    );
    // pp not last and edp (4) != dp (2).
    let e = err(folded(
        Config::new()
            .tp(2)
            .dp(Some(2))
            .pp(2)
            .etp(Some(1))
            .order(order("tp-pp-dp")),
    ));
    assert!(
        matches!(
            e,
            Error::FoldedDpMismatch {
                dp: 2,
                edp: 4,
                pp: 2,
                ..
            }
        ),
        "{e}"
    );
    // edp == dp, but the pipelines differ: attention pp stride 2 (tp), expert 1.
    let e = err(folded(
        Config::new()
            .tp(2)
            .dp(Some(2))
            .pp(2)
            .ep(2)
            .etp(Some(1))
            .order(order("tp-pp-ep-dp")),
    ));
    assert!(
        matches!(
            e,
            Error::FoldedPpMismatch {
                attention_stride: 2,
                expert_stride: 1,
                ..
            }
        ),
        "{e}"
    );
    // Size-1 axes after pp do not count as "not ending in pp".
    assert!(
        Layout::new(&folded(
            Config::new()
                .tp(2)
                .dp(Some(2))
                .pp(2)
                .etp(Some(1))
                .order(order("tp-dp-pp-cp"))
        ))
        .is_ok()
    );
    // Encoder + folded experts is Megatron-LM 5a3b6bcf1f's layout (tests/megatron.rs).
    assert!(Layout::new(&folded(Config::new().encoder_tp(Some(1)))).is_ok());
    assert!(matches!(
        err(folded(
            Config::new().ep(2).dp(Some(2)).order(order("tp-dp-pp"))
        )),
        Error::MissingAxis { .. }
    ));
}

#[test]
fn hierarchical_cp_errors() {
    assert_eq!(
        err(Config::new()
            .cp(8)
            .hierarchical_cp(vec![2, 2])
            .expert_layout(ExpertLayout::Nested))
        .to_string(),
        "hierarchical_cp [2, 2] multiplies to 4, but cp is 8"
    );
    assert!(matches!(
        err(Config::new()
            .cp(4)
            .hierarchical_cp(vec![4, 0])
            .expert_layout(ExpertLayout::Nested)),
        Error::ZeroSize { .. }
    ));
    // With an encoder, hcp groups come from each grid, encoder first.
    let l = Layout::new(
        &Config::new()
            .tp(2)
            .cp(2)
            .encoder_tp(Some(1))
            .hierarchical_cp(vec![2]),
    )
    .unwrap();
    assert_eq!(
        l.groups(Kind::hcp(0)).unwrap().to_vecs(),
        vec![vec![0, 1], vec![2, 4], vec![3, 5]]
    );
}

#[test]
fn dist_opt_errors() {
    assert!(matches!(
        err(Config::new()
            .dp(Some(4))
            .dist_opt_instances(2)
            .expert_layout(ExpertLayout::Nested)),
        Error::NeedsFolded {
            what: "dist_opt_instances"
        }
    ));
    assert_eq!(
        err(folded(Config::new().dp(Some(6)).dist_opt_instances(4))),
        Error::DistOptNotDivisible {
            instances: 4,
            dp_cp: 6,
            edp: 6
        }
    );
    // Megatron-Core's silent case: with order cp-dp-tp-ep-pp the dp-cp
    // groups are {0,1,2,3} and {4,5,6,7} but the instances are {0..3} and
    // {4..7}: the dp-cp-intra slices [0,1],[2,3] sit in one instance, yet
    // the inter groups ([0,4], ...) leave the dp-cp groups, mixing tp shards.
    let e = err(folded(
        Config::new()
            .tp(2)
            .dp(Some(2))
            .etp(Some(1))
            .dist_opt_instances(2)
            .order(order("cp-dp-tp-ep-pp")),
    ));
    assert_eq!(
        e,
        Error::DistOptInconsistent {
            instances: 2,
            order: "cp-dp-tp-ep-pp".into(),
            problem: DistOptProblem::InterLeavesDpCp,
            dp_cp_end: 2,
            edp_end: 4,
        },
        "{e}"
    );
    assert!(e.to_string().contains("cp-dp-tp-ep-pp"), "{e}");
    assert!(
        e.to_string().contains("mix tensor or pipeline shards"),
        "{e}"
    );
    // Expert grid: ep after dp, so edp (size 2) is the fastest digit and the
    // instances are the even and the odd ranks, while the dp-cp-intra slices
    // of the dp group [0, 1, 2, 3] are [0, 1] and [2, 3].
    let e = err(folded(
        Config::new()
            .dp(Some(4))
            .ep(2)
            .etp(Some(1))
            .dist_opt_instances(2)
            .order(order("tp-cp-dp-ep-pp")),
    ));
    assert!(
        matches!(
            e,
            Error::DistOptInconsistent {
                problem: DistOptProblem::IntraSpansInstances,
                ..
            }
        ),
        "{e}"
    );
    // dp and cp apart (tp between them) is fine when dp ends where edp ends:
    // the dp-cp group [0, 1, 4, 5] is sliced into [0, 1] and [4, 5], the
    // instances are ranks 0-3 and 4-7.
    let l = Layout::new(&folded(
        Config::new()
            .tp(2)
            .cp(2)
            .dp(Some(2))
            .etp(Some(2))
            .dist_opt_instances(2)
            .order(order("cp-tp-dp-ep-pp")),
    ))
    .unwrap();
    assert_eq!(
        l.groups(Kind::DP_CP_INTRA).unwrap().to_vecs()[..2],
        [vec![0, 1], vec![4, 5]]
    );
    // N = 1 is off: no kinds, no checks.
    let l = Layout::new(&folded(Config::new().dp(Some(3)).dist_opt_instances(1))).unwrap();
    assert!(!l.kinds().contains(&Kind::DP_CP_INTRA));
}

#[test]
fn query_errors() {
    let l = Layout::new(
        &Config::new()
            .tp(2)
            .world_size(Some(4))
            .rank_offset(8)
            .expert_layout(ExpertLayout::Nested),
    )
    .unwrap();
    assert_eq!(
        l.placement(12).unwrap_err().to_string(),
        "rank 12 is outside the layout (ranks 8..11, both included)"
    );
    assert!(l.memberships(7, Kind::TP).is_err());
    assert!(matches!(
        l.groups(Kind::ETP),
        Err(Error::KindNotInLayout { .. })
    ));
    assert!(matches!(
        l.groups(Kind::hcp(0)),
        Err(Error::KindNotInLayout { .. })
    ));
    assert!(matches!(
        l.groups(Kind::DIST_OPT_INSTANCE),
        Err(Error::KindNotInLayout { .. })
    ));
    assert!(matches!(
        l.rank(
            rank_layout::Part::Decoder,
            rank_layout::Coord {
                tp: 2,
                ..Default::default()
            }
        ),
        Err(Error::CoordOutOfRange {
            value: 2,
            size: 2,
            ..
        })
    ));
    assert!(matches!(
        l.rank(rank_layout::Part::Encoder, rank_layout::Coord::default()),
        Err(Error::NeedsEncoder)
    ));
    let enc = Layout::new(
        &Config::new()
            .tp(4)
            .encoder_tp(Some(2))
            .expert_layout(ExpertLayout::Nested),
    )
    .unwrap();
    assert_eq!(enc.split_rounds(Kind::PP).unwrap(), 2);
    assert!(matches!(
        enc.split(0, Kind::PP),
        Err(Error::OverlappingKind { rounds: 2, .. })
    ));
    assert!(matches!(
        enc.split_in_round(0, Kind::PP, 2),
        Err(Error::RoundOutOfRange { .. })
    ));
    assert_eq!(
        enc.split_in_round(0, Kind::PP, 1).unwrap(),
        Some(rank_layout::Split { color: 1, key: 0 })
    );
    assert!(matches!(
        "hcp-x".parse::<Kind>(),
        Err(Error::UnknownKind { .. })
    ));
}
