//! The `nvidia_smi` target: `nvidia-smi -q` outputs.

use rank_layout::machine::Hosts;

use super::shared::{check_hosts, check_refusal};

/// The bytes as `nvidia-smi -q` output, both as one host's output and as
/// `==> HOST <==` sections: nothing panics, a refusal is a host table
/// error; a table read is canonical; a host's GPUs are at most the lines
/// of the text; a known domain is `<ClusterUUID>.<CliqueId>` (a dot, a
/// number after it); the one host read from the whole text is the same
/// whether given as a pair or as one section.
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
    match Hosts::parse_nvidia_smi(text) {
        Ok(hosts) => check(&hosts),
        Err(e) => check_refusal(&e),
    }
    if !text.contains("==>") {
        let sectioned = Hosts::parse_nvidia_smi(&format!("==> h <==\n{text}\n"));
        match (one, sectioned) {
            (Ok(a), Ok(b)) => assert_eq!(a, b),
            (Err(_), Err(_)) => {}
            (a, b) => panic!("as a pair {a:?}, as a section {b:?}"),
        }
    }
}
