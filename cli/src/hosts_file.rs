//! `--hosts FILE`: the host table's file, or a directory of `nvidia-smi
//! -q` outputs (one file per host, named after it), read by the library's
//! [`HostsReader`]; what the reading noticed goes to stderr as warnings.

use std::path::Path;

use rank_layout::machine::{Hosts, HostsFormat, HostsReader};

use crate::error::Failure;

/// The host table at `path`, read by `reader`.
///
/// # Errors
/// [`Failure::Message`] naming the file: it does not read, or the
/// library's error.
pub fn read(path: &Path, reader: HostsReader) -> Result<Hosts, Failure> {
    let name = |m: String| Failure::Message(format!("--hosts {}: {m}", path.display()));
    let read = if reader.format() == HostsFormat::NvidiaSmi && path.is_dir() {
        let files = nvidia_smi_files(path).map_err(name)?;
        let pairs: Vec<(&str, &str)> = files
            .iter()
            .map(|(f, t)| (f.as_str(), t.as_str()))
            .collect();
        reader.read_nvidia_smi_files(&pairs)
    } else {
        let text = std::fs::read_to_string(path).map_err(|e| name(e.to_string()))?;
        // One host's output without a header is named after its file.
        reader.file_name(&path.to_string_lossy()).read(&text)
    }
    .map_err(|e| name(e.to_string()))?;
    for note in &read.notes {
        eprintln!("warning: --hosts {}: {note}", path.display());
    }
    Ok(read.hosts)
}

/// The files of `dir` (those whose names start with `.` skipped), each
/// with its text.
fn nvidia_smi_files(dir: &Path) -> Result<Vec<(String, String)>, String> {
    let mut files = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| e.to_string())?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        let Some(file) = path.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        if file.starts_with('.') || !path.is_file() {
            continue;
        }
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        files.push((file.to_string(), text));
    }
    Ok(files)
}
