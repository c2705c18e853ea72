//! The fuzz entry of the host table readers: the library's plain table
//! (`rank_layout::machine::Hosts::parse_plain`) and the command line's
//! `--hosts` reader (`rank_layout_cli::hosts_file`, plain or JSON), then a
//! placement on what they read.
//!
//! It lives apart from `entries/` because it needs the CLI package: the
//! CLI package's test `cli/tests/fuzz_corpus.rs` includes this file as a
//! module and replays `corpus/host_table/` through it.

use rank_layout::machine::{Hosts, KindGroups, PlaceOptions, place};
use rank_layout_cli::hosts_file;

/// Past this many hosts (a hostlist such as `n[0-99999]` in a short input)
/// only the reading is checked: the checks after it read the table again
/// several times, which an instrumented build takes seconds for, and
/// libFuzzer would report the input as a timeout.
const LARGE: usize = 4096;

/// The bytes as a host table. Nothing panics; a table read is in the
/// canonical order (every name found by binary search at its own index:
/// sorted, no name twice); a plain table reads back the same once written out; and a
/// placement of a small job on it (when one exists) uses each healthy host
/// at most once and never an unhealthy one.
pub fn host_table(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(hosts) = Hosts::parse_plain(text) {
        if hosts.len() > LARGE {
            return;
        }
        let again = Hosts::parse_plain(&hosts.to_plain())
            .unwrap_or_else(|e| panic!("written out, not read back: {e}: {text:?}"));
        assert_eq!(again, hosts, "{text:?}");
        check(&hosts);
    }
    // The --hosts reader hands plain text to the library's reader (read
    // above): only its JSON is its own.
    let json = matches!(text.trim_start().chars().next(), Some('[' | '{'));
    if let Some(Ok(hosts)) = json.then(|| hosts_file::parse(text)) {
        if hosts.len() <= LARGE {
            check(&hosts);
        }
    }
}

fn check(hosts: &Hosts) {
    // Found by binary search at its own index: in order, and no name twice.
    for (i, h) in hosts.iter().enumerate() {
        assert_eq!(hosts.index_of(&h.name), Some(i), "{} out of order", h.name);
    }
    let healthy = hosts.iter().filter(|h| h.healthy).count().min(8) as u32;
    if healthy == 0 {
        return;
    }
    let gpus = 2;
    let world = healthy * gpus;
    let tp = KindGroups::new(
        "tp",
        (0..world / 2).map(|g| vec![2 * g, 2 * g + 1]).collect(),
    );
    let options = PlaceOptions::default().gpus_per_node(gpus);
    if let Ok(plan) = place(world, &[tp], &[], hosts, &options) {
        let mut used = plan.node_hosts.clone();
        used.sort_unstable();
        used.dedup();
        assert_eq!(used.len(), plan.node_hosts.len(), "a host used twice");
        for &h in &plan.node_hosts {
            assert!(hosts.get(h).is_some_and(|h| h.healthy), "host {h} placed");
        }
    }
}
