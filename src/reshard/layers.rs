//! Which layers each pipeline stage holds: Megatron-Core's even split,
//! its uneven first and last stages, virtual pipeline chunks, explicit
//! chunks and its `--pipeline-model-parallel-layout` strings.
//!
//! The layers are cut into `pp * v` chunks in layer order; chunk `c` runs
//! on stage `c mod pp` (virtual stage `c / pp`), as Megatron-Core's
//! `get_transformer_layer_offset` and `PipelineParallelLayerLayout` place
//! them.

use crate::cast::to_usize;
use crate::error::{Error, Result};

/// How a side places the model's layers on its pipeline stages (a
/// description; [`LayerSplit::resolve`] makes the [`LayerMap`] of a number
/// of layers and stages).
///
/// ```
/// use rank_layout::reshard::LayerSplit;
/// // Megatron's uneven split: 10 layers on 4 stages, 1 on the first, 3 on the last.
/// let map = LayerSplit::even().first(1).last(3).resolve(10, 4)?;
/// assert_eq!(map.chunks(), &[1, 3, 3, 3]);
/// assert_eq!(map.stage_of(4), Some(2));
/// // Interleaved: 8 layers, 2 stages, 2 chunks each: stage 0 holds 0-1 and 4-5.
/// let map = LayerSplit::even().virtual_stages(2).resolve(8, 2)?;
/// assert_eq!(map.windows(0), vec![(0, 2), (4, 6)]);
/// assert!(LayerSplit::even().resolve(10, 4).is_err()); // 10 layers over 4 stages
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct LayerSplit {
    first: Option<u32>,
    last: Option<u32>,
    virtual_stages: u32,
    layers_per_virtual_stage: Option<u32>,
    embedding_counts: bool,
    loss_counts: bool,
    chunks: Option<Vec<u32>>,
}

impl LayerSplit {
    /// The even split (Megatron-Core's default): `num_layers / pp` layers
    /// per stage.
    pub fn even() -> LayerSplit {
        LayerSplit {
            virtual_stages: 1,
            ..LayerSplit::default()
        }
    }

    /// With `n` layers on the first stage (Megatron's
    /// `--decoder-first-pipeline-num-layers`).
    #[must_use]
    pub fn first(mut self, n: u32) -> LayerSplit {
        self.first = Some(n);
        self
    }

    /// With `n` layers on the last stage
    /// (`--decoder-last-pipeline-num-layers`).
    #[must_use]
    pub fn last(mut self, n: u32) -> LayerSplit {
        self.last = Some(n);
        self
    }

    /// With `v` model chunks per stage (the interleaved schedule,
    /// `--num-virtual-stages-per-pipeline-rank`).
    #[must_use]
    pub fn virtual_stages(mut self, v: u32) -> LayerSplit {
        self.virtual_stages = v;
        self
    }

    /// With `n` layers per model chunk: `(num_layers / pp) / n` chunks per
    /// stage, as Megatron-LM derives them from
    /// `--num-layers-per-virtual-pipeline-stage`.
    #[must_use]
    pub fn layers_per_virtual_stage(mut self, n: u32) -> LayerSplit {
        self.layers_per_virtual_stage = Some(n);
        self
    }

    /// Counting the embedding as a layer of the first stage
    /// (`--account-for-embedding-in-pipeline-split`).
    #[must_use]
    pub fn embedding_counts(mut self) -> LayerSplit {
        self.embedding_counts = true;
        self
    }

    /// Counting the loss as a layer of the last stage
    /// (`--account-for-loss-in-pipeline-split`).
    #[must_use]
    pub fn loss_counts(mut self) -> LayerSplit {
        self.loss_counts = true;
        self
    }

    /// Explicit chunks: `layers[c]` layers in chunk `c`, in layer order,
    /// chunk `c` on stage `c mod pp` (so `pp * v` chunks).
    pub fn chunks(layers: impl Into<Vec<u32>>) -> LayerSplit {
        LayerSplit {
            chunks: Some(layers.into()),
            virtual_stages: 1,
            ..LayerSplit::default()
        }
    }

    /// The chunks of Megatron-Core's `--pipeline-model-parallel-layout`
    /// string, read as `PipelineParallelLayerLayout.parse_str_to_list`
    /// reads it: commas ignored, `(...)*n` then `x*n` repeated, stages
    /// separated by `|`, `E` the embedding, `t` a transformer layer, `m`
    /// an MTP layer, `L` the loss; a chunk's layers are its `t`s. The
    /// embedding must open the first chunk and the loss close the last,
    /// as Megatron-Core checks.
    ///
    /// ```
    /// use rank_layout::reshard::LayerSplit;
    /// let split = LayerSplit::parse_megatron_layout("Et*3|(tt|)*2,tL")?;
    /// assert_eq!(split.resolve(8, 2)?.chunks(), &[3, 2, 2, 1]);
    /// assert!(LayerSplit::parse_megatron_layout("Etx|tL").is_err());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::LayerSplit`] naming an unknown character, a layout longer
    /// than 1,048,576 characters once repeated, or an embedding or loss
    /// out of place.
    pub fn parse_megatron_layout(text: &str) -> Result<LayerSplit> {
        let problem = |p: String| Error::LayerSplit {
            side: "",
            problem: p,
        };
        let expanded = unroll(&text.replace(',', "")).map_err(problem)?;
        let stages: Vec<&str> = expanded.split('|').collect();
        let mut chunks = Vec::with_capacity(stages.len());
        let (mut embeddings, mut losses) = (Vec::new(), Vec::new());
        for (i, stage) in stages.iter().enumerate() {
            let mut layers = 0u32;
            for (j, c) in stage.chars().enumerate() {
                match c {
                    't' => layers = layers.saturating_add(1),
                    'm' => {}
                    'E' => embeddings.push((i, j)),
                    'L' => losses.push((i, j, stage.chars().count())),
                    other => {
                        return Err(problem(format!(
                            "pipeline layout {text:?}: unknown layer character {other:?} (E, t, m or L)"
                        )));
                    }
                }
            }
            chunks.push(layers);
        }
        if embeddings != [(0, 0)] {
            return Err(problem(format!(
                "pipeline layout {text:?}: the embedding E must be given once, first"
            )));
        }
        let last = stages.len() - 1;
        if !matches!(losses.as_slice(), [(i, j, n)] if *i == last && j + 1 == *n) {
            return Err(problem(format!(
                "pipeline layout {text:?}: the loss L must be given once, last"
            )));
        }
        Ok(LayerSplit::chunks(chunks))
    }

    /// The layer map of `num_layers` layers over `pp` stages.
    ///
    /// # Errors
    /// [`Error::LayerSplit`], naming the values, when Megatron-Core would
    /// refuse the split: the layers (with the embedding and loss when they
    /// count) not divisible by `pp` for the even split, or by the virtual
    /// stages per stage; uneven counts with `pp` 1, adding up to more than
    /// the layers, or leaving middle layers the middle stages do not
    /// divide; explicit chunks not a multiple of `pp` or not adding up to
    /// the layers.
    pub fn resolve(&self, num_layers: u32, pp: u32) -> Result<LayerMap> {
        self.resolve_on("", num_layers, pp)
    }

    pub(crate) fn resolve_on(
        &self,
        side: &'static str,
        num_layers: u32,
        pp: u32,
    ) -> Result<LayerMap> {
        let fail = |problem: String| Error::LayerSplit { side, problem };
        if pp == 0 {
            return Err(fail("pp must be at least 1".into()));
        }
        let chunks = match &self.chunks {
            Some(chunks) => {
                if chunks.is_empty() || chunks.len() % to_usize(pp) != 0 {
                    return Err(fail(format!(
                        "{} chunks are not a multiple of pp = {pp}",
                        chunks.len()
                    )));
                }
                let sum: u64 = chunks.iter().map(|c| u64::from(*c)).sum();
                if sum != u64::from(num_layers) {
                    return Err(fail(format!(
                        "the chunks hold {sum} layers, the model has {num_layers}"
                    )));
                }
                chunks.clone()
            }
            None => self.megatron(num_layers, pp).map_err(fail)?,
        };
        LayerMap::new(pp, chunks).ok_or_else(|| fail("too many chunks".into()))
    }

    /// Megatron-Core's chunks (`get_num_layers_to_build`,
    /// `get_transformer_layer_offset`), or the refusal.
    fn megatron(&self, num_layers: u32, pp: u32) -> std::result::Result<Vec<u32>, String> {
        let v = match self.layers_per_virtual_stage {
            Some(n) if n > 0 => (num_layers / pp) / n,
            Some(_) => 0,
            None => self.virtual_stages,
        };
        if v == 0 {
            return Err("the virtual stages per stage must be at least 1".into());
        }
        let l = u64::from(num_layers);
        let stages = u64::from(pp);
        let mut per_stage = vec![0u64; to_usize(pp)];
        if self.first.is_some() || self.last.is_some() {
            if self.embedding_counts || self.loss_counts {
                return Err("uneven first or last stages do not go with the embedding or loss counted as layers (Megatron-Core refuses it)".into());
            }
            if pp < 2 {
                return Err(format!(
                    "uneven first or last stage layer counts need pp >= 2, got pp = {pp}"
                ));
            }
            let given = u64::from(self.first.unwrap_or(0)) + u64::from(self.last.unwrap_or(0));
            let middle_stages =
                stages - u64::from(self.first.is_some()) - u64::from(self.last.is_some());
            let middle = l.checked_sub(given).ok_or_else(|| {
                format!(
                    "the first and last stages' layers ({given}) exceed num_layers ({num_layers})"
                )
            })?;
            let per = if middle_stages > 0 {
                if middle % middle_stages != 0 {
                    return Err(format!(
                        "the middle layers ({middle}) are not divisible by the middle stages ({middle_stages})"
                    ));
                }
                middle / middle_stages
            } else if middle != 0 {
                return Err(format!(
                    "the first and last stages' layers ({given}) must add up to num_layers ({num_layers}) when pp = 2"
                ));
            } else {
                0
            };
            per_stage.fill(per);
            if let (Some(f), Some(slot)) = (self.first, per_stage.first_mut()) {
                *slot = u64::from(f);
            }
            if let (Some(n), Some(slot)) = (self.last, per_stage.last_mut()) {
                *slot = u64::from(n);
            }
        } else {
            let counted = l + u64::from(self.embedding_counts) + u64::from(self.loss_counts);
            if counted % stages != 0 {
                let what = match (self.embedding_counts, self.loss_counts) {
                    (false, false) => format!("num_layers ({num_layers})"),
                    _ => format!("num_layers with the embedding and loss counted ({counted})"),
                };
                return Err(format!(
                    "{what} is not divisible by pp = {pp} for the even split (give the first and last stages' layers, or the chunks)"
                ));
            }
            per_stage.fill(counted / stages);
        }
        let mut chunks = Vec::with_capacity(to_usize(pp) * to_usize(v));
        for _ in 0..v {
            for (s, n) in per_stage.iter().enumerate() {
                if n % u64::from(v) != 0 {
                    return Err(format!(
                        "stage {s}'s {n} layers are not divisible by its {v} virtual stages"
                    ));
                }
                chunks.push(n / u64::from(v));
            }
        }
        if self.embedding_counts {
            if let Some(c) = chunks.first_mut() {
                *c = c
                    .checked_sub(1)
                    .ok_or("the first chunk has no room for the embedding")?;
            }
        }
        if self.loss_counts {
            if let Some(c) = chunks.last_mut() {
                *c = c
                    .checked_sub(1)
                    .ok_or("the last chunk has no room for the loss")?;
            }
        }
        chunks
            .into_iter()
            .map(|c| {
                u32::try_from(c).map_err(|_| "a chunk holds more than 2^32 layers".to_string())
            })
            .collect()
    }
}

/// Repeats Megatron's `(...)*n`, then `x*n`, once each left to right as
/// its two `re.sub` calls do.
fn unroll(text: &str) -> std::result::Result<String, String> {
    const MAX: usize = 1 << 20;
    let too_long = || format!("pipeline layout {text:?} repeats to more than {MAX} characters");
    let chars: Vec<char> = text.chars().collect();
    // `\(([^)]+)\)\*(\d+)`
    let mut once = String::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        if c == '(' {
            if let Some(close) = chars.iter().skip(i + 1).position(|x| *x == ')') {
                let close = i + 1 + close;
                if close > i + 1 {
                    if let Some((n, end)) = count_after(&chars, close + 1) {
                        let group: String = chars.get(i + 1..close).unwrap_or(&[]).iter().collect();
                        if group.len().saturating_mul(n) > MAX {
                            return Err(too_long());
                        }
                        once.push_str(&group.repeat(n));
                        i = end;
                        continue;
                    }
                }
            }
        }
        once.push(c);
        i += 1;
    }
    // `(.)\*(\d+)`
    let chars: Vec<char> = once.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        if let Some((n, end)) = count_after(&chars, i + 1) {
            if out.len().saturating_add(n) > MAX {
                return Err(too_long());
            }
            for _ in 0..n {
                out.push(c);
            }
            i = end;
            continue;
        }
        out.push(c);
        i += 1;
        if out.len() > MAX {
            return Err(too_long());
        }
    }
    Ok(out)
}

/// `*digits` at `at`: the count and the index after it.
fn count_after(chars: &[char], at: usize) -> Option<(usize, usize)> {
    if chars.get(at) != Some(&'*') {
        return None;
    }
    let digits: String = chars
        .iter()
        .skip(at + 1)
        .take_while(|c| c.is_ascii_digit())
        .collect();
    if digits.is_empty() {
        return None;
    }
    let n = digits.parse::<usize>().unwrap_or(usize::MAX);
    Some((n, at + 1 + digits.len()))
}

/// The layers of every chunk of a side's pipeline: chunk `c` holds layers
/// `[start(c), start(c + 1))` and runs on stage `c mod pp`.
///
/// Made by [`LayerSplit::resolve`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LayerMap {
    pp: u32,
    chunks: Vec<u32>,
    starts: Vec<u32>,
}

impl LayerMap {
    fn new(pp: u32, chunks: Vec<u32>) -> Option<LayerMap> {
        let mut starts = Vec::with_capacity(chunks.len() + 1);
        let mut at = 0u32;
        starts.push(at);
        for c in &chunks {
            at = at.checked_add(*c)?;
            starts.push(at);
        }
        Some(LayerMap { pp, chunks, starts })
    }

    /// The pipeline stages.
    pub fn stages(&self) -> u32 {
        self.pp
    }

    /// The chunks per stage (1 without virtual stages).
    pub fn virtual_stages(&self) -> u32 {
        u32::try_from(self.chunks.len() / to_usize(self.pp.max(1))).unwrap_or(u32::MAX)
    }

    /// The layers of every chunk, in layer order.
    pub fn chunks(&self) -> &[u32] {
        &self.chunks
    }

    /// The layers.
    pub fn num_layers(&self) -> u32 {
        self.starts.last().copied().unwrap_or(0)
    }

    /// The stage holding `layer`, `None` past the layers.
    pub fn stage_of(&self, layer: u32) -> Option<u32> {
        if layer >= self.num_layers() {
            return None;
        }
        // starts[0] = 0 <= layer; the chunk is the last starting at or before it.
        let chunk = self
            .starts
            .partition_point(|s| *s <= layer)
            .checked_sub(1)?;
        u32::try_from(chunk % to_usize(self.pp.max(1))).ok()
    }

    /// The layer windows `[start, end)` of `stage`, in order (empty chunks
    /// left out).
    pub fn windows(&self, stage: u32) -> Vec<(u32, u32)> {
        self.starts
            .windows(2)
            .enumerate()
            .filter(|(c, _)| *c % to_usize(self.pp.max(1)) == to_usize(stage))
            .filter_map(|(_, w)| match w {
                [a, b] if b > a => Some((*a, *b)),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uneven_with_virtual_stages_follows_megatron_s_offsets() {
        // First 2, last 2, 12 layers, pp 4, vp 2: the middle 8 over 2
        // stages = 4 each; per chunk: 1, 2, 2, 1.
        let map = LayerSplit::even()
            .first(2)
            .last(2)
            .virtual_stages(2)
            .resolve(12, 4)
            .unwrap();
        assert_eq!(map.chunks(), &[1, 2, 2, 1, 1, 2, 2, 1]);
        // get_transformer_layer_offset(pp_rank 2, vp_stage 1) = 1 * 6 + 1 + 1 * (4 // 2) = 9.
        assert_eq!(map.windows(2), vec![(3, 5), (9, 11)]);
    }

    #[test]
    fn embedding_and_loss_counted() {
        // 6 layers + embedding + loss = 8 over 4 stages: 1, 2, 2, 1.
        let map = LayerSplit::even()
            .embedding_counts()
            .loss_counts()
            .resolve(6, 4)
            .unwrap();
        assert_eq!(map.chunks(), &[1, 2, 2, 1]);
    }

    #[test]
    fn unroll_as_megatron() {
        assert_eq!(unroll("xy(ab|cd|ef)*2pq").unwrap(), "xyab|cd|efab|cd|efpq");
        assert_eq!(unroll("(ab)*3").unwrap(), "ababab");
        assert_eq!(unroll("ab(cd|)*2").unwrap(), "abcd|cd|");
        assert_eq!(unroll("(|ab)*2cd").unwrap(), "|ab|abcd");
        assert_eq!(unroll("Et*3|t").unwrap(), "Ettt|t");
        assert!(unroll("t*99999999999").is_err());
    }
}
