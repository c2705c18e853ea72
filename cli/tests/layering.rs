//! The planner's modules are layered: `suggest` stands on `check`, `check`
//! on `ranking`, `ranking` on `spread`; none imports a module above it.

use std::path::Path;

/// The `crate::` modules `file` (under `cli/src`) imports.
fn imports(file: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("use crate::"))
        .map(|rest| {
            rest.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
fn planner_modules_import_only_those_below() {
    let layers = ["suggest", "check", "ranking", "spread"];
    for (i, module) in layers.iter().enumerate() {
        let used = imports(&format!("{module}.rs"));
        for above in &layers[..=i] {
            assert!(
                !used.iter().any(|u| u == above),
                "{module}.rs imports {above}: {used:?}"
            );
        }
    }
    // And the ranking is where both find it.
    assert!(imports("check.rs").contains(&"ranking".to_owned()));
    assert!(imports("suggest.rs").contains(&"ranking".to_owned()));
}
