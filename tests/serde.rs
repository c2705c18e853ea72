//! Serialization: configurations round-trip, layouts re-validate on the way
//! in, unknown keys are rejected, text-like types go through their names.
#![cfg(feature = "serde")]
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

use rank_layout::{Config, ExpertLayout, Kind, Layout, Order};

#[test]
fn config_round_trips() {
    let c = Config::new()
        .tp(2)
        .cp(4)
        .ep(2)
        .dp(Some(4))
        .order("tp-cp-dp-ep-pp".parse().unwrap())
        .expert_layout(ExpertLayout::Folded)
        .etp(Some(1))
        .hierarchical_cp(vec![2, 2])
        .dist_opt_instances(2);
    let text = serde_json::to_string(&c).unwrap();
    assert!(text.contains("\"expert_layout\":\"folded\""), "{text}");
    assert!(text.contains("\"order\":\"tp-cp-dp-ep-pp\""), "{text}");
    assert_eq!(serde_json::from_str::<Config>(&text).unwrap(), c);
}

#[test]
fn missing_keys_take_defaults_and_unknown_keys_are_rejected() {
    let c: Config = serde_json::from_str(r#"{"tp": 4}"#).unwrap();
    assert_eq!(c, Config::new().tp(4));
    assert_eq!(c.expert_layout, ExpertLayout::Folded);
    let e = serde_json::from_str::<Config>(r#"{"tp": 4, "tensor_parallel": 2}"#).unwrap_err();
    assert!(e.to_string().contains("tensor_parallel"), "{e}");
    let e = serde_json::from_str::<Config>(r#"{"order": "tp-xp"}"#).unwrap_err();
    assert!(e.to_string().contains("xp"), "{e}");
}

#[test]
fn layout_round_trips_and_revalidates() {
    let l = Layout::new(
        &Config::new()
            .tp(2)
            .pp(2)
            .world_size(Some(8))
            .expert_layout(ExpertLayout::Nested),
    )
    .unwrap();
    let text = serde_json::to_string(&l).unwrap();
    let back: Layout = serde_json::from_str(&text).unwrap();
    assert_eq!(back, l);
    let e = serde_json::from_str::<Layout>(r#"{"tp": 4, "world_size": 10}"#).unwrap_err();
    assert!(
        e.to_string()
            .contains("world_size (10) is not divisible by tp*cp*pp = 4"),
        "{e}"
    );
}

#[test]
fn kinds_and_orders_serialize_as_names() {
    assert_eq!(
        serde_json::to_string(&Kind::DP_CP_MOD_EP).unwrap(),
        "\"dp-cp-mod-ep\""
    );
    assert_eq!(
        serde_json::from_str::<Kind>("\"cp-dp\"").unwrap(),
        Kind::DP_CP
    );
    assert!(serde_json::from_str::<Kind>("\"dp-dp\"").is_err());
    assert_eq!(
        serde_json::from_str::<Order>("\"PP-TP\"")
            .unwrap()
            .to_string(),
        "pp-tp"
    );
}

#[test]
fn every_kind_name_round_trips() {
    let l = Layout::new(
        &Config::new()
            .tp(2)
            .cp(4)
            .dp(Some(2))
            .expert_layout(ExpertLayout::Folded)
            .hierarchical_cp(vec![2, 2])
            .dist_opt_instances(2),
    )
    .unwrap();
    let nested = Layout::new(&Config::default()).unwrap();
    for &kind in l.kinds().iter().chain(nested.kinds()) {
        assert_eq!(kind.to_string().parse::<Kind>().unwrap(), kind);
    }
}

#[test]
fn a_modules_file_that_is_not_a_table_says_what_it_must_be() {
    // `[1,2,3]` said "expected a boolean" and `[]` "invalid length 4,
    // expected struct RawSpec with 5 elements": serde read an array as the
    // file's fields in order.
    use rank_layout::modules::ModulesSpec;
    for (text, found) in [
        ("[1, 2, 3]", "found an array"),
        ("[]", "found an array"),
        (r#""modules""#, "found a string"),
        ("5", "found the number 5"),
        ("true", "found the boolean true"),
        ("null", "found null"),
    ] {
        let e = serde_json::from_str::<ModulesSpec>(text)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("a modules file must be a table with `modules`") && e.contains(found),
            "{text}: {e}"
        );
    }
    let spec: ModulesSpec =
        serde_json::from_str(r#"{"modules": [{"name": "a", "mesh": "tp=2"}]}"#).unwrap();
    assert_eq!(spec.modules.len(), 1);
    let e = serde_json::from_str::<ModulesSpec>(r#"{"modules": [], "colocate": true}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `colocate`"), "{e}");
}
