//! Pipeline questions of one rank: its neighbours and its stage.

use crate::error::Result;
use crate::kind::Kind;
use crate::layout::Layout;

impl Layout {
    /// Pipeline neighbours of `rank`: the next stage(s) if `forward`, else
    /// the previous, each once, in the order of the rank's pipelines.
    fn neighbours(&self, rank: u32, forward: bool) -> Result<Vec<u32>> {
        let mut out: Vec<u32> = Vec::new();
        for m in self.memberships(rank, Kind::PP)? {
            let key = m.key as usize;
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
