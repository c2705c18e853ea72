//! Pipeline questions of one rank: its neighbours and its stage.

use crate::cast::to_usize;
use crate::error::Result;
use crate::kind::Kind;
use crate::layout::Layout;

/// A rank's place along its pipeline: its stage and the number of stages,
/// counted over the joined pipeline of an encoder + decoder layout.
///
/// Created by [`Layout::stage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Stage {
    /// The rank's stage, from 0.
    pub stage: u32,
    /// The number of stages of its pipeline.
    pub stages: u32,
}

impl Layout {
    /// Pipeline neighbours of `rank`: the next stage(s) if `forward`, else
    /// the previous, each once, in the order of the rank's pipelines.
    fn neighbours(&self, rank: u32, forward: bool) -> Result<Vec<u32>> {
        let mut out: Vec<u32> = Vec::new();
        for m in self.memberships(rank, Kind::PP)? {
            let key = to_usize(m.key);
            let other = if forward {
                m.group.get(key + 1)
            } else {
                key.checked_sub(1).and_then(|k| m.group.get(k))
            };
            if let Some(r) = other.filter(|r| !out.contains(r)) {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// The next pipeline stage(s) of `rank`: one rank inside a pipeline,
    /// every decoder rank fed by a last-stage encoder rank (fan-out), none at
    /// the last stage. Unlike Megatron-LM this does not wrap around.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`](crate::Error::RankOutOfRange).
    pub fn pipeline_next(&self, rank: u32) -> Result<Vec<u32>> {
        self.neighbours(rank, true)
    }

    /// The previous pipeline stage(s) of `rank`: one rank inside a pipeline,
    /// every encoder rank feeding a first-stage decoder rank when
    /// `encoder_tp > tp` (fan-in: the receiving side averages their
    /// gradients), none at the first stage.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`](crate::Error::RankOutOfRange).
    pub fn pipeline_prev(&self, rank: u32) -> Result<Vec<u32>> {
        self.neighbours(rank, false)
    }

    /// `rank`'s stage in its pipeline, joined across encoder and decoder
    /// (encoder stages first), and the number of stages of that pipeline.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`](crate::Error::RankOutOfRange).
    ///
    /// ```
    /// use rank_layout::{Config, Layout};
    /// // Encoder tp=1 pp=1 before a decoder tp=8 cp=2: rank 17 is a decoder rank.
    /// let layout = Layout::new(&Config::new().tp(8).cp(2).encoder_tp(1).encoder_pp(1).world_size(72))?;
    /// let s = layout.stage(17)?;
    /// assert_eq!((s.stage, s.stages), (1, 2));
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn stage(&self, rank: u32) -> Result<Stage> {
        let first = self.memberships(rank, Kind::PP)?.into_iter().next();
        Ok(first.map_or(
            Stage {
                stage: 0,
                stages: 1,
            },
            |m| Stage {
                stage: m.key,
                stages: u32::try_from(m.group.len()).unwrap_or(u32::MAX),
            },
        ))
    }

    /// Whether `rank` is on the first stage of its (joined) pipeline.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`](crate::Error::RankOutOfRange).
    pub fn is_first_stage(&self, rank: u32) -> Result<bool> {
        Ok(self.pipeline_prev(rank)?.is_empty())
    }

    /// Whether `rank` is on the last stage of its (joined) pipeline.
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`](crate::Error::RankOutOfRange).
    pub fn is_last_stage(&self, rank: u32) -> Result<bool> {
        Ok(self.pipeline_next(rank)?.is_empty())
    }

    /// Whether `rank` holds the word embedding (is in an `embd` group).
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`](crate::Error::RankOutOfRange).
    pub fn is_embedding_rank(&self, rank: u32) -> Result<bool> {
        Ok(!self.memberships(rank, Kind::EMBD)?.is_empty())
    }

    /// Whether `rank` holds the position embedding (is in a `pos-embd` group).
    ///
    /// # Errors
    /// [`Error::RankOutOfRange`](crate::Error::RankOutOfRange).
    pub fn is_position_embedding_rank(&self, rank: u32) -> Result<bool> {
        Ok(!self.memberships(rank, Kind::POS_EMBD)?.is_empty())
    }
}
