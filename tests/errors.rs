//! Every invalid configuration (docs/semantics.md, section 6) is a typed error whose
//! message names the offending values.

use rank_layout::{Config, DistOptProblem, Error, ExpertLayout, Kind, Layout, Order};

fn err(c: Config) -> Error {
    Layout::new(&c).expect_err("invalid configuration")
}

fn folded(c: Config) -> Config {
    Config {
        expert_layout: ExpertLayout::Folded,
        ..c
    }
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
    let e = err(Config {
        cp: 2,
        order: order("tp-dp-pp"),
        ..Config::default()
    });
    assert_eq!(
        e.to_string(),
        "cp has size 2 but is missing from order \"tp-dp-pp\" (only size-1 axes may be left out)"
    );
}

#[test]
fn size_errors() {
    for (c, what) in [
        (
            Config {
                tp: 0,
                ..Config::default()
            },
            "tp",
        ),
        (
            Config {
                dp: Some(0),
                ..Config::default()
            },
            "dp",
        ),
        (
            Config {
                world_size: Some(0),
                ..Config::default()
            },
            "world_size",
        ),
        (
            Config {
                encoder_pp: Some(0),
                ..Config::default()
            },
            "encoder_pp",
        ),
        (
            folded(Config {
                etp: Some(0),
                ..Config::default()
            }),
            "etp",
        ),
    ] {
        assert_eq!(err(c), Error::ZeroSize { what });
    }
    assert_eq!(
        err(Config {
            tp: 4,
            world_size: Some(10),
            ..Config::default()
        })
        .to_string(),
        "world_size (10) is not divisible by tp*cp*pp = 4"
    );
    assert_eq!(
        err(Config {
            tp: 2,
            dp: Some(2),
            world_size: Some(6),
            ..Config::default()
        })
        .to_string(),
        "world_size (6) disagrees with dp (2): tp*cp*pp * dp = 4"
    );
    assert!(matches!(
        err(Config {
            tp: 1 << 20,
            cp: 1 << 12,
            ..Config::default()
        }),
        Error::Overflow { .. }
    ));
}

#[test]
fn nested_expert_errors() {
    assert_eq!(
        err(Config {
            ep: 4,
            dp: Some(6),
            ..Config::default()
        }),
        Error::DpNotDivisibleByEp { dp: 6, ep: 4 }
    );
    // ep written away from dp, even with ep = 1.
    assert!(matches!(
        err(Config {
            order: order("ep-tp-dp-pp"),
            ..Config::default()
        }),
        Error::EpNotAdjacentToDp { .. }
    ));
    assert!(matches!(
        err(Config {
            etp: Some(2),
            ..Config::default()
        }),
        Error::NeedsFolded { what: "etp" }
    ));
}

#[test]
fn folded_errors() {
    assert_eq!(
        err(folded(Config {
            tp: 2,
            dp: Some(3),
            ep: 4,
            etp: Some(1),
            ..Config::default()
        })),
        Error::ExpertWorldNotDivisible {
            world_size: 6,
            etp: 1,
            ep: 4,
            pp: 1
        }
    );
    // pp not last and edp (4) != dp (2).
    let e = err(folded(Config {
        tp: 2,
        dp: Some(2),
        pp: 2,
        etp: Some(1),
        order: order("tp-pp-dp"),
        ..Config::default()
    }));
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
    let e = err(folded(Config {
        tp: 2,
        dp: Some(2),
        pp: 2,
        ep: 2,
        etp: Some(1),
        order: order("tp-pp-ep-dp"),
        ..Config::default()
    }));
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
        Layout::new(&folded(Config {
            tp: 2,
            dp: Some(2),
            pp: 2,
            etp: Some(1),
            order: order("tp-dp-pp-cp"),
            ..Config::default()
        }))
        .is_ok()
    );
    assert!(matches!(
        err(folded(Config {
            encoder_tp: Some(1),
            ..Config::default()
        })),
        Error::NotWithEncoder { .. }
    ));
    assert!(matches!(
        err(folded(Config {
            ep: 2,
            dp: Some(2),
            order: order("tp-dp-pp"),
            ..Config::default()
        })),
        Error::MissingAxis { .. }
    ));
}

#[test]
fn hierarchical_cp_errors() {
    assert_eq!(
        err(Config {
            cp: 8,
            hierarchical_cp: Some(vec![2, 2]),
            ..Config::default()
        })
        .to_string(),
        "hierarchical_cp [2, 2] multiplies to 4, but cp is 8"
    );
    assert!(matches!(
        err(Config {
            cp: 4,
            hierarchical_cp: Some(vec![4, 0]),
            ..Config::default()
        }),
        Error::ZeroSize { .. }
    ));
    assert!(matches!(
        err(Config {
            tp: 2,
            cp: 2,
            encoder_tp: Some(1),
            hierarchical_cp: Some(vec![2]),
            ..Config::default()
        }),
        Error::NotWithEncoder {
            what: "hierarchical_cp"
        }
    ));
}

#[test]
fn dist_opt_errors() {
    assert!(matches!(
        err(Config {
            dp: Some(4),
            dist_opt_instances: Some(2),
            ..Config::default()
        }),
        Error::NeedsFolded {
            what: "dist_opt_instances"
        }
    ));
    assert_eq!(
        err(folded(Config {
            dp: Some(6),
            dist_opt_instances: Some(4),
            ..Config::default()
        })),
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
    let e = err(folded(Config {
        tp: 2,
        dp: Some(2),
        etp: Some(1),
        dist_opt_instances: Some(2),
        order: order("cp-dp-tp-ep-pp"),
        ..Config::default()
    }));
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
    let e = err(folded(Config {
        dp: Some(4),
        ep: 2,
        etp: Some(1),
        dist_opt_instances: Some(2),
        order: order("tp-cp-dp-ep-pp"),
        ..Config::default()
    }));
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
    let l = Layout::new(&folded(Config {
        tp: 2,
        cp: 2,
        dp: Some(2),
        etp: Some(2),
        dist_opt_instances: Some(2),
        order: order("cp-tp-dp-ep-pp"),
        ..Config::default()
    }))
    .unwrap();
    assert_eq!(
        l.groups(Kind::DP_CP_INTRA).unwrap().to_vecs()[..2],
        [vec![0, 1], vec![4, 5]]
    );
    // N = 1 is off: no kinds, no checks.
    let l = Layout::new(&folded(Config {
        dp: Some(3),
        dist_opt_instances: Some(1),
        ..Config::default()
    }))
    .unwrap();
    assert!(!l.kinds().contains(&Kind::DpCpIntra));
}

#[test]
fn query_errors() {
    let l = Layout::new(&Config {
        tp: 2,
        world_size: Some(4),
        rank_offset: 8,
        ..Config::default()
    })
    .unwrap();
    assert_eq!(
        l.placement(12).unwrap_err().to_string(),
        "rank 12 is outside the layout (ranks 8..12)"
    );
    assert!(l.memberships(7, Kind::TP).is_err());
    assert!(matches!(
        l.groups(Kind::ETP),
        Err(Error::KindNotInLayout { .. })
    ));
    assert!(matches!(
        l.groups(Kind::Hcp(0)),
        Err(Error::KindNotInLayout { .. })
    ));
    assert!(matches!(
        l.groups(Kind::DistOptInstance),
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
    let enc = Layout::new(&Config {
        tp: 4,
        encoder_tp: Some(2),
        ..Config::default()
    })
    .unwrap();
    assert_eq!(enc.comm_split_rounds(Kind::PP).unwrap(), 2);
    assert!(matches!(
        enc.comm_split(0, Kind::PP),
        Err(Error::OverlappingKind { rounds: 2, .. })
    ));
    assert!(matches!(
        enc.comm_split_round(0, Kind::PP, 2),
        Err(Error::RoundOutOfRange { .. })
    ));
    assert_eq!(
        enc.comm_split_round(0, Kind::PP, 1).unwrap(),
        Some(rank_layout::Split { color: 1, key: 0 })
    );
    assert!(matches!(
        "hcp-x".parse::<Kind>(),
        Err(Error::UnknownKind { .. })
    ));
}
