//! The `nvidia_smi` target: `nvidia-smi -q` outputs.

use rank_layout::machine::{Hosts, HostsFormat, HostsReader};

use super::shared::{check_hosts, check_refusal};

/// The bytes as `nvidia-smi -q` output: as one host's output, as `==>
/// HOST <==` sections or pdsh lines (`Hosts::parse_nvidia_smi`), and
/// through the reader with a file name. Nothing panics, a refusal is a
/// host table error; a table read is canonical; a host's GPUs are at most
/// the lines of the text; a known domain is `<ClusterUUID>.<CliqueId>` (a
/// dot, a number after it); the one host read from the whole text is the
/// same given as a pair, as one section, as pdsh lines of that host, and
/// through the reader named by its file.
pub fn nvidia_smi(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.lines().count();
    let check = |hosts: &Hosts| {
        check_hosts(hosts);
        for h in hosts {
            assert!(h.gpus.is_none_or(|g| g as usize <= lines), "{h:?}");
            assert!(h.keys.len() <= 1, "{h:?}");
            if let Some(d) = h.domain() {
                let (_, clique) = d.rsplit_once('.').unwrap_or_else(|| panic!("{d:?}"));
                assert!(clique.bytes().all(|b| b.is_ascii_digit()), "{d:?}");
            }
        }
    };
    let one = Hosts::from_nvidia_smi(&[("h", text)]);
    match &one {
        Ok(hosts) => check(hosts),
        Err(e) => check_refusal(e),
    }
    let whole = Hosts::parse_nvidia_smi(text);
    match &whole {
        Ok(hosts) => check(hosts),
        Err(e) => check_refusal(e),
    }
    // Through the reader, named by a file: the whole text's reading, or,
    // when the text names no host, the pair's.
    let read = HostsReader::new(HostsFormat::NvidiaSmi)
        .file_name("smi/h.txt")
        .read(text)
        .map(|r| r.hosts);
    match (&read, &whole) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Ok(a), Err(_)) => assert_eq!(Some(a), one.as_ref().ok()),
        (Err(e), _) => check_refusal(e),
    }
    // (A text of blank lines has no line to prefix: its pdsh form names no
    // host, where the pair names one.)
    if !text.contains("==>") && !text.trim().is_empty() {
        let sectioned = Hosts::parse_nvidia_smi(&format!("==> h <==\n{text}\n"));
        let pdsh: String = text.lines().map(|l| format!("h: {l}\n")).collect();
        let prefixed = Hosts::parse_nvidia_smi(&pdsh);
        for other in [sectioned, prefixed] {
            match (&one, other) {
                (Ok(a), Ok(b)) => assert_eq!(a, &b),
                (Err(_), Err(_)) => {}
                (a, b) => panic!("as a pair {a:?}, in another form {b:?}"),
            }
        }
    }
}
