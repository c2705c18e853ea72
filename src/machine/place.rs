//! The node order: which host runs each logical node of a job, so that the
//! groups that must stay inside an NVLink domain do.

use std::collections::BTreeMap;

use fnv::FnvHashMap;

use crate::error::{Error, Result};
use crate::machine::hosts::Hosts;

/// One kind's groups, as ranks of the job counted from 0 (a layout's rank
/// minus its `rank_offset`), under a name for reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindGroups {
    /// The kind's name (`tp`, `etp-ep`, a mesh's dim set).
    pub name: String,
    /// Every group's members.
    pub groups: Vec<Vec<u32>>,
}

/// What to do when the domains cannot hold every unit whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
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
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct PlaceOptions {
    /// GPUs (ranks) per node; `None`: the hosts' common GPU count.
    pub gpus_per_node: Option<u32>,
    /// The policy when the domains fall short.
    pub shortfall: Shortfall,
}

/// A job placed on hosts: logical node `n` (ranks `n*G .. (n+1)*G`, GPU =
/// local rank) runs on host `node_hosts[n]` (an index into the [`Hosts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// order, hosts with fewer GPUs), in words.
    pub notes: Vec<String>,
}

/// How a kind's groups fall on the hosts' topology.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// Places a job of `world` ranks on `hosts`, keeping every group of the
/// `must_fit` kinds inside one domain where the domains allow it.
///
/// The unit is the smallest block of consecutive logical nodes holding
/// whole groups of every must-fit kind (`k` nodes); the job is `world / (G
/// k)` units. When the domains hold enough whole units (`sum floor(n_d /
/// k) >= units`), every unit is placed inside one domain, the largest
/// domains first (the fewest domains used, consecutive units together, so
/// pipelines and data-parallel groups spread over few domains) and no
/// must-fit group crosses. Otherwise, with [`Shortfall::Straddle`], the
/// domains' whole units are filled and the rest straddle the leftover
/// hosts, largest leftovers first: exactly `units - sum floor(n_d / k)`
/// units cross, each over as few domains as the leftovers allow. Hosts of
/// an unknown domain never join one. Deterministic: the host table's
/// canonical order decides every tie.
///
/// ```
/// use rank_layout::machine::{place, Hosts, KindGroups, PlaceOptions};
/// // 4 hosts of 2 GPUs in two racks listed interleaved; tp groups of 4.
/// let hosts = Hosts::parse_plain("a0 r0 2\na1 r1 2\na2 r0 2\na3 r1 2\n")?;
/// let tp = KindGroups { name: "tp".into(), groups: vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]] };
/// let plan = place(8, &[tp.clone()], &hosts, &PlaceOptions::default())?;
/// assert_eq!((plan.unit_nodes, plan.node_hosts.clone()), (2, vec![0, 2, 1, 3]));
/// assert_eq!(plan.crossing(&hosts, &tp).domain_crossing(), 0);
/// # Ok::<(), rank_layout::Error>(())
/// ```
///
/// # Errors
/// [`Error::NoPlacement`] when the hosts are too few, a must-fit group is
/// larger than every domain (with the sizes that would fit), the GPUs per
/// node are unknown or do not divide the world, or the domains fall short
/// under [`Shortfall::Fail`].
pub fn place(
    world: u32,
    must_fit: &[KindGroups],
    hosts: &Hosts,
    options: &PlaceOptions,
) -> Result<NodePlan> {
    let mut notes = Vec::new();
    let g = gpus_per_node(hosts, options.gpus_per_node)?;
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
    if (usable.len() as u64) < u64::from(nodes) {
        return Err(no(format!(
            "the job needs {nodes} nodes of {g} GPUs; the table has {} usable host(s) ({} not healthy)",
            usable.len(),
            unhealthy.len()
        )));
    }
    // Domains: known keys, each host of an unknown domain alone.
    let mut by_key: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut alone = Vec::new();
    for &i in &usable {
        match hosts.get(i).and_then(|h| h.domain()) {
            Some(key) => by_key.entry(key).or_default().push(i),
            None => alone.push(i),
        }
    }
    let largest = by_key
        .values()
        .map(Vec::len)
        .max()
        .unwrap_or(0)
        .max(1.min(alone.len()));
    // The unit.
    let mut block = 1u64;
    for kind in must_fit {
        let b = aligned_block(world, kind)?;
        let size = kind.groups.iter().map(Vec::len).max().unwrap_or(1) as u64;
        let span_nodes = size.div_ceil(u64::from(g));
        if span_nodes > largest as u64 {
            return Err(no(format!(
                "{} groups are {size} GPUs ({span_nodes} nodes of {g}) and the largest domain holds {largest} node(s) ({} GPUs): no order or host permutation keeps them inside one; {} groups of at most {} GPUs would fit (smaller sizes of its axes), or drop it from the must-fit kinds",
                kind.name,
                largest as u64 * u64::from(g),
                kind.name,
                largest as u64 * u64::from(g)
            )));
        }
        if b > size {
            notes.push(format!(
                "{} is not contiguous in the order: a block of {b} consecutive ranks holds whole groups of {size}; put its axes first in the order for a smaller unit",
                kind.name
            ));
        }
        block = lcm(block, b);
    }
    let unit_ranks = lcm(block, u64::from(g));
    let k = (unit_ranks / u64::from(g)) as u32;
    if u64::from(world) % unit_ranks != 0 {
        return Err(no(format!(
            "the unit of {unit_ranks} ranks does not divide the job's {world}"
        )));
    }
    let units = nodes / k;
    let mut domains: Vec<(&str, Vec<usize>)> = by_key.into_iter().collect();
    let ku = k as usize;
    // Largest whole capacity first, then the most hosts, then the key.
    domains.sort_by(|a, b| {
        (b.1.len() / ku)
            .cmp(&(a.1.len() / ku))
            .then(b.1.len().cmp(&a.1.len()))
            .then(a.0.cmp(b.0))
    });
    let mut whole_units: u64 = domains.iter().map(|d| (d.1.len() / ku) as u64).sum();
    if k == 1 {
        whole_units += alone.len() as u64;
    }
    if whole_units < u64::from(units) && options.shortfall != Shortfall::Straddle {
        return Err(no(format!(
            "the domains hold {whole_units} whole unit(s) of {k} node(s) and the job needs {units}: {} would straddle domains",
            u64::from(units) - whole_units
        )));
    }
    let mut node_hosts: Vec<usize> = Vec::with_capacity(nodes as usize);
    let mut leftovers: Vec<(String, Vec<usize>)> = Vec::new();
    let mut left = units as usize;
    for (key, members) in &domains {
        let take = (members.len() / ku).min(left);
        let (whole, rest) = members.split_at(take * ku);
        node_hosts.extend_from_slice(whole);
        left -= take;
        leftovers.push((key.to_string(), rest.to_vec()));
    }
    for &i in &alone {
        leftovers.push((String::new(), vec![i]));
    }
    if k == 1 {
        // A lone host holds a whole unit of one node.
        let mut rest = Vec::new();
        for (key, members) in leftovers {
            if key.is_empty() && left > 0 {
                node_hosts.extend_from_slice(&members);
                left -= 1;
            } else {
                rest.push((key, members));
            }
        }
        leftovers = rest;
    }
    let straddling = left as u32;
    // The rest straddles the leftovers, largest first.
    leftovers.retain(|(_, m)| !m.is_empty());
    leftovers.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
    let mut pieces: Vec<std::collections::VecDeque<usize>> =
        leftovers.into_iter().map(|(_, m)| m.into()).collect();
    while left > 0 {
        let mut need = ku;
        while need > 0 {
            // The largest piece (ties: the earliest).
            let Some(piece) = pieces
                .iter_mut()
                .rev()
                .max_by_key(|p| p.len())
                .filter(|p| !p.is_empty())
            else {
                break;
            };
            let take = need.min(piece.len());
            node_hosts.extend(piece.drain(..take));
            need -= take;
        }
        left -= 1;
    }
    let used: std::collections::BTreeSet<usize> = node_hosts.iter().copied().collect();
    let idle = usable
        .iter()
        .copied()
        .filter(|i| !used.contains(i))
        .collect();
    Ok(NodePlan {
        gpus_per_node: g,
        node_hosts,
        idle,
        unhealthy,
        unit_nodes: k,
        units,
        whole_units,
        straddling_units: straddling,
        notes,
    })
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
        let nodes = (world / g) as usize;
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
            units: nodes as u32,
            whole_units: nodes as u64,
            straddling_units: 0,
            notes: Vec::new(),
        })
    }

    /// The host (index) that runs job rank `rank`.
    pub fn host_of(&self, rank: u32) -> Option<usize> {
        self.node_hosts
            .get((rank / self.gpus_per_node) as usize)
            .copied()
    }

    /// How `kind`'s groups fall on the hosts' topology levels.
    ///
    /// O(levels x (hosts + members)): each level's keys are numbered once
    /// and a group's distinct keys counted with a stamp per key.
    pub fn crossing(&self, hosts: &Hosts, kind: &KindGroups) -> Crossing {
        let levels = hosts.levels().max(1);
        let mut crossing = vec![0; levels];
        let mut widest = vec![0; levels];
        for (level, (crossed, wide)) in crossing.iter_mut().zip(widest.iter_mut()).enumerate() {
            let (ids, count) = key_ids(hosts, level, levels);
            // stamp[id] == group number + 1: the key is counted for it.
            let mut stamp = vec![0usize; count];
            for (g, group) in kind.groups.iter().enumerate() {
                let mut spanned = 0;
                for &r in group {
                    let Some(id) = self.host_of(r).and_then(|h| ids.get(h)) else {
                        continue;
                    };
                    if let Some(s) = stamp.get_mut(*id) {
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

/// Every host's key at topology `level` (of `levels`; the innermost is the
/// domain) as a number, equal numbers for equal keys; a host with no key
/// there gets a number of its own (an unknown key is the host's own).
/// Returns the numbers by host and how many there are.
fn key_ids(hosts: &Hosts, level: usize, levels: usize) -> (Vec<usize>, usize) {
    let mut known: FnvHashMap<&str, usize> = FnvHashMap::default();
    let mut ids = Vec::with_capacity(hosts.len());
    let mut next = 0;
    for host in hosts.iter() {
        let key = if level + 1 == levels {
            host.domain()
        } else {
            host.keys.get(level).map(String::as_str)
        };
        let id = match key {
            Some(k) => *known.entry(k).or_insert_with(|| {
                next += 1;
                next - 1
            }),
            None => {
                next += 1;
                next - 1
            }
        };
        ids.push(id);
    }
    (ids, next)
}

fn gpus_per_node(hosts: &Hosts, given: Option<u32>) -> Result<u32> {
    if let Some(g) = given {
        if g == 0 {
            return Err(no("GPUs per node must be at least 1".to_string()));
        }
        return Ok(g);
    }
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    for h in hosts.iter().filter(|h| h.healthy) {
        if let Some(n) = h.gpus {
            *counts.entry(n).or_default() += 1;
        }
    }
    match counts.len() {
        0 => Err(no(
            "the GPUs per node are unknown: give them in the host table or as PlaceOptions::gpus_per_node"
                .to_string(),
        )),
        1 => Ok(*counts.keys().next().unwrap_or(&1)),
        _ => Err(no(format!(
            "the healthy hosts have different GPU counts ({}): give the GPUs per node (PlaceOptions::gpus_per_node)",
            counts
                .keys()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The smallest block of consecutive ranks, aligned, dividing `world`,
/// that holds each of `kind`'s groups whole.
fn aligned_block(world: u32, kind: &KindGroups) -> Result<u64> {
    let size = kind.groups.iter().map(Vec::len).max().unwrap_or(1) as u64;
    let mut candidates: Vec<u64> = (1..=u64::from(world).isqrt())
        .filter(|d| u64::from(world) % d == 0)
        .flat_map(|d| [d, u64::from(world) / d])
        .filter(|&d| d >= size)
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    for d in candidates {
        let fits = kind.groups.iter().all(|group| {
            let lo = group.iter().min().copied().unwrap_or(0);
            let hi = group.iter().max().copied().unwrap_or(0);
            u64::from(lo) / d == u64::from(hi) / d
        });
        if fits {
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
