//! An audit of the encoder + decoder pipelines Megatron-LM joined: which of
//! its joined pipelines mix context-parallel slices or data-parallel
//! replicas, and which pair other tensor-parallel ranks than rank-layout's
//! join by coordinates ([`semantics`](crate::semantics), sections 3.3 and
//! 3.3.1).

use std::fmt;
use std::str::FromStr;

use crate::axis::Axis;
use crate::config::ExpertLayout;
use crate::coord::{Coord, Part, Placement};
use crate::error::{Error, Result};
use crate::kind::Kind;
use crate::layout::{Layout, Sizes};

/// How many examples of each class an [`Audit`] keeps.
///
/// ```
/// use rank_layout::{Config, Layout};
/// use rank_layout::megatron::{AUDIT_EXAMPLES, MegatronJoin, audit};
/// let layout = Layout::new(&Config::new().tp(2).dp(64).encoder_tp(1))?;
/// let a = audit(&layout, MegatronJoin::Zip2024)?;
/// assert_eq!((a.pipelines, a.mixing), (128, 126)); // decoder group i joins encoder group i % 64
/// assert_eq!(a.examples.len(), AUDIT_EXAMPLES);
/// # Ok::<(), rank_layout::Error>(())
/// ```
pub const AUDIT_EXAMPLES: usize = 8;

/// A Megatron-LM commit whose encoder + decoder pipeline join
/// [`audit`] reproduces.
///
/// Parsed from its year or its short hash (`"2024"`, `"4ff9e66"`, `"2025"`,
/// `"5a3b6bcf1f"`, or the full hash).
///
/// ```
/// use rank_layout::megatron::MegatronJoin;
/// let join: MegatronJoin = "2024".parse()?;
/// assert_eq!(join, MegatronJoin::Zip2024);
/// assert_eq!(join.commit(), "4ff9e66ec870e6e45d765531318d50bd47c85d0f");
/// assert_eq!("5a3b6bcf1f".parse::<MegatronJoin>()?, MegatronJoin::Block2025);
/// assert!("2023".parse::<MegatronJoin>().is_err());
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MegatronJoin {
    /// Commit 4ff9e66 (2024-08-22): `zip(cycle(encoder_pp_groups),
    /// decoder_pp_groups)`, decoder group `i` joins encoder group
    /// `i % len(encoder_pp_groups)`.
    Zip2024,
    /// Commit 5a3b6bcf1f (2025-03-16): a block map of list positions, the
    /// decoder groups cut into `len(encoder_pp_groups)` contiguous blocks,
    /// the first `len(decoder) % len(encoder)` of them one larger.
    Block2025,
}

impl MegatronJoin {
    /// Both joins, oldest first.
    ///
    /// ```
    /// use rank_layout::megatron::MegatronJoin;
    /// assert_eq!(MegatronJoin::ALL.map(MegatronJoin::year), [2024, 2025]);
    /// ```
    pub const ALL: [MegatronJoin; 2] = [MegatronJoin::Zip2024, MegatronJoin::Block2025];

    /// The full commit hash.
    ///
    /// ```
    /// use rank_layout::megatron::MegatronJoin;
    /// assert_eq!(MegatronJoin::Block2025.commit(), "5a3b6bcf1f131bee73afbb96ee35e244a4ab674f");
    /// ```
    pub const fn commit(self) -> &'static str {
        match self {
            MegatronJoin::Zip2024 => "4ff9e66ec870e6e45d765531318d50bd47c85d0f",
            MegatronJoin::Block2025 => "5a3b6bcf1f131bee73afbb96ee35e244a4ab674f",
        }
    }

    /// The short commit hash, as `tests/data/megatron` names it.
    ///
    /// ```
    /// use rank_layout::megatron::MegatronJoin;
    /// assert_eq!(MegatronJoin::Zip2024.short_commit(), "4ff9e66");
    /// ```
    pub const fn short_commit(self) -> &'static str {
        match self {
            MegatronJoin::Zip2024 => "4ff9e66",
            MegatronJoin::Block2025 => "5a3b6bcf1f",
        }
    }

    /// The year of the commit.
    ///
    /// ```
    /// use rank_layout::megatron::MegatronJoin;
    /// assert_eq!(MegatronJoin::Block2025.year(), 2025);
    /// ```
    pub const fn year(self) -> u16 {
        match self {
            MegatronJoin::Zip2024 => 2024,
            MegatronJoin::Block2025 => 2025,
        }
    }

    /// How the commit joins the pipelines, in words.
    ///
    /// ```
    /// use rank_layout::megatron::MegatronJoin;
    /// assert!(MegatronJoin::Zip2024.how().contains("cycle"));
    /// ```
    pub const fn how(self) -> &'static str {
        match self {
            MegatronJoin::Zip2024 => {
                "zip(cycle(encoder pp groups), decoder pp groups): list positions, cycled"
            }
            MegatronJoin::Block2025 => {
                "a block map of list positions: each encoder pp group feeds a contiguous run of decoder pp groups"
            }
        }
    }

    /// The position, in Megatron-LM's list of encoder pp groups, of the
    /// group joined to decoder pp group `i` of `decoders`, with `encoders`
    /// encoder groups (`0 < encoders <= decoders`).
    fn encoder_index(self, i: u64, encoders: u64, decoders: u64) -> u64 {
        let encoders = encoders.max(1);
        match self {
            MegatronJoin::Zip2024 => i % encoders,
            MegatronJoin::Block2025 => {
                let rep = (decoders / encoders).max(1);
                let remain = decoders % encoders;
                let long = remain * (rep + 1);
                if i < long {
                    i / (rep + 1)
                } else {
                    remain + (i - long) / rep
                }
            }
        }
    }
}

impl FromStr for MegatronJoin {
    type Err = Error;

    fn from_str(s: &str) -> Result<MegatronJoin> {
        let text = s.trim().to_ascii_lowercase();
        MegatronJoin::ALL
            .into_iter()
            .find(|join| {
                text == join.year().to_string()
                    || text == join.short_commit()
                    || text == join.commit()
            })
            .ok_or_else(|| Error::InvalidArgument {
                name: "megatron".to_owned(),
                value: s.to_owned(),
                expected: "a Megatron-LM commit of the audit: 2024 (4ff9e66) or 2025 (5a3b6bcf1f)",
            })
    }
}

impl fmt::Display for MegatronJoin {
    /// `Megatron-LM 4ff9e66 (2024)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Megatron-LM {} ({})", self.short_commit(), self.year())
    }
}

/// What is wrong with one of Megatron-LM's joined pipelines.
///
/// ```
/// use rank_layout::megatron::JoinClass;
/// assert_eq!(JoinClass::Mixing.name(), "mixing");
/// assert_eq!(JoinClass::OtherTpPairing.to_string(), "other_tp_pairing");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JoinClass {
    /// Its encoder ranks and decoder ranks have different cp or dp
    /// coordinates: it joins two context-parallel slices or two
    /// data-parallel replicas.
    Mixing,
    /// Not mixing, but the encoder tensor index it pairs with the decoder's
    /// is not the one rank-layout's join gives it (`block(t)`).
    OtherTpPairing,
}

impl JoinClass {
    /// `"mixing"` or `"other_tp_pairing"`.
    ///
    /// ```
    /// use rank_layout::megatron::JoinClass;
    /// assert_eq!(JoinClass::OtherTpPairing.name(), "other_tp_pairing");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            JoinClass::Mixing => "mixing",
            JoinClass::OtherTpPairing => "other_tp_pairing",
        }
    }
}

impl fmt::Display for JoinClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// One of Megatron-LM's joined pipelines that rank-layout joins otherwise.
///
/// ```
/// use rank_layout::{Config, Layout};
/// use rank_layout::megatron::{JoinClass, MegatronJoin, audit};
/// let layout = Layout::new(&Config::new().tp(4).cp(2).encoder_tp(2))?;
/// let audit = audit(&layout, MegatronJoin::Zip2024)?;
/// let e = &audit.examples[0];
/// assert_eq!((e.class, e.megatron.clone(), e.rank_layout.clone()), (JoinClass::Mixing, vec![2, 6], vec![1, 6]));
/// assert_eq!((e.encoder.coord.cp, e.decoder.coord.cp), (1, 0));
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct AuditExample {
    /// What is wrong with it.
    pub class: JoinClass,
    /// Megatron-LM's joined pipeline: its encoder stages, then its decoder
    /// stages.
    pub megatron: Vec<u32>,
    /// rank-layout's joined pipeline holding the same first decoder rank.
    pub rank_layout: Vec<u32>,
    /// The last encoder stage of Megatron-LM's pipeline, and its coordinates.
    pub encoder: Placement,
    /// The first decoder stage of Megatron-LM's pipeline, and its coordinates.
    pub decoder: Placement,
}

/// What [`audit`] found: how many of Megatron-LM's joined pipelines mix
/// cp slices or dp replicas, how many pair other tp ranks, and the first
/// few of each ([`AUDIT_EXAMPLES`] at most per class, in Megatron-LM's
/// creation order).
///
/// ```
/// use rank_layout::{Config, Layout};
/// use rank_layout::megatron::{MegatronJoin, audit};
/// let layout = Layout::new(&Config::new().tp(4).cp(2).encoder_tp(2))?;
/// let a = audit(&layout, MegatronJoin::Block2025)?;
/// assert_eq!((a.pipelines, a.mixing, a.other_tp_pairing), (8, 0, 0));
/// assert!(a.agrees());
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Audit {
    /// The commit whose join was reproduced.
    pub join: MegatronJoin,
    /// How many joined pipelines it builds (one per decoder pp group).
    pub pipelines: usize,
    /// How many of them mix cp slices or dp replicas.
    pub mixing: usize,
    /// How many, not mixing, pair an encoder tp index other than
    /// rank-layout's with the decoder's.
    pub other_tp_pairing: usize,
    /// The first few of each class.
    pub examples: Vec<AuditExample>,
}

impl Audit {
    /// Whether every joined pipeline is rank-layout's.
    ///
    /// ```
    /// use rank_layout::{Config, Layout};
    /// use rank_layout::megatron::{MegatronJoin, audit};
    /// let layout = Layout::new(&Config::new().tp(4).cp(2).encoder_tp(2))?;
    /// assert!(!audit(&layout, MegatronJoin::Zip2024)?.agrees());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn agrees(&self) -> bool {
        self.mixing == 0 && self.other_tp_pairing == 0
    }
}

/// The joined pipelines of Megatron-LM at `join`'s commit for `layout`, in
/// its creation order (one per decoder pp group): each the encoder pp
/// group's ranks, then the decoder pp group's. Lazy; O(pp * axes) per
/// pipeline. Megatron-LM's `embd` group of a pipeline is its first and last
/// rank, its `pos-embd` group its first rank.
///
/// # Errors
/// [`Error::NeedsEncoder`] for a layout without an encoder;
/// [`Error::MegatronRefuses`] for one that commit does not build
/// (`encoder_tp > tp`; experts laid out otherwise than it lays them out;
/// hierarchical cp or optimizer instances before 2025).
///
/// ```
/// use rank_layout::{Config, Layout};
/// use rank_layout::megatron::{MegatronJoin, megatron_pipelines};
/// // Encoder ranks 0-3 (tp=2 x cp=2), decoder ranks 4-11 (tp=4 x cp=2).
/// let layout = Layout::new(&Config::new().tp(4).cp(2).encoder_tp(2))?;
/// let zip: Vec<Vec<u32>> = megatron_pipelines(&layout, MegatronJoin::Zip2024)?.collect();
/// assert_eq!(zip, vec![
///     vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7],
///     vec![0, 8], vec![1, 9], vec![2, 10], vec![3, 11],
/// ]);
/// let block = megatron_pipelines(&layout, MegatronJoin::Block2025)?.collect::<Vec<_>>();
/// assert_eq!(block[..4], [vec![0, 4], vec![0, 5], vec![1, 6], vec![1, 7]]);
/// # Ok::<(), rank_layout::Error>(())
/// ```
pub fn megatron_pipelines(layout: &Layout, join: MegatronJoin) -> Result<MegatronPipelines<'_>> {
    Ok(MegatronPipelines {
        joiner: Joiner::new(layout, join)?,
        next: 0,
    })
}

/// The iterator of [`megatron_pipelines`]: one joined pipeline per
/// decoder pp group, in Megatron-LM's creation order.
///
/// ```
/// use rank_layout::{Config, Layout};
/// use rank_layout::megatron::{MegatronJoin, megatron_pipelines};
/// let layout = Layout::new(&Config::new().tp(2).pp(2).encoder_tp(1).encoder_pp(2))?;
/// let mut pipelines = megatron_pipelines(&layout, MegatronJoin::Block2025)?;
/// assert_eq!(pipelines.len(), 2);
/// assert_eq!(pipelines.next(), Some(vec![0, 1, 2, 4]));
/// assert_eq!(pipelines.next(), Some(vec![0, 1, 3, 5]));
/// assert_eq!(pipelines.next(), None);
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct MegatronPipelines<'a> {
    joiner: Joiner<'a>,
    next: u64,
}

impl Iterator for MegatronPipelines<'_> {
    type Item = Vec<u32>;

    fn next(&mut self) -> Option<Vec<u32>> {
        if self.next >= self.joiner.decoders {
            return None;
        }
        let pair = self.joiner.pair(self.next);
        self.next += 1;
        // Every coordinate is inside its grid, so `rank` does not fail.
        self.joiner.ranks(&pair).ok()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::try_from(self.joiner.decoders.saturating_sub(self.next)).unwrap_or(0);
        (left, Some(left))
    }
}

impl ExactSizeIterator for MegatronPipelines<'_> {}

/// Reproduces Megatron-LM's joined pipelines at `join`'s commit for
/// `layout`'s encoder + decoder layout, and classifies each against
/// rank-layout's join by coordinates: [`JoinClass::Mixing`] when an
/// encoder rank and a decoder rank of the pipeline have different cp or dp
/// coordinates, [`JoinClass::OtherTpPairing`] when they do not but the
/// (encoder tp, decoder tp) pair is not rank-layout's.
///
/// O(axes + pp) per pipeline for the examples and O(axes) for the others;
/// every coordinate is the layout's own answer ([`Layout::placement`]).
///
/// # Errors
/// Those of [`megatron_pipelines`].
///
/// ```
/// use rank_layout::{Config, Layout};
/// use rank_layout::megatron::{MegatronJoin, audit};
/// let layout = Layout::new(&Config::new().tp(4).cp(2).encoder_tp(2))?;
/// let a = audit(&layout, MegatronJoin::Zip2024)?;
/// assert_eq!((a.pipelines, a.mixing, a.other_tp_pairing), (8, 4, 2));
/// // A decoder-only layout has nothing to join.
/// assert!(audit(&Layout::new(&Config::new().tp(4))?, MegatronJoin::Zip2024).is_err());
/// # Ok::<(), rank_layout::Error>(())
/// ```
pub fn audit(layout: &Layout, join: MegatronJoin) -> Result<Audit> {
    let joiner = Joiner::new(layout, join)?;
    let mut audit = Audit {
        join,
        pipelines: usize::try_from(joiner.decoders).unwrap_or(usize::MAX),
        mixing: 0,
        other_tp_pairing: 0,
        examples: Vec::new(),
    };
    let (mut mixing_examples, mut other_examples) = (Vec::new(), Vec::new());
    for i in 0..joiner.decoders {
        let pair = joiner.pair(i);
        let last_stage = joiner.encoder.pp.saturating_sub(1);
        let encoder = layout.placement(layout.rank(Part::Encoder, pair.encoder.at(last_stage))?)?;
        let decoder = layout.placement(layout.rank(Part::Decoder, pair.decoder.at(0))?)?;
        let (class, examples) =
            if encoder.coord.cp != decoder.coord.cp || encoder.coord.dp != decoder.coord.dp {
                audit.mixing += 1;
                (JoinClass::Mixing, &mut mixing_examples)
            } else {
                // rank-layout's pipeline of this decoder rank (one: encoder_tp
                // <= tp) starts at the encoder rank it joins.
                let first = layout.rank(Part::Encoder, pair.encoder.at(0))?;
                let ours = layout
                    .memberships(decoder.rank, Kind::PP)?
                    .into_iter()
                    .next()
                    .and_then(|m| m.group.first());
                if ours == Some(first) {
                    continue;
                }
                audit.other_tp_pairing += 1;
                (JoinClass::OtherTpPairing, &mut other_examples)
            };
        if examples.len() < AUDIT_EXAMPLES {
            let rank_layout = layout
                .memberships(decoder.rank, Kind::PP)?
                .into_iter()
                .next()
                .map(|m| m.group.to_vec())
                .unwrap_or_default();
            examples.push(AuditExample {
                class,
                megatron: joiner.ranks(&pair)?,
                rank_layout,
                encoder,
                decoder,
            });
        }
    }
    audit.examples = mixing_examples;
    audit.examples.append(&mut other_examples);
    Ok(audit)
}

/// The (tp, cp, dp) coordinates of one pp group of a grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Line {
    tp: u32,
    cp: u32,
    dp: u32,
}

impl Line {
    /// The coordinate of stage `pp` of this pp group.
    fn at(self, pp: u32) -> Coord {
        Coord {
            tp: self.tp,
            cp: self.cp,
            dp: self.dp,
            pp,
        }
    }
}

/// A decoder pp group and the encoder pp group Megatron-LM joins to it.
#[derive(Debug, Clone, Copy)]
struct Pair {
    encoder: Line,
    decoder: Line,
}

/// Megatron-LM's lists of pp groups of both grids, and its join of them.
#[derive(Debug, Clone)]
struct Joiner<'a> {
    layout: &'a Layout,
    join: MegatronJoin,
    /// tp, cp and dp in the layout's order, first fastest: the mixed radix
    /// of a pp group's number in `RankGenerator.get_ranks("pp")`.
    axes: [Axis; 3],
    encoder: Sizes,
    decoder: Sizes,
    /// The numbers of encoder and decoder pp groups.
    encoders: u64,
    decoders: u64,
}

impl<'a> Joiner<'a> {
    fn new(layout: &'a Layout, join: MegatronJoin) -> Result<Joiner<'a>> {
        let encoder = layout.encoder_sizes().ok_or(Error::NeedsEncoder)?;
        let decoder = layout.sizes();
        let config = layout.config();
        let refuse = |reason: String| Error::MegatronRefuses {
            commit: join.short_commit(),
            reason,
        };
        if encoder.tp > decoder.tp {
            return Err(refuse(format!(
                "encoder_tp ({}) > tp ({}): \"We do not support encoders with more TP than the decoder.\"",
                encoder.tp, decoder.tp
            )));
        }
        let experts = decoder.ep > 1 || decoder.etp != decoder.tp;
        match join {
            MegatronJoin::Zip2024 => {
                if experts && config.expert_layout == ExpertLayout::Folded {
                    return Err(refuse(format!(
                        "it nests experts in dp (expert_layout = nested); this layout folds them (ep {}, etp {})",
                        decoder.ep, decoder.etp
                    )));
                }
                if !config.hierarchical_cp.is_empty() {
                    return Err(refuse(
                        "it has no hierarchical context parallelism (hierarchical_cp)".to_owned(),
                    ));
                }
                if config.dist_opt_instances > 1 {
                    return Err(refuse(format!(
                        "it has no distributed-optimizer instances (dist_opt_instances = {})",
                        config.dist_opt_instances
                    )));
                }
                // Its RankGenerator checks the order string, whatever ep's size.
                let written = config.order.written();
                if let Some(ep) = config.order.written_position(Axis::Ep) {
                    let next_to_dp = [ep.checked_sub(1), ep.checked_add(1)]
                        .into_iter()
                        .flatten()
                        .any(|i| written.get(i) == Some(&Axis::Dp));
                    if !next_to_dp {
                        return Err(refuse(format!(
                            "\"The ep and dp must be adjacent in order ({}).\"",
                            config.order
                        )));
                    }
                }
            }
            MegatronJoin::Block2025 => {
                if experts && config.expert_layout == ExpertLayout::Nested {
                    return Err(refuse(format!(
                        "it folds experts (expert_layout = folded); this layout nests them in dp (ep {})",
                        decoder.ep
                    )));
                }
                // Its expert grid has no cp: edp = decoder world / (etp * ep * pp),
                // checked against dp unless the order string ends in pp.
                let ends_in_pp = config.order.written().last() == Some(&Axis::Pp);
                let edp = u64::from(decoder.tp) * u64::from(decoder.cp) * u64::from(decoder.dp)
                    / (u64::from(decoder.etp) * u64::from(decoder.ep)).max(1);
                if decoder.pp > 1 && !ends_in_pp && edp != u64::from(decoder.dp) {
                    return Err(refuse(format!(
                        "with pp ({}) > 1 and order \"{}\" not ending in pp, its expert data-parallel size ({edp}) must equal dp ({}) (\"When not using pp-last rank ordering, the data parallel size of the attention and moe layers must be the same\")",
                        decoder.pp, config.order, decoder.dp
                    )));
                }
            }
        }
        let mut axes = [Axis::Tp, Axis::Cp, Axis::Dp];
        let mut at = 0;
        for axis in config.order.axes() {
            if matches!(axis, Axis::Tp | Axis::Cp | Axis::Dp) {
                if let Some(slot) = axes.get_mut(at) {
                    *slot = axis;
                }
                at += 1;
            }
        }
        let lines = |s: &Sizes| u64::from(s.tp) * u64::from(s.cp) * u64::from(s.dp);
        Ok(Joiner {
            layout,
            join,
            axes,
            encoders: lines(&encoder),
            decoders: lines(&decoder),
            encoder,
            decoder,
        })
    }

    /// Pp group `index` of a grid of `sizes` in Megatron-LM's list: its
    /// number is the mixed radix of its tp, cp and dp in the order.
    fn line(&self, mut index: u64, sizes: &Sizes) -> Line {
        let mut line = Line {
            tp: 0,
            cp: 0,
            dp: 0,
        };
        for axis in self.axes {
            let size = u64::from(sizes[axis]).max(1);
            let digit = u32::try_from(index % size).unwrap_or(0);
            index /= size;
            match axis {
                Axis::Tp => line.tp = digit,
                Axis::Cp => line.cp = digit,
                _ => line.dp = digit,
            }
        }
        line
    }

    /// Decoder pp group `i` and the encoder pp group joined to it.
    fn pair(&self, i: u64) -> Pair {
        let e = self.join.encoder_index(i, self.encoders, self.decoders);
        Pair {
            encoder: self.line(e, &self.encoder),
            decoder: self.line(i, &self.decoder),
        }
    }

    /// The ranks of a joined pipeline: encoder stages, then decoder stages.
    fn ranks(&self, pair: &Pair) -> Result<Vec<u32>> {
        let stages = |part: Part, line: Line, n: u32| {
            (0..n).map(move |pp| self.layout.rank(part, line.at(pp)))
        };
        stages(Part::Encoder, pair.encoder, self.encoder.pp)
            .chain(stages(Part::Decoder, pair.decoder, self.decoder.pp))
            .collect()
    }
}
