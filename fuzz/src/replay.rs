//! The corpus replay both replay tests share: `tests/fuzz_corpus.rs` (the
//! library's targets) and `cli/tests/fuzz_corpus.rs` (`cli_config`) include
//! this file as a module. It is not a module of the fuzz crate.

use std::path::Path;

/// Every file of `<corpus>/<target>/` through `entry`; fails when the
/// directory is missing or empty, so the test cannot pass vacuously.
pub fn replay(corpus: &str, target: &str, entry: fn(&[u8])) {
    let dir = Path::new(corpus).join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    for path in &files {
        let data = std::fs::read(path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if let Err(panic) = std::panic::catch_unwind(|| entry(&data)) {
            eprintln!("{target}: corpus file {name} ({} bytes) failed", data.len());
            std::panic::resume_unwind(panic);
        }
    }
    eprintln!("{target}: {} corpus files replayed", files.len());
}
