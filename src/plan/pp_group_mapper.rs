//! Joining encoder and decoder pipelines by coordinates.
//!
//! An encoder + decoder layout has two grids over consecutive rank ranges.
//! Every joined pipeline is an encoder pipeline followed by a decoder
//! pipeline of the **same context-parallel slice and data-parallel replica**;
//! inside one (cp, dp) block, decoder tensor-parallel index `t` is joined to
//! encoder tensor-parallel index `block(t)`, where `block` cuts `0..tp` into
//! `encoder_tp` contiguous blocks whose sizes differ by at most one (the first
//! `tp % encoder_tp` one larger). When `encoder_tp > tp` the encoder indices
//! are cut into `tp` blocks instead and decoder index `t` is joined to every
//! encoder index of block `t`, one joined pipeline per pair.
//!
//! Joined pipelines are listed in decoder `pp`-group order, then by ascending
//! encoder tensor-parallel index. Every question is answered arithmetically.
//!
//! # The seed case
//!
//! tp = 4, encoder_tp = 2, cp = 2, pp = encoder_pp = 1, order `tp-cp-ep-dp-pp`:
//! ranks 0-3 are the encoder (encoder tp index fastest, then cp), 4-11 the
//! decoder. The joined pipelines keep each CP slice apart:
//!
//! ```
//! use rank_layout::{Config, Kind, Layout};
//! let layout = Layout::new(&Config::new().tp(4).cp(2).encoder_tp(2).encoder_pp(1))?;
//! assert_eq!(layout.world_size(), 12);
//! let pp = layout.groups(Kind::PP)?.to_vecs();
//! assert_eq!(pp, vec![
//!     vec![0, 4], vec![0, 5], vec![1, 6], vec![1, 7],   // cp slice 0
//!     vec![2, 8], vec![2, 9], vec![3, 10], vec![3, 11], // cp slice 1
//! ]);
//! // Megatron-LM's 2024 `zip(cycle(encoder_groups), decoder_groups)` would
//! // give [0,4],[1,5],[2,6],[3,7],[0,8],...: [2,6] feeds encoder rank 2
//! // (cp slice 1) into decoder rank 6 (cp slice 0).
//! assert!(!pp.contains(&vec![2, 6]));
//! # Ok::<(), rank_layout::Error>(())
//! ```
//!
//! # Differences from Megatron-LM
//!
//! - Megatron-LM 2024 joined pipelines by list position, `zip(cycle(encoder),
//!   decoder)`: wrong as soon as cp * dp > 1 (above).
//! - Its 2025 block map still mixes slices when a cp or dp axis precedes tp
//!   in the order, and when `tp % encoder_tp != 0` with cp * dp > 1; here the
//!   blocks are taken inside each (cp, dp) block by coordinates, for any order.
//! - `encoder_tp > tp`, rejected by Megatron-LM, is supported (fan-in).
//! - `embd` and `pos-embd` are derived from the joined pipelines, each
//!   distinct group once, in order of first appearance.
//!
//! An encoder rank then sits in several pipelines (fan-out) and, when
//! `encoder_tp > tp`, a decoder rank does (fan-in). Such groups overlap, so
//! they are built as communicators in [`rounds`](crate::Layout::comm_split_rounds):
//! round `r` holds the joined pipelines whose decoder index is the `r`-th of
//! its block (fan-out) or whose encoder index is the `r`-th of its block
//! (fan-in); the groups of one round are disjoint, and there are as many
//! rounds as the largest block.

use crate::cast::to_usize;
use std::ops::Range;

use arrayvec::ArrayVec;

use crate::axis::Axis;
use crate::error::{Error, Result};
use crate::grid::{Grid, MAX_AXES};
use crate::group::Group;
use crate::math::{Blocks, Div};
use crate::plan::boxes::Boxes;
use crate::plan::fill::{Parts, Pattern, replicate_groups};
use crate::plan::shared_digit::Shared;
use crate::plan::spread::Joins;
use crate::plan::view::RankView;
use crate::split::Split;

/// The balanced block map between decoder and encoder tensor-parallel
/// indices, seen from its wide side.
///
/// The side with more tensor-parallel indices is *wide*, the other
/// *narrow*; the wide indices are cut into one block per narrow index, and
/// each (narrow, wide) pair of a block is one joined pipeline. So a joined
/// pipeline is named by its wide index `w`, its narrow index is
/// `block_of(w)`, and pipelines listed in decoder order come in ascending
/// `w` (fan-out: `w` is the decoder index; fan-in: decoder blocks are
/// consecutive runs of encoder indices).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct BlockMap {
    blocks: Blocks,
    /// The decoder is the wide side (`tp >= encoder_tp`, fan-out).
    decoder_wide: bool,
}

impl BlockMap {
    fn new(tp: u32, encoder_tp: u32) -> Option<BlockMap> {
        let decoder_wide = tp >= encoder_tp;
        let (wide, narrow) = if decoder_wide {
            (tp, encoder_tp)
        } else {
            (encoder_tp, tp)
        };
        Some(BlockMap {
            blocks: Blocks::new(wide, narrow)?,
            decoder_wide,
        })
    }

    /// The wide indices of the pipelines of index `i` of a side.
    fn pairs(&self, i: u32, wide: bool) -> Range<u32> {
        if wide { i..i + 1 } else { self.blocks.range(i) }
    }

    /// The pipelines of decoder tensor-parallel index `t`.
    fn decoder_pairs(&self, t: u32) -> Range<u32> {
        self.pairs(t, self.decoder_wide)
    }

    /// The pipelines of encoder tensor-parallel index `e`.
    fn encoder_pairs(&self, e: u32) -> Range<u32> {
        self.pairs(e, !self.decoder_wide)
    }

    /// `(decoder index, encoder index)` of pipeline `w`.
    fn sides(&self, w: u32) -> (u32, u32) {
        let narrow = self.blocks.block_of(w);
        if self.decoder_wide {
            (w, narrow)
        } else {
            (narrow, w)
        }
    }

    /// The round of pipeline `w`: its place in its block.
    fn round(&self, w: u32) -> u32 {
        w - self.blocks.range(self.blocks.block_of(w)).start
    }

    /// The pipeline of round `round` among `pairs`, the pipelines of one
    /// index of a side (`wide`: the wide side, so one pipeline; otherwise
    /// a whole block, one pipeline per round).
    fn in_round(&self, pairs: Range<u32>, wide: bool, round: u32) -> Option<u32> {
        if wide {
            (self.round(pairs.start) == round).then_some(pairs.start)
        } else {
            let w = pairs.start + round;
            (w < pairs.end).then_some(w)
        }
    }
}

/// A rank's pipeline in its own grid (index and stage) and the joined
/// pipelines (wide indices) of its tensor-parallel index.
#[derive(Debug, Clone)]
struct Side {
    encoder: bool,
    own: Split,
    pairs: Range<u32>,
}

impl Side {
    /// The joined pipeline `w` of this side, and the rank's place in it.
    fn split(&self, mapper: &PpGroupMapper, w: u32) -> Split {
        if self.encoder {
            let (t, _) = mapper.map.sides(w);
            Split {
                color: mapper.joined_index(mapper.decoder_group(self.own.color, t), w),
                key: self.own.key,
            }
        } else {
            Split {
                color: mapper.joined_index(self.own.color, w),
                key: mapper.encoder.size() + self.own.key,
            }
        }
    }
}

/// The encoder + decoder pipelines, joined by coordinates: the `pp` kind of
/// an encoder + decoder layout.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PpGroupMapper {
    /// Encoder pipelines (the encoder's `pp` groups) and decoder pipelines.
    encoder: Boxes,
    decoder: Boxes,
    map: BlockMap,
    tp: Div,
    encoder_tp: Div,
    /// Product of the sizes of the shared axes before tp in the order: the
    /// weight of the tp digit in a pipeline index (`L` below).
    low: Div,
    /// Joined pipelines per value of the axes after tp: `L * max(tp, encoder_tp)`.
    per_high: Div,
    /// The shared axes before tp and after it, fastest first.
    low_digits: ArrayVec<Shared, MAX_AXES>,
    high_digits: ArrayVec<Shared, MAX_AXES>,
    /// The distance between encoder ranks of consecutive tp indices.
    encoder_tp_stride: u32,
}

impl PpGroupMapper {
    /// The join of `encoder` and `decoder` (attention grids with axes tp,
    /// cp, dp, pp in the same order, equal cp and dp sizes) whose pipelines
    /// are `encoder_pp` and `decoder_pp`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when the grids do not share their cp and dp
    /// axes, or a tensor-parallel size is 0.
    pub fn new(
        encoder: &Grid,
        encoder_pp: Boxes,
        decoder: &Grid,
        decoder_pp: Boxes,
    ) -> Result<PpGroupMapper> {
        let mismatch = |what: String| Error::InvalidConfig {
            message: format!("encoder and decoder grids cannot be joined: {what}"),
        };
        let (tp, encoder_tp) = (decoder.size(Axis::Tp), encoder.size(Axis::Tp));
        let map = BlockMap::new(tp, encoder_tp)
            .ok_or_else(|| mismatch(format!("tp {tp}, encoder tp {encoder_tp}")))?;
        let (mut low_digits, mut high_digits) = (ArrayVec::new(), ArrayVec::new());
        let mut before_tp = true;
        for a in decoder.axes() {
            match a.axis {
                Axis::Tp => before_tp = false,
                Axis::Pp => {}
                axis => {
                    let size = a.digit.size;
                    if encoder.size(axis) != size || encoder.position(axis).is_none() {
                        return Err(mismatch(format!(
                            "{axis} is {} in the encoder, {size} in the decoder",
                            encoder.size(axis)
                        )));
                    }
                    if size > 1 {
                        let shared = Shared {
                            size,
                            strides: [encoder.stride(axis), a.digit.stride],
                        };
                        let list = if before_tp {
                            &mut low_digits
                        } else {
                            &mut high_digits
                        };
                        list.try_push(shared)
                            .map_err(|_| mismatch("too many axes".into()))?;
                    }
                }
            }
        }
        let low: u32 = low_digits.iter().map(|d| d.size).product();
        Ok(PpGroupMapper {
            encoder: encoder_pp,
            decoder: decoder_pp,
            map,
            tp: Div::new(tp),
            encoder_tp: Div::new(encoder_tp),
            low: Div::new(low),
            per_high: Div::new(low * tp.max(encoder_tp)),
            low_digits,
            high_digits,
            encoder_tp_stride: encoder.stride(Axis::Tp),
        })
    }

    pub fn count(&self) -> u32 {
        let highs = self.decoder.count() / (self.low.divisor() * self.tp.divisor());
        highs * self.per_high.divisor()
    }

    /// `(g % L, (g / L) % n, g / (L * n))` for a pipeline index `g` of a
    /// grid whose tp size is `n`: the axes before tp, tp, the axes after.
    fn digits(&self, g: u32, n: Div) -> (u32, u32, u32) {
        let (rest, low_i) = self.low.div_rem(g);
        let (high, t) = n.div_rem(rest);
        (low_i, t, high)
    }

    /// Members per joined pipeline.
    pub fn len(&self) -> u32 {
        self.encoder.size() + self.decoder.size()
    }

    /// The index of the joined pipeline of decoder pipeline `g` (tp index
    /// `t`) and pipeline `w` of the block map.
    ///
    /// With `L = low`, `W = max(tp, encoder_tp)` and `g = low_i + t*L +
    /// high*L*tp`, the joined index is
    /// `high*L*W + L*first(t) + low_i*pairs(t) + (w - first(t))`, where
    /// `first(t)..first(t) + pairs(t)` are the pipelines of `t`: inside one
    /// high block, decoder tp index slowest, then the axes before tp, then
    /// the encoder index.
    ///
    /// For example tp = 2, encoder_tp = 3, cp = 2, order `cp-tp-...` (so
    /// `L = 2`, `W = 3`; decoder 0 pairs with encoders 0, 1, decoder 1
    /// with encoder 2):
    ///
    /// | joined index | 0 | 1 | 2 | 3 | 4 | 5 |
    /// | --- | --- | --- | --- | --- | --- | --- |
    /// | decoder tp `t` | 0 | 0 | 0 | 0 | 1 | 1 |
    /// | cp (`low_i`)   | 0 | 0 | 1 | 1 | 0 | 1 |
    /// | encoder tp `e` | 0 | 1 | 0 | 1 | 2 | 2 |
    ///
    /// and with tp = 4, encoder_tp = 2, cp = 2, order `tp-cp-...` (the seed
    /// case: `L = 1`, cp is a high axis, one pipeline per decoder index):
    ///
    /// | joined index | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 |
    /// | --- | --- | --- | --- | --- | --- | --- | --- | --- |
    /// | decoder tp `t` | 0 | 1 | 2 | 3 | 0 | 1 | 2 | 3 |
    /// | encoder tp `e` | 0 | 0 | 1 | 1 | 0 | 0 | 1 | 1 |
    /// | cp (high)      | 0 | 0 | 0 | 0 | 1 | 1 | 1 | 1 |
    fn joined_index(&self, g: u32, w: u32) -> u32 {
        let (low_i, t, high) = self.digits(g, self.tp);
        let pairs = self.map.decoder_pairs(t);
        let width = pairs.end - pairs.start;
        high * self.per_high.divisor()
            + self.low.divisor() * pairs.start
            + low_i * width
            + (w - pairs.start)
    }

    /// The inverse of [`joined_index`](Self::joined_index): `(g, w)`.
    fn split_joined(&self, index: u32) -> (u32, u32) {
        let l = self.low.divisor();
        let (high, rem) = self.per_high.div_rem(index);
        // rem / L lies among the pipelines of t.
        let (t, _) = self.map.sides(self.low.div(rem));
        let pairs = self.map.decoder_pairs(t);
        let width = pairs.end - pairs.start;
        let r = rem - l * pairs.start;
        let (low_i, j) = (r / width, r % width);
        (self.compose(low_i, t, high, self.tp), pairs.start + j)
    }

    /// The pipeline index `low_i + t*L + high*L*n` of a grid whose tp size is `n`.
    fn compose(&self, low_i: u32, t: u32, high: u32, n: Div) -> u32 {
        let l = self.low.divisor();
        low_i + t * l + high * l * n.divisor()
    }

    /// The encoder pipeline index of decoder pipeline `g` with encoder tp index `e`.
    fn encoder_group(&self, g: u32, e: u32) -> u32 {
        let (low_i, _, high) = self.digits(g, self.tp);
        self.compose(low_i, e, high, self.encoder_tp)
    }

    /// The decoder pipeline index of encoder pipeline `ge` with decoder tp index `t`.
    fn decoder_group(&self, ge: u32, t: u32) -> u32 {
        let (low_i, _, high) = self.digits(ge, self.encoder_tp);
        self.compose(low_i, t, high, self.tp)
    }

    /// (encoder pipeline, decoder pipeline) of joined pipeline `index`.
    fn pipelines(&self, index: u32) -> (u32, u32) {
        let (g, w) = self.split_joined(index);
        let (_, e) = self.map.sides(w);
        (self.encoder_group(g, e), g)
    }

    pub fn group(&self, index: u32) -> Group {
        let (ge, g) = self.pipelines(index);
        Group::joined(self.encoder.segment(ge), self.decoder.segment(g))
    }

    pub fn rounds(&self) -> u32 {
        self.map.blocks.max_len()
    }

    /// The joined pipeline of round `round` holding the rank seen by `view`.
    pub fn locate(&self, view: &RankView, round: u32) -> Option<Split> {
        let wide = self.map.decoder_wide;
        let side = self.side(view)?;
        let w = self
            .map
            .in_round(side.pairs.clone(), wide != side.encoder, round)?;
        Some(side.split(self, w))
    }

    /// The rank's place in each of its joined pipelines (the same in all).
    pub fn key(&self, view: &RankView) -> Option<u32> {
        let side = self.side(view)?;
        Some(side.split(self, side.pairs.start).key)
    }

    /// Every joined pipeline holding the rank seen by `view` (O(its
    /// pipelines), whatever the number of rounds).
    pub fn locate_all(&self, view: &RankView) -> Vec<Split> {
        self.side(view)
            .map(|side| side.pairs.clone().map(|w| side.split(self, w)).collect())
            .unwrap_or_default()
    }

    /// Where the rank seen by `view` sits: its pipeline in its own grid and
    /// the block-map pipelines of its tensor-parallel index.
    fn side(&self, view: &RankView) -> Option<Side> {
        if let Some(coords) = view.coords(self.decoder.grid()) {
            let s = self.decoder.locate(coords);
            let (_, t, _) = self.digits(s.color, self.tp);
            return Some(Side {
                encoder: false,
                own: s,
                pairs: self.map.decoder_pairs(t),
            });
        }
        let s = self.encoder.locate(view.coords(self.encoder.grid())?);
        let (_, e, _) = self.digits(s.color, self.encoder_tp);
        Some(Side {
            encoder: true,
            own: s,
            pairs: self.map.encoder_pairs(e),
        })
    }

    /// The joined pipelines as groups of two parts, for counting where they
    /// fall on nodes ([`spread`](crate::plan::spread)); with `ends`, their
    /// `[first encoder stage, last decoder stage]` (`embd`).
    ///
    /// Joined pipeline `(w, x)`, for wide index `w` and shared (cp, dp)
    /// coordinates `x`, joins the encoder pipeline of tp index `e` and the
    /// decoder pipeline of tp index `t` (`(t, e)` the sides of `w`) at the
    /// same `x`: their first ranks are those at `x = 0` plus the dot product
    /// of `x` with each grid's strides. So every joined pipeline is one pair
    /// of first ranks (one per `w`, `max(tp, encoder_tp)` of them) moved
    /// along the shared digits.
    pub fn joins(&self, ends: bool) -> Joins {
        let wide = self.tp.divisor().max(self.encoder_tp.divisor());
        let shift = if ends { self.decoder.span() } else { 0 };
        let pairs = (0..wide)
            .map(|w| {
                let (t, e) = self.map.sides(w);
                [
                    self.encoder.base(self.compose(0, e, 0, self.encoder_tp)),
                    self.decoder
                        .base(self.compose(0, t, 0, self.tp))
                        .wrapping_add(shift),
                ]
            })
            .collect();
        let members = if ends {
            Default::default()
        } else {
            [self.encoder.member_steps(), self.decoder.member_steps()]
        };
        Joins {
            pairs,
            shared: self
                .low_digits
                .iter()
                .chain(&self.high_digits)
                .copied()
                .collect(),
            members,
            boundary: self.decoder.base(0),
        }
    }

    /// Writes every joined pipeline.
    pub fn fill(&self, out: &mut [u32]) {
        let parts = [to_usize(self.encoder.size()), to_usize(self.decoder.size())];
        self.fill_with(out, parts, |index, out| {
            let (ge, g) = self.pipelines(index);
            self.encoder.segment(ge).fill(out);
            if let Some(rest) = out.get_mut(parts[0]..) {
                self.decoder.segment(g).fill(rest);
            }
        });
    }

    /// Writes the ends of every joined pipeline: `[first encoder stage,
    /// last decoder stage]`, or the first encoder stage alone.
    pub fn fill_ends(&self, last: bool, out: &mut [u32]) {
        let parts = [1, usize::from(last)];
        let span = self.decoder.span();
        self.fill_with(out, parts, |index, out| {
            let (ge, g) = self.pipelines(index);
            let ends = [
                self.encoder.base(ge),
                self.decoder.base(g).wrapping_add(span),
            ];
            for (slot, rank) in out.iter_mut().zip(ends).take(parts[0] + parts[1]) {
                *slot = rank;
            }
        });
    }

    /// Writes every joined pipeline with parts of `parts` members: the
    /// first pipeline of each decoder tp index by `write`, every other one
    /// as a copy of those plus per-part constants.
    fn fill_with(&self, out: &mut [u32], parts: Parts, write: impl Fn(u32, &mut [u32])) {
        let p = parts[0] + parts[1];
        let mut pattern = Pattern::new(parts);
        let mut at = 0usize;
        for t in 0..self.tp.divisor() {
            let pairs = self.map.decoder_pairs(t);
            let first = self.joined_index(self.compose(0, t, 0, self.tp), pairs.start);
            let here = at * p;
            if let Some(rest) = out.get_mut(here..) {
                write(first, rest);
            }
            // Fan-in: the next pipelines of t have the next encoder indices.
            let width = pairs.end - pairs.start;
            replicate_groups(
                out,
                here,
                1,
                &mut pattern,
                width,
                [self.encoder_tp_stride, 0],
            );
            let mut tile = to_usize(width);
            for d in &self.low_digits {
                replicate_groups(out, here, tile, &mut pattern, d.size, d.strides);
                tile *= to_usize(d.size);
            }
            at += tile;
        }
        let mut tile = at;
        for d in &self.high_digits {
            replicate_groups(out, 0, tile, &mut pattern, d.size, d.strides);
            tile *= to_usize(d.size);
        }
    }
}
