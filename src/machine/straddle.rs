//! The units that must straddle domains: made of the domains' leftover
//! hosts, split at the boundaries of the must-fit kinds' smaller groups.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::machine::tree::Tree;

/// A unit made of several domains' hosts.
#[derive(Debug)]
pub(crate) struct Straddler {
    /// Its hosts, in node order.
    pub(crate) hosts: Vec<usize>,
    /// The deepest tree node above all of them.
    pub(crate) node: usize,
}

/// `count` units of `k` nodes made of `leftovers` (by domain of `tree`, the
/// hosts that hold no whole unit).
///
/// `grains` are the block sizes inside a unit, in nodes, largest first,
/// each dividing the one before, ending in 1 (the must-fit kinds' smaller
/// groups: a unit of an `etp-ep` group of 4 nodes holds `tp` groups of 2).
/// Grain by grain, every unit still short takes whole blocks of the grain
/// from the domain with the most such blocks left (known domains before
/// hosts of an unknown one; ties: tree order, so siblings go together):
/// the fewest domains per unit, and blocks split only when no leftover
/// holds one whole. A unit's pieces follow one another, so a block of the
/// grain starts at a multiple of it.
///
/// Returns `None` when the leftovers are too few (the caller counts them
/// first, so it does not happen).
pub(crate) fn straddlers(
    tree: &Tree,
    leftovers: &[Vec<usize>],
    k: usize,
    grains: &[usize],
    count: usize,
) -> Option<Vec<Straddler>> {
    let mut left: Vec<usize> = leftovers.iter().map(Vec::len).collect();
    // pieces[u]: (domain, nodes) in node order.
    let mut pieces: Vec<Vec<(usize, usize)>> = vec![Vec::new(); count];
    let mut need = vec![k; count];
    for &g in grains {
        let g = g.max(1);
        let mut heap: BinaryHeap<(bool, usize, Reverse<usize>)> = left
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n >= g)
            .map(|(d, &n)| (known(tree, d), n / g, Reverse(d)))
            .collect();
        for (unit, short) in pieces.iter_mut().zip(need.iter_mut()) {
            while *short >= g {
                let Some((is_known, blocks, Reverse(d))) = heap.pop() else {
                    break;
                };
                let take = blocks.min(*short / g);
                unit.push((d, take * g));
                *short -= take * g;
                if let Some(n) = left.get_mut(d) {
                    *n -= take * g;
                    if *n >= g {
                        heap.push((is_known, *n / g, Reverse(d)));
                    }
                }
            }
        }
    }
    if need.iter().any(|&n| n > 0) {
        return None;
    }
    let mut taken = vec![0usize; leftovers.len()];
    let mut out = Vec::with_capacity(count);
    for unit in pieces {
        let mut hosts = Vec::with_capacity(k);
        let mut node = None;
        for (d, n) in unit {
            let from = taken.get(d).copied().unwrap_or(0);
            hosts.extend(leftovers.get(d)?.get(from..from + n)?);
            if let Some(t) = taken.get_mut(d) {
                *t += n;
            }
            let leaf = tree.domains().get(d)?.node;
            node = Some(node.map_or(leaf, |a| tree.common(a, leaf)));
        }
        out.push(Straddler {
            hosts,
            node: node.unwrap_or(0),
        });
    }
    Some(out)
}

fn known(tree: &Tree, d: usize) -> bool {
    tree.domains().get(d).is_some_and(|x| x.known)
}
