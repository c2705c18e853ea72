//! The `host_table` target: the plain and the JSON host tables, read by
//! format and with a nodelist, then a placement on what they read.

use rank_layout::machine::{Hosts, HostsFormat, KindGroups, PlaceOptions, Placed};

use super::shared::{check_hosts, check_refusal, too_many_names};

/// Past this many hosts only the reading is checked: the checks after it
/// read the table again several times, which an instrumented build takes
/// seconds for, and libFuzzer would report the input as a timeout.
const LARGE: usize = 4096;

/// The bytes (unless their hostlists stand for too many names) as a host
/// table, plain and JSON (`Hosts::parse_plain`,
/// `Hosts::parse_json`, and `Hosts::parse` with `auto`, which must agree
/// with the one the text looks like). Nothing panics; a refusal is a host
/// table error; a table read is canonical (every name found by binary
/// search at its own index: sorted, no name twice), its names and keys
/// free of control characters; a plain table reads back the same once
/// written out; restricted to its first and last hosts (a nodelist) it is
/// those hosts; and a placement of a small job on it (when one exists)
/// uses each healthy host at most once and never an unhealthy one.
pub fn host_table(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // A short hostlist may stand for up to 1,048,576 hosts, which an
    // instrumented build reads in tens of seconds (the limit is the
    // library's unit tests'): skipped, as by the topology targets.
    if too_many_names(text) {
        return;
    }
    let plain = Hosts::parse_plain(text);
    let json = Hosts::parse_json(text);
    let auto = Hosts::parse(text, HostsFormat::Auto);
    let looks_json = matches!(text.trim_start().chars().next(), Some('[' | '{'));
    let expected = if looks_json { &json } else { &plain };
    match (&auto, expected) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (a, b) => panic!("auto {a:?}, by its look {b:?}"),
    }
    for read in [&plain, &json] {
        match read {
            Ok(hosts) if hosts.len() <= LARGE => check(hosts),
            Ok(_) => {}
            Err(e) => check_refusal(e),
        }
    }
    if let Ok(hosts) = &plain {
        if hosts.len() <= LARGE {
            let again = Hosts::parse_plain(&hosts.to_plain())
                .unwrap_or_else(|e| panic!("written out, not read back: {e}: {text:?}"));
            assert_eq!(&again, hosts, "{text:?}");
        }
    }
}

// `PlaceOptions` is built field by field, as a `#[non_exhaustive]` struct
// is outside its crate.
#[allow(clippy::field_reassign_with_default)]
fn check(hosts: &Hosts) {
    check_hosts(hosts);
    // A nodelist of its first and last hosts keeps exactly them (a name
    // with hostlist syntax reads as another list).
    if let (Some(first), Some(last)) = (hosts.get(0), hosts.get(hosts.len().wrapping_sub(1))) {
        let plain = |n: &str| !n.contains(['[', ']', ','].as_slice());
        if plain(&first.name) && plain(&last.name) {
            let list = format!("{},{}", first.name, last.name);
            let mut want = vec![first.clone()];
            if last.name != first.name {
                want.push(last.clone());
            }
            match hosts.restrict_to(&list) {
                Ok(kept) => assert_eq!(kept.iter().cloned().collect::<Vec<_>>(), want),
                // The same name twice (a table of one host).
                Err(e) => {
                    check_refusal(&e);
                    assert_eq!(first.name, last.name, "{e}");
                }
            }
        }
    }
    let healthy = hosts.iter().filter(|h| h.healthy).count().min(8) as u32;
    if healthy == 0 {
        return;
    }
    let gpus = 2;
    let world = healthy * gpus;
    let tp = KindGroups::of_layout(
        &rank_layout::Layout::new(&rank_layout::Config::new().tp(2).world_size(world))
            .expect("tp 2 of an even world"),
        rank_layout::Kind::TP,
    )
    .expect("the layout has tp");
    let options = PlaceOptions::default().gpus_per_node(gpus);
    if let Ok(placed) = Placed::groups(world, vec![tp], &[], hosts.clone(), &options) {
        let plan = placed.plan();
        let mut used = plan.node_hosts.clone();
        used.sort_unstable();
        used.dedup();
        assert_eq!(used.len(), plan.node_hosts.len(), "a host used twice");
        for &h in &plan.node_hosts {
            assert!(hosts.get(h).is_some_and(|h| h.healthy), "host {h} placed");
        }
    }
}
