//! How the groups of a kind fall on nodes and domains.

use std::collections::{BTreeMap, HashMap};

use crate::plan::Plan;
use crate::plan::boxes::Boxes;
use crate::segment::{Digit, Segment};
use crate::topology::Topology;

/// How the groups of one kind fall on the nodes and domains of a
/// [`Topology`].
///
/// Created by [`Layout::spread`](crate::Layout::spread) and
/// [`Mesh::spread`](crate::Mesh::spread).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Spread {
    /// The number of groups.
    pub groups: u32,
    /// Members of the largest group.
    pub size: usize,
    /// Groups whose members are on more than one node.
    pub cross_node_groups: u32,
    /// The most nodes one group spans.
    pub max_nodes_per_group: u32,
    /// Groups whose members are in more than one domain (with domains).
    pub cross_domain_groups: Option<u32>,
    /// The most domains one group spans (with domains).
    pub max_domains_per_group: Option<u32>,
}

/// Groups crossing a boundary every `unit` ranks, and the most units one spans.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Count {
    crossing: u64,
    most: u32,
}

impl Count {
    fn add(self, other: Count) -> Count {
        Count {
            crossing: self.crossing + other.crossing,
            most: self.most.max(other.most),
        }
    }
}

/// The number of distinct `rank / unit` among ascending-or-not `ranks`.
fn units(ranks: &mut [u32], unit: u32) -> u32 {
    ranks.sort_unstable();
    let mut n = 0u32;
    let mut last = None;
    for r in ranks.iter() {
        let u = r / unit;
        if last != Some(u) {
            n += 1;
            last = Some(u);
        }
    }
    n
}

/// The units spanned by the box `first + spread(p, digits)`, from the
/// strides when the digits nest (each stride beyond the span of the
/// smaller ones, as a grid's do): see [`nested_units`]. Otherwise the
/// members are listed.
fn box_units(first: u32, digits: &[Digit], unit: u32) -> u32 {
    let mut sorted: Vec<Digit> = digits.iter().filter(|d| d.size > 1).copied().collect();
    sorted.sort_unstable_by_key(|d| d.stride);
    let mut span = 0u64;
    for d in &sorted {
        if u64::from(d.stride) <= span {
            let size: usize = digits.iter().map(|d| d.size as usize).product();
            let mut members = vec![0u32; size];
            Segment::boxed(first, digits).fill(&mut members);
            return units(&mut members, unit);
        }
        span += u64::from(d.size - 1) * u64::from(d.stride);
    }
    let mut memo = HashMap::new();
    let n = nested_units(u64::from(first % unit), &sorted, unit, &mut memo);
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The greatest common divisor.
fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The units spanned by the box of nested `digits` (ascending strides)
/// whose first member is `r` (below `unit`; a box's count depends only on
/// its first member modulo `unit`).
///
/// The box is `N` copies of the box of the inner digits, `S` apart (the
/// outermost digit), each copy wholly below the next, so the copies' units
/// are counted and a unit shared by a copy's last member and the next
/// copy's first is subtracted. Both depend only on the copy's first member
/// modulo `unit`, which repeats every `unit / gcd(S, unit)` copies: each
/// residue is counted once, weighted by its copies, and memoised, so the
/// work is at most `unit` per residue and digit, and never more than
/// listing the members.
fn nested_units(r: u64, digits: &[Digit], unit: u32, memo: &mut HashMap<(usize, u64), u64>) -> u64 {
    let Some((outer, inner)) = digits.split_last() else {
        return 1;
    };
    if let Some(n) = memo.get(&(digits.len(), r)) {
        return *n;
    }
    let unit64 = u64::from(unit);
    let inner_span: u64 = inner
        .iter()
        .map(|d| u64::from(d.size - 1) * u64::from(d.stride))
        .sum();
    let (s, n) = (u64::from(outer.stride), u64::from(outer.size));
    let out = if r + inner_span + (n - 1) * s < unit64 {
        1
    } else {
        let period = unit64 / gcd(s % unit64, unit64);
        let mut total = 0u64;
        for j in 0..n.min(period) {
            let rj = (r + j * (s % unit64)) % unit64;
            // Copies k < n with k = j (mod period), and those of them
            // followed by another copy.
            let copies = (n - j).div_ceil(period);
            let followed = (n - 1).saturating_sub(j).div_ceil(period);
            total += copies * nested_units(rj, inner, unit, memo);
            if (rj + inner_span) / unit64 == (rj + s) / unit64 {
                total -= followed;
            }
        }
        total
    };
    memo.insert((digits.len(), r), out);
    out
}

/// From the strides: the units a group spans depend only on its first
/// member modulo `unit` (the members' offsets from it are the same in every
/// group), and the first members' residues follow from the group digits
/// whose stride is not a multiple of `unit` (a small table, built digit by
/// digit). So each residue class is counted once, with one representative
/// group, instead of listing every group.
///
/// `ends` counts the pipeline ends of the boxes instead of the boxes: the
/// first member, and the last one too if `Some(true)`.
fn boxes(b: &Boxes, unit: u32, ends: Option<bool>) -> Count {
    let steps = b.group_steps();
    // residue of a first member -> (groups with it, one group index with it)
    let mut residues: BTreeMap<u32, (u64, u32)> = BTreeMap::new();
    residues.insert(b.base(0) % unit, (1, 0));
    let mut weight = 1u32;
    for d in &steps {
        let stride = d.stride % unit;
        if stride == 0 {
            for v in residues.values_mut() {
                v.0 *= u64::from(d.size);
            }
        } else {
            // The residues repeat every `period` steps of the digit: each
            // is visited once, weighted by the steps that reach it.
            let period = u64::from(unit) / gcd(u64::from(stride), u64::from(unit));
            let size = u64::from(d.size);
            let mut next: BTreeMap<u32, (u64, u32)> = BTreeMap::new();
            for (r, (count, index)) in &residues {
                for k in 0..size.min(period) {
                    let residue =
                        ((u64::from(*r) + k * u64::from(stride)) % u64::from(unit)) as u32;
                    let steps = (size - k).div_ceil(period);
                    // k is below the digit's u32 size.
                    let e = next
                        .entry(residue)
                        .or_insert((0, index + k as u32 * weight));
                    e.0 += count * steps;
                }
            }
            residues = next;
        }
        weight = weight.wrapping_mul(d.size);
    }
    let member_steps = b.member_steps();
    let mut out = Count::default();
    for (count, index) in residues.values() {
        let n = match ends {
            None => box_units(b.base(*index), &member_steps, unit),
            Some(last) => {
                let first = b.base(*index);
                let end = if last {
                    first.wrapping_add(b.span())
                } else {
                    first
                };
                units(&mut [first, end], unit)
            }
        };
        if n > 1 {
            out.crossing += count;
        }
        out.most = out.most.max(n);
    }
    out
}

/// By listing every group.
fn listed(plan: &Plan, unit: u32) -> Count {
    let mut out = Count::default();
    let mut members = Vec::new();
    for i in 0..plan.count() {
        let group = plan.group(i);
        members.resize(group.len(), 0);
        group.fill_into(&mut members);
        let n = units(&mut members, unit);
        if n > 1 {
            out.crossing += 1;
        }
        out.most = out.most.max(n);
    }
    out
}

fn count(plan: &Plan, unit: u32) -> Count {
    match plan {
        Plan::Boxes(b) => boxes(b, unit, None),
        Plan::Ends(e) => match &e.pipelines {
            Plan::Boxes(b) => boxes(b, unit, Some(e.last)),
            _ => listed(plan, unit),
        },
        Plan::Stack(p) => count(&p.first, unit).add(count(&p.second, unit)),
        other => listed(other, unit),
    }
}

/// How the groups of `plan` fall on the nodes (and domains) of
/// `topology`, from the strides where the plan is boxes (each residue of a
/// group's first rank modulo the node size once) and by listing otherwise.
pub(crate) fn spread(plan: &Plan, topology: &Topology) -> Spread {
    let to_u32 = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    let nodes = count(plan, topology.gpus_per_node());
    let domains = topology.gpus_per_domain().map(|g| count(plan, g));
    Spread {
        groups: plan.count(),
        size: plan
            .runs()
            .iter()
            .map(|r| r.len as usize)
            .max()
            .unwrap_or(0),
        cross_node_groups: to_u32(nodes.crossing),
        max_nodes_per_group: nodes.most,
        cross_domain_groups: domains.map(|d| to_u32(d.crossing)),
        max_domains_per_group: domains.map(|d| d.most),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The units of a box by listing its members.
    fn listed_units(first: u32, digits: &[Digit], unit: u32) -> u32 {
        let size: usize = digits.iter().map(|d| d.size as usize).product();
        let mut members = vec![0u32; size];
        Segment::boxed(first, digits).fill(&mut members);
        units(&mut members, unit)
    }

    #[test]
    fn nested_boxes_are_counted_from_their_strides() {
        // Random grids (strides the products of the faster sizes), random
        // subsets of their axes in random member order, random first
        // members and units, against the listed members.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for _ in 0..3000 {
            let axes = 1 + next(5) as usize;
            let mut stride = 1u32;
            let mut digits = Vec::new();
            for _ in 0..axes {
                let size = 1 + next(12) as u32;
                if next(3) > 0 {
                    digits.push(Digit { size, stride });
                }
                stride *= size;
            }
            if next(2) == 0 {
                digits.reverse();
            }
            let first = next(100) as u32;
            let unit = 1 + next(40) as u32;
            assert_eq!(
                box_units(first, &digits, unit),
                listed_units(first, &digits, unit),
                "{first} {digits:?} {unit}"
            );
        }
        // A box of 2^30 members on 8-rank nodes, without listing it.
        let big = [Digit {
            size: 1 << 30,
            stride: 1,
        }];
        assert_eq!(box_units(3, &big, 8), (3 + (1 << 30) - 1) / 8 + 1);
    }
}
