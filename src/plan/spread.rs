//! How the groups of a kind fall on nodes and domains.

use crate::cast::{low32, to_u64, to_usize};
use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

use arrayvec::ArrayVec;

use crate::plan::boxes::Boxes;
use crate::plan::shared_digit::Shared;
use crate::plan::{Pair, Plan};
use crate::segment::{Digit, MAX_DIGITS, Segment};
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
            let size: usize = digits.iter().map(|d| to_usize(d.size)).product();
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
                    let residue = low32((u64::from(*r) + k * u64::from(stride)) % u64::from(unit));
                    let steps = (size - k).div_ceil(period);
                    // k is below the digit's u32 size.
                    let e = next
                        .entry(residue)
                        .or_insert((0, index + low32(k) * weight));
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

/// Groups of two parts, an encoder part wholly below `boundary` (the
/// decoder's first rank) and a decoder part at or above it: the joined
/// pipelines, their ends (`embd`) and the concatenated `tp-pp` groups of an
/// encoder + decoder layout.
///
/// Group `(p, x)`, for a pair `p` and coordinates `x` of the shared digits,
/// has parts whose first ranks are `pairs[p][s] + sum(x_i *
/// shared[i].strides[s])` (`s` = 0: encoder, 1: decoder) and whose members
/// are those first ranks plus the boxes of `members[s]`; every `(p, x)` is
/// one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Joins {
    pub pairs: Vec<[u32; 2]>,
    pub shared: ArrayVec<Shared, MAX_DIGITS>,
    pub members: [ArrayVec<Digit, MAX_DIGITS>; 2],
    pub boundary: u32,
}

/// The units a part spans, by the residue of its first rank, memoised.
struct PartUnits<'a> {
    digits: &'a [Digit],
    unit: u32,
    memo: HashMap<u32, u32>,
}

impl PartUnits<'_> {
    fn get(&mut self, residue: u64) -> u32 {
        // A residue modulo a u32 unit.
        let r = low32(residue);
        let (digits, unit) = (self.digits, self.unit);
        *self
            .memo
            .entry(r)
            .or_insert_with(|| box_units(r, digits, unit))
    }
}

/// The distance from a box's first member to its last.
fn box_span(digits: &[Digit]) -> u64 {
    digits
        .iter()
        .map(|d| u64::from(d.size.saturating_sub(1)) * u64::from(d.stride))
        .sum()
}

impl Joins {
    /// The concatenation of two box families with as many groups, group
    /// `i` of the first (the encoder's) followed by group `i` of the second;
    /// `None` unless both number their groups with digits of the same sizes.
    fn concat(p: &Pair<Boxes>) -> Option<Joins> {
        let (a, b) = (&p.first, &p.second);
        let (ga, gb) = (a.group_steps(), b.group_steps());
        if ga.len() != gb.len() || ga.iter().zip(&gb).any(|(x, y)| x.size != y.size) {
            return None;
        }
        Some(Joins {
            pairs: vec![[a.base(0), b.base(0)]],
            shared: ga
                .iter()
                .zip(&gb)
                .map(|(x, y)| Shared {
                    size: x.size,
                    strides: [x.stride, y.stride],
                })
                .collect(),
            members: [a.member_steps(), b.member_steps()],
            boundary: b.base(0),
        })
    }

    /// The number of groups.
    fn total(&self) -> u64 {
        to_u64(self.pairs.len())
            * self
                .shared
                .iter()
                .map(|d| u64::from(d.size))
                .product::<u64>()
    }

    /// Whether every encoder part lies below the boundary and every decoder
    /// part at or above it (always so in a layout; checked so that the
    /// counts below can rely on it).
    fn split_at_boundary(&self) -> bool {
        let [moved, _] = self
            .shared
            .iter()
            .fold([0, 0], |acc, d| both(acc, reach(d), |a, b| a + b));
        let top = self.pairs.iter().map(|[e, _]| u64::from(*e)).max();
        let bottom = self.pairs.iter().map(|[_, d]| *d).min();
        let [encoder, _] = &self.members;
        top.is_some_and(|t| t + moved + box_span(encoder) < u64::from(self.boundary))
            && bottom.is_some_and(|b| b >= self.boundary)
    }

    /// The most units a group's two parts span counted apart (a unit both
    /// touch counted twice), and how many groups reach it.
    ///
    /// A part's units depend only on its first rank modulo `unit`, and the
    /// residues of the two first ranks along a shared digit repeat every
    /// `period` steps (the order of the digit's two strides modulo `unit`):
    /// each pair of residues is visited once, weighted by the groups that
    /// have it, as [`boxes`] does for one part.
    fn most_apart(&self, unit: u32, parts: &mut [PartUnits; 2]) -> (u32, u64) {
        let u = u64::from(unit);
        let mut states: HashMap<[u64; 2], u64> = HashMap::new();
        for p in &self.pairs {
            *states.entry(p.map(|r| u64::from(r) % u)).or_default() += 1;
        }
        for d in &self.shared {
            let steps = d.strides.map(|s| u64::from(s) % u);
            let [oe, od] = steps.map(|s| u / gcd(s, u));
            let period = oe / gcd(oe, od) * od;
            let n = u64::from(d.size);
            if period == 1 {
                for w in states.values_mut() {
                    *w *= n;
                }
                continue;
            }
            let mut next: HashMap<[u64; 2], u64> = HashMap::new();
            for (start, w) in &states {
                let mut at = *start;
                for k in 0..n.min(period) {
                    *next.entry(at).or_default() += w * (n - k).div_ceil(period);
                    at = both(at, steps, |a, s| (a + s) % u);
                }
            }
            states = next;
        }
        let [encoder, decoder] = parts;
        let mut best = (0u32, 0u64);
        for ([e, d], w) in states {
            let n = encoder.get(e).saturating_add(decoder.get(d));
            if n > best.0 {
                best = (n, w);
            } else if n == best.0 {
                best.1 += w;
            }
        }
        best
    }

    /// Calls `f` with the first ranks of the two parts of every group whose
    /// encoder part ends in the unit where its decoder part starts.
    ///
    /// Both parts then touch the one unit holding ranks `boundary - 1` and
    /// `boundary`, so there is none when `boundary` is a multiple of `unit`,
    /// and otherwise the groups are found by narrowing each shared digit,
    /// largest stride first, to the values that keep both first ranks in
    /// reach of that unit: O(digits) per pair and per group found.
    fn sharing_a_unit(&self, unit: u32, f: &mut dyn FnMut([u64; 2])) {
        let u = u64::from(unit);
        let boundary = u64::from(self.boundary);
        let r = boundary % u;
        if r == 0 {
            return;
        }
        let lo = boundary - r;
        let [encoder, _] = &self.members;
        let span = box_span(encoder);
        // First ranks allowed: the encoder part's last member in
        // [lo, boundary), the decoder part's first in [boundary, lo + u).
        let allowed = [
            (lo.saturating_sub(span), boundary.saturating_sub(span)),
            (boundary, lo + u),
        ];
        let mut digits: ArrayVec<Shared, MAX_DIGITS> = self.shared.clone();
        digits.sort_unstable_by_key(|d| Reverse(d.strides[0]));
        // Each digit with the reach of the digits after it.
        let mut after = [0, 0];
        let mut levels: ArrayVec<(Shared, [u64; 2]), MAX_DIGITS> = digits
            .iter()
            .rev()
            .map(|d| {
                let level = (*d, after);
                after = both(after, reach(d), |a, b| a + b);
                level
            })
            .collect();
        levels.reverse();
        for p in &self.pairs {
            narrow(&levels, &allowed, p.map(u64::from), f);
        }
    }
}

/// `[f(a0, b0), f(a1, b1)]`: one operation on both parts.
fn both(a: [u64; 2], b: [u64; 2], f: impl Fn(u64, u64) -> u64) -> [u64; 2] {
    let ([a0, a1], [b0, b1]) = (a, b);
    [f(a0, b0), f(a1, b1)]
}

/// How far a shared digit moves each part's first rank.
fn reach(d: &Shared) -> [u64; 2] {
    d.strides
        .map(|s| u64::from(d.size.saturating_sub(1)) * u64::from(s))
}

/// The values of the digits of `levels` (each with the reach of the digits
/// after it) that keep both first ranks in `allowed`, `at` being the first
/// ranks so far: see [`Joins::sharing_a_unit`].
fn narrow(
    levels: &[(Shared, [u64; 2])],
    allowed: &[(u64, u64); 2],
    at: [u64; 2],
    f: &mut dyn FnMut([u64; 2]),
) {
    let Some(((d, below), rest)) = levels.split_first() else {
        if allowed
            .iter()
            .zip(at)
            .all(|(&(lo, hi), a)| lo <= a && a < hi)
        {
            f(at);
        }
        return;
    };
    // x such that at + x*stride + [0, below] meets [lo, hi) on both sides.
    let (mut first, mut last) = (0u64, u64::from(d.size.saturating_sub(1)));
    for (((lo, hi), stride), (a, below)) in allowed
        .iter()
        .zip(d.strides)
        .zip(at.into_iter().zip(*below))
    {
        let stride = u64::from(stride);
        let reach = a + below;
        if *hi <= a {
            return;
        }
        if stride == 0 {
            if reach < *lo {
                return;
            }
            continue;
        }
        last = last.min((hi - 1 - a) / stride);
        if reach < *lo {
            first = first.max((lo - reach).div_ceil(stride));
        }
    }
    for x in first..=last {
        let next = both(at, d.strides.map(u64::from), |a, s| a + x * s);
        narrow(rest, allowed, next, f);
    }
}

/// Two-part groups: a group spans its parts' units, less one when the
/// encoder part ends in the unit where the decoder part starts; it crosses
/// unless both parts lie in that one unit. The groups whose parts share a
/// unit all touch the unit around the boundary, so they are few and found
/// directly; the others are counted from the residues of their first
/// ranks. `None` when the parts do not lie on either side of the boundary.
fn joins(j: &Joins, unit: u32) -> Option<Count> {
    if !j.split_at_boundary() {
        return None;
    }
    if j.total() == 0 {
        return Some(Count::default());
    }
    let u = u64::from(unit);
    let mut parts = j.members.each_ref().map(|digits| PartUnits {
        digits,
        unit,
        memo: HashMap::new(),
    });
    let (most, reaching) = j.most_apart(unit, &mut parts);
    let (mut inside, mut sharing_most) = (0u64, 0u64);
    let [encoder, decoder] = &mut parts;
    j.sharing_a_unit(unit, &mut |[e, d]| {
        let n = (encoder.get(e % u), decoder.get(d % u));
        if n == (1, 1) {
            inside += 1;
        }
        if n.0.saturating_add(n.1) == most {
            sharing_most += 1;
        }
    });
    Some(Count {
        crossing: j.total() - inside,
        most: if reaching > sharing_most {
            most
        } else {
            most - 1
        },
    })
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
    let found = match plan {
        Plan::Boxes(b) => Some(boxes(b, unit, None)),
        // One rank per group.
        Plan::Ends(e) if !e.last => Some(Count {
            crossing: 0,
            most: u32::from(e.pipelines.count() > 0),
        }),
        Plan::Ends(e) => match &e.pipelines {
            Plan::Boxes(b) => Some(boxes(b, unit, Some(true))),
            Plan::Joined(j) => joins(&j.joins(true), unit),
            _ => None,
        },
        Plan::Stack(p) => Some(count(&p.first, unit).add(count(&p.second, unit))),
        Plan::Concat(p) => Joins::concat(p).and_then(|j| joins(&j, unit)),
        Plan::Joined(j) => joins(&j.joins(false), unit),
        Plan::Slices(_) | Plan::Mapped(_) => None,
    };
    found.unwrap_or_else(|| listed(plan, unit))
}

/// How the groups of `plan` fall on the nodes (and domains) of
/// `topology`, from the strides where the plan is boxes (each residue of a
/// group's first rank modulo the node size once) or two-part groups
/// ([`Joins`]: the encoder + decoder joins), and by listing otherwise
/// (strided slices, and the groups of a mesh with a rank map).
pub(crate) fn spread(plan: &Plan, topology: &Topology) -> Spread {
    let to_u32 = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    let nodes = count(plan, topology.gpus_per_node());
    let domains = topology.gpus_per_domain().map(|g| count(plan, g));
    Spread {
        groups: plan.count(),
        size: plan
            .runs()
            .iter()
            .map(|r| to_usize(r.len))
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
        let size: usize = digits.iter().map(|d| to_usize(d.size)).product();
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
            let axes = 1 + usize::try_from(next(5)).unwrap();
            let mut stride = 1u32;
            let mut digits = Vec::new();
            for _ in 0..axes {
                let size = 1 + u32::try_from(next(12)).unwrap();
                if next(3) > 0 {
                    digits.push(Digit { size, stride });
                }
                stride *= size;
            }
            if next(2) == 0 {
                digits.reverse();
            }
            let first = u32::try_from(next(100)).unwrap();
            let unit = 1 + u32::try_from(next(40)).unwrap();
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
