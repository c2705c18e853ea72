//! The node order: which host runs each logical node of a job, so that the
//! groups that must stay inside an NVLink domain do, and the other kinds'
//! groups stay under as few parents of the topology tree as it allows.

use crate::cast::{to_u64, to_usize};
use std::borrow::Cow;
use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::machine::fill::{Slot, fill};
use crate::machine::hosts::Hosts;
use crate::machine::straddle::straddlers;
use crate::machine::tree::{LevelKeys, Tree};

/// One kind's groups, as ranks of the job counted from 0 (a layout's rank
/// minus its `rank_offset`), under a name for reports.
///
/// ```
/// use rank_layout::machine::KindGroups;
/// let tp = KindGroups::new("tp", vec![vec![0, 1], vec![2, 3]]);
/// assert_eq!((tp.name.as_str(), tp.groups.len()), ("tp", 2));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct KindGroups {
    /// The kind's name (`tp`, `etp-ep`, a mesh's dim set).
    pub name: String,
    /// Every group's members.
    pub groups: Vec<Vec<u32>>,
}

impl KindGroups {
    /// The groups `groups` under the name `name`.
    pub fn new(name: impl Into<String>, groups: Vec<Vec<u32>>) -> KindGroups {
        KindGroups {
            name: name.into(),
            groups,
        }
    }
}

/// What to do when the domains cannot hold every unit whole. New policies
/// may be added: a `match` on it needs a `_` arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Shortfall {
    /// Use every rank: the fewest units straddle domains (the lower bound),
    /// each over as few domains as possible.
    #[default]
    Straddle,
    /// A smaller job that fits whole, idling the remainders:
    /// [`place_layout`](crate::machine::place_layout) lowers the layout's
    /// data-parallel size; [`place`], which knows no layout, refuses as
    /// with [`Shortfall::Fail`].
    Shrink,
    /// Refuse ([`Error::NoPlacement`]).
    Fail,
}

/// How [`place`] places.
///
/// ```
/// use rank_layout::machine::{PlaceOptions, Shortfall};
/// let options = PlaceOptions::default().gpus_per_node(4).shortfall(Shortfall::Fail);
/// assert_eq!((options.gpus_per_node, options.shortfall), (Some(4), Shortfall::Fail));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct PlaceOptions {
    /// GPUs (ranks) per node; `None`: the hosts' common GPU count.
    pub gpus_per_node: Option<u32>,
    /// The policy when the domains fall short.
    pub shortfall: Shortfall,
}

impl PlaceOptions {
    /// With `gpus` GPUs (ranks) per node.
    #[must_use]
    pub fn gpus_per_node(mut self, gpus: u32) -> PlaceOptions {
        self.gpus_per_node = Some(gpus);
        self
    }

    /// With the policy `shortfall` when the domains fall short.
    #[must_use]
    pub fn shortfall(mut self, shortfall: Shortfall) -> PlaceOptions {
        self.shortfall = shortfall;
        self
    }
}

/// A job placed on hosts: logical node `n` (ranks `n*G .. (n+1)*G`, GPU =
/// local rank) runs on host `node_hosts[n]` (an index into the [`Hosts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodePlan {
    /// GPUs (ranks) per node.
    pub gpus_per_node: u32,
    /// The host of each logical node, by index into the host table.
    pub node_hosts: Vec<usize>,
    /// Healthy hosts the job does not use, in the table's order.
    pub idle: Vec<usize>,
    /// Hosts not healthy (never placed).
    pub unhealthy: Vec<usize>,
    /// The unit: consecutive logical nodes holding whole groups of every
    /// must-fit kind.
    pub unit_nodes: u32,
    /// The job's units.
    pub units: u32,
    /// Units the domains can hold whole (`sum floor(n_d / k)`).
    pub whole_units: u64,
    /// Units placed across domains (`units - whole_units` when short, else 0).
    pub straddling_units: u32,
    /// What the placement noticed (a must-fit kind not contiguous in the
    /// order, hosts with fewer GPUs, the table's order kept), in words.
    pub notes: Vec<String>,
    /// Every kind [`place`] was given (the must-fit kinds, then the
    /// others), and how its groups fall on every topology level, placed and
    /// in the table's order; empty for [`NodePlan::plain`].
    pub kinds: Vec<KindCrossing>,
    /// Whether the node order is the table's: where the two first differ,
    /// compared kind by kind and level by level, the table's order crossed
    /// fewer groups (see [`place`]).
    pub table_order: bool,
}

/// How a kind's groups fall on the hosts' topology.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Crossing {
    /// The kind's name.
    pub name: String,
    /// Its number of groups.
    pub groups: usize,
    /// By topology level, outermost first (the last is the domain): the
    /// groups whose members sit under more than one key of that level.
    pub crossing: Vec<usize>,
    /// By level: the most keys of that level one group spans.
    pub widest: Vec<usize>,
}

impl Crossing {
    /// The groups that span more than one domain (the innermost level).
    pub fn domain_crossing(&self) -> usize {
        self.crossing.last().copied().unwrap_or(0)
    }
}

/// One kind of a placement: how its groups fall placed, and in the table's
/// order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KindCrossing {
    /// Whether it is a must-fit kind.
    pub must_fit: bool,
    /// Its groups on the placement's hosts, by level.
    pub placed: Crossing,
    /// Its groups with the job on the first usable hosts of the table's
    /// order ([`NodePlan::plain`]), by level; `None` when those are too
    /// few.
    pub plain: Option<Crossing>,
}

/// Places a job of `world` ranks on `hosts`, keeping every group of the
/// `must_fit` kinds inside one domain where the domains allow it, and the
/// groups of the `others` kinds (`dp`, `pp`, ...) under as few parents of
/// the topology tree as it allows.
///
/// **The unit** is the smallest block of consecutive logical nodes holding
/// whole groups of every must-fit kind (`k` nodes); the job is `world / (G
/// k)` units. **The tree**: the usable hosts' domains grouped under their
/// parents level by level (the hosts' topology keys, outermost first), the
/// keys of each level in natural order (`switch.1.2` before
/// `switch.1.10`).
///
/// - When the domains hold enough whole units (`sum floor(n_d / k) >=
///   units`), every unit is placed inside one domain and no must-fit group
///   crosses. Otherwise, with [`Shortfall::Straddle`], every domain's
///   whole units are used and exactly `units - sum floor(n_d / k)` units
///   straddle the leftover hosts (the lower bound), each over as few
///   domains as the leftovers allow and **cut at the boundaries of the
///   must-fit kinds' smaller groups** (a `tp` group of 2 nodes inside an
///   `etp-ep` unit of 4 stays whole where some leftover holds 2 nodes).
/// - **Hosts of an unknown domain** never join a domain, and are used only
///   when the known hosts cannot hold the job.
/// - **Level by level**, the runs of consecutive units that hold whole
///   groups of the other kinds (a pipeline stage holds whole data-parallel
///   groups) go down the tree: each whole to the deepest node with room for
///   it, the one with the least room to spare; where none below has room,
///   cut into its shorter runs, given to the children with the most room
///   first. Where nothing else decides, units follow the tree's order.
/// - **Never worse than the table's order** ([`NodePlan::plain`]): the two
///   are compared kind by kind (the must-fit kinds, then the others by
///   their run, shortest first) and level by level (from the domain
///   outwards); where they first differ the placement crosses fewer
///   groups, or the table's order is kept ([`NodePlan::table_order`], with
///   a note), unless it straddles more units or takes hosts of an unknown
///   domain the job does not need. So for every kind given and every
///   level the placement crosses no more groups than the table's order, or
///   fewer somewhere compared before. Without `others` only the must-fit
///   kinds are compared.
///
/// Deterministic: the host table's canonical order and the keys' natural
/// order decide every tie.
///
/// ```
/// use rank_layout::machine::{place, Hosts, KindGroups, PlaceOptions};
/// // 4 hosts of 2 GPUs in two racks listed interleaved; tp groups of 4.
/// let hosts = Hosts::parse_plain("a0 r0 2\na1 r1 2\na2 r0 2\na3 r1 2\n")?;
/// let tp = KindGroups::new("tp", vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
/// let plan = place(8, &[tp.clone()], &[], &hosts, &PlaceOptions::default())?;
/// assert_eq!((plan.unit_nodes, plan.node_hosts.clone()), (2, vec![0, 2, 1, 3]));
/// assert_eq!(plan.crossing(&hosts, &tp).domain_crossing(), 0);
/// // The same groups in the table's order: both cross.
/// assert_eq!(plan.kinds[0].plain.as_ref().map(|c| c.domain_crossing()), Some(2));
/// // Too few hosts.
/// assert!(place(16, &[tp], &[], &hosts, &PlaceOptions::default()).is_err());
/// # Ok::<(), rank_layout::Error>(())
/// ```
///
/// # Errors
/// [`Error::NoPlacement`] when the hosts are too few, a must-fit group is
/// larger than every domain (with the sizes that would fit), the GPUs per
/// node are unknown or do not divide the world, or the domains fall short
/// under [`Shortfall::Fail`]; the same for a kind with a rank beyond the
/// job's.
pub fn place(
    world: u32,
    must_fit: &[KindGroups],
    others: &[KindGroups],
    hosts: &Hosts,
    options: &PlaceOptions,
) -> Result<NodePlan> {
    place_with(
        world,
        must_fit,
        || Ok(Cow::Borrowed(others)),
        hosts,
        options,
    )
}

/// [`place`], the other kinds built only once the job is known to fit.
pub(crate) fn place_with<'a>(
    world: u32,
    must_fit: &[KindGroups],
    others: impl FnOnce() -> Result<Cow<'a, [KindGroups]>>,
    hosts: &Hosts,
    options: &PlaceOptions,
) -> Result<NodePlan> {
    let mut notes = Vec::new();
    let g = hosts.gpus_per_node(options.gpus_per_node)?;
    if world == 0 || world % g != 0 {
        return Err(no(format!(
            "the job's {world} ranks are not a whole number of nodes of {g} GPUs"
        )));
    }
    let nodes = world / g;
    let unhealthy: Vec<usize> = (0..hosts.len())
        .filter(|&i| hosts.get(i).is_some_and(|h| !h.healthy))
        .collect();
    let mut usable = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        if !h.healthy {
            continue;
        }
        match h.gpus {
            Some(n) if n < g => notes.push(format!(
                "host {} has {n} GPUs, fewer than {g}: not used",
                h.name
            )),
            _ => usable.push(i),
        }
    }
    if to_u64(usable.len()) < u64::from(nodes) {
        return Err(no(format!(
            "the job needs {nodes} nodes of {g} GPUs; the table has {} usable host(s) ({} not healthy)",
            usable.len(),
            unhealthy.len()
        )));
    }
    let tree = Tree::new(hosts, &usable);
    let domains = tree.domains();
    let largest = domains
        .iter()
        .map(|d| d.hosts.len())
        .max()
        .unwrap_or(0)
        .max(1);
    // The unit, and the must-fit kinds' blocks in nodes inside it.
    let mut block = 1u64;
    let mut inner = Vec::new();
    for kind in must_fit {
        let b = aligned_block(world, kind)?;
        let size = to_u64(kind.groups.iter().map(Vec::len).max().unwrap_or(1));
        let span_nodes = size.div_ceil(u64::from(g));
        if span_nodes > to_u64(largest) {
            return Err(no(format!(
                "{} groups are {size} GPUs ({span_nodes} nodes of {g}) and the largest domain holds {largest} node(s) ({} GPUs): no order or host permutation keeps them inside one; {} groups of at most {} GPUs would fit (smaller sizes of its axes), or drop it from the must-fit kinds",
                kind.name,
                to_u64(largest) * u64::from(g),
                kind.name,
                to_u64(largest) * u64::from(g)
            )));
        }
        if b > size {
            notes.push(format!(
                "{} is not contiguous in the order: a block of {b} consecutive ranks holds whole groups of {size}; put its axes first in the order for a smaller unit",
                kind.name
            ));
        }
        block = lcm(block, b);
        inner.push(lcm(b, u64::from(g)) / u64::from(g));
    }
    let unit_ranks = lcm(block, u64::from(g));
    if u64::from(world) % unit_ranks != 0 {
        return Err(no(format!(
            "the unit of {unit_ranks} ranks does not divide the job's {world}"
        )));
    }
    // unit_ranks divides world (a u32) and g does too: k fits in u32.
    let k = u32::try_from(unit_ranks / u64::from(g))
        .map_err(|_| no(format!("the unit of {unit_ranks} ranks is too large")))?;
    let units = nodes / k;
    let ku = to_usize(k);
    let known_whole: u64 = domains
        .iter()
        .filter(|d| d.known)
        .map(|d| to_u64(d.hosts.len() / ku))
        .sum();
    let alone = to_u64(domains.iter().filter(|d| !d.known).count());
    let whole_units = known_whole + if k == 1 { alone } else { 0 };
    if whole_units < u64::from(units) && options.shortfall != Shortfall::Straddle {
        return Err(no(format!(
            "the domains hold {whole_units} whole unit(s) of {k} node(s) and the job needs {units}: {} would straddle domains",
            u64::from(units) - whole_units
        )));
    }
    let others = others()?;
    // Every kind with its run of units; the others' runs keep units
    // together, and order the comparison: must-fit kinds first, then the
    // kinds of shorter runs.
    let mut kinds: Vec<(bool, u64, &KindGroups)> = Vec::new();
    for (must, kind) in must_fit
        .iter()
        .map(|kind| (true, kind))
        .chain(others.iter().map(|kind| (false, kind)))
    {
        let run = lcm(aligned_block(world, kind)?, unit_ranks) / unit_ranks;
        kinds.push((must, run, kind));
    }
    kinds.sort_by_key(|&(must, run, _)| (!must, if must { 0 } else { run }));
    let runs: Vec<u64> = kinds.iter().map(|&(_, run, _)| run).collect();
    let (node_hosts, straddling) = tree_order(
        &tree,
        ku,
        to_usize(units),
        &nested(k.into(), &inner),
        &nested(units.into(), &runs),
    )?;
    let mut plan = NodePlan {
        gpus_per_node: g,
        idle: Vec::new(),
        node_hosts,
        unhealthy,
        unit_nodes: k,
        units,
        whole_units,
        straddling_units: straddling,
        notes,
        kinds: Vec::new(),
        table_order: false,
    };
    let kinds: Vec<(bool, &KindGroups)> = kinds.into_iter().map(|(m, _, kind)| (m, kind)).collect();
    against_table(&mut plan, &kinds, hosts, world);
    let used: BTreeSet<usize> = plan.node_hosts.iter().copied().collect();
    plan.idle = usable.into_iter().filter(|i| !used.contains(i)).collect();
    Ok(plan)
}

/// Compares `plan` (the tree's order) with the table's order on `kinds`
/// (must-fit or not, in the order of the comparison), keeps the table's
/// order where it is better ([`place`]), and records both crossings.
fn against_table(plan: &mut NodePlan, kinds: &[(bool, &KindGroups)], hosts: &Hosts, world: u32) {
    let keys = LevelKeys::new(hosts);
    let crossings = |p: &NodePlan| -> Vec<Crossing> {
        kinds
            .iter()
            .map(|(_, kind)| p.crossing_on(&keys, kind))
            .collect()
    };
    let mut placed = crossings(plan);
    let plain = NodePlan::plain(world, hosts, plan.gpus_per_node).ok();
    let table = plain.as_ref().map(crossings);
    if let (Some(plain), Some(table)) = (&plain, &table) {
        let k = to_usize(plan.unit_nodes);
        let eligible = straddled(plain, hosts, k) <= plan.straddling_units
            && unknown(plain, hosts) <= unknown(plan, hosts);
        let nowhere_worse = placed
            .iter()
            .zip(table)
            .all(|(p, t)| worse_level(p, t).is_none());
        // The first kind and level (innermost first) where they differ.
        let first = placed.iter().zip(table).find_map(|(p, t)| {
            p.crossing
                .iter()
                .zip(&t.crossing)
                .enumerate()
                .rev()
                .find(|(_, (x, y))| x != y)
                .map(|(level, (x, y))| (t.name.as_str(), level, y < x))
        });
        if let (true, false, Some((name, level, true))) = (eligible, nowhere_worse, first) {
            plan.notes.push(format!(
                "the table's order is kept: it puts fewer {name} groups across topology level {level} (0 the outermost), and the tree's order is better only for kinds compared later"
            ));
            plan.straddling_units = straddled(plain, hosts, k);
            plan.node_hosts.clone_from(&plain.node_hosts);
            plan.table_order = true;
            placed.clone_from(table);
        }
    }
    let mut table = table.map(Vec::into_iter);
    plan.kinds = kinds
        .iter()
        .zip(placed)
        .map(|((must, _), placed)| KindCrossing {
            must_fit: *must,
            placed,
            plain: table.as_mut().and_then(Iterator::next),
        })
        .collect();
}

/// The tree's node order of `units` units of `k` nodes, cut at the `inner`
/// block sizes (nodes) when they straddle and kept together by the `outer`
/// ones (units); and how many units straddle.
fn tree_order(
    tree: &Tree,
    k: usize,
    units: usize,
    inner: &[usize],
    outer: &[usize],
) -> Result<(Vec<usize>, u32)> {
    let domains = tree.domains();
    let known_whole: usize = domains
        .iter()
        .filter(|d| d.known)
        .map(|d| d.hosts.len() / k)
        .sum();
    // Hosts of an unknown domain hold a unit of one node only when the
    // known hosts cannot hold the job.
    let whole: Vec<usize> = domains
        .iter()
        .map(|d| {
            if d.known {
                d.hosts.len() / k
            } else {
                usize::from(k == 1 && known_whole < units)
            }
        })
        .collect();
    let short = units.saturating_sub(whole.iter().sum());
    let leftovers: Vec<Vec<usize>> = domains
        .iter()
        .zip(&whole)
        .map(|(d, &w)| d.hosts.get(w * k..).unwrap_or_default().to_vec())
        .collect();
    let grains = inner.get(1..).unwrap_or_default();
    let straddling = if short > 0 {
        straddlers(tree, &leftovers, k, grains, short)
            .ok_or_else(|| no("the leftover hosts cannot hold the straddling units".to_string()))?
    } else {
        Vec::new()
    };
    let at: Vec<usize> = straddling.iter().map(|s| s.node).collect();
    let slots = fill(tree, &whole, &at, units, outer)
        .ok_or_else(|| no("the domains cannot hold the job's units".to_string()))?;
    let mut node_hosts = Vec::with_capacity(units * k);
    for slot in slots {
        let hosts = match slot {
            Slot::Whole { domain, index } => domains
                .get(domain)
                .and_then(|d| d.hosts.get(index * k..(index + 1) * k)),
            Slot::Straddler(s) => straddling.get(s).map(|s| s.hosts.as_slice()),
        };
        node_hosts.extend_from_slice(hosts.unwrap_or_default());
    }
    if node_hosts.len() != units * k {
        return Err(no("a unit has no hosts".to_string()));
    }
    // At most `units`, a u32.
    let straddling = u32::try_from(straddling.len()).unwrap_or(u32::MAX);
    Ok((node_hosts, straddling))
}

/// The sizes among `sizes` that divide `top` and one another: `top`, then
/// the largest dividing it, the largest dividing that, ..., 1.
fn nested(top: u64, sizes: &[u64]) -> Vec<usize> {
    let mut all: Vec<u64> = sizes.iter().copied().filter(|&s| s >= 1).collect();
    all.sort_unstable_by(|a, b| b.cmp(a));
    let mut chain = vec![top.max(1)];
    for s in all.into_iter().chain([1]) {
        if let Some(&last) = chain.last() {
            if s < last && last % s == 0 {
                chain.push(s);
            }
        }
    }
    // Sizes of a job of at most u32::MAX ranks.
    chain
        .into_iter()
        .map(|s| usize::try_from(s).unwrap_or(usize::MAX))
        .collect()
}

/// The first level at which `a` crosses more groups than `b`.
fn worse_level(a: &Crossing, b: &Crossing) -> Option<usize> {
    a.crossing.iter().zip(&b.crossing).position(|(x, y)| x > y)
}

/// The units of `k` nodes of `plan` not inside one known domain.
fn straddled(plan: &NodePlan, hosts: &Hosts, k: usize) -> u32 {
    let count = plan
        .node_hosts
        .chunks(k.max(1))
        .filter(|unit| {
            let domain = |h: &usize| hosts.get(*h).and_then(|x| x.domain());
            let first = unit.first().and_then(domain);
            (first.is_none() && k > 1) || unit.iter().any(|h| domain(h) != first)
        })
        .count();
    // At most the plan's units, a u32.
    u32::try_from(count).unwrap_or(u32::MAX)
}

/// The hosts of an unknown domain `plan` uses.
fn unknown(plan: &NodePlan, hosts: &Hosts) -> usize {
    plan.node_hosts
        .iter()
        .filter(|&&h| hosts.get(h).is_some_and(|x| x.domain().is_none()))
        .count()
}

impl NodePlan {
    /// The plain node order: the job's nodes on the first usable hosts of
    /// the table's canonical order (what a launcher gives that knows no
    /// topology), for comparison.
    ///
    /// # Errors
    /// [`Error::NoPlacement`] when the hosts are too few.
    pub fn plain(world: u32, hosts: &Hosts, gpus_per_node: u32) -> Result<NodePlan> {
        let g = gpus_per_node.max(1);
        let nodes = to_usize(world / g);
        let usable: Vec<usize> = hosts
            .iter()
            .enumerate()
            .filter(|(_, h)| h.healthy && h.gpus.is_none_or(|n| n >= g))
            .map(|(i, _)| i)
            .collect();
        if usable.len() < nodes {
            return Err(no(format!(
                "the job needs {nodes} nodes; the table has {} usable",
                usable.len()
            )));
        }
        let (used, idle) = usable.split_at(nodes);
        Ok(NodePlan {
            gpus_per_node: g,
            node_hosts: used.to_vec(),
            idle: idle.to_vec(),
            unhealthy: (0..hosts.len())
                .filter(|&i| hosts.get(i).is_some_and(|h| !h.healthy))
                .collect(),
            unit_nodes: 1,
            units: world / g,
            whole_units: u64::from(world / g),
            straddling_units: 0,
            notes: Vec::new(),
            kinds: Vec::new(),
            table_order: true,
        })
    }

    /// The host (index) that runs job rank `rank`.
    pub fn host_of(&self, rank: u32) -> Option<usize> {
        self.node_hosts
            .get(to_usize(rank / self.gpus_per_node))
            .copied()
    }

    /// How `kind`'s groups fall on the hosts' topology levels.
    ///
    /// O(levels x (hosts + members)): each level's keys are numbered once
    /// and a group's distinct keys counted with a stamp per key.
    pub fn crossing(&self, hosts: &Hosts, kind: &KindGroups) -> Crossing {
        self.crossing_on(&LevelKeys::new(hosts), kind)
    }

    /// [`NodePlan::crossing`] on keys numbered beforehand.
    fn crossing_on(&self, keys: &LevelKeys, kind: &KindGroups) -> Crossing {
        let levels = keys.levels();
        let mut crossing = vec![0; levels];
        let mut widest = vec![0; levels];
        for (level, (crossed, wide)) in crossing.iter_mut().zip(widest.iter_mut()).enumerate() {
            let (ids, count) = keys.level(level);
            // The key of each logical node's host.
            let node_key: Vec<u32> = self
                .node_hosts
                .iter()
                .map(|&h| ids.get(h).copied().unwrap_or(u32::MAX))
                .collect();
            let g_per_node = self.gpus_per_node.max(1);
            // stamp[id] == group number + 1: the key is counted for it.
            let mut stamp = vec![0usize; count];
            for (g, group) in kind.groups.iter().enumerate() {
                let mut spanned = 0;
                for &r in group {
                    let Some(&id) = node_key.get(to_usize(r / g_per_node)) else {
                        continue;
                    };
                    if let Some(s) = stamp.get_mut(to_usize(id)) {
                        if *s != g + 1 {
                            *s = g + 1;
                            spanned += 1;
                        }
                    }
                }
                if spanned > 1 {
                    *crossed += 1;
                }
                *wide = (*wide).max(spanned);
            }
        }
        Crossing {
            name: kind.name.clone(),
            groups: kind.groups.len(),
            crossing,
            widest,
        }
    }
}

/// The smallest block of consecutive ranks, aligned, dividing `world`,
/// that holds each of `kind`'s groups whole.
///
/// O(groups x divisors of `world` + members): each group's lowest and
/// highest rank are found once.
fn aligned_block(world: u32, kind: &KindGroups) -> Result<u64> {
    let size = to_u64(kind.groups.iter().map(Vec::len).max().unwrap_or(1));
    let spans: Vec<(u64, u64)> = kind
        .groups
        .iter()
        .map(|group| {
            let lo = group.iter().min().copied().unwrap_or(0);
            let hi = group.iter().max().copied().unwrap_or(0);
            (u64::from(lo), u64::from(hi))
        })
        .collect();
    let mut candidates: Vec<u64> = (1..=u64::from(world).isqrt())
        .filter(|d| u64::from(world) % d == 0)
        .flat_map(|d| [d, u64::from(world) / d])
        .filter(|&d| d >= size)
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    for d in candidates {
        if spans.iter().all(|&(lo, hi)| lo / d == hi / d) {
            return Ok(d);
        }
    }
    Err(no(format!(
        "{} has a rank beyond the job's {world} ranks",
        kind.name
    )))
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn lcm(a: u64, b: u64) -> u64 {
    a / gcd(a, b) * b
}

fn no(problem: String) -> Error {
    Error::NoPlacement { problem }
}
