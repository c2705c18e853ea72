//! Named meshes on the command line: `--mesh`, `--device-mesh`, `--view`,
//! `--flatten` and the same keys in JSON and TOML files, with every
//! command; the answers are the library's `Mesh`, computed here from the
//! same specification.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

mod common;

use std::collections::BTreeSet;

use common::{fails_with, fails_with_args, json, run, stdout, temp_dir};
use rank_layout::{Mesh, MeshSpec, Topology};
use serde_json::{Value, json as j};

/// The flags of the mesh most tests use: tp=2, cp=2, dp=4, an expert view
/// of ep=4, edp=4 over the same 16 ranks, and dp_cp flattened.
const MESH: &str = "--mesh tp=2,cp=2,dp=4 --view expert:ep=4,edp=4 --flatten dp_cp=dp,cp";

/// The same mesh, built by the library.
fn library_mesh() -> Mesh {
    MeshSpec::parse("tp=2,cp=2,dp=4")
        .unwrap()
        .view("expert:ep=4,edp=4")
        .unwrap()
        .flatten("dp_cp=dp,cp")
        .unwrap()
        .build()
        .unwrap()
}

#[test]
fn groups_are_the_library_meshs_for_every_dim_set() {
    let v = json(&format!("groups --format json {MESH}"));
    let mesh = library_mesh();
    // Every dim, each view's dims and each flatten, in that order.
    let names: Vec<&str> = v["groups"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let expected = ["tp", "cp", "dp", "expert:ep", "expert:edp", "dp_cp"];
    assert_eq!(names, expected, "{v}");
    for name in expected {
        assert_eq!(
            v["groups"][name],
            j!(mesh.groups(name).unwrap().to_vecs()),
            "{name}"
        );
    }
    assert_eq!(v["world_size"], 16);
    assert_eq!(v["mesh"]["dims"], j!({"tp": 2, "cp": 2, "dp": 4}));
    assert_eq!(v["mesh"]["strides"], j!({"tp": 1, "cp": 2, "dp": 4}));
    assert_eq!(v["mesh"]["flattens"], j!({"dp_cp": "cp-dp"}));
    // Worked by hand: cp-dp groups are the ranks that agree on tp.
    assert_eq!(
        v["groups"]["dp_cp"],
        j!([[0, 2, 4, 6, 8, 10, 12, 14], [1, 3, 5, 7, 9, 11, 13, 15]])
    );
    assert_eq!(v["groups"]["expert:ep"][1], j!([4, 5, 6, 7]));

    // The table lists the dim sets in the mesh's order.
    let text = stdout(&format!("groups {MESH}"));
    let headings: Vec<&str> = text
        .lines()
        .filter(|l| l.ends_with("ranks)") && !l.starts_with(' ') && !l.starts_with("mesh"))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(
        headings,
        ["tp", "cp", "dp", "expert:ep", "expert:edp", "dp_cp"],
        "{text}"
    );
}

#[test]
fn kinds_name_any_dim_set_in_any_order() {
    let one = json(&format!("groups --format json {MESH} --kind cp-dp"));
    let other = json(&format!("groups --format json {MESH} --kind dp-cp"));
    assert_eq!(one, other);
    // The name is the mesh's order of the dims.
    assert_eq!(one["groups"].as_object().unwrap().len(), 1);
    assert_eq!(
        one["groups"]["cp-dp"],
        json(&format!("groups --format json {MESH} --kind dp_cp"))["groups"]["dp_cp"]
    );
    let v = json(&format!(
        "groups --format json {MESH} --kind expert:ep --kind tp-dp --kind tp-dp"
    ));
    assert_eq!(
        v["groups"]["expert:ep"],
        j!([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]])
    );
    assert_eq!(v["groups"]["tp-dp"][0], j!([0, 1, 4, 5, 8, 9, 12, 13]));
    assert_eq!(v["groups"].as_object().unwrap().len(), 2);
}

#[test]
fn device_mesh_order_and_rank_offset() {
    // DeviceMesh's last-fastest pp=2,dp=4,tp=2 is first-fastest tp=2,dp=4,pp=2.
    let device = json("groups --format json --device-mesh pp=2,dp=4,tp=2");
    let mesh = json("groups --format json --mesh tp=2,dp=4,pp=2");
    assert_eq!(device["groups"], mesh["groups"]);
    assert_eq!(device["mesh"]["device_mesh"], true);
    assert_eq!(device["mesh"]["written"], "pp=2,dp=4,tp=2");
    assert_eq!(device["groups"]["tp"][0], j!([0, 1]));
    assert_eq!(device["groups"]["pp"][0], j!([0, 8]));
    // A view in DeviceMesh order is read last-fastest too.
    let v = json(
        "groups --format json --device-mesh pp=2,dp=4,tp=2 --view expert:pp,edp=2,ep=4 --kind expert:ep",
    );
    assert_eq!(v["groups"]["expert:ep"][0], j!([0, 1, 2, 3]));
    let text = stdout("groups --device-mesh pp=2,dp=4,tp=2");
    assert!(
        text.starts_with(
            "mesh tp=2 dp=4 pp=2 (first fastest; --device-mesh pp=2,dp=4,tp=2, last fastest)"
        ),
        "{text}"
    );
    // --rank-offset moves the mesh.
    let v = json("groups --format json --mesh tp=2,dp=2 --rank-offset 8 --kind tp");
    assert_eq!(v["groups"]["tp"], j!([[8, 9], [10, 11]]));
    assert_eq!(v["mesh"]["rank_offset"], 8);
}

#[test]
fn rank_card_is_the_library_split_of_every_dim_set() {
    let mesh = library_mesh();
    for rank in [0u32, 5, 13, 15] {
        let v = json(&format!(
            "rank {rank} --format json {MESH} --gpus-per-node 4"
        ));
        assert_eq!(v["rank"], rank);
        let coord = mesh.placement(rank).unwrap();
        for (dim, value) in coord.iter() {
            assert_eq!(v["coord"][dim], value, "rank {rank} {dim}");
        }
        let view = mesh.placement_in(rank, "expert").unwrap();
        for (dim, value) in view.iter() {
            assert_eq!(v["view_coords"]["expert"][dim], value, "rank {rank} {dim}");
        }
        assert_eq!(v["node"], rank / 4);
        assert_eq!(v["local_gpu"], rank % 4);
        for name in ["tp", "cp", "dp", "expert:ep", "expert:edp", "dp_cp"] {
            let split = mesh.split(rank, name).unwrap();
            let got = &v["groups"][name][0];
            assert_eq!(got["color"], split.color, "rank {rank} {name}");
            assert_eq!(got["key"], split.key, "rank {rank} {name}");
            let members = mesh.groups(name).unwrap().to_vecs()[split.color as usize].clone();
            assert_eq!(got["members"], j!(members), "rank {rank} {name}");
            assert_eq!(members[split.key as usize], rank);
        }
    }
    // The card: coordinates in the mesh and the view, then a row per set.
    let text = stdout(&format!("rank 13 {MESH}"));
    assert!(
        text.starts_with(
            "rank 13 of 16 (ranks 0..15, both included), mesh tp=2 cp=2 dp=4 (first fastest)\n\
             view expert: ep=4 edp=4\nflatten dp_cp = cp-dp\n\
             coord     tp=1 cp=0 dp=3\n          expert: ep=1 edp=3\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("\ndp_cp           1      6      8  1 3 5 7 9 11 13 15\n"),
        "{text}"
    );
    // Only the sets asked for.
    let v = json(&format!("rank 13 --format json {MESH} --kind expert:ep"));
    assert_eq!(v["groups"].as_object().unwrap().len(), 1);
    fails_with(
        &format!("rank 16 {MESH}"),
        "rank 16 is outside the mesh (ranks 0..15",
    );
    fails_with(
        "rank 3 --mesh tp=2,dp=2 --rank-offset 4",
        "rank 3 is outside the mesh (ranks 4..7",
    );
}

#[test]
fn check_counts_as_the_library_and_warns_about_tp_cp_ep_etp() {
    let topology = Topology::new(4, None).unwrap();
    let mesh = library_mesh();
    let v = json(&format!("check --format json {MESH} --gpus-per-node 4"));
    for name in ["tp", "cp", "dp", "expert:ep", "expert:edp", "dp_cp"] {
        let s = mesh.spread(name, &topology).unwrap();
        let got = &v["dim_sets"][name];
        assert_eq!(got["groups"], s.groups, "{name}");
        assert_eq!(got["cross_node_groups"], s.cross_node_groups, "{name}");
        assert_eq!(got["max_nodes_per_group"], s.max_nodes_per_group, "{name}");
    }
    // tp, cp and the view's ep stay inside nodes of 4: no warning.
    assert_eq!(v["warnings"], j!([]));
    let text = stdout(&format!("check {MESH} --gpus-per-node 4"));
    assert!(
        text.contains("ok: tp, cp, expert:ep groups stay inside a node"),
        "{text}"
    );
    assert!(
        text.starts_with(
            "16 ranks on 4 nodes of 4 GPUs, mesh tp=2 cp=2 dp=4 (first fastest); view expert: ep=4 edp=4; flatten dp_cp = cp-dp\n"
        ),
        "{text}"
    );

    // tp written last: its groups cross nodes; the fix puts it first.
    let v = json("check --format json --mesh dp=4,tp=8");
    assert_eq!(v["dim_sets"]["tp"]["cross_node_groups"], 4);
    let w = v["warnings"][0].as_str().unwrap();
    assert!(
        w.contains("put tp first in the mesh (--mesh tp=8,dp=4)"),
        "{w}"
    );
    let v = json("check --format json --device-mesh tp=8,dp=4");
    let w = v["warnings"][0].as_str().unwrap();
    assert!(
        w.contains("put tp last in the device mesh (--device-mesh dp=4,tp=8)"),
        "{w}"
    );
    // A view's own etp and ep count as well; a dim it shares (its tp, dp)
    // is the mesh's, not counted twice.
    let args = "--mesh tp=8,dp=2 --view expert:tp,etp=1,ep=1,dp --gpus-per-node 4";
    let text = stdout(&format!("check {args}"));
    assert!(
        text.contains(
            "warnings (dim sets that should stay inside a node: tp, expert:etp, expert:ep):"
        ),
        "{text}"
    );
    let v =
        json("check --format json --mesh tp=8,dp=2 --view expert:etp=2,ep=4,dp --gpus-per-node 4");
    let w: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].starts_with("tp groups span 2 nodes"), "{w:?}");
    assert!(w[1].starts_with("expert:ep groups span 2 nodes"), "{w:?}");
    assert!(w[1].contains("the expert-parallel all-to-all"), "{w:?}");
    // Required sets replace the default; --strict fails on them.
    let out = run(&format!(
        "check --format json {MESH} --gpus-per-node 4 --require-intra-node dp_cp --strict"
    ));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("dp_cp"));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["warnings"][0]
            .as_str()
            .unwrap()
            .starts_with("dp_cp groups"),
        "{v}"
    );
    assert_eq!(
        run(&format!("check {MESH} --gpus-per-node 4 --strict"))
            .status
            .code(),
        Some(0)
    );
}

#[test]
fn suggest_ranks_every_order_of_the_dims_and_skips_those_a_view_rejects() {
    // Three dims of size > 1: six orders, tp inside the node first.
    let v = json("suggest --format json --mesh dp=4,tp=8,cp=2 --gpus-per-node 8");
    let orders = v["orders"].as_array().unwrap();
    assert_eq!(orders.len(), 6);
    assert_eq!(v["invalid"], 0);
    // cp and dp cross nodes in either order after tp: the one closer to
    // the given order (one swap, not two) ranks first.
    assert_eq!(orders[0]["order"], "tp=8,dp=4,cp=2");
    assert_eq!(orders[0]["flag"], "--mesh tp=8,dp=4,cp=2");
    assert_eq!(orders[0]["dim_sets"]["tp"]["cross_node_groups"], 0);
    assert_eq!(
        orders.iter().filter(|o| o["given"] == true).count(),
        1,
        "{orders:?}"
    );
    let all: BTreeSet<String> = orders
        .iter()
        .map(|o| o["order"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(all.len(), 6);
    // Size-1 dims stay where they are written.
    let v = json("suggest --format json --mesh dp=4,x=1,tp=8");
    let orders: Vec<&str> = v["orders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["order"].as_str().unwrap())
        .collect();
    assert_eq!(orders, ["tp=8,x=1,dp=4", "dp=4,x=1,tp=8"]);
    // A view sharing pp pins pp's stride: orders that move pp are skipped.
    let v =
        json("suggest --format json --mesh tp=2,dp=4,pp=2 --view expert:ep=8,pp --gpus-per-node 8");
    assert_eq!(v["orders"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["invalid"], 4);
    let text = stdout("suggest --mesh tp=2,dp=4,pp=2 --view expert:ep=8,pp --gpus-per-node 8");
    assert!(
        text.contains("4 orders skipped: a view or flatten no longer builds, e.g."),
        "{text}"
    );
    assert!(text.contains("\nbest: --mesh tp=2,dp=4,pp=2\n"), "{text}");
    // A device mesh's orders are written as DeviceMesh's.
    let v = json("suggest --format json --device-mesh tp=8,dp=4");
    assert_eq!(v["orders"][0]["flag"], "--device-mesh dp=4,tp=8");
    // Priorities name the mesh's dim sets.
    let v = json("suggest --format json --mesh tp=8,dp=4 --priority dp,tp");
    assert_eq!(v["orders"][0]["order"], "dp=4,tp=8");
    fails_with("suggest --mesh tp=8,dp=4 --priority zz", "zz");
}

#[test]
fn describe_lists_dims_strides_views_flattens_and_costs() {
    let text = stdout(
        "describe --mesh tp=2,cp=2,dp=4,pp=2 --view expert:ep=4,edp=4,pp --flatten dp_cp=dp,cp",
    );
    for line in [
        "mesh tp=2 cp=2 dp=4 pp=2 (first fastest)\n",
        "dims      tp=2 stride 1, cp=2 stride 2, dp=4 stride 4, pp=2 stride 16\n",
        "view      expert: ep=4 stride 1, edp=4 stride 4, pp=2 stride 16 (shares pp with the mesh",
        "flatten   dp_cp = cp-dp",
        "dp_cp                  32  4 groups of 8 ranks\n",
        "listing everything: 256 members in 92 groups of 8 dim sets\n",
    ] {
        assert!(text.contains(line), "{line:?} in\n{text}");
    }
    let v = json(
        "describe --format json --mesh tp=2,cp=2,dp=4,pp=2 --view expert:ep=4,edp=4,pp --flatten dp_cp=dp,cp",
    );
    assert_eq!(
        v["mesh"]["strides"],
        j!({"tp": 1, "cp": 2, "dp": 4, "pp": 16})
    );
    assert_eq!(
        v["mesh"]["views"]["expert"]["strides"],
        j!({"ep": 1, "edp": 4, "pp": 16})
    );
    assert_eq!(v["mesh"]["views"]["expert"]["shared"], j!(["pp"]));
    assert_eq!(
        v["dim_sets"]["dp_cp"],
        j!({"groups": 4, "members": 32, "sizes": [8]})
    );
    assert_eq!(v["listing"]["members"], 256);
    assert_eq!(v["listing"]["dim_sets"], 8);
    assert_eq!(v["last_rank"], 31);
}

#[test]
fn render_draws_a_panel_per_dim_set() {
    let svg = stdout(&format!("render {MESH}"));
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let panels: Vec<&str> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("panel"))
        .map(|n| n.attribute("data-kind").unwrap())
        .collect();
    assert_eq!(
        panels,
        ["tp", "cp", "dp", "expert:ep", "expert:edp", "dp_cp"]
    );
    // Each cell's group is the library's color.
    let mesh = library_mesh();
    for panel in doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("panel"))
    {
        let name = panel.attribute("data-kind").unwrap();
        let cells: Vec<_> = panel
            .descendants()
            .filter(|n| n.attribute("class").is_some_and(|c| c.starts_with("cell")))
            .collect();
        assert_eq!(cells.len(), 16, "{name}");
        for cell in cells {
            let rank: u32 = cell.attribute("data-rank").unwrap().parse().unwrap();
            let group: u32 = cell.attribute("data-group").unwrap().parse().unwrap();
            assert_eq!(
                group,
                mesh.split(rank, name).unwrap().color,
                "{name} {rank}"
            );
        }
    }
    assert!(
        svg.contains("16 ranks: mesh tp=2 cp=2 dp=4 (first fastest); view expert"),
        "mesh title"
    );
    let svg = stdout(&format!("render {MESH} --kind cp-dp"));
    assert!(svg.contains(r#"data-kind="cp-dp""#));
    let html = stdout(&format!("render {MESH} --format html --kind tp"));
    assert!(
        html.contains("expert: ep=1 edp=3"),
        "tooltip with the view's coordinates"
    );
}

#[test]
fn config_files_take_the_mesh_keys() {
    let dir = temp_dir("mesh-configs");
    let json_path = dir.join("mesh.json");
    std::fs::write(
        &json_path,
        r#"{"mesh": "tp=2,cp=2,dp=4", "views": ["expert:ep=4,edp=4"], "flattens": ["dp_cp=dp,cp"],
            "rank_offset": 8, "gpus_per_node": 4}"#,
    )
    .unwrap();
    let toml_path = dir.join("mesh.toml");
    std::fs::write(
        &toml_path,
        "mesh = \"tp=2,cp=2,dp=4\"\nviews = [\"expert:ep=4,edp=4\"]\nflattens = [\"dp_cp=dp,cp\"]\nrank_offset = 8\ngpus_per_node = 4\n",
    )
    .unwrap();
    let device_path = dir.join("device.toml");
    std::fs::write(
        &device_path,
        "device_mesh = \"dp=4,cp=2,tp=2\"\nviews = [\"expert:edp=4,ep=4\"]\nflattens = [\"dp_cp=dp,cp\"]\nrank_offset = 8\ngpus_per_node = 4\n",
    )
    .unwrap();
    for command in [
        "groups --format json",
        "rank 13 --format json",
        "check --format json",
        "describe",
    ] {
        let flags = stdout(&format!(
            "{command} {MESH} --rank-offset 8 --gpus-per-node 4"
        ));
        let from_json = stdout(&format!("{command} --config {}", json_path.display()));
        let from_toml = stdout(&format!("{command} --config {}", toml_path.display()));
        assert_eq!(flags, from_json, "{command}");
        assert_eq!(flags, from_toml, "{command}");
        let device: Value = serde_json::from_str(&stdout(&format!(
            "groups --format json --config {}",
            device_path.display()
        )))
        .unwrap();
        let mesh: Value = serde_json::from_str(&stdout(&format!(
            "groups --format json --config {}",
            json_path.display()
        )))
        .unwrap();
        assert_eq!(device["groups"], mesh["groups"]);
    }
    // A mesh in the flags replaces the file's, with its views and
    // flattens; the other keys stay.
    let v = json(&format!(
        "groups --format json --config {} --mesh tp=4,dp=4 --view e:ep=16",
        toml_path.display()
    ));
    assert_eq!(v["mesh"]["dims"], j!({"tp": 4, "dp": 4}));
    assert_eq!(v["mesh"]["flattens"], j!({}));
    assert_eq!(v["groups"]["e:ep"][0][0], 8);
    let v = json(&format!(
        "groups --format json --config {} --device-mesh dp=4,tp=4",
        device_path.display()
    ));
    assert_eq!(v["mesh"]["views"], j!({}));
    // Views alone in the flags replace the file's views, on its mesh.
    let v = json(&format!(
        "groups --format json --config {} --view e:ep=16",
        toml_path.display()
    ));
    assert_eq!(v["mesh"]["dims"], j!({"tp": 2, "cp": 2, "dp": 4}));
    assert!(
        v["mesh"]["views"]["e"].is_object() && v["mesh"]["views"]["expert"].is_null(),
        "{v}"
    );
    assert!(v["groups"]["dp_cp"].is_array());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_text_output_names_the_mesh() {
    for command in ["groups", "rank 3", "check", "suggest", "describe"] {
        let text = stdout(&format!("{command} {MESH}"));
        assert!(
            text.contains("mesh tp=2 cp=2 dp=4 (first fastest)"),
            "{command}: {text}"
        );
        assert!(
            text.contains("view expert: ep=4 edp=4") || text.contains("view      expert: ep=4"),
            "{command}: {text}"
        );
        assert!(
            text.contains("flatten dp_cp = cp-dp") || text.contains("flatten   dp_cp = cp-dp"),
            "{command}: {text}"
        );
    }
}

#[test]
fn bad_meshes_views_and_flattens_name_the_value() {
    for (args, needles) in [
        // Malformed text.
        (
            "--mesh tp=2,cp",
            &["--mesh", "tp=2,cp", "cp has no size"][..],
        ),
        ("--mesh tp=x", &["--mesh", "tp=x", "\"x\""]),
        ("--mesh tp=2,,dp=2", &["--mesh", "tp=2,,dp=2"]),
        ("--mesh tp=0,dp=2", &["--mesh", "tp=0,dp=2", "size 0"]),
        ("--mesh tp=2,tp=2", &["--mesh", "tp is named twice"]),
        ("--mesh 2tp=2", &["--mesh", "\"2tp\""]),
        ("--device-mesh tp=2,dp", &["--device-mesh", "tp=2,dp"]),
        (
            "--mesh tp=65536,dp=65536",
            &["--mesh", "tp=65536,dp=65536", "overflows"],
        ),
        (
            "--mesh tp=2,dp=4 --view expert",
            &["--view", "expert", "':'"],
        ),
        ("--mesh tp=2,dp=4 --view :ep=8", &["--view", ":ep=8"]),
        (
            "--mesh tp=2,dp=4 --view expert:ep=x",
            &["--view", "expert:ep=x"],
        ),
        (
            "--mesh tp=2,dp=4 --flatten dp_cp",
            &["--flatten", "dp_cp", "'='"],
        ),
        (
            "--mesh tp=2,dp=4 --flatten dp_cp=dp,,tp",
            &["--flatten", "dp_cp=dp,,tp"],
        ),
        (
            "--mesh tp=2,dp=4 --flatten dp_cp=dp,cp",
            &["--flatten", "dp_cp=dp,cp", "unknown dim \"cp\""],
        ),
        (
            "--mesh tp=2,dp=4 --flatten tp=dp",
            &["--flatten", "tp=dp", "named twice"],
        ),
        // A view whose size differs from the mesh's.
        (
            "--mesh tp=2,dp=4 --view expert:ep=3",
            &["--view", "expert:ep=3", "3 ranks", "the mesh 8"],
        ),
        // A shared dim that differs: another size, another stride.
        (
            "--mesh tp=2,dp=4 --view expert:ep=2,tp=4",
            &[
                "--view",
                "expert:ep=2,tp=4",
                "shares dim tp",
                "its groups differ",
            ],
        ),
        (
            "--mesh tp=2,dp=4 --view expert:dp=4,tp=2",
            &[
                "--view",
                "expert:dp=4,tp=2",
                "shares dim dp",
                "stride 1 there",
            ],
        ),
        (
            "--mesh tp=2,dp=4 --view expert:zz,ep=8",
            &["--view", "expert:zz,ep=8", "\"zz\""],
        ),
        // Unknown dims, views and repeats in --kind (every command).
        ("--mesh tp=2,dp=4 --kind zz", &["\"zz\"", "known: tp, dp"]),
        ("--mesh tp=2,dp=4 --kind tp-zz", &["\"zz\""]),
        ("--mesh tp=2,dp=4 --kind tp-tp", &["tp is named twice"]),
        ("--mesh tp=2,dp=4 --kind expert:ep", &["view \"expert\""]),
        (
            "--mesh tp=2,dp=4 --view e:ep=8 --kind e:tp",
            &["\"tp\"", "view e"],
        ),
        // Layout keys with a mesh, and two meshes.
        ("--mesh tp=2,dp=4 --tp 2", &["--mesh tp=2,dp=4", "--tp 2"]),
        (
            "--tp 2 --device-mesh tp=2",
            &["--device-mesh tp=2", "--tp 2"],
        ),
        (
            "--mesh tp=2,dp=4 --world-size 8",
            &["--mesh", "--world-size 8"],
        ),
        (
            "--mesh tp=2,dp=4 --tensor-model-parallel-size 2",
            &["--mesh", "--tensor-model-parallel-size 2"],
        ),
        (
            "--mesh tp=2 --device-mesh tp=2",
            &["--mesh tp=2", "--device-mesh tp=2"],
        ),
        // Views and flattens without a mesh.
        ("--view e:ep=2", &["--view e:ep=2", "needs a mesh"]),
        ("--tp 2 --flatten x=tp", &["--flatten x=tp", "needs a mesh"]),
    ] {
        for command in ["groups", "check"] {
            let err = fails_with(&format!("{command} {args}"), needles[0]);
            for needle in needles {
                assert!(
                    err.contains(needle),
                    "{command} {args}: {err:?} lacks {needle:?}"
                );
            }
        }
    }
    // Every command reads --kind the same way.
    for command in ["rank 0", "check", "render"] {
        fails_with(&format!("{command} --mesh tp=2,dp=4 --kind zz"), "\"zz\"");
    }
    fails_with("check --mesh tp=2,dp=4 --require-intra-node zz", "\"zz\"");
    // --megatron-args gives layout keys: not with a mesh.
    let err = fails_with_args(
        &[
            "groups",
            "--mesh",
            "tp=2,dp=4",
            "--megatron-args",
            "pretrain_gpt.py --tensor-model-parallel-size 2",
        ],
        "--tensor-model-parallel-size 2 (in --megatron-args)",
    );
    assert!(err.contains("--mesh tp=2,dp=4"), "{err}");
    // And an unexpanded variable in it is named first.
    fails_with_args(
        &[
            "groups",
            "--mesh",
            "tp=2,dp=4",
            "--megatron-args",
            "--tensor-model-parallel-size $TP",
        ],
        "$TP",
    );
}

#[test]
fn bad_mesh_keys_in_files_name_the_file_and_the_value() {
    let dir = temp_dir("mesh-bad-files");
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let p = write("bad.toml", "mesh = \"tp=2,cp\"\n");
    let err = fails_with(&format!("groups --config {p}"), "tp=2,cp");
    assert!(err.contains("mesh (in ") && err.contains(&p), "{err}");
    let p = write(
        "view.toml",
        "mesh = \"tp=2,dp=4\"\nviews = [\"e:ep=8\", \"f:ep=3\"]\n",
    );
    let err = fails_with(&format!("groups --config {p}"), "f:ep=3");
    assert!(err.contains("views[1] (in ") && err.contains(&p), "{err}");
    let p = write("list.json", r#"{"mesh": "tp=2", "views": "e:ep=2"}"#);
    let err = fails_with(
        &format!("groups --config {p}"),
        "views = \"e:ep=2\" is not a list",
    );
    assert!(err.contains(&p), "{err}");
    let p = write("number.json", r#"{"mesh": 4}"#);
    fails_with(&format!("groups --config {p}"), "mesh = 4 is not a string");
    let p = write("both.toml", "mesh = \"tp=2\"\ntp = 2\n");
    let err = fails_with(&format!("groups --config {p}"), "cannot be given together");
    assert!(
        err.contains("mesh = \"tp=2\"") && err.contains("tp = 2"),
        "{err}"
    );
    let p = write("alone.toml", "views = [\"e:ep=2\"]\n");
    fails_with(&format!("groups --config {p}"), "needs a mesh");
    // A mesh key in the file with a layout flag names both.
    let p = write("mesh.toml", "mesh = \"tp=2,dp=4\"\n");
    let err = fails_with(&format!("groups --config {p} --cp 2"), "--cp 2");
    assert!(err.contains("mesh = \"tp=2,dp=4\""), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_empty_mesh_is_the_librarys_error() {
    // Refused as the library refuses `Mesh::new([])` (and Python `Mesh([])`),
    // not as a parse error of the text.
    const NO_DIMS: &str = "the mesh has no dims: give at least one (one rank is dp=1)";
    for flag in ["--mesh", "--device-mesh"] {
        let err = fails_with_args(&["groups", flag, ""], NO_DIMS);
        assert!(err.contains(flag), "{err}");
        fails_with_args(&["describe", flag, " "], NO_DIMS);
    }
    let dir = temp_dir("empty-mesh");
    let path = dir.join("mesh.toml");
    std::fs::write(&path, "mesh = \"\"\n").unwrap();
    let p = path.display().to_string();
    let err = fails_with_args(&["groups", "--config", &p], NO_DIMS);
    assert!(err.contains(&p), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
