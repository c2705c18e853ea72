//! Which slot of the tree holds each unit: the job's units go down the
//! tree, aligned runs of units (a pipeline stage, a pipeline) kept under
//! one node as deep as one holds them.

use crate::machine::tree::Tree;

/// Where a unit runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// The `index`-th whole unit of domain `domain` (its hosts `index * k ..
    /// (index + 1) * k`).
    Whole { domain: usize, index: usize },
    /// The straddling unit `0`.
    Straddler(usize),
}

/// A run of units `start .. start + len`, whole blocks of `chain[grain]`
/// units.
#[derive(Debug, Clone, Copy)]
struct Piece {
    start: usize,
    len: usize,
    grain: usize,
}

/// The slot of each of `units` units.
///
/// `whole[d]` is how many whole units domain `d` of `tree` may hold;
/// `straddlers[s]` is the tree node under which straddling unit `s` lies
/// (the straddling units under a node are one more child of it, after the
/// others). `chain` are the block sizes in units, largest first, each
/// dividing the one before, from `units` down to 1: the runs of
/// consecutive units that hold whole groups of the other kinds (a pipeline
/// stage holds whole data-parallel groups, the job whole pipelines).
///
/// A run goes whole to the deepest node that has room for it, the one with
/// the least room to spare among those (ties: the tree's order). When no
/// node below the one it reached has room, the run is cut into its blocks
/// of the next size of `chain`, given to the children with the most room
/// first (the fewest children), a block that fits in none cut again; the
/// blocks are laid out in the children's order and each goes on down its
/// child the same way.
///
/// Returns `None` if the slots are too few for the units (the caller counts
/// them first, so it does not happen).
pub(crate) fn fill(
    tree: &Tree,
    whole: &[usize],
    straddlers: &[usize],
    units: usize,
    chain: &[usize],
) -> Option<Vec<Slot>> {
    let mut nodes = Nodes::new(tree, whole, straddlers)?;
    let mut held: Vec<Vec<usize>> = vec![Vec::new(); nodes.children.len()];
    let mut work = vec![(
        Piece {
            start: 0,
            len: units,
            grain: 0,
        },
        0usize,
    )];
    while let Some((piece, at)) = work.pop() {
        let to = nodes.deepest_fit(at, piece.len).unwrap_or(at);
        if nodes.children.get(to)?.is_empty() {
            nodes.take(to, piece.len);
            held.get_mut(to)?
                .extend(piece.start..piece.start + piece.len);
            continue;
        }
        let cut = nodes.cut(to, piece, chain)?;
        work.extend(cut.into_iter().rev());
    }
    let mut slots = vec![None; units];
    for (node, mut got) in held.into_iter().enumerate() {
        got.sort_unstable();
        for (index, unit) in got.into_iter().enumerate() {
            let slot = match nodes.leaf.get(node)? {
                Leaf::Domain(domain) => Slot::Whole {
                    domain: *domain,
                    index,
                },
                Leaf::Straddlers(list) => Slot::Straddler(*list.get(index)?),
                Leaf::No => return None,
            };
            *slots.get_mut(unit)? = Some(slot);
        }
    }
    slots.into_iter().collect()
}

/// What a node holds itself.
#[derive(Debug)]
enum Leaf {
    /// Nothing: its children hold the units.
    No,
    /// Whole units of a domain.
    Domain(usize),
    /// Straddling units.
    Straddlers(Vec<usize>),
}

/// The tree's nodes, with a child more under each node that straddling
/// units lie under, and the room (units) left in every subtree.
#[derive(Debug)]
struct Nodes {
    children: Vec<Vec<usize>>,
    parent: Vec<usize>,
    depth: Vec<usize>,
    leaf: Vec<Leaf>,
    room: Vec<usize>,
}

impl Nodes {
    fn new(tree: &Tree, whole: &[usize], straddlers: &[usize]) -> Option<Nodes> {
        let source = tree.nodes();
        let mut nodes = Nodes {
            children: source.iter().map(|n| n.children.clone()).collect(),
            parent: source.iter().map(|n| n.parent).collect(),
            depth: source.iter().map(|n| n.depth).collect(),
            leaf: source
                .iter()
                .map(|n| n.domain.map_or(Leaf::No, Leaf::Domain))
                .collect(),
            room: source
                .iter()
                .map(|n| n.domain.and_then(|d| whole.get(d).copied()).unwrap_or(0))
                .collect(),
        };
        let mut under: Vec<Vec<usize>> = vec![Vec::new(); source.len()];
        for (s, &n) in straddlers.iter().enumerate() {
            under.get_mut(n)?.push(s);
        }
        for (n, list) in under.into_iter().enumerate() {
            if list.is_empty() {
                continue;
            }
            let id = nodes.children.len();
            nodes.children.get_mut(n)?.push(id);
            nodes.children.push(Vec::new());
            nodes.parent.push(n);
            nodes.depth.push(nodes.depth.get(n)? + 1);
            nodes.room.push(list.len());
            nodes.leaf.push(Leaf::Straddlers(list));
        }
        // A subtree's room: its leaves'. Children come after their parent
        // but the added ones, which are leaves.
        for n in (0..source.len()).rev() {
            let below: usize = nodes
                .children
                .get(n)?
                .iter()
                .map(|&c| nodes.room.get(c).copied().unwrap_or(0))
                .sum();
            *nodes.room.get_mut(n)? += below;
        }
        Some(nodes)
    }

    /// The deepest node strictly below `at` with room for `len` units, the
    /// one with the least room among those (ties: the tree's order).
    fn deepest_fit(&self, at: usize, len: usize) -> Option<usize> {
        // (depth, room, node), best first by depth then least room.
        let mut best: Option<(usize, usize, usize)> = None;
        let mut stack: Vec<usize> = self.children.get(at)?.iter().rev().copied().collect();
        while let Some(n) = stack.pop() {
            let room = self.room.get(n).copied().unwrap_or(0);
            if room < len {
                continue;
            }
            let depth = self.depth.get(n).copied().unwrap_or(0);
            if best.is_none_or(|(d, r, _)| depth > d || (depth == d && room < r)) {
                best = Some((depth, room, n));
            }
            if let Some(c) = self.children.get(n) {
                stack.extend(c.iter().rev());
            }
        }
        best.map(|(_, _, n)| n)
    }

    /// Takes `len` units of room at leaf `node` and above it.
    fn take(&mut self, mut node: usize, len: usize) {
        loop {
            if let Some(r) = self.room.get_mut(node) {
                *r = r.saturating_sub(len);
            }
            let up = self.parent.get(node).copied().unwrap_or(0);
            if up == node {
                return;
            }
            node = up;
        }
    }

    /// `piece`, which no node below `at` holds whole, cut among `at`'s
    /// children: its blocks of the next size to the children with the most
    /// room first, the blocks that fit in none cut again; each child's
    /// blocks laid out in the children's order.
    fn cut(&self, at: usize, piece: Piece, chain: &[usize]) -> Option<Vec<(Piece, usize)>> {
        let children = self.children.get(at)?;
        let mut rooms: Vec<usize> = children
            .iter()
            .map(|&c| self.room.get(c).copied().unwrap_or(0))
            .collect();
        let mut out = Vec::new();
        let (mut start, mut len, mut grain) = (piece.start, piece.len, piece.grain);
        while len > 0 {
            let g = chain.get(grain).copied()?.max(1);
            if len <= g {
                // One block, and it did not fit: its blocks of the next size.
                grain += 1;
                continue;
            }
            let mut most: Vec<usize> = (0..children.len())
                .filter(|&i| rooms.get(i).is_some_and(|&r| r >= g))
                .collect();
            most.sort_by_key(|&i| std::cmp::Reverse(rooms.get(i).copied().unwrap_or(0)));
            let mut blocks = len / g;
            let mut got: Vec<(usize, usize)> = Vec::new();
            for i in most {
                if blocks == 0 {
                    break;
                }
                let room = rooms.get_mut(i)?;
                let n = (*room / g).min(blocks);
                *room -= n * g;
                blocks -= n;
                got.push((i, n));
            }
            got.sort_unstable();
            for (i, n) in got {
                let piece = Piece {
                    start,
                    len: n * g,
                    grain,
                };
                out.push((piece, *children.get(i)?));
                start += n * g;
            }
            len = blocks * g;
            grain += 1;
        }
        Some(out)
    }
}
