//! The topology of the usable hosts as a tree: domains grouped under their
//! parents level by level, the keys of every level in natural order
//! (`switch.1.2` before `switch.1.10`), and each level's keys numbered for
//! counting crossings.

use crate::cast::to_usize;
use std::cmp::Ordering;

use fnv::FnvHashMap;

use crate::machine::hosts::{Hosts, natural};

/// The usable hosts as a tree whose leaves are the domains. Node 0 is the
/// root (above the outermost level); nodes are numbered in depth-first
/// order, children in natural order of their keys, so a node's subtree is
/// a run of consecutive numbers and so are its domains.
#[derive(Debug)]
pub(crate) struct Tree {
    nodes: Vec<TreeNode>,
    domains: Vec<Domain>,
}

/// A node: a key of one level (the root: none).
#[derive(Debug)]
pub(crate) struct TreeNode {
    /// Its parent (the root's is itself).
    pub(crate) parent: usize,
    /// Its depth (the root's 0).
    pub(crate) depth: usize,
    /// Its children, in natural order of their keys.
    pub(crate) children: Vec<usize>,
    /// The domain it is, for a leaf.
    pub(crate) domain: Option<usize>,
}

/// A domain: hosts that share the innermost key, or one host of an unknown
/// domain.
#[derive(Debug)]
pub(crate) struct Domain {
    /// Its usable hosts, as indices into the table, in the table's order.
    pub(crate) hosts: Vec<usize>,
    /// Its leaf.
    pub(crate) node: usize,
    /// Whether its key is known (a host of an unknown domain is a domain
    /// of its own, under the root, after every known one).
    pub(crate) known: bool,
}

/// A key at one level: the host's, or none (the host's own place).
type Key<'a> = Option<&'a str>;

impl Tree {
    /// The tree of the `usable` hosts (indices into `hosts`, ascending).
    /// A domain sits under the keys of its first host (a key of a level
    /// above the domain that a host lacks is a place of its own, after the
    /// named ones); domains of equal keys are ordered by their own key.
    pub(crate) fn new(hosts: &Hosts, usable: &[usize]) -> Tree {
        let levels = hosts.levels().max(1);
        let mut index: FnvHashMap<&str, usize> = FnvHashMap::default();
        // (path above the domain, domain key, hosts)
        let mut known: Vec<(Vec<Key<'_>>, &str, Vec<usize>)> = Vec::new();
        let mut unknown = Vec::new();
        for &i in usable {
            let Some(host) = hosts.get(i) else { continue };
            let Some(key) = host.domain() else {
                unknown.push(i);
                continue;
            };
            let d = *index.entry(key).or_insert_with(|| {
                let path = (0..levels - 1)
                    .map(|l| host.keys.get(l).map(String::as_str))
                    .collect();
                known.push((path, key, Vec::new()));
                known.len() - 1
            });
            if let Some(entry) = known.get_mut(d) {
                entry.2.push(i);
            }
        }
        known.sort_by(|a, b| by_path(&a.0, &b.0).then_with(|| natural(a.1, b.1)));
        let mut tree = Tree {
            nodes: vec![TreeNode {
                parent: 0,
                depth: 0,
                children: Vec::new(),
                domain: None,
            }],
            domains: Vec::with_capacity(known.len() + unknown.len()),
        };
        tree.group(&known, 0, 0);
        for i in unknown {
            tree.leaf(0, vec![i], false);
        }
        tree
    }

    /// Adds `run` (domains sorted by path, equal up to `level`) under
    /// `parent`: a node per key of `level`, a leaf per domain below the
    /// last.
    fn group(&mut self, run: &[(Vec<Key<'_>>, &str, Vec<usize>)], level: usize, parent: usize) {
        let mut rest = run;
        while let Some((first, _, hosts)) = rest.first() {
            let Some(key) = first.get(level) else {
                self.leaf(parent, hosts.clone(), true);
                rest = rest.get(1..).unwrap_or_default();
                continue;
            };
            // A missing key is a place of its own: it groups nothing.
            let same = match key {
                Some(k) => rest
                    .iter()
                    .take_while(|d| d.0.get(level) == Some(&Some(*k)))
                    .count(),
                None => 1,
            };
            let (here, after) = rest.split_at(same.max(1));
            let node = self.node(parent);
            self.group(here, level + 1, node);
            rest = after;
        }
    }

    fn node(&mut self, parent: usize) -> usize {
        let id = self.nodes.len();
        let depth = self.nodes.get(parent).map_or(0, |p| p.depth + 1);
        self.nodes.push(TreeNode {
            parent,
            depth,
            children: Vec::new(),
            domain: None,
        });
        if let Some(p) = self.nodes.get_mut(parent) {
            p.children.push(id);
        }
        id
    }

    fn leaf(&mut self, parent: usize, hosts: Vec<usize>, known: bool) {
        let node = self.node(parent);
        let d = self.domains.len();
        if let Some(n) = self.nodes.get_mut(node) {
            n.domain = Some(d);
        }
        self.domains.push(Domain { hosts, node, known });
    }

    /// The nodes, the root first, in depth-first order.
    pub(crate) fn nodes(&self) -> &[TreeNode] {
        &self.nodes
    }

    /// The domains, in depth-first order (the unknown ones last).
    pub(crate) fn domains(&self) -> &[Domain] {
        &self.domains
    }

    /// The deepest node above both `a` and `b` (nodes).
    pub(crate) fn common(&self, mut a: usize, mut b: usize) -> usize {
        let depth = |n: usize| self.nodes.get(n).map_or(0, |x| x.depth);
        let up = |n: usize| self.nodes.get(n).map_or(0, |x| x.parent);
        while a != b {
            if depth(a) >= depth(b) {
                a = up(a);
            } else {
                b = up(b);
            }
            if a == 0 || b == 0 {
                return 0;
            }
        }
        a
    }
}

/// Paths compared key by key in natural order; a missing key after every
/// named one.
fn by_path(a: &[Key<'_>], b: &[Key<'_>]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = match (x, y) {
            (Some(x), Some(y)) => natural(x, y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// Every host's key at each topology level as a number (equal numbers for
/// equal keys; a host without a key at a level has a number of its own
/// there, as an unknown key is the host's own), numbered once for all the
/// crossings of a table.
#[derive(Debug)]
pub(crate) struct LevelKeys {
    /// By level (outermost first; the last is the domain), by host.
    ids: Vec<Vec<u32>>,
    /// By level, how many numbers there are.
    counts: Vec<usize>,
}

impl LevelKeys {
    /// The numbered keys of `hosts` (at least one level).
    pub(crate) fn new(hosts: &Hosts) -> LevelKeys {
        let levels = hosts.levels().max(1);
        let mut ids = Vec::with_capacity(levels);
        let mut counts = Vec::with_capacity(levels);
        for level in 0..levels {
            let mut known: FnvHashMap<&str, u32> = FnvHashMap::default();
            let mut row = Vec::with_capacity(hosts.len());
            // At most one number per host: the table has at most
            // MAX_HOSTS (2^20) hosts, so they fit in u32.
            let mut next: u32 = 0;
            for host in hosts.iter() {
                let key = if level + 1 == levels {
                    host.domain()
                } else {
                    host.keys.get(level).map(String::as_str)
                };
                let id = match key {
                    Some(k) => *known.entry(k).or_insert_with(|| {
                        next = next.saturating_add(1);
                        next - 1
                    }),
                    None => {
                        next = next.saturating_add(1);
                        next - 1
                    }
                };
                row.push(id);
            }
            ids.push(row);
            counts.push(to_usize(next));
        }
        LevelKeys { ids, counts }
    }

    /// The number of levels.
    pub(crate) fn levels(&self) -> usize {
        self.ids.len()
    }

    /// Level `level`'s numbers by host, and how many there are.
    pub(crate) fn level(&self, level: usize) -> (&[u32], usize) {
        (
            self.ids.get(level).map_or(&[][..], Vec::as_slice),
            self.counts.get(level).copied().unwrap_or(0),
        )
    }
}
