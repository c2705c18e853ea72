//! Named meshes: every dim set and view partitions the ranks exactly as the
//! definition says (checked against a brute force over coordinates), fill,
//! table and per-rank answers agree with the enumeration, a view's shared
//! dims are accepted exactly when their groups are equal, rank maps move
//! ranks and nothing else, and a layout's kinds are its mesh's dim sets.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

use proptest::prelude::*;
use rank_layout::{Config, Error, ExpertLayout, Kind, Layout, Mesh, MeshSpec, Split};

/// Coordinates of position `p` in sizes `s`, first fastest.
fn coords(mut p: u64, sizes: &[u32]) -> Vec<u64> {
    sizes
        .iter()
        .map(|s| {
            let c = p % u64::from(*s);
            p /= u64::from(*s);
            c
        })
        .collect()
}

/// The mixed-radix number of the coordinates at `which`, first fastest.
fn number(c: &[u64], sizes: &[u32], which: &[bool]) -> u64 {
    let (mut n, mut w) = (0, 1);
    for ((c, s), pick) in c.iter().zip(sizes).zip(which) {
        if *pick {
            n += c * w;
            w *= u64::from(*s);
        }
    }
    n
}

/// The groups of the dims `which` by definition: positions agreeing on the
/// other dims, grouped by their number, ordered by the selected dims'.
fn brute(sizes: &[u32], which: &[bool], rank: impl Fn(u64) -> u32) -> Vec<Vec<u32>> {
    let world: u64 = sizes.iter().map(|s| u64::from(*s)).product();
    let others: Vec<bool> = which.iter().map(|w| !w).collect();
    let size: u64 = sizes
        .iter()
        .zip(which)
        .filter(|(_, w)| **w)
        .map(|(s, _)| u64::from(*s))
        .product();
    let mut groups = vec![vec![0u32; size as usize]; (world / size) as usize];
    for p in 0..world {
        let c = coords(p, sizes);
        groups[number(&c, sizes, &others) as usize][number(&c, sizes, which) as usize] = rank(p);
    }
    groups
}

fn names(n: usize) -> Vec<String> {
    ["a", "b", "c", "d", "e", "f"]
        .iter()
        .take(n)
        .map(|s| s.to_string())
        .collect()
}

fn mesh_of(sizes: &[u32], offset: u32) -> Mesh {
    let n = names(sizes.len());
    Mesh::new(n.iter().cloned().zip(sizes.iter().copied()))
        .unwrap()
        .with_rank_offset(offset)
        .unwrap()
}

fn spec(n: &[String], which: &[bool]) -> String {
    n.iter()
        .zip(which)
        .filter(|(_, w)| **w)
        .map(|(n, _)| n.as_str())
        .collect::<Vec<_>>()
        .join("-")
}

fn sizes() -> impl Strategy<Value = Vec<u32>> {
    proptest::collection::vec(1u32..=5, 1..=6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every non-empty dim set, its groups by definition; `fill`, `table`
    /// and every rank's split agree with them; a split plan answers every
    /// dim set at once.
    #[test]
    fn every_dim_set_is_its_definition(sizes in sizes(), offset in 0u32..100) {
        let mesh = mesh_of(&sizes, offset);
        let n = names(sizes.len());
        let mut specs = Vec::new();
        for bits in 1u32..(1 << sizes.len()) {
            let which: Vec<bool> = (0..sizes.len()).map(|i| bits & (1 << i) != 0).collect();
            let s = spec(&n, &which);
            let want = brute(&sizes, &which, |p| offset + p as u32);
            let groups = mesh.groups(&s).unwrap();
            prop_assert_eq!(groups.len(), want.len());
            prop_assert_eq!(groups.clone().to_vecs(), want.clone(), "{}", s);
            let flat: Vec<u32> = want.iter().flatten().copied().collect();
            let mut buf = vec![0; flat.len()];
            prop_assert_eq!(groups.clone().fill(&mut buf).unwrap(), flat.len());
            prop_assert_eq!(&buf, &flat);
            let table = groups.table().unwrap();
            prop_assert_eq!(table.members(), &flat[..]);
            for (color, g) in want.iter().enumerate() {
                for (key, r) in g.iter().enumerate() {
                    prop_assert_eq!(mesh.split(*r, &s).unwrap(), Split { color: color as u32, key: key as u32 });
                }
            }
            specs.push(s);
        }
        let refs: Vec<&str> = specs.iter().map(String::as_str).collect();
        let plan = mesh.split_plan(&refs).unwrap();
        for r in offset..offset + mesh.world_size() {
            let all: Vec<Split> = plan.splits(r).unwrap().collect();
            let one: Vec<Split> = refs.iter().map(|s| mesh.split(r, s).unwrap()).collect();
            prop_assert_eq!(all, one);
            let c = mesh.placement(r).unwrap();
            let want = coords(u64::from(r - offset), &sizes);
            for (i, name) in n.iter().enumerate() {
                prop_assert_eq!(c.get(name).map(u64::from), Some(want[i]));
            }
        }
        prop_assert!(mesh.split(offset + mesh.world_size(), refs[0]).is_err());
    }

    /// A view over the same ranks: its dim sets are its definition too, and
    /// a shared dim is accepted exactly when its groups in the view equal
    /// its groups in the mesh.
    #[test]
    fn views_and_shared_dims(sizes in sizes(), view in sizes(), pick in any::<prop::sample::Index>()) {
        let world: u32 = sizes.iter().product();
        let view_world: u32 = view.iter().product();
        let mesh = mesh_of(&sizes, 0);
        let vn: Vec<String> = ["p", "q", "r", "s", "t", "u"].iter().take(view.len()).map(|s| s.to_string()).collect();
        let dims: Vec<(&str, u32)> = vn.iter().map(String::as_str).zip(view.iter().copied()).collect();
        let made = mesh.clone().view("v", &dims, &[]);
        if view_world != world {
            prop_assert!(matches!(made, Err(Error::ViewWorld { .. })), "{:?}", made);
            return Ok(());
        }
        let m = made.unwrap();
        for bits in 1u32..(1 << view.len()) {
            let which: Vec<bool> = (0..view.len()).map(|i| bits & (1 << i) != 0).collect();
            let s = format!("v:{}", spec(&vn, &which));
            prop_assert_eq!(m.groups(&s).unwrap().to_vecs(), brute(&view, &which, |p| p as u32));
        }
        // Share a dim of the mesh: rename one view dim to a mesh dim's name.
        let base_i = pick.index(sizes.len());
        let view_i = pick.index(view.len());
        let name = names(sizes.len())[base_i].clone();
        let mut renamed: Vec<(String, u32)> = vn.iter().cloned().zip(view.iter().copied()).collect();
        if renamed.iter().enumerate().any(|(i, (n, _))| i != view_i && *n == name) {
            return Ok(());
        }
        renamed[view_i].0 = name.clone();
        let dims: Vec<(&str, u32)> = renamed.iter().map(|(n, s)| (n.as_str(), *s)).collect();
        let shared = mesh.clone().view("v", &dims, &[name.as_str()]);
        let one = |k: usize, len: usize| (0..len).map(|i| i == k).collect::<Vec<bool>>();
        let equal = view[view_i] == sizes[base_i]
            && brute(&sizes, &one(base_i, sizes.len()), |p| p as u32) == brute(&view, &one(view_i, view.len()), |p| p as u32);
        prop_assert_eq!(shared.is_ok(), equal, "{:?}", shared.err());
    }

    /// A rank map moves ranks, nothing else: every group is the mapped
    /// group of the mesh without it, and every answer follows.
    #[test]
    fn rank_maps(sizes in sizes(), seed in any::<u64>(), offset in 0u32..50) {
        let world: u32 = sizes.iter().product();
        let mut map: Vec<u32> = (0..world).collect();
        let mut x = seed | 1;
        for i in (1..map.len()).rev() {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            map.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let plain = mesh_of(&sizes, 0);
        let mapped = mesh_of(&sizes, offset).with_rank_map(map.clone()).unwrap();
        let n = names(sizes.len());
        for bits in 1u32..(1 << sizes.len()) {
            let which: Vec<bool> = (0..sizes.len()).map(|i| bits & (1 << i) != 0).collect();
            let s = spec(&n, &which);
            let want: Vec<Vec<u32>> = plain.groups(&s).unwrap().map(|g| g.iter().map(|p| offset + map[p as usize]).collect()).collect();
            let groups = mapped.groups(&s).unwrap();
            prop_assert_eq!(groups.clone().to_vecs(), want.clone());
            let mut buf = vec![0; world as usize];
            groups.fill(&mut buf).unwrap();
            prop_assert_eq!(buf, want.concat());
            for (color, g) in want.iter().enumerate() {
                for (key, r) in g.iter().enumerate() {
                    prop_assert_eq!(mapped.split(*r, &s).unwrap(), Split { color: color as u32, key: key as u32 });
                }
            }
        }
    }

    /// A layout's kinds of axes are its mesh's dim sets (folded and nested).
    #[test]
    fn layout_kinds_are_mesh_dim_sets(tp in 1u32..4, cp in 1u32..3, ep in 1u32..3, pp in 1u32..3, k in 1u32..3, nested in any::<bool>(), offset in 0u32..9) {
        let c = Config::new().tp(tp).cp(cp).ep(ep).pp(pp).dp(ep * k).rank_offset(offset)
            .expert_layout(if nested { ExpertLayout::Nested } else { ExpertLayout::Folded });
        let Ok(layout) = Layout::new(&c) else { return Ok(()) };
        let mesh = layout.mesh().unwrap();
        for kind in layout.kinds() {
            let name = kind.to_string();
            let expert_axes: &[&str] = if nested { &["ep"] } else { &["etp", "ep", "edp"] };
            let spec = if let Some(base) = name.strip_suffix("-mod-ep") {
                format!("expert:{}", base.replace("dp", "edp"))
            } else if kind.axis_set().is_some() {
                if name.split('-').any(|a| expert_axes.contains(&a)) {
                    let mut s = format!("expert:{name}");
                    if nested { s = s.replace("-dp", "-edp").replace(":dp", ":edp"); }
                    s
                } else {
                    name.clone()
                }
            } else {
                continue;
            };
            prop_assert_eq!(mesh.groups(&spec).unwrap().to_vecs(), layout.groups(*kind).unwrap().to_vecs(), "{} {}", name, spec);
        }
    }
}

#[test]
fn megatron_example_and_device_mesh_order() {
    // HyperCommGrid / Megatron order: tp fastest.
    let mesh = Mesh::from_hyper_comm_grid(&[2, 2, 4], &["tp", "cp", "dp"], 8).unwrap();
    assert_eq!(
        mesh.groups("tp").unwrap().next().unwrap().to_vec(),
        vec![8, 9]
    );
    assert_eq!(
        mesh.groups("dp-cp").unwrap().next().unwrap().to_vec(),
        vec![8, 10, 12, 14, 16, 18, 20, 22]
    );
    // DeviceMesh order: the last dim fastest; names keep their meaning.
    let dm = Mesh::from_device_mesh(&[4, 2, 2], &["dp", "cp", "tp"]).unwrap();
    for kind in ["tp", "cp", "dp", "cp-dp", "tp-dp"] {
        assert_eq!(
            dm.groups(kind).unwrap().to_vecs(),
            Mesh::new([("tp", 2), ("cp", 2), ("dp", 4)])
                .unwrap()
                .groups(kind)
                .unwrap()
                .to_vecs(),
            "{kind}"
        );
    }
}

#[test]
fn bad_meshes_are_typed_errors_naming_the_value() {
    let msg = |r: Result<Mesh, Error>| r.unwrap_err().to_string();
    assert!(msg(Mesh::new([("tp", 2), ("tp", 2)])).contains("tp is named twice"));
    assert!(msg(Mesh::new([("", 2)])).contains("\"\""));
    assert!(msg(Mesh::new([("dp-cp", 2)])).contains("\"dp-cp\""));
    assert!(msg(Mesh::new([("tp", 0)])).contains("dim tp has size 0"));
    assert!(msg(Mesh::new([("a", 65536), ("b", 65536)])).contains("overflows"));
    assert!(msg(Mesh::new((0..9).map(|i| (format!("d{i}"), 1)))).contains("9 dims"));
    let m = Mesh::new([("tp", 2), ("dp", 2)]).unwrap();
    assert!(msg(m.clone().with_rank_offset(u32::MAX)).contains("rank_offset (4294967295)"));
    assert!(
        msg(m.clone().with_rank_map(vec![0, 1, 2])).contains("has 3 entries, the mesh 4 ranks")
    );
    assert!(msg(m.clone().with_rank_map(vec![0, 1, 2, 9])).contains("entry 3 is 9"));
    assert!(msg(m.clone().with_rank_map(vec![0, 1, 1, 2])).contains("holds 1 twice"));
    assert!(msg(m.clone().view("v", &[("x", 3)], &[])).contains("view v has 3 ranks"));
    assert!(msg(m.clone().view("tp", &[("x", 4)], &[])).contains("tp is named twice"));
    assert!(msg(m.clone().view("v", &[("x", 2), ("tp", 2)], &["tp"])).contains("shares dim tp"));
    assert!(
        msg(m.clone().view("v", &[("x", 4)], &["tp"])).contains("unknown dim \"tp\" in view v")
    );
    assert!(
        msg(m.clone().flatten("f", "tp-zz"))
            .contains("unknown dim \"zz\" in the mesh (known: tp, dp)")
    );
    assert!(msg(m.clone().flatten("f", "x:tp")).contains("unknown view \"x\""));
    assert!(m.groups("tp-tp").is_err());
    assert!(m.groups("").is_err());
    assert!(
        m.split(4, "tp")
            .unwrap_err()
            .to_string()
            .contains("ranks 0..3, both included")
    );
    for bad in ["tp=2,cp", "tp=x", "=2", "tp=2,,dp=2", "tp=-1"] {
        assert!(
            matches!(MeshSpec::parse(bad), Err(Error::BadSpec { .. })),
            "{bad}"
        );
    }
    assert!(matches!(
        MeshSpec::parse("tp=2").unwrap().view("expert"),
        Err(Error::BadSpec { .. })
    ));
    assert!(matches!(
        MeshSpec::parse("tp=2").unwrap().flatten("f"),
        Err(Error::BadSpec { .. })
    ));
    assert!(
        Layout::new(&Config::new().tp(2).encoder_tp(1))
            .unwrap()
            .mesh()
            .is_err()
    );
    let _ = Kind::TP;
}

#[test]
fn specs_build_meshes_with_views_and_flattens() {
    let mesh = MeshSpec::parse("tp=2,cp=2,dp=4")
        .unwrap()
        .view("expert:etp=1,ep=4,edp=4")
        .unwrap()
        .flatten("dp_cp=dp,cp")
        .unwrap()
        .flatten("moe=expert:ep,edp")
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(
        mesh.groups("dp_cp").unwrap().to_vecs(),
        mesh.groups("cp-dp").unwrap().to_vecs()
    );
    assert_eq!(
        mesh.groups("expert:ep").unwrap().next().unwrap().to_vec(),
        vec![0, 1, 2, 3]
    );
    assert_eq!(mesh.groups("moe").unwrap().len(), 1);
    // A shared dim without a size takes the mesh's, and is checked.
    let ok = MeshSpec::parse("tp=2,dp=2,pp=2")
        .unwrap()
        .view("x:ep=4,pp")
        .unwrap()
        .build();
    assert!(ok.is_ok());
    let bad = MeshSpec::parse("tp=2,dp=2,pp=2")
        .unwrap()
        .view("x:pp,ep=4")
        .unwrap()
        .build();
    assert!(
        matches!(bad, Err(Error::SharedDimDiffers { .. })),
        "{bad:?}"
    );
    let dm = MeshSpec::parse_device_mesh("dp=4,tp=2")
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(
        dm.groups("tp").unwrap().next().unwrap().to_vec(),
        vec![0, 1]
    );
}

#[test]
fn an_empty_mesh_is_refused_with_one_error() {
    // `Mesh::new([])` made a mesh of no dims (one rank) while the command
    // line refused `--mesh ""` as a parse error: the rule is the library's,
    // one error, whichever way the mesh is written.
    const NO_DIMS: &str = "the mesh has no dims: give at least one (one rank is dp=1)";
    let none: [(&str, u32); 0] = [];
    let errors = [
        Mesh::new(none).unwrap_err(),
        Mesh::from_device_mesh(&[], &[]).unwrap_err(),
        Mesh::from_hyper_comm_grid(&[], &[], 4).unwrap_err(),
        MeshSpec::parse("").unwrap_err(),
        MeshSpec::parse("  ").unwrap_err(),
        MeshSpec::parse_device_mesh("").unwrap_err(),
        MeshSpec::default().build().unwrap_err(),
    ];
    for e in errors {
        assert!(matches!(e, Error::NoDims { .. }), "{e:?}");
        assert_eq!(e.to_string(), NO_DIMS);
    }
    // A view of no dims is refused the same way.
    let one = Mesh::new([("dp", 1)]).unwrap();
    let e = one.view("v", &[], &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "view v has no dims: give at least one (one rank is dp=1)"
    );
    // An empty part is still a parse error naming the text.
    assert!(matches!(
        MeshSpec::parse("tp=2,"),
        Err(Error::BadSpec { .. })
    ));
}
