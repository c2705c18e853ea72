//! One inference shard as `--inference-shards` writes it, and the parser
//! of the whole text, exactly as Megatron-Core 0.19.2's
//! `parse_inference_shards_spec` reads it.

use std::fmt;

use crate::error::{Error, Result, ShardProblem};
use crate::megatron::inference_shards::python_text;

/// A shard's part in disaggregated serving (`role=prefill|decode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ShardRole {
    /// Runs the prompts and hands their KV cache to a decode shard.
    Prefill,
    /// Generates tokens from the KV cache a prefill shard handed over.
    Decode,
}

impl ShardRole {
    /// The role's name: `prefill` or `decode`.
    pub fn name(self) -> &'static str {
        match self {
            ShardRole::Prefill => "prefill",
            ShardRole::Decode => "decode",
        }
    }

    /// The role written `text`, read as Megatron-Core reads it: Python's
    /// `text.lower()` is `prefill` or `decode` (`Prefill` is a role).
    pub fn from_text(text: &str) -> Option<ShardRole> {
        match text.to_lowercase().as_str() {
            "prefill" => Some(ShardRole::Prefill),
            "decode" => Some(ShardRole::Decode),
            _ => None,
        }
    }
}

impl fmt::Display for ShardRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// One inference shard's parallelism (Megatron-Core's
/// `InferenceShardSpec`): `tp`, `pp`, `ep`, `dp` (each 1 unless given),
/// `expt_tp` (default `tp`) and an optional role. It holds `tp * pp * dp`
/// ranks; cp is always 1.
///
/// ```
/// use rank_layout::megatron::{ShardRole, ShardSpec};
/// let spec = ShardSpec::new().tp(4).dp(2).ep(2).role(ShardRole::Decode);
/// assert_eq!((spec.world_size(), spec.expt_tp_size()), (8, 4));
/// assert_eq!(spec.to_string(), "tp=4,pp=1,ep=2,dp=2,expt_tp=4,role=decode");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ShardSpec {
    /// Tensor-parallel size.
    pub tp: u32,
    /// Pipeline-parallel size.
    pub pp: u32,
    /// Expert-parallel size.
    pub ep: u32,
    /// Data-parallel size: independent replicas of the shard's model.
    pub dp: u32,
    /// Expert tensor-parallel size; `None` is `tp`.
    pub expt_tp: Option<u32>,
    /// The shard's role, if the spec gives one.
    pub role: Option<ShardRole>,
}

impl Default for ShardSpec {
    fn default() -> ShardSpec {
        ShardSpec::new()
    }
}

/// The size keys of a shard, in Megatron-Core's `VALID_INT_KEYS` order
/// (the other key is `role`).
const SIZE_KEYS: [&str; 6] = ["tp", "pp", "ep", "expt_tp", "dp", "cp"];

impl ShardSpec {
    /// One rank: every size 1, no role.
    pub const fn new() -> ShardSpec {
        ShardSpec {
            tp: 1,
            pp: 1,
            ep: 1,
            dp: 1,
            expt_tp: None,
            role: None,
        }
    }

    /// The same with tensor-parallel size `tp`.
    pub const fn tp(mut self, tp: u32) -> ShardSpec {
        self.tp = tp;
        self
    }

    /// The same with pipeline-parallel size `pp`.
    pub const fn pp(mut self, pp: u32) -> ShardSpec {
        self.pp = pp;
        self
    }

    /// The same with expert-parallel size `ep`.
    pub const fn ep(mut self, ep: u32) -> ShardSpec {
        self.ep = ep;
        self
    }

    /// The same with data-parallel size `dp`.
    pub const fn dp(mut self, dp: u32) -> ShardSpec {
        self.dp = dp;
        self
    }

    /// The same with expert tensor-parallel size `expt_tp`.
    pub const fn expt_tp(mut self, expt_tp: u32) -> ShardSpec {
        self.expt_tp = Some(expt_tp);
        self
    }

    /// The same with role `role`.
    pub const fn role(mut self, role: ShardRole) -> ShardSpec {
        self.role = Some(role);
        self
    }

    /// The expert tensor-parallel size: `expt_tp`, or `tp` when not given.
    pub fn expt_tp_size(&self) -> u32 {
        self.expt_tp.unwrap_or(self.tp)
    }

    /// The number of ranks, `tp * pp * dp` (a `u128`: three `u32`s).
    pub fn world_size(&self) -> u128 {
        u128::from(self.tp) * u128::from(self.pp) * u128::from(self.dp)
    }

    /// The checks Megatron-Core makes of one shard: every size at least
    /// 1, and `expt_tp * ep * pp` dividing `tp * pp * dp` (its expert
    /// grid tiles it).
    ///
    /// # Errors
    /// [`Error::InferenceShard`] naming shard `index`: a size of 0
    /// ([`ShardProblem::OutOfRange`]), the expert grid
    /// ([`ShardProblem::ExpertGrid`]).
    pub fn check(&self, index: usize) -> Result<()> {
        let sizes = [
            ("tp", self.tp),
            ("pp", self.pp),
            ("ep", self.ep),
            ("expt_tp", self.expt_tp_size()),
            ("dp", self.dp),
        ];
        if let Some((key, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return Err(shard_error(
                index,
                ShardProblem::OutOfRange {
                    key,
                    value: "0".into(),
                },
            ));
        }
        let (etp, ep, pp) = (self.expt_tp_size(), self.ep, self.pp);
        let expert = u128::from(etp) * u128::from(ep) * u128::from(pp);
        if self.world_size() % expert != 0 {
            return Err(shard_error(
                index,
                ShardProblem::ExpertGrid {
                    ranks: self.world_size(),
                    expt_tp: etp,
                    ep,
                    pp,
                },
            ));
        }
        Ok(())
    }

    /// The shards of an `--inference-shards` text, in order, each checked
    /// alone ([`check`](Self::check)), read exactly as Megatron-Core 0.19.2
    /// reads it (`parse_inference_shards_spec`): every `+` is a `;`; the
    /// text is cut at `;` into shards and each shard at `,` into entries,
    /// each stripped of white space (Python's) and skipped when empty;
    /// an entry is `key=value` (cut at the first `=`, both sides stripped);
    /// the keys are `tp`, `pp`, `ep`, `expt_tp`, `dp`, `cp` (which must
    /// be one) and `role` (`prefill` or `decode`, any case); a size is
    /// Python's `int()` of its text (`0_8`, `08` and `٨` are 8); a key
    /// given again replaces its value. A shard of no entries (`,`) is one rank.
    /// Shards are numbered from 0 among the non-empty ones. Which world
    /// they partition is not checked here ([`InferenceShards`](crate::megatron::InferenceShards)).
    ///
    /// ```
    /// use rank_layout::megatron::{ShardRole, ShardSpec};
    /// let shards = ShardSpec::parse_all("tp=2,role=prefill + tp=1,dp=2,role=decode")?;
    /// assert_eq!(shards, vec![
    ///     ShardSpec::new().tp(2).role(ShardRole::Prefill),
    ///     ShardSpec::new().dp(2).role(ShardRole::Decode),
    /// ]);
    /// let err = ShardSpec::parse_all("tp=2;tp=1,cp=2").unwrap_err();
    /// assert_eq!(err.to_string(), "inference shard 1: cp = 2, but inference shards have no context parallelism (cp must be 1)");
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InferenceShard`] naming the shard and the
    /// [`ShardProblem`]: an entry that is not `key=value`, an unknown key
    /// or role, a size that is not an integer or not from 1 to
    /// 4294967295, `cp` other than 1, an expert grid that does not tile
    /// the shard. [`Error::NoInferenceShards`] for a text of no shard.
    pub fn parse_all(text: &str) -> Result<Vec<ShardSpec>> {
        let text = text.replace('+', ";");
        let mut shards = Vec::new();
        for piece in text.split(';') {
            let piece = python_text::strip(piece);
            if piece.is_empty() {
                continue;
            }
            let index = shards.len();
            let spec = parse_one(piece, index)?;
            spec.check(index)?;
            shards.push(spec);
        }
        if shards.is_empty() {
            return Err(Error::NoInferenceShards);
        }
        Ok(shards)
    }
}

/// The error of shard `index`.
fn shard_error(shard: usize, problem: ShardProblem) -> Error {
    Error::InferenceShard { shard, problem }
}

/// One value read: Python's `int()` of the text, and the text.
type Read<'a> = Option<(i128, &'a str)>;

/// One shard's entries (its text stripped, not empty), read in order.
/// Megatron-Core refuses a size below 1 only when it builds the shard's
/// grids; it is refused here, after the entries and `cp`.
fn parse_one(text: &str, index: usize) -> Result<ShardSpec> {
    let mut sizes: [Read<'_>; 6] = [None; 6];
    let mut role = None;
    for entry in text.split(',') {
        let entry = python_text::strip(entry);
        if entry.is_empty() {
            continue;
        }
        let Some((key, value)) = entry.split_once('=') else {
            return Err(shard_error(
                index,
                ShardProblem::NotKeyValue {
                    entry: entry.to_owned(),
                },
            ));
        };
        let (key, value) = (python_text::strip(key), python_text::strip(value));
        if key == "role" {
            let read = ShardRole::from_text(value).ok_or_else(|| {
                shard_error(
                    index,
                    ShardProblem::UnknownRole {
                        role: value.to_owned(),
                    },
                )
            })?;
            role = Some(read);
            continue;
        }
        let Some((name, slot)) = SIZE_KEYS
            .iter()
            .zip(sizes.iter_mut())
            .find(|(k, _)| **k == key)
        else {
            return Err(shard_error(
                index,
                ShardProblem::UnknownKey {
                    key: key.to_owned(),
                },
            ));
        };
        let n = python_text::int(value).ok_or_else(|| {
            shard_error(
                index,
                ShardProblem::NotAnInteger {
                    key: name,
                    value: value.to_owned(),
                },
            )
        })?;
        *slot = Some((n, value));
    }
    let [tp, pp, ep, expt_tp, dp, cp] = sizes;
    if let Some((_, value)) = cp.filter(|(n, _)| *n != 1) {
        return Err(shard_error(
            index,
            ShardProblem::ContextParallel {
                cp: value.to_owned(),
            },
        ));
    }
    let size = |key: &'static str, read: Read<'_>| -> Result<Option<u32>> {
        read.map(|(n, value)| {
            u32::try_from(n).ok().filter(|n| *n >= 1).ok_or_else(|| {
                shard_error(
                    index,
                    ShardProblem::OutOfRange {
                        key,
                        value: value.to_owned(),
                    },
                )
            })
        })
        .transpose()
    };
    Ok(ShardSpec {
        tp: size("tp", tp)?.unwrap_or(1),
        pp: size("pp", pp)?.unwrap_or(1),
        ep: size("ep", ep)?.unwrap_or(1),
        expt_tp: size("expt_tp", expt_tp)?,
        dp: size("dp", dp)?.unwrap_or(1),
        role,
    })
}

impl fmt::Display for ShardSpec {
    /// The shard as `--inference-shards` writes it, every key given in
    /// Megatron-Core's `to_dict` order: `tp=2,pp=1,ep=1,dp=1,expt_tp=2`,
    /// then `,role=...` when it has one. It parses back to itself, but for
    /// `expt_tp` no longer left to default.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tp={},pp={},ep={},dp={},expt_tp={}",
            self.tp,
            self.pp,
            self.ep,
            self.dp,
            self.expt_tp_size()
        )?;
        if let Some(role) = self.role {
            write!(f, ",role={role}")?;
        }
        Ok(())
    }
}
