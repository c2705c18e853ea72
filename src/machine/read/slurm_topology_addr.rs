//! `SLURM_TOPOLOGY_ADDR` / `SLURM_TOPOLOGY_ADDR_PATTERN` lines, as the
//! tasks of a job print them.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::machine::hosts::{Host, Hosts, bad};

const ADDR: &str = "SLURM_TOPOLOGY_ADDR=";
const PATTERN: &str = "SLURM_TOPOLOGY_ADDR_PATTERN=";

impl Hosts {
    /// Reads the `SLURM_TOPOLOGY_ADDR=...` values of a job's tasks (for
    /// example the output of `srun -l env | grep SLURM_TOPOLOGY`): an
    /// address is the switches (or the block) from the top down to the
    /// node, then the node, separated by `.` (`s0.s4.tux1`, `b8.tux1`).
    /// The host is the last component, its keys the others; a component may
    /// be a hostlist of several switches (a key like any other). A
    /// `SLURM_TOPOLOGY_ADDR_PATTERN=` value (`switch.switch.node`) after an
    /// address, on its line or the next, is checked against it: as many
    /// components, the last `node`. Words around the assignments (`0: `,
    /// `export`) are ignored, and several tasks of one host give it once.
    /// A host whose innermost switch is empty, or whose address is the node
    /// alone, has an unknown domain. Every host is healthy, its GPUs not
    /// given.
    ///
    /// ```
    /// use rank_layout::machine::Hosts;
    /// let lines = "0: SLURM_TOPOLOGY_ADDR=s0.s1.tux1\n0: SLURM_TOPOLOGY_ADDR_PATTERN=switch.switch.node\n\
    ///              1: SLURM_TOPOLOGY_ADDR=s0.s1.tux1\n2: SLURM_TOPOLOGY_ADDR=b8.gb07\n";
    /// let hosts = Hosts::parse_slurm_topology_addr(lines)?;
    /// assert_eq!(hosts.len(), 2);
    /// assert_eq!(hosts.get(1).unwrap().keys, ["s0", "s1"]);
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::BadHostTable`](crate::Error::BadHostTable) naming the line
    /// and the bad value: an empty address or node, a pattern that does not
    /// fit its address or comes before any, one host with two addresses,
    /// no address at all.
    pub fn parse_slurm_topology_addr(text: &str) -> Result<Hosts> {
        // Host -> (line, components), and the address a pattern checks.
        let mut hosts: BTreeMap<String, (usize, Vec<String>)> = BTreeMap::new();
        let mut last: Option<(usize, Vec<String>, bool)> = None;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            for word in raw.split_whitespace() {
                let word = word.trim_matches(|c| c == '"' || c == '\'');
                if let Some(pattern) = word
                    .find(PATTERN)
                    .and_then(|at| word.get(at + PATTERN.len()..))
                {
                    let pattern = pattern.trim_matches(|c| c == '"' || c == '\'');
                    let Some((at, parts, checked)) = last.as_mut().filter(|l| !l.2) else {
                        return Err(bad(
                            line,
                            pattern,
                            "a pattern without its SLURM_TOPOLOGY_ADDR before it",
                        ));
                    };
                    let kinds: Vec<&str> = pattern.split('.').collect();
                    let fits = kinds.len() == parts.len()
                        && kinds.last() == Some(&"node")
                        && kinds
                            .iter()
                            .rev()
                            .skip(1)
                            .all(|k| matches!(*k, "switch" | "block"));
                    if !fits {
                        return Err(bad(
                            line,
                            pattern,
                            &format!(
                                "the pattern does not fit the address at line {at} ({})",
                                parts.join(".")
                            ),
                        ));
                    }
                    *checked = true;
                } else if let Some(addr) =
                    word.find(ADDR).and_then(|at| word.get(at + ADDR.len()..))
                {
                    let addr = addr.trim_matches(|c| c == '"' || c == '\'');
                    let parts: Vec<String> = addr.split('.').map(str::to_string).collect();
                    let Some((node, switches)) = parts.split_last() else {
                        return Err(bad(line, addr, "an empty address"));
                    };
                    if node.is_empty() {
                        return Err(bad(line, addr, "an address ends with the node's name"));
                    }
                    match hosts.get(node) {
                        Some((first, known)) if known.as_slice() != switches => {
                            return Err(bad(
                                line,
                                addr,
                                &format!(
                                    "host {node:?} has two addresses ({}.{node} at line {first})",
                                    known.join(".")
                                ),
                            ));
                        }
                        Some(_) => {}
                        None => {
                            hosts.insert(node.clone(), (line, switches.to_vec()));
                        }
                    }
                    last = Some((line, parts, false));
                }
            }
        }
        if hosts.is_empty() {
            return Err(bad(0, "", "no SLURM_TOPOLOGY_ADDR= line"));
        }
        let rows = hosts
            .into_iter()
            .map(|(name, (line, switches))| {
                let keys = if switches.last().is_some_and(|s| !s.is_empty()) {
                    switches.into_iter().filter(|s| !s.is_empty()).collect()
                } else {
                    Vec::new()
                };
                let host = Host {
                    name,
                    gpus: None,
                    healthy: true,
                    keys,
                };
                (line, host)
            })
            .collect();
        Hosts::checked(rows)
    }
}
