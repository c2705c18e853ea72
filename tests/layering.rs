//! The library's file-level import graph (`src/`): data flows one way,
//! configuration -> shape -> plan -> groups, with the consumers on top.
//! No import circle but `error` <-> `kind` (an error names a kind; a kind's
//! parser returns the error); a module file's edges into its own folder
//! (declaring and re-exporting its parts) are containment, not use. Nothing
//! below `layout/` imports it, and the top of the crate (`machine/`,
//! `relayout/`, `reshard/`, `mpi/`) is imported only by what stands above.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

#[path = "common/imports.rs"]
mod imports;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// `src/`'s graph without containment edges (`a/mod.rs` or `lib.rs` to a
/// file inside its folder).
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = imports::graph(&src, "lib.rs");
    for (file, used) in graph.iter_mut() {
        let folder = match file.as_str() {
            "lib.rs" => Some(""),
            f => f.strip_suffix("mod.rs"),
        };
        if let Some(folder) = folder {
            used.retain(|u| !u.starts_with(folder));
        }
    }
    graph
}

/// The top folder (or root file) a file is in: `plan` for
/// `plan/spread.rs`, `lib.rs` for `lib.rs`.
fn top(file: &str) -> &str {
    file.split('/').next().unwrap_or(file)
}

#[test]
fn no_import_circle_but_error_and_kind() {
    let graph = graph();
    assert!(graph.len() > 100, "{}", graph.len());
    let circles: Vec<Vec<String>> = imports::components(&graph)
        .into_iter()
        .filter(|c| c.len() > 1 && c != &["error.rs", "kind.rs"])
        .collect();
    assert!(circles.is_empty(), "import circles: {circles:?}");
}

#[test]
fn the_crate_is_layered() {
    let graph = graph();
    // Who may import each upper folder (besides itself and `lib.rs`).
    let above: [(&str, &[&str]); 5] = [
        ("mpi", &[]),
        ("reshard", &["mpi"]),
        ("relayout", &["reshard", "mpi"]),
        ("machine", &["relayout", "reshard", "mpi"]),
        (
            "layout",
            &[
                "mesh",
                "modules",
                "megatron",
                "machine",
                "relayout",
                "reshard",
                "mpi",
                "serde_layout.rs",
            ],
        ),
    ];
    let mut checked = 0;
    for (file, used) in &graph {
        let from = top(file);
        for u in used {
            let to = top(u);
            for (folder, users) in &above {
                if to == *folder && from != *folder && from != "lib.rs" {
                    assert!(users.contains(&from), "{file} imports {u}");
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 20, "only {checked} imports of upper folders seen");
}
