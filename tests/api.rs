//! The 1.0 API's promises: every kind prints and parses back (text and
//! serde), "off" has one spelling, layouts compare by resolved content, and
//! the main types can cross threads.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

use proptest::prelude::*;
use rank_layout::{Axis, AxisSet, Config, Error, Groups, Kind, Layout};

/// Any kind there is: every non-empty set of the nine axes, its `-mod-ep`
/// form, `hcp-n` and the special families.
fn any_kind() -> impl Strategy<Value = Kind> {
    let set = (1u16..512).prop_map(|bits| {
        let axes: Vec<Axis> = Axis::ALL
            .into_iter()
            .enumerate()
            .filter(|(i, _)| bits & (1 << i) != 0)
            .map(|(_, a)| a)
            .collect();
        AxisSet::of(&axes)
    });
    prop_oneof![
        set.clone().prop_map(|s| Kind::of_axes(s).unwrap()),
        set.prop_map(|s| Kind::mod_ep(s).unwrap()),
        any::<u8>().prop_map(Kind::hcp),
        prop::sample::select(vec![
            Kind::EMBD,
            Kind::POS_EMBD,
            Kind::DP_CP_INTRA,
            Kind::EDP_INTRA,
            Kind::DP_CP_INTER,
            Kind::DIST_OPT_INSTANCE,
        ]),
    ]
}

proptest! {
    /// `Display` then `FromStr` gives the kind back; so do serde and
    /// upper-case spellings.
    #[test]
    fn every_kind_round_trips(kind in any_kind()) {
        let name = kind.to_string();
        prop_assert!(!name.is_empty() && !name.contains('{'), "{}", name);
        prop_assert_eq!(name.parse::<Kind>().unwrap(), kind);
        prop_assert_eq!(name.to_uppercase().parse::<Kind>().unwrap(), kind);
        #[cfg(feature = "serde")]
        {
            let json = serde_json::to_string(&kind).unwrap();
            prop_assert_eq!(serde_json::from_str::<Kind>(&json).unwrap(), kind);
        }
        prop_assert_eq!(format!("{kind:?}"), name);
    }

    /// A configuration round-trips through serde, and its `Display` names
    /// every key that differs from the defaults.
    #[test]
    fn configs_round_trip(tp in 1u32..9, cp in 1u32..5, pp in 1u32..5, dp in proptest::option::of(1u32..9), n in 1u32..4) {
        let c = Config::new().tp(tp).cp(cp).pp(pp).dp(dp).dist_opt_instances(n);
        #[cfg(feature = "serde")]
        {
            let json = serde_json::to_string(&c).unwrap();
            prop_assert_eq!(serde_json::from_str::<Config>(&json).unwrap(), c.clone());
        }
        let shown = c.to_string();
        prop_assert_eq!(shown.contains("tp="), tp != 1);
        prop_assert_eq!(shown.contains("dist_opt_instances="), n != 1);
    }
}

#[test]
fn the_empty_axis_set_is_no_kind() {
    assert_eq!(Kind::of_axes(AxisSet::EMPTY), None);
    assert_eq!(Kind::mod_ep(AxisSet::EMPTY), None);
    assert!("".parse::<Kind>().is_err());
    assert!("-mod-ep".parse::<Kind>().is_err());
}

/// "Off" has one spelling, and layouts are equal when their resolved
/// configurations are: dp given or derived, hierarchical cp and
/// distributed-optimizer instances absent or off.
#[test]
fn off_has_one_spelling_and_layouts_compare_resolved() {
    let a = Layout::new(&Config::new().tp(2).world_size(8)).unwrap();
    let b = Layout::new(&Config::new().tp(2).dp(4)).unwrap();
    let c = Layout::new(
        &Config::new()
            .tp(2)
            .dp(4)
            .dist_opt_instances(1)
            .hierarchical_cp(Vec::new()),
    )
    .unwrap();
    assert_eq!(a, b);
    assert_eq!(b, c);
    assert_eq!(a.config(), c.config());
    assert_ne!(a, Layout::new(&Config::new().tp(4).dp(2)).unwrap());
}

#[test]
fn main_types_are_send_and_sync() {
    fn both<T: Send + Sync>() {}
    both::<Layout>();
    both::<Groups<'static>>();
    both::<Error>();
    both::<Config>();
    both::<Kind>();
    both::<rank_layout::Group>();
    both::<rank_layout::GroupTable>();
    both::<rank_layout::megatron::RankGenerator>();
    both::<rank_layout::Mesh>();
    both::<rank_layout::Modules>();
    both::<rank_layout::modules::Bridge>();
    both::<rank_layout::modules::BridgeRole>();
    both::<rank_layout::modules::ModulesSpec>();
    both::<rank_layout::megatron::Audit>();
}

/// Layouts hash as they compare: by resolved content.
#[test]
fn layouts_hash_as_they_compare() {
    use std::collections::HashSet;
    let a = Layout::new(&Config::new().tp(2).world_size(8)).unwrap();
    let b = Layout::new(&Config::new().tp(2).dp(4)).unwrap();
    let c = Layout::new(&Config::new().tp(4).world_size(8)).unwrap();
    assert_eq!(a, b);
    let set: HashSet<Layout> = [a, b, c].into_iter().collect();
    assert_eq!(set.len(), 2);
}

/// Every 1.0 name still compiles in 1.x: the mesh types at the root (now
/// at home in `mesh::`, the same types), and the renamed methods,
/// deprecated, answering as their new names.
#[test]
#[allow(deprecated)]
fn names_of_1_0_still_compile() {
    use rank_layout::{
        FlattenSpec, Mesh, MeshCoord, MeshSpec, MeshSplits, MeshSplitsIter, Selection, ViewSpec,
        torchtitan_mesh,
    };
    fn same<T: 'static, U: 'static>() -> bool {
        std::any::TypeId::of::<T>() == std::any::TypeId::of::<U>()
    }
    assert!(same::<Selection, rank_layout::mesh::Selection>());
    assert!(same::<
        MeshCoord<'static>,
        rank_layout::mesh::MeshCoord<'static>,
    >());
    assert!(same::<MeshSpec, rank_layout::mesh::MeshSpec>());
    assert!(same::<ViewSpec, rank_layout::mesh::ViewSpec>());
    assert!(same::<FlattenSpec, rank_layout::mesh::FlattenSpec>());
    assert!(same::<
        MeshSplits<'static>,
        rank_layout::mesh::MeshSplits<'static>,
    >());
    assert!(same::<
        MeshSplitsIter<'static>,
        rank_layout::mesh::MeshSplitsIter<'static>,
    >());
    let _ = torchtitan_mesh;

    let mesh = Mesh::new([("tp", 2), ("dp", 4)]).unwrap();
    let (old, new) = (mesh.coord(5).unwrap(), mesh.placement(5).unwrap());
    assert_eq!(
        old.iter().collect::<Vec<_>>(),
        new.iter().collect::<Vec<_>>()
    );
    let sel = mesh.select("dp").unwrap();
    assert_eq!(
        mesh.split_of(5, sel).unwrap(),
        mesh.split_selected(5, sel).unwrap()
    );
    assert_eq!(
        mesh.groups_of(sel).unwrap().to_vecs(),
        mesh.groups_selected(sel).unwrap().to_vecs()
    );
}
