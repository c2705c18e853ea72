//! Slurm's units (switches and blocks) as a host table, and the
//! `Key=value` lines of `topology.conf` and `scontrol show topology`.

use std::collections::{BTreeMap, HashMap};

use crate::error::Result;
use crate::machine::hosts::{Host, Hosts, bad, expand_at};
use crate::machine::read::block_levels::{BlockSizes, span_key};
use crate::machine::read::unit::Unit;

/// The most levels of a switch tree (a deeper chain is a cycle or a
/// mistake).
const MAX_LEVELS: usize = 64;

/// What a topology lists.
#[derive(Debug, Default)]
pub(crate) struct Units {
    /// `SwitchName=` lines (topology/tree).
    pub switches: Vec<Unit>,
    /// `BlockName=` lines (topology/block).
    pub blocks: Vec<Unit>,
    /// `AggregatedBlock=` lines (`scontrol show topology` of a block
    /// topology: the higher-level blocks).
    pub aggregated: Vec<Unit>,
    /// `BlockSizes=` (topology.conf) or `block_sizes` (topology.yaml):
    /// the higher-level blocks, formed as Slurm forms them.
    pub block_sizes: Option<BlockSizes>,
}

impl Units {
    /// The host table: the hosts of the blocks, or of the switch tree.
    pub fn hosts(&self, what: &str) -> Result<Hosts> {
        self.hosts_and_notes(what).map(|(hosts, _)| hosts)
    }

    /// [`Units::hosts`], with a note for each switch or block that lists
    /// no node (Slurm takes it; it holds no host).
    ///
    /// # Errors
    /// As [`Units::hosts`]; a topology that lists no node at all.
    pub fn hosts_and_notes(&self, what: &str) -> Result<(Hosts, Vec<String>)> {
        let (hosts, units, kind) = match (self.switches.first(), self.blocks.first()) {
            (Some(_), Some(b)) => {
                return Err(bad(
                    b.line,
                    &b.name,
                    "switches and blocks in one topology: give one topology",
                ));
            }
            (Some(_), None) => (tree_hosts(&self.switches)?, &self.switches, "switch"),
            (None, Some(_)) => {
                let levels = match &self.block_sizes {
                    Some(sizes) => sizes.outer_keys(&self.blocks)?,
                    None => vec![Vec::new(); self.blocks.len()],
                };
                let hosts = block_hosts(&self.blocks, &levels, &self.aggregated)?;
                (hosts, &self.blocks, "block")
            }
            (None, None) => return Err(bad(0, what, "no switch and no block listed")),
        };
        if hosts.is_empty() {
            let first = units.first().map_or(0, |u| u.line);
            return Err(bad(
                first,
                what,
                &format!("no {kind} lists a node: the topology has no host"),
            ));
        }
        let notes = units.iter().filter_map(|u| u.empty_note(kind)).collect();
        Ok((hosts, notes))
    }
}

/// The hosts of a switch tree: each node's keys are the switches from the
/// root down to its deepest switch (a node listed by a switch and by one of
/// its ancestors, as `scontrol` prints, is the deeper switch's).
fn tree_hosts(switches: &[Unit]) -> Result<Hosts> {
    let mut index = HashMap::new();
    for (i, s) in switches.iter().enumerate() {
        if index.insert(s.name.as_str(), i).is_some() {
            return Err(bad(
                s.line,
                &s.name,
                &format!("switch {:?} is defined twice", s.name),
            ));
        }
    }
    let mut parent: Vec<Option<usize>> = vec![None; switches.len()];
    let mut listed = 0;
    for (i, s) in switches.iter().enumerate() {
        let Some(children) = &s.children else {
            continue;
        };
        for child in expand_at(s.line, children, &mut listed)? {
            let j = *index
                .get(child.as_str())
                .ok_or_else(|| bad(s.line, &child, &format!("switch {child:?} is not defined")))?;
            let Some(slot) = parent.get_mut(j) else {
                continue;
            };
            match *slot {
                Some(p) if p != i => {
                    return Err(bad(
                        s.line,
                        &child,
                        &format!("switch {child:?} has two parents"),
                    ));
                }
                _ => *slot = Some(i),
            }
        }
    }
    // Each switch's chain, root first.
    let mut chains: Vec<Vec<String>> = Vec::with_capacity(switches.len());
    for (i, s) in switches.iter().enumerate() {
        let mut chain = vec![s.name.clone()];
        let mut at = i;
        while let Some(p) = parent.get(at).copied().flatten() {
            if chain.len() >= MAX_LEVELS {
                return Err(bad(
                    s.line,
                    &s.name,
                    &format!(
                        "switch {:?} is in a cycle or more than {MAX_LEVELS} levels deep",
                        s.name
                    ),
                ));
            }
            if let Some(up) = switches.get(p) {
                chain.push(up.name.clone());
            }
            at = p;
        }
        chain.reverse();
        chains.push(chain);
    }
    let mut leaf: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (i, s) in switches.iter().enumerate() {
        let Some(nodes) = &s.nodes else {
            continue;
        };
        let depth = chains.get(i).map_or(0, Vec::len);
        for node in expand_at(s.line, nodes, &mut listed)? {
            match leaf.get(&node).copied() {
                Some((j, _)) if j == i => {}
                Some((j, _)) => {
                    let other = chains.get(j).map_or(0, Vec::len);
                    if depth == other {
                        let name = switches.get(j).map_or("", |u| u.name.as_str());
                        return Err(bad(
                            s.line,
                            &node,
                            &format!("node {node:?} is under switches {name:?} and {:?}", s.name),
                        ));
                    }
                    if depth > other {
                        leaf.insert(node, (i, s.line));
                    }
                }
                None => {
                    leaf.insert(node, (i, s.line));
                }
            }
        }
    }
    let rows = leaf
        .into_iter()
        .map(|(name, (i, line))| {
            let host = Host {
                name,
                gpus: None,
                healthy: true,
                keys: chains.get(i).cloned().unwrap_or_default(),
            };
            (line, host)
        })
        .collect();
    Hosts::checked(rows)
}

/// The hosts of blocks: each node's domain is its block; its outer keys
/// are its block's `levels` (the higher-level blocks of `BlockSizes=`),
/// then the aggregated blocks holding it (`scontrol`'s lines), largest
/// first, each named by its first and last block (`scontrol`'s `b[1-2]`
/// or `b1,b2` is `b1..b2`).
fn block_hosts(blocks: &[Unit], levels: &[Vec<String>], aggregated: &[Unit]) -> Result<Hosts> {
    let mut names = HashMap::new();
    let mut rows: BTreeMap<String, (usize, Host)> = BTreeMap::new();
    let mut listed = 0;
    for (i, b) in blocks.iter().enumerate() {
        if names.insert(b.name.as_str(), ()).is_some() {
            return Err(bad(
                b.line,
                &b.name,
                &format!("block {:?} is defined twice", b.name),
            ));
        }
        let Some(nodes) = &b.nodes else {
            continue;
        };
        for node in expand_at(b.line, nodes, &mut listed)? {
            if let Some((_, host)) = rows.get(&node) {
                return Err(bad(
                    b.line,
                    &node,
                    &format!(
                        "node {node:?} is in blocks {:?} and {:?}",
                        host.keys.last().map_or("", String::as_str),
                        b.name
                    ),
                ));
            }
            let mut keys = levels.get(i).cloned().unwrap_or_default();
            keys.push(b.name.clone());
            let host = Host {
                name: node.clone(),
                gpus: None,
                healthy: true,
                keys,
            };
            rows.insert(node, (b.line, host));
        }
    }
    // Outer keys: (nodes of the aggregated block, its name) per node.
    let mut outer: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();
    for a in aggregated {
        let Some(nodes) = &a.nodes else {
            continue;
        };
        let members = expand_at(a.line, nodes, &mut listed)?;
        let size = members.len();
        let names = expand_at(a.line, &a.name, &mut listed)?;
        let name = span_key(&names.iter().map(String::as_str).collect::<Vec<_>>());
        for node in members {
            if !rows.contains_key(&node) {
                return Err(bad(
                    a.line,
                    &node,
                    &format!(
                        "node {node:?} of aggregated block {:?} is in no block",
                        a.name
                    ),
                ));
            }
            outer.entry(node).or_default().push((size, name.clone()));
        }
    }
    for (node, mut keys) in outer {
        keys.sort_by(|x, y| y.0.cmp(&x.0).then_with(|| x.1.cmp(&y.1)));
        if let Some((_, host)) = rows.get_mut(&node) {
            let mut all: Vec<String> = keys.into_iter().map(|(_, k)| k).collect();
            all.append(&mut host.keys);
            host.keys = all;
        }
    }
    Hosts::checked(rows.into_values().collect())
}

/// Which `Key=value` lines a reader takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// `topology.conf`: `SwitchName=`, `BlockName=`, `BlockSizes=`.
    Conf,
    /// `scontrol show topology`: `SwitchName=`, `BlockName=`,
    /// `AggregatedBlock=`.
    Scontrol,
}

/// The units of `Key=value` lines (keys case-insensitive, `#` to the end
/// of a line a comment, blanks between pairs).
pub(crate) fn read_lines(text: &str, dialect: Dialect) -> Result<Units> {
    let mut units = Units::default();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let body = raw.split('#').next().unwrap_or("");
        let mut pairs = Vec::new();
        for word in body.split_whitespace() {
            let Some((key, value)) = word.split_once('=') else {
                return Err(bad(line, word, "expected `Key=value`"));
            };
            if value.is_empty() {
                return Err(bad(line, word, "a value is empty"));
            }
            pairs.push((key.to_ascii_lowercase(), value));
        }
        let Some((first, name)) = pairs.first() else {
            continue;
        };
        let (list, allowed): (&mut Vec<Unit>, &[&str]) = match (first.as_str(), dialect) {
            ("switchname", Dialect::Conf) => {
                (&mut units.switches, &["nodes", "switches", "linkspeed"])
            }
            ("switchname", Dialect::Scontrol) => (
                &mut units.switches,
                &["nodes", "switches", "linkspeed", "level"],
            ),
            ("blockname", Dialect::Conf) => (&mut units.blocks, &["nodes"]),
            ("blockname", Dialect::Scontrol) => {
                (&mut units.blocks, &["nodes", "blockindex", "blocksize"])
            }
            ("aggregatedblock", Dialect::Scontrol) => {
                (&mut units.aggregated, &["nodes", "blockindex", "blocksize"])
            }
            ("blocksizes", Dialect::Conf) => {
                let sizes = block_sizes(line, name)?;
                if let Some((_, value)) = pairs.get(1) {
                    return Err(bad(line, value, "BlockSizes= stands alone on its line"));
                }
                if units
                    .block_sizes
                    .replace(BlockSizes { line, sizes })
                    .is_some()
                {
                    return Err(bad(line, name, "BlockSizes= is given twice"));
                }
                continue;
            }
            ("ringname", _) => {
                return Err(bad(
                    line,
                    name,
                    "a ring topology has no domains: give a block or tree topology",
                ));
            }
            _ => {
                return Err(bad(
                    line,
                    raw.trim(),
                    match dialect {
                        Dialect::Conf => "expected SwitchName=, BlockName= or BlockSizes=",
                        Dialect::Scontrol => "expected SwitchName=, BlockName= or AggregatedBlock=",
                    },
                ));
            }
        };
        let mut unit = Unit {
            line,
            name: (*name).to_string(),
            ..Unit::default()
        };
        for (key, value) in pairs.iter().skip(1) {
            if !allowed.contains(&key.as_str()) {
                return Err(bad(
                    line,
                    key,
                    &format!("unknown parameter (expected one of {})", allowed.join(", ")),
                ));
            }
            let slot = match key.as_str() {
                "nodes" => &mut unit.nodes,
                "switches" => &mut unit.children,
                number => {
                    whole_number(line, number, value)?;
                    continue;
                }
            };
            if slot.replace((*value).to_string()).is_some() {
                return Err(bad(line, key, "a parameter is given twice"));
            }
        }
        list.push(unit);
    }
    Ok(units)
}

/// A numeric parameter's value checked, so that a value that is not one
/// (`BlockSize=four`) is refused rather than read as absent: `BlockSize=`
/// a positive integer; `BlockIndex=`, `Level=`, `LinkSpeed=` integers from
/// 0 (32 bits, as Slurm reads them).
fn whole_number(line: usize, key: &str, value: &str) -> Result<()> {
    let min = u32::from(key == "blocksize");
    match value.parse::<u32>() {
        Ok(n) if n >= min => Ok(()),
        _ => {
            let name = match key {
                "blocksize" => "BlockSize",
                "blockindex" => "BlockIndex",
                "level" => "Level",
                "linkspeed" => "LinkSpeed",
                other => other,
            };
            let range = if min == 1 { "from 1" } else { "from 0" };
            Err(bad(
                line,
                &format!("{name}={value}"),
                &format!("{name} is an integer {range} to 4294967295"),
            ))
        }
    }
}

/// `BlockSizes=`: positive integers separated by commas.
fn block_sizes(line: usize, value: &str) -> Result<Vec<u32>> {
    value
        .split(',')
        .map(|size| match size.parse::<u32>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(bad(line, size, "a block size is a positive integer")),
        })
        .collect()
}
