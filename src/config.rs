//! The input of a layout: the same keys as the command line and its JSON.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;
use crate::order::Order;

/// How expert parallelism is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum ExpertLayout {
    /// Expert parallelism carved out of data parallelism (Megatron-LM
    /// 2024, the default).
    #[default]
    Nested,
    /// A second expert grid over the same ranks, "MoE parallel folding"
    /// (Megatron-Core today).
    Folded,
}

impl FromStr for ExpertLayout {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.to_ascii_lowercase().as_str() {
            "nested" => Ok(ExpertLayout::Nested),
            "folded" => Ok(ExpertLayout::Folded),
            _ => Err(Error::UnknownExpertLayout { name: s.to_owned() }),
        }
    }
}

impl fmt::Display for ExpertLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ExpertLayout::Nested => "nested",
            ExpertLayout::Folded => "folded",
        })
    }
}

/// A layout request: sizes, order and options, as given by a user.
///
/// Nothing is checked until [`Layout::new`](crate::Layout::new); a
/// [`Layout`](crate::Layout) keeps the resolved copy, with derived sizes
/// (`dp`, `world_size`, `etp`, `encoder_tp`, `encoder_pp`) filled in.
///
/// With the `serde` feature it reads and writes the JSON of `--config`
/// (snake_case keys, unknown keys rejected, every key optional).
///
/// ```
/// use rank_layout::{Config, Layout};
/// let config = Config { tp: 4, cp: 2, pp: 2, world_size: Some(64), ..Config::default() };
/// let layout = Layout::new(&config)?;
/// assert_eq!(layout.config().dp, Some(4));
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct Config {
    /// Tensor-parallel size (default 1).
    pub tp: u32,
    /// Context-parallel size (default 1).
    pub cp: u32,
    /// Expert-parallel size (default 1).
    pub ep: u32,
    /// Data-parallel size; derived from `world_size` when left out (then 1 if both are).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub dp: Option<u32>,
    /// Pipeline-parallel size (default 1).
    pub pp: u32,
    /// The world size; checked against `dp` when both are given.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub world_size: Option<u32>,
    /// The axis order, first fastest (default `tp-cp-ep-dp-pp`).
    pub order: Order,
    /// The first rank (default 0).
    pub rank_offset: u32,
    /// Encoder tensor-parallel size: giving it (or `encoder_pp`) makes an
    /// encoder + decoder layout; defaults to `tp`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub encoder_tp: Option<u32>,
    /// Encoder pipeline-parallel size (>= 1; default 1 in an encoder + decoder layout).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub encoder_pp: Option<u32>,
    /// Nested (default) or folded expert layout.
    pub expert_layout: ExpertLayout,
    /// Expert tensor-parallel size of the folded layout (default `tp`).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub etp: Option<u32>,
    /// Hierarchical context-parallel level sizes, innermost first, product `cp`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub hierarchical_cp: Option<Vec<u32>>,
    /// Distributed-optimizer instances of the folded layout (1 = off).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub dist_opt_instances: Option<u32>,
}

impl Default for Config {
    /// Every size 1, default order, no encoder, nested experts.
    fn default() -> Self {
        Config {
            tp: 1,
            cp: 1,
            ep: 1,
            dp: None,
            pp: 1,
            world_size: None,
            order: Order::default(),
            rank_offset: 0,
            encoder_tp: None,
            encoder_pp: None,
            expert_layout: ExpertLayout::Nested,
            etp: None,
            hierarchical_cp: None,
            dist_opt_instances: None,
        }
    }
}

impl Config {
    /// Whether the configuration asks for an encoder + decoder layout.
    pub fn has_encoder(&self) -> bool {
        self.encoder_tp.is_some() || self.encoder_pp.is_some()
    }
}
