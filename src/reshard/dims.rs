//! One dim of a tensor on one side: its windows, which part holds each,
//! and the equal local cuts of each part. Pure arithmetic on `u64`.
//!
//! A dim of length `len` is cut into windows `0..W`; part `p` of `n` holds
//! windows `p, p + n, p + 2n, ...`, concatenated in that order (its local
//! extent). Megatron's `partition_stride` `s` over tp `t` is `t * s` equal
//! windows; `partition_sizes` are blocks each cut into `t` windows; a
//! pipeline's chunks are windows of layers, chunk `c` on stage `c mod pp`.
//! Then each part's local extent is cut into `cuts` equal pieces (the
//! weight shards of GTP, the distributed optimizer's dp shards).

use crate::cast::{saturating_usize, to_u64};

/// The windows of a dim.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Windows {
    /// `count` windows of `size` each: window `j` is `[j*size, (j+1)*size)`.
    Equal { size: u64, count: u64 },
    /// Windows of any length: window `j` is `[bounds[j], bounds[j+1])`;
    /// `local[j]` is where it starts in its part.
    Listed { bounds: Vec<u64>, local: Vec<u64> },
}

/// A dim's split on one side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DimSplit {
    len: u64,
    parts: u64,
    windows: Windows,
    /// Each part's local length (all equal for [`Windows::Equal`]).
    part_len: Vec<u64>,
    cuts: u64,
}

/// A run of a part: global `[lo, hi)` at local offset `local` (from the
/// start of the part's cut piece).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    pub lo: u64,
    pub hi: u64,
    pub local: u64,
}

/// A piece of a global range on one side: the part and cut holding global
/// `[lo, hi)`, at local offset `local` in that cut piece.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    pub part: u64,
    pub cut: u64,
    pub lo: u64,
    pub hi: u64,
    pub local: u64,
}

/// Why a split cannot be made: `(length, pieces)` that do not divide, and
/// which block or part (for the message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Indivisible {
    pub size: u64,
    pub divisor: u64,
}

impl DimSplit {
    /// The whole dim, one part, no cut.
    pub fn whole(len: u64) -> DimSplit {
        DimSplit {
            len,
            parts: 1,
            windows: Windows::Equal {
                size: len,
                count: 1,
            },
            part_len: vec![len],
            cuts: 1,
        }
    }

    /// `blocks` equal blocks, each cut into `parts` equal windows: part `p`
    /// holds window `p` of every block (Megatron's `partition_stride` =
    /// `blocks`).
    pub fn strided(len: u64, blocks: u64, parts: u64) -> Result<DimSplit, Indivisible> {
        let count = blocks.checked_mul(parts).ok_or(Indivisible {
            size: len,
            divisor: u64::MAX,
        })?;
        if count == 0 || len % count != 0 {
            return Err(Indivisible {
                size: len,
                divisor: count,
            });
        }
        if parts == 1 {
            // One part holds every window, in order: the dim whole (one
            // run, so one piece where the windows would make several).
            return Ok(DimSplit::whole(len));
        }
        let size = len / count;
        Ok(DimSplit {
            len,
            parts,
            windows: Windows::Equal { size, count },
            part_len: vec![size * blocks],
            cuts: 1,
        })
    }

    /// Blocks of the given lengths (summing to the dim), each cut into
    /// `parts` equal windows (Megatron's `partition_sizes`, given globally).
    /// The error names the first block that does not divide.
    pub fn blocks(sizes: &[u64], parts: u64) -> Result<DimSplit, Indivisible> {
        let mut bounds = Vec::with_capacity(sizes.len() * saturating_usize(parts) + 1);
        bounds.push(0u64);
        let mut at = 0u64;
        for &size in sizes {
            if parts == 0 || size % parts != 0 {
                return Err(Indivisible {
                    size,
                    divisor: parts,
                });
            }
            let w = size / parts;
            for _ in 0..parts {
                at += w;
                bounds.push(at);
            }
        }
        if parts == 1 {
            return Ok(DimSplit::whole(at));
        }
        Ok(DimSplit::listed(bounds, parts))
    }

    /// Windows of the given lengths in order (chunks of layers), part `p`
    /// holding windows `p, p + parts, ...`. `lens.len()` must be a multiple
    /// of `parts` (the caller's layer map guarantees it).
    pub fn chunks(lens: &[u64], parts: u64) -> DimSplit {
        let mut bounds = Vec::with_capacity(lens.len() + 1);
        let mut at = 0u64;
        bounds.push(at);
        for &l in lens {
            at += l;
            bounds.push(at);
        }
        DimSplit::listed(bounds, parts)
    }

    fn listed(bounds: Vec<u64>, parts: u64) -> DimSplit {
        let windows = bounds.len().saturating_sub(1);
        let mut local = vec![0u64; windows];
        let mut part_len = vec![0u64; saturating_usize(parts.max(1))];
        for (j, pair) in bounds.windows(2).enumerate() {
            if let ([lo, hi], Some(slot), Some(part)) = (
                pair,
                local.get_mut(j),
                part_len.get_mut(j % saturating_usize(parts.max(1))),
            ) {
                *slot = *part;
                *part += hi - lo;
            }
        }
        DimSplit {
            len: bounds.last().copied().unwrap_or(0),
            parts: parts.max(1),
            windows: Windows::Listed { bounds, local },
            part_len,
            cuts: 1,
        }
    }

    /// Every part's local extent cut into `cuts` equal pieces. The error
    /// names the first part whose length `cuts` does not divide.
    pub fn with_cuts(mut self, cuts: u64) -> Result<DimSplit, Indivisible> {
        for &l in &self.part_len {
            if cuts == 0 || l % cuts != 0 {
                return Err(Indivisible {
                    size: l,
                    divisor: cuts,
                });
            }
        }
        self.cuts = cuts;
        Ok(self)
    }

    /// The number of windows.
    pub fn windows(&self) -> u64 {
        match &self.windows {
            Windows::Equal { count, .. } => *count,
            Windows::Listed { local, .. } => to_u64(local.len()),
        }
    }

    fn part_len(&self, part: u64) -> u64 {
        match self.part_len.get(saturating_usize(part)) {
            Some(l) => *l,
            None => self.part_len.first().copied().unwrap_or(0),
        }
    }

    /// The length of one cut piece of `part`: its local extent.
    pub fn piece_len(&self, part: u64) -> u64 {
        self.part_len(part) / self.cuts.max(1)
    }

    /// Window `j`: global `[lo, hi)` and its local start in its part.
    fn window(&self, j: u64) -> (u64, u64, u64) {
        match &self.windows {
            Windows::Equal { size, .. } => (j * size, (j + 1) * size, (j / self.parts) * size),
            Windows::Listed { bounds, local } => {
                let i = saturating_usize(j);
                match (bounds.get(i), bounds.get(i + 1), local.get(i)) {
                    (Some(lo), Some(hi), Some(l)) => (*lo, *hi, *l),
                    _ => (self.len, self.len, 0),
                }
            }
        }
    }

    /// The first window ending after `at`.
    fn first_window_after(&self, at: u64) -> u64 {
        match &self.windows {
            Windows::Equal { size, .. } => at / (*size).max(1),
            Windows::Listed { bounds, .. } => {
                // bounds[0] = 0 <= at: the windows ending at or before `at`.
                let ended = bounds.partition_point(|b| *b <= at);
                to_u64(ended.saturating_sub(1))
            }
        }
    }

    /// The runs of `part`'s cut piece `cut`, in local order: the windows of
    /// the part clipped to the piece's local range.
    pub fn runs(&self, part: u64, cut: u64) -> Vec<Run> {
        let piece = self.piece_len(part);
        let (from, to) = (cut * piece, (cut + 1) * piece);
        let mut out = Vec::new();
        let mut j = part;
        let count = self.windows();
        while j < count {
            let (lo, hi, local) = self.window(j);
            let end = local + (hi - lo);
            if local >= to {
                break;
            }
            if end > from {
                let a = local.max(from);
                let b = end.min(to);
                if b > a {
                    out.push(Run {
                        lo: lo + (a - local),
                        hi: lo + (b - local),
                        local: a - from,
                    });
                }
            }
            j += self.parts;
        }
        out
    }

    /// Every (part, cut) piece of global `[lo, hi)`, in global order.
    pub fn pieces(&self, lo: u64, hi: u64, out: &mut Vec<Piece>) {
        out.clear();
        let count = self.windows();
        let mut j = self.first_window_after(lo);
        while j < count {
            let (w_lo, w_hi, w_local) = self.window(j);
            if w_lo >= hi {
                break;
            }
            let a = lo.max(w_lo);
            let b = hi.min(w_hi);
            if b > a {
                let part = j % self.parts;
                let piece = self.piece_len(part).max(1);
                let (la, lb) = (w_local + (a - w_lo), w_local + (b - w_lo));
                let mut cut = la / piece;
                while cut * piece < lb {
                    let ca = la.max(cut * piece);
                    let cb = lb.min((cut + 1) * piece);
                    out.push(Piece {
                        part,
                        cut,
                        lo: w_lo + (ca - w_local),
                        hi: w_lo + (cb - w_local),
                        local: ca - cut * piece,
                    });
                    cut += 1;
                }
            }
            j += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(split: &DimSplit, lo: u64, hi: u64) -> Vec<Piece> {
        let mut out = Vec::new();
        split.pieces(lo, hi, &mut out);
        out
    }

    #[test]
    fn stride_is_megatron_s_partition_stride() {
        // 12 rows, tp 2, stride 3: segments of 2; rank 0 holds 0, 2, 4.
        let s = DimSplit::strided(12, 3, 2).unwrap();
        let runs = s.runs(0, 0);
        let got: Vec<(u64, u64, u64)> = runs.iter().map(|r| (r.lo, r.hi, r.local)).collect();
        assert_eq!(got, [(0, 2, 0), (4, 6, 2), (8, 10, 4)]);
        let got: Vec<(u64, u64, u64)> =
            s.runs(1, 0).iter().map(|r| (r.lo, r.hi, r.local)).collect();
        assert_eq!(got, [(2, 4, 0), (6, 8, 2), (10, 12, 4)]);
        assert!(DimSplit::strided(12, 5, 2).is_err());
    }

    #[test]
    fn cuts_refine_local_extent() {
        // tp 2 stride 2 on 8 rows, then 3 cuts fail (4 rows per part), 2 cuts fit.
        let s = DimSplit::strided(8, 2, 2).unwrap();
        assert!(s.clone().with_cuts(3).is_err());
        let s = s.with_cuts(2).unwrap();
        // Part 0 holds rows 0,1,4,5; cut 1 is its local 2..4 = rows 4,5.
        let got: Vec<(u64, u64, u64)> =
            s.runs(0, 1).iter().map(|r| (r.lo, r.hi, r.local)).collect();
        assert_eq!(got, [(4, 6, 0)]);
        let p = all(&s, 0, 8);
        let parts: Vec<(u64, u64, u64, u64)> =
            p.iter().map(|x| (x.part, x.cut, x.lo, x.hi)).collect();
        assert_eq!(
            parts,
            [(0, 0, 0, 2), (1, 0, 2, 4), (0, 1, 4, 6), (1, 1, 6, 8)]
        );
    }

    #[test]
    fn pieces_cover_a_range_once() {
        let s = DimSplit::blocks(&[6, 4, 2], 2)
            .unwrap()
            .with_cuts(1)
            .unwrap();
        for lo in 0..12 {
            for hi in lo + 1..=12 {
                let p = all(&s, lo, hi);
                let mut at = lo;
                for x in &p {
                    assert_eq!(x.lo, at);
                    assert!(x.hi > x.lo);
                    at = x.hi;
                    // The run of its part holds it at `local`.
                    let runs = s.runs(x.part, x.cut);
                    let r = runs.iter().find(|r| r.lo <= x.lo && x.hi <= r.hi).unwrap();
                    assert_eq!(r.local + (x.lo - r.lo), x.local);
                }
                assert_eq!(at, hi);
            }
        }
    }

    #[test]
    fn chunks_of_layers() {
        // 8 layers on 2 stages with 2 virtual chunks each: [2, 2, 2, 2].
        let s = DimSplit::chunks(&[2, 2, 2, 2], 2);
        let got: Vec<(u64, u64, u64)> =
            s.runs(1, 0).iter().map(|r| (r.lo, r.hi, r.local)).collect();
        assert_eq!(got, [(2, 4, 0), (6, 8, 2)]);
        // An empty chunk holds nothing.
        let s = DimSplit::chunks(&[3, 0, 1, 4], 2);
        let got: Vec<(u64, u64)> = s.runs(1, 0).iter().map(|r| (r.lo, r.hi)).collect();
        assert_eq!(got, [(4, 8)]);
        let p = all(&s, 0, 8);
        assert_eq!(p.len(), 3);
    }
}
