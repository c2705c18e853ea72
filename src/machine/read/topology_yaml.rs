//! Slurm's `topology.yaml` (topology.yaml(5)): its block or tree topology.

use crate::error::Result;
use crate::machine::Hosts;
use crate::machine::hosts::bad;
use crate::machine::read::block_levels::BlockSizes;
use crate::machine::read::slurm::Units;
use crate::machine::read::unit::Unit;
use crate::machine::read::yaml::{self, Node};

impl Hosts {
    /// Reads Slurm's `topology.yaml`: a list of topologies, each with a
    /// `topology` name, `cluster_default` and one of `block` (`blocks` of
    /// `block` and `nodes`, each block a domain; `block_sizes` the
    /// higher-level blocks, outer keys, as in
    /// [`Hosts::parse_topology_conf`]) or `tree` (`switches` of `switch`, `children` and `nodes`,
    /// each node's keys the switches from the root down to its leaf). The
    /// topology read is the one named `topology`, else the first with
    /// `cluster_default: true`, else the first listed. Node and switch
    /// lists are hostlist expressions. The YAML is read by a small reader of
    /// the subset the format needs (block mappings and sequences, flow
    /// sequences of scalars, quoted scalars, comments): anything beyond it
    /// is an error with its line. Every host is healthy, its GPUs not given.
    ///
    /// ```
    /// use rank_layout::machine::Hosts;
    /// let yaml = "- topology: nvl\n  cluster_default: true\n  block:\n    block_sizes: [18]\n    blocks:\n      - block: rack1\n        nodes: gb[01-18]\n";
    /// let hosts = Hosts::parse_topology_yaml(yaml, None)?;
    /// assert_eq!(hosts.len(), 18);
    /// assert!(hosts.iter().all(|h| h.domain() == Some("rack1")));
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::BadHostTable`](crate::Error::BadHostTable) naming the line
    /// and the bad value: YAML outside the subset, a topology not found or
    /// neither block nor tree (flat, ring, torus3d), an unknown key, and
    /// what [`Hosts::parse_topology_conf`] refuses in the blocks or switches.
    pub fn parse_topology_yaml(text: &str, topology: Option<&str>) -> Result<Hosts> {
        with_notes(text, topology).map(|(hosts, _)| hosts)
    }
}

/// [`Hosts::parse_topology_yaml`], with a note for each switch or block
/// that lists no node.
pub(crate) fn with_notes(text: &str, topology: Option<&str>) -> Result<(Hosts, Vec<String>)> {
    let doc = yaml::parse(text)?;
    let Node::Seq { items, .. } = &doc else {
        return Err(bad(doc.line(), "", "expected a list of topologies"));
    };
    let mut chosen: Option<(&str, &Entries)> = None;
    let mut first = None;
    for item in items {
        let Node::Map { entries, line } = item else {
            return Err(bad(item.line(), "", "a topology is a mapping"));
        };
        let name = scalar(
            get(entries, "topology")
                .ok_or_else(|| bad(*line, "", "a topology has a `topology:` name"))?,
        )?;
        let default = match get(entries, "cluster_default") {
            None => false,
            Some(v) => match scalar(v)? {
                "true" | "True" | "TRUE" | "yes" => true,
                "false" | "False" | "FALSE" | "no" => false,
                other => {
                    return Err(bad(v.line(), other, "cluster_default is true or false"));
                }
            },
        };
        first.get_or_insert((name, entries.as_slice()));
        let wanted = match topology {
            Some(want) => want == name,
            None => default,
        };
        if wanted && chosen.is_none() {
            chosen = Some((name, entries.as_slice()));
        }
    }
    let (name, entries) = match (chosen, topology) {
        (Some(c), _) => c,
        (None, Some(want)) => {
            return Err(bad(0, want, &format!("no topology named {want:?}")));
        }
        (None, None) => first.ok_or_else(|| bad(1, "", "no topology listed"))?,
    };
    let mut units = Units::default();
    let mut kind = None;
    for (key, value) in entries {
        match key.as_str() {
            "topology" | "cluster_default" => {}
            "block" | "tree" | "flat" | "ring" | "torus3d" => {
                if kind.replace(key.as_str()).is_some() {
                    return Err(bad(value.line(), key, "a topology has one type"));
                }
                match key.as_str() {
                    "block" => read_block(value, &mut units)?,
                    "tree" => read_tree(value, &mut units)?,
                    _ => {
                        return Err(bad(
                            value.line(),
                            key,
                            &format!(
                                "topology {name:?} is {key}: it has no domains (give a block or tree topology)"
                            ),
                        ));
                    }
                }
            }
            other => return Err(bad(value.line(), other, "unknown topology attribute")),
        }
    }
    units.hosts_and_notes(name)
}

/// A mapping's entries, in the order written.
type Entries = [(String, Node)];

fn get<'a>(entries: &'a Entries, key: &str) -> Option<&'a Node> {
    entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn scalar(node: &Node) -> Result<&str> {
    match node {
        Node::Scalar {
            text, null: false, ..
        } => Ok(text),
        other => Err(bad(other.line(), "", "expected a value")),
    }
}

/// A hostlist value: a scalar, or a list of scalars (joined by commas).
fn hostlist(node: &Node) -> Result<String> {
    match node {
        Node::Seq { items, .. } => Ok(items
            .iter()
            .map(scalar)
            .collect::<Result<Vec<_>>>()?
            .join(",")),
        other => scalar(other).map(str::to_string),
    }
}

/// The list of mappings under `node` (a sequence of mappings).
fn mappings(node: &Node) -> Result<Vec<(usize, &Entries)>> {
    let Node::Seq { items, .. } = node else {
        return Err(bad(node.line(), "", "expected a list"));
    };
    items
        .iter()
        .map(|item| match item {
            Node::Map { line, entries } => Ok((*line, entries.as_slice())),
            other => Err(bad(other.line(), "", "expected a mapping")),
        })
        .collect()
}

/// A unit of `entries`: its name under `name_key`, its `nodes` and (a
/// switch) its `children`.
fn unit(line: usize, entries: &Entries, name_key: &str) -> Result<Unit> {
    let mut unit = Unit {
        line,
        ..Unit::default()
    };
    for (key, value) in entries {
        match key.as_str() {
            k if k == name_key => unit.name = scalar(value)?.to_string(),
            "nodes" => unit.nodes = Some(hostlist(value)?),
            "children" if name_key == "switch" => unit.children = Some(hostlist(value)?),
            other => {
                return Err(bad(
                    value.line(),
                    other,
                    &format!("unknown {name_key} attribute"),
                ));
            }
        }
    }
    if unit.name.is_empty() {
        return Err(bad(
            line,
            "",
            &format!("a {name_key} has a `{name_key}:` name"),
        ));
    }
    Ok(unit)
}

fn read_block(node: &Node, units: &mut Units) -> Result<()> {
    let Node::Map { entries, .. } = node else {
        return Err(bad(
            node.line(),
            "",
            "block: expected block_sizes and blocks",
        ));
    };
    for (key, value) in entries {
        match key.as_str() {
            "block_sizes" => {
                let items = match value {
                    Node::Seq { items, .. } => items.iter().collect(),
                    other => vec![other],
                };
                let mut sizes = Vec::with_capacity(items.len());
                for size in items {
                    let text = scalar(size)?;
                    match text.parse::<u32>() {
                        Ok(n) if n > 0 => sizes.push(n),
                        _ => {
                            return Err(bad(
                                size.line(),
                                text,
                                "a block size is a positive integer",
                            ));
                        }
                    }
                }
                let line = value.line();
                if units
                    .block_sizes
                    .replace(BlockSizes { line, sizes })
                    .is_some()
                {
                    return Err(bad(line, "block_sizes", "block_sizes is given twice"));
                }
            }
            "blocks" => {
                for (line, entries) in mappings(value)? {
                    units.blocks.push(unit(line, entries, "block")?);
                }
            }
            other => return Err(bad(value.line(), other, "unknown block attribute")),
        }
    }
    Ok(())
}

fn read_tree(node: &Node, units: &mut Units) -> Result<()> {
    let Node::Map { entries, .. } = node else {
        return Err(bad(node.line(), "", "tree: expected switches"));
    };
    for (key, value) in entries {
        match key.as_str() {
            "switches" => {
                for (line, entries) in mappings(value)? {
                    units.switches.push(unit(line, entries, "switch")?);
                }
            }
            other => return Err(bad(value.line(), other, "unknown tree attribute")),
        }
    }
    Ok(())
}
