//! The CLI's file-level import graph: every path of each file under
//! `cli/src` that names something of this crate (`crate::...`,
//! `super::...`, `self::...`, a path through a module the file declares
//! with `mod`, or through a name it imported), in `use` lines, `use`
//! groups (`use crate::{a, b::c}`) and inline code alike, gives an edge
//! from the file to the file that defines the module. The graph has no
//! circle of more than two files; no command file (`commands/*.rs`)
//! imports another (only `suggest` may use `check`); every command file
//! owns its flags (`XArgs`) and its `run`, is one line of the list in
//! `commands/mod.rs`, and `args.rs` holds only the shared flag groups; and
//! the planner is layered: `report/suggest` stands on `report/check`,
//! which stands on `ranking`, which stands on `spread`, which stands on
//! `target`.
// Test code may unwrap, expect, panic and index: the workspace's clippy
// restriction lints (Cargo.toml) are for the library and the command.
#![allow(clippy::restriction)]

#[path = "common/imports.rs"]
mod imports;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use imports::{code_only, components, tokens, use_tree};

/// `cli/src`.
fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The files each file under `cli/src` imports (itself left out).
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    imports::graph(&src(), "main.rs")
}

#[test]
fn the_reader_sees_inline_paths_groups_and_super() {
    let code = code_only(
        "use crate::{a, b::{c, d::E}};\n// crate::commented::Out\nlet s = \"crate::quoted\";\nlet r = r#\"crate::raw\"#; let ch = '\"';\nfn f() { crate::inline::g(); super::up::h(); }\n",
    );
    assert!(!code.contains("commented") && !code.contains("quoted") && !code.contains("raw"));
    let t = tokens(&code);
    let mut i = 1;
    let mut leaves = Vec::new();
    use_tree(&t, &mut i, Vec::new(), &mut leaves);
    let paths: Vec<String> = leaves.iter().map(|(p, _)| p.join("::")).collect();
    assert_eq!(paths, ["crate::a", "crate::b::c", "crate::b::d::E"]);
    assert!(t.windows(3).any(|w| w[0] == "crate" && w[2] == "inline"));
    assert!(t.windows(3).any(|w| w[0] == "super" && w[2] == "up"));
}

#[test]
fn no_import_circle_of_more_than_two_files() {
    let graph = graph();
    assert!(graph.len() > 20, "{graph:?}");
    let large: Vec<Vec<String>> = components(&graph)
        .into_iter()
        .filter(|c| c.len() > 2)
        .collect();
    assert!(
        large.is_empty(),
        "import circles of more than two files: {large:?}"
    );
}

#[test]
fn command_files_import_no_other_command_file() {
    let graph = graph();
    let commands: Vec<&String> = graph
        .keys()
        .filter(|f| f.starts_with("commands/") && f.as_str() != "commands/mod.rs")
        .collect();
    assert!(!commands.is_empty(), "no command files under src/commands/");
    for file in &commands {
        for used in &graph[*file] {
            let allowed = file.as_str() == "commands/suggest.rs" && used == "commands/check.rs";
            assert!(
                !used.starts_with("commands/") || allowed,
                "{file} imports {used}"
            );
        }
    }
}

/// `groups` -> `GroupsArgs`.
fn flags_of(stem: &str) -> String {
    let mut name = String::new();
    for part in stem.split('_') {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            name.extend(first.to_uppercase());
            name.push_str(chars.as_str());
        }
    }
    name + "Args"
}

#[test]
fn every_command_file_owns_its_flags_and_its_run() {
    let dir = src().join("commands");
    let list = code_only(&std::fs::read_to_string(dir.join("mod.rs")).unwrap());
    let mut stems = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if stem == "mod" {
            continue;
        }
        let text = code_only(&std::fs::read_to_string(&path).unwrap());
        let flags = flags_of(&stem);
        assert!(
            text.contains(&format!("pub struct {flags} ")),
            "commands/{stem}.rs has no `pub struct {flags}`"
        );
        assert!(
            text.contains(&format!("pub fn run(args: &{flags})")),
            "commands/{stem}.rs has no `pub fn run(args: &{flags})`"
        );
        // One line of the list: its module, variant and flags.
        let line = list
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("mod {stem};")))
            .unwrap_or_else(|| panic!("commands/mod.rs does not list {stem}"));
        assert!(line.contains(&format!("{stem}::{flags}")), "{line}");
        stems.push(stem);
    }
    assert!(stems.len() >= 10, "{stems:?}");
    // args.rs holds the shared groups only: no subcommand, no command's
    // flags.
    let args = code_only(&std::fs::read_to_string(src().join("args.rs")).unwrap());
    let mut types: Vec<&str> = args
        .split("pub struct ")
        .skip(1)
        .chain(args.split("pub enum ").skip(1))
        .filter_map(|t| t.split(|c: char| !c.is_alphanumeric()).next())
        .collect();
    types.sort_unstable();
    assert_eq!(
        types,
        [
            "Format",
            "HostsReadArgs",
            "MachineArgs",
            "OutputArgs",
            "SetupArgs"
        ]
    );
    assert!(!args.contains("Subcommand"));
}

#[test]
fn planner_modules_import_only_those_below() {
    let graph = graph();
    let layers = [
        "report/suggest.rs",
        "report/check.rs",
        "ranking.rs",
        "spread.rs",
        "target.rs",
    ];
    for (i, file) in layers.iter().enumerate() {
        let used = &graph[*file];
        for above in &layers[..i] {
            assert!(!used.contains(*above), "{file} imports {above}: {used:?}");
        }
    }
    // And the ranking is where both find it.
    assert!(graph["report/check.rs"].contains("ranking.rs"));
    assert!(graph["report/suggest.rs"].contains("ranking.rs"));
    // And every report takes the target, never builds its own.
    for report in [
        "report/check.rs",
        "report/suggest.rs",
        "report/describe.rs",
        "report/groups.rs",
        "report/rank.rs",
        "render/mod.rs",
    ] {
        assert!(graph[report].contains("target.rs"), "{report}");
    }
}
