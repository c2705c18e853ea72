//! The expert data-parallel lanes of a layout: the data-parallel replicas
//! that must be dropped together so that no expert group is cut.

use crate::cast::to_usize;
use crate::coord::Part;
use crate::error::Result;
use crate::kind::Kind;
use crate::layout::Layout;
use crate::relayout::assign::replicas::dp_stride;

/// The layout's data-parallel replicas (dense grid `dp` coordinates)
/// grouped into lanes: two replicas are in one lane when ranks of theirs
/// share an expert data-parallel coordinate (`edp`, in the same grid).
/// Dropping whole lanes keeps every expert group of the other lanes
/// (an `ep` or `etp` group lies inside one `edp` coordinate); without
/// experts (`edp` is then a replica's own), every lane is one replica.
///
/// With tp 2 and ep 4 folded over dp 16 (`edp` 4), ranks `2d`, `2d + 1`
/// are replica `d` and `edp = d / 4`: the lanes are replicas 0-3, 4-7,
/// 8-11 and 12-15.
pub(crate) struct Lanes {
    /// Each lane's replicas, ascending; lanes by their first replica.
    lanes: Vec<Vec<u32>>,
}

/// No replica yet.
const NONE: u32 = u32::MAX;

impl Lanes {
    /// The lanes of `layout`. Time O(ranks), memory O(ranks) while the
    /// expert data-parallel groups are listed.
    pub fn of(layout: &Layout) -> Result<Lanes> {
        let s = layout.sizes();
        let dp = s.dp;
        let mut root: Vec<u32> = (0..dp).collect();
        // Without experts a replica holds its own edp coordinates.
        if s.ep > 1 || s.etp != s.tp {
            // The kind of the one axis edp: folded `edp`, nested
            // `dp-mod-ep` (Megatron-LM's name).
            let kinds = layout.kinds();
            match [Kind::EDP, Kind::DP_MOD_EP]
                .into_iter()
                .find(|k| kinds.contains(k))
            {
                Some(edp) => join_by_edp(layout, edp, &mut root)?,
                None => join_by_placement(layout, &mut root)?,
            }
        }
        let mut lane_of_root = vec![NONE; to_usize(dp)];
        let mut lanes: Vec<Vec<u32>> = Vec::new();
        for d in 0..dp {
            let r = find(&mut root, d);
            let Some(slot) = lane_of_root.get_mut(to_usize(r)) else {
                continue;
            };
            if *slot == NONE {
                // Lanes are numbered by first replica, so at most dp.
                *slot = u32::try_from(lanes.len()).unwrap_or(NONE);
                lanes.push(Vec::new());
            }
            if let Some(lane) = lanes.get_mut(to_usize(*slot)) {
                lane.push(d);
            }
        }
        Ok(Lanes { lanes })
    }

    /// How many lanes.
    pub fn len(&self) -> usize {
        self.lanes.len()
    }

    /// The replicas of the largest lane (1 without experts).
    pub fn widest(&self) -> usize {
        self.lanes.iter().map(Vec::len).max().unwrap_or(1)
    }

    /// The replicas of the aligned blocks of `c` lanes (lanes `k c ..
    /// (k + 1) c`) that hold a replica for which `broken` is true,
    /// ascending.
    pub fn blocks_holding(&self, c: usize, broken: &[bool]) -> Vec<u32> {
        let c = c.max(1);
        let mut out: Vec<u32> = self
            .lanes
            .chunks(c)
            .filter(|block| {
                block
                    .iter()
                    .flatten()
                    .any(|&d| broken.get(to_usize(d)) == Some(&true))
            })
            .flatten()
            .flatten()
            .copied()
            .collect();
        out.sort_unstable();
        out
    }

    /// Whether `replicas` (ascending) is a union of whole lanes.
    pub fn whole(&self, replicas: &[u32]) -> bool {
        self.lanes.iter().all(|lane| {
            let inside = lane
                .iter()
                .filter(|d| replicas.binary_search(d).is_ok())
                .count();
            inside == 0 || inside == lane.len()
        })
    }
}

/// Joins, in the union-find `root` over replicas, the replicas of ranks
/// that share a grid and an `edp` coordinate. A rank's `edp` is its
/// position in its group of `edp` (the kind of that one axis), and its
/// replica is its `dp` digit, `(q / stride) % dp` for the rank `q` within
/// its grid: no per-rank placement.
fn join_by_edp(layout: &Layout, edp: Kind, root: &mut [u32]) -> Result<()> {
    let dp = layout.sizes().dp;
    let off = layout.rank_offset();
    let enc = layout.encoder_world_size();
    let (enc_stride, dec_stride) = (
        if layout.has_encoder() {
            dp_stride(layout, Part::Encoder)?
        } else {
            1
        },
        dp_stride(layout, Part::Decoder)?,
    );
    let replica = |r: u32| {
        let q = r - off;
        if q < enc {
            (q / enc_stride) % dp.max(1)
        } else {
            ((q - enc) / dec_stride) % dp.max(1)
        }
    };
    // The first replica seen at each edp, in each grid.
    let mut first: [Vec<u32>; 2] = [Vec::new(), Vec::new()];
    for group in &layout.groups(edp)?.table()? {
        let grid = usize::from(group.first().is_some_and(|&r| r - off >= enc));
        let Some(first) = first.get_mut(grid) else {
            continue;
        };
        if first.len() < group.len() {
            first.resize(group.len(), NONE);
        }
        for (&r, seen) in group.iter().zip(first.iter_mut()) {
            join(root, seen, replica(r));
        }
    }
    Ok(())
}

/// As [`join_by_edp`], reading every rank's place: O(ranks) placements,
/// for a layout without a kind of the one axis `edp`.
fn join_by_placement(layout: &Layout, root: &mut [u32]) -> Result<()> {
    let off = layout.rank_offset();
    let mut first: [Vec<u32>; 2] = [Vec::new(), Vec::new()];
    for r in off..off.saturating_add(layout.world_size()) {
        let p = layout.placement(r)?;
        let grid = usize::from(p.part == Part::Decoder);
        let Some(first) = first.get_mut(grid) else {
            continue;
        };
        let e = to_usize(p.expert.edp);
        if first.len() <= e {
            first.resize(e + 1, NONE);
        }
        if let Some(seen) = first.get_mut(e) {
            join(root, seen, p.coord.dp);
        }
    }
    Ok(())
}

/// Records replica `d` at a slot first seen with `seen`, or joins their
/// lanes; the smaller root stays, so a lane's root is its first replica.
fn join(root: &mut [u32], seen: &mut u32, d: u32) {
    if *seen == NONE {
        *seen = d;
        return;
    }
    let (a, b) = (find(root, *seen), find(root, d));
    if let Some(h) = root.get_mut(to_usize(a.max(b))) {
        *h = a.min(b);
    }
}

/// The root of `d`'s lane, halving the path on the way.
fn find(root: &mut [u32], mut d: u32) -> u32 {
    while let Some(&parent) = root.get(to_usize(d)) {
        if parent == d {
            break;
        }
        let grand = root.get(to_usize(parent)).copied().unwrap_or(parent);
        if let Some(slot) = root.get_mut(to_usize(d)) {
            *slot = grand;
        }
        d = grand;
    }
    d
}

#[cfg(test)]
mod tests {
    #![allow(clippy::restriction)]
    use super::*;
    use crate::config::{Config, ExpertLayout};

    fn roots(layout: &Layout, by_placement: bool) -> Vec<u32> {
        let dp = layout.sizes().dp;
        let mut root: Vec<u32> = (0..dp).collect();
        if by_placement {
            join_by_placement(layout, &mut root).unwrap();
        } else {
            let kinds = layout.kinds();
            let edp = [Kind::EDP, Kind::DP_MOD_EP]
                .into_iter()
                .find(|k| kinds.contains(k))
                .unwrap();
            join_by_edp(layout, edp, &mut root).unwrap();
        }
        (0..dp).map(|d| find(&mut root, d)).collect()
    }

    /// The lanes read from the edp groups are those read rank by rank,
    /// and the folded case of the semantics has lanes of 4 replicas.
    #[test]
    fn groups_and_placements_agree() {
        let configs = [
            Config::new().tp(2).ep(4).dp(16),
            Config::new().tp(4).cp(2).ep(8).pp(2).dp(8),
            Config::new().tp(8).ep(2).etp(1).dp(4),
            Config::new()
                .tp(2)
                .ep(2)
                .dp(8)
                .expert_layout(ExpertLayout::Nested),
            Config::new()
                .ep(2)
                .dp(4)
                .order("tp-cp-dp-ep-pp".parse().unwrap())
                .expert_layout(ExpertLayout::Nested),
            Config::new()
                .tp(2)
                .ep(2)
                .dp(4)
                .encoder_tp(1)
                .expert_layout(ExpertLayout::Nested),
        ];
        for config in configs {
            let layout = Layout::new(&config).unwrap();
            assert_eq!(roots(&layout, false), roots(&layout, true), "{config}");
        }
        let folded = Layout::new(&Config::new().tp(2).ep(4).dp(16)).unwrap();
        let lanes = Lanes::of(&folded).unwrap();
        assert_eq!((lanes.len(), lanes.widest()), (4, 4));
        assert_eq!(lanes.blocks_holding(1, &[false, true]), [0, 1, 2, 3]);
        assert!(lanes.whole(&[4, 5, 6, 7]) && !lanes.whole(&[4, 5]));
    }
}
