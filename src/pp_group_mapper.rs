//! Joining encoder and decoder pipelines by coordinates (SPEC 3.3).
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
//! let layout = Layout::new(&Config {
//!     tp: 4, cp: 2, encoder_tp: Some(2), encoder_pp: Some(1), ..Config::default()
//! })?;
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

use std::ops::Range;

use crate::grid::{Grid, Mask};
use crate::group::{Group, Segment};
use crate::math::{Blocks, Digit};
use crate::plan::Slot;
use crate::{Axis, AxisSet};

/// Which joined kind a plan enumerates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Joined {
    /// `pp`: encoder pipeline then decoder pipeline.
    Pp,
    /// `embd`: first encoder stage and last decoder stage of each joined pipeline.
    Embd,
    /// `pos-embd`: first encoder stage, each encoder pipeline once.
    PosEmbd,
    /// `tp-pp`: encoder and decoder tp-pp groups of the same (cp, dp).
    TpPp,
}

/// The coordinate map between an encoder grid and the decoder grid after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PpGroupMapper {
    encoder: Grid,
    decoder: Grid,
    enc_pp: Mask,
    dec_pp: Mask,
    tp: u32,
    encoder_tp: u32,
    /// Product of the decoder's non-pp axis sizes before tp: the weight of
    /// the tp digit in a decoder pp-group index.
    low: u32,
}

impl PpGroupMapper {
    /// Both grids are attention views (axes tp, cp, dp, pp) with equal cp and dp.
    pub fn new(encoder: Grid, decoder: Grid) -> PpGroupMapper {
        let pp = AxisSet::of(&[Axis::Pp]);
        // Both grids have a pp axis, so the masks exist.
        let enc_pp = encoder.mask(pp).unwrap_or_else(|| unreachable!());
        let dec_pp = decoder.mask(pp).unwrap_or_else(|| unreachable!());
        let low = decoder
            .axes()
            .take_while(|(a, _)| *a != Axis::Tp)
            .filter(|(a, _)| *a != Axis::Pp)
            .map(|(_, d)| d.size)
            .product();
        PpGroupMapper {
            tp: decoder.size(Axis::Tp),
            encoder_tp: encoder.size(Axis::Tp),
            encoder,
            decoder,
            enc_pp,
            dec_pp,
            low,
        }
    }

    fn fan_out(&self) -> bool {
        self.tp >= self.encoder_tp
    }

    /// Fan-out: decoder indices cut into encoder_tp blocks; fan-in: the reverse.
    fn blocks(&self) -> Blocks {
        if self.fan_out() {
            Blocks::new(self.tp, self.encoder_tp)
        } else {
            Blocks::new(self.encoder_tp, self.tp)
        }
    }

    /// The encoder tp indices decoder tp index `t` is joined to.
    fn encoders_of(&self, t: u32) -> Range<u32> {
        if self.fan_out() {
            let e = self.blocks().block_of(t);
            e..e + 1
        } else {
            self.blocks().range(t)
        }
    }

    /// The decoder tp indices encoder tp index `e` is joined to.
    fn decoders_of(&self, e: u32) -> Range<u32> {
        if self.fan_out() {
            self.blocks().range(e)
        } else {
            let t = self.blocks().block_of(e);
            t..t + 1
        }
    }

    /// Joined groups before decoder tp index `t` inside one (low, high) block.
    fn before(&self, t: u32) -> u32 {
        if self.fan_out() {
            t
        } else {
            self.encoders_of(t).start
        }
    }

    /// Joined groups per (high) block: `max(tp, encoder_tp)` per low index.
    fn width(&self) -> u32 {
        self.tp.max(self.encoder_tp)
    }

    /// The joined index of decoder pp group `g` with its `j`-th encoder.
    fn joined_index(&self, g: u32, j: u32) -> u32 {
        let (low, t, high) = (
            g % self.low,
            (g / self.low) % self.tp,
            g / (self.low * self.tp),
        );
        let w = self.encoders_of(t).len() as u32;
        high * self.low * self.width() + self.low * self.before(t) + low * w + j
    }

    /// Inverse of [`joined_index`](Self::joined_index): `(g, t, e)`.
    fn split_joined(&self, index: u32) -> (u32, u32, u32) {
        let block = self.low * self.width();
        let (high, rem) = (index / block, index % block);
        let t = if self.fan_out() {
            rem / self.low
        } else {
            self.blocks().block_of(rem / self.low)
        };
        let encoders = self.encoders_of(t);
        let r = rem - self.low * self.before(t);
        let w = encoders.len() as u32;
        let (low, j) = (r / w, r % w);
        let g = low + t * self.low + high * self.low * self.tp;
        (g, t, encoders.start + j)
    }

    /// First rank of the encoder pipeline with tp index `e` and the (cp, dp)
    /// of `decoder_rank`.
    fn encoder_pipeline(&self, decoder_rank: u32, e: u32) -> Segment {
        let first = first_stage(&self.decoder, decoder_rank, &self.encoder, e);
        let stages = self
            .encoder
            .digit(Axis::Pp)
            .unwrap_or(Digit { size: 1, stride: 1 });
        Segment::boxed(first, [stages])
    }

    /// The decoder pp group index of tp index `t` and the (cp, dp) of `encoder_rank`.
    fn decoder_group(&self, encoder_rank: u32, t: u32) -> u32 {
        let first = first_stage(&self.encoder, encoder_rank, &self.decoder, t);
        self.decoder
            .locate(self.dec_pp, first)
            .map_or(0, |(g, _)| g)
    }

    pub fn covers(&self, rank: u32) -> bool {
        self.encoder.contains(rank) || self.decoder.contains(rank)
    }

    pub fn count(&self, what: Joined) -> u32 {
        let blocks = self.decoder.group_count(self.dec_pp) / self.tp;
        match what {
            Joined::Pp | Joined::Embd => blocks * self.width(),
            Joined::PosEmbd => blocks * self.encoder_tp,
            Joined::TpPp => blocks,
        }
    }

    fn tp_pp(grid: &Grid) -> Mask {
        grid.mask(AxisSet::of(&[Axis::Tp, Axis::Pp]))
            .unwrap_or_else(|| unreachable!("attention grids have tp and pp"))
    }

    /// The joined pp group `index` as (encoder pipeline, decoder pipeline).
    fn pipelines(&self, index: u32) -> (Segment, Segment) {
        let (g, _, e) = self.split_joined(index);
        let decoder = self.decoder.group_segment(self.dec_pp, g);
        (self.encoder_pipeline(decoder.at(0), e), decoder)
    }

    /// The joined index holding encoder pipeline `index` of `pos-embd` first.
    fn pos_embd_joined(&self, index: u32) -> u32 {
        if !self.fan_out() {
            return index;
        }
        // Fan-out: first appearances are ordered (high, e, low).
        let (low, e, high) = (
            index % self.low,
            (index / self.low) % self.encoder_tp,
            index / (self.low * self.encoder_tp),
        );
        let t = self.decoders_of(e).start;
        low + t * self.low + high * self.low * self.tp
    }

    pub fn group(&self, what: Joined, index: u32) -> Group {
        match what {
            Joined::Pp => {
                let (enc, dec) = self.pipelines(index);
                Group::joined(enc, dec)
            }
            Joined::Embd => {
                let (enc, dec) = self.pipelines(index);
                Group::joined(
                    Segment::single(enc.at(0)),
                    Segment::single(dec.at(dec.len() - 1)),
                )
            }
            Joined::PosEmbd => {
                let (enc, _) = self.pipelines(self.pos_embd_joined(index));
                Group::new(Segment::single(enc.at(0)))
            }
            Joined::TpPp => Group::joined(
                self.encoder
                    .group_segment(Self::tp_pp(&self.encoder), index),
                self.decoder
                    .group_segment(Self::tp_pp(&self.decoder), index),
            ),
        }
    }

    /// The joined pp groups holding `rank`, with its position in each.
    fn pp_slots(&self, rank: u32) -> Vec<Slot> {
        if let Some((g, stage)) = self.decoder.locate(self.dec_pp, rank) {
            let t = self.decoder.coord(rank, Axis::Tp).unwrap_or(0);
            let enc_stages = self.encoder.group_size(self.enc_pp);
            let w = self.encoders_of(t).len() as u32;
            return (0..w)
                .map(|j| (self.joined_index(g, j), enc_stages + stage))
                .collect();
        }
        let Some((_, stage)) = self.encoder.locate(self.enc_pp, rank) else {
            return Vec::new();
        };
        let e = self.encoder.coord(rank, Axis::Tp).unwrap_or(0);
        self.decoders_of(e)
            .map(|t| {
                let j = e - self.encoders_of(t).start;
                (self.joined_index(self.decoder_group(rank, t), j), stage)
            })
            .collect()
    }

    pub fn locate(&self, what: Joined, rank: u32) -> Vec<Slot> {
        let dec_stages = self.decoder.group_size(self.dec_pp);
        let enc_stages = self.encoder.group_size(self.enc_pp);
        match what {
            Joined::Pp => self.pp_slots(rank),
            Joined::Embd => self
                .pp_slots(rank)
                .into_iter()
                .filter_map(|(i, pos)| match pos {
                    0 => Some((i, 0)),
                    p if p == enc_stages + dec_stages - 1 => Some((i, 1)),
                    _ => None,
                })
                .collect(),
            Joined::PosEmbd => {
                let Some(0) = self.encoder.coord(rank, Axis::Pp) else {
                    return Vec::new();
                };
                let e = self.encoder.coord(rank, Axis::Tp).unwrap_or(0);
                let t = self.decoders_of(e).start;
                let g = self.decoder_group(rank, t);
                let index = if self.fan_out() {
                    let (low, high) = (g % self.low, g / (self.low * self.tp));
                    high * self.low * self.encoder_tp + e * self.low + low
                } else {
                    self.joined_index(g, e - self.encoders_of(t).start)
                };
                vec![(index, 0)]
            }
            Joined::TpPp => {
                if let Some(slot) = self.encoder.locate(Self::tp_pp(&self.encoder), rank) {
                    return vec![slot];
                }
                let enc_size = self.encoder.group_size(Self::tp_pp(&self.encoder));
                self.decoder
                    .locate(Self::tp_pp(&self.decoder), rank)
                    .map(|(i, k)| (i, enc_size + k))
                    .into_iter()
                    .collect()
            }
        }
    }

    pub fn rounds(&self, what: Joined) -> u32 {
        match what {
            Joined::Pp | Joined::Embd => self.blocks().max_len(),
            Joined::PosEmbd | Joined::TpPp => 1,
        }
    }

    pub fn round_of(&self, what: Joined, index: u32) -> u32 {
        match what {
            Joined::Pp | Joined::Embd => {
                let (_, t, e) = self.split_joined(index);
                if self.fan_out() {
                    t - self.decoders_of(e).start
                } else {
                    e - self.encoders_of(t).start
                }
            }
            Joined::PosEmbd | Joined::TpPp => 0,
        }
    }
}

/// The first-stage rank of grid `to` with tp index `tp` and the cp and dp
/// coordinates of `rank` in grid `from` (both grids share cp and dp sizes).
fn first_stage(from: &Grid, rank: u32, to: &Grid, tp: u32) -> u32 {
    to.rank_with(|axis| match axis {
        Axis::Tp => tp,
        Axis::Pp => 0,
        other => from.coord(rank, other).unwrap_or(0),
    })
    .unwrap_or_else(|_| unreachable!("cp and dp sizes agree and tp < the grid's tp"))
}
