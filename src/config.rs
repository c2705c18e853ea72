//! The input of a layout: the same keys as the command line and its JSON.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;
use crate::order::Order;

/// How expert parallelism is laid out.
///
/// ```
/// use rank_layout::{Config, ExpertLayout};
/// assert_eq!(Config::new().expert_layout, ExpertLayout::Folded); // Megatron-Core's
/// assert_eq!("nested".parse::<ExpertLayout>()?, ExpertLayout::Nested);
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
#[non_exhaustive]
pub enum ExpertLayout {
    /// A second expert grid over the same ranks, "MoE parallel folding":
    /// what Megatron-Core builds (the default). Without expert parallelism
    /// it has the same groups as the nested layout.
    #[default]
    Folded,
    /// Expert parallelism carved out of data parallelism: Megatron-LM's
    /// 2024 `RankGenerator` (commit 4ff9e66).
    Nested,
}

impl ExpertLayout {
    /// `"folded"` or `"nested"`.
    pub const fn name(self) -> &'static str {
        match self {
            ExpertLayout::Folded => "folded",
            ExpertLayout::Nested => "nested",
        }
    }

    /// Which Megatron-LM builds this layout: `"Megatron-Core (MoE parallel
    /// folding, the default since 2024)"` or `"Megatron-LM 2024 (commit
    /// 4ff9e66, RankGenerator with ep nested in dp)"`.
    pub const fn megatron(self) -> &'static str {
        match self {
            ExpertLayout::Folded => {
                "Megatron-Core's MoE parallel folding (what Megatron-Core builds today)"
            }
            ExpertLayout::Nested => {
                "Megatron-LM 2024, commit 4ff9e66 (RankGenerator with ep nested in dp)"
            }
        }
    }
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
        f.pad(self.name())
    }
}

/// A layout request: sizes, order and options, as given by a user; the
/// input vocabulary of the crate, of the command line's flags and
/// configuration files, and of the Python package.
///
/// Built with chained setters named after the keys, from [`Config::new`]
/// (every size 1, order `tp-cp-ep-dp-pp`, Megatron-Core's folded experts):
/// new keys are added without breaking anyone. The fields can be read (and
/// set) directly. Nothing is checked until [`Layout::new`](crate::Layout::new);
/// a [`Layout`](crate::Layout) keeps the resolved copy, with derived sizes
/// (`dp`, `world_size`, `etp`, `encoder_tp`, `encoder_pp`) filled in.
///
/// "Off" has one spelling: no hierarchical context parallel is an empty
/// `hierarchical_cp`, no distributed-optimizer instances is
/// `dist_opt_instances = 1`.
///
/// With the `serde` feature it reads and writes the JSON of `--config`
/// (snake_case keys, unknown keys rejected, every key optional).
/// `Display` writes the keys that differ from [`Config::new`].
///
/// ```
/// use rank_layout::{Config, Layout};
/// let config = Config::new().tp(4).cp(2).pp(2).world_size(64);
/// let layout = Layout::new(&config)?;
/// assert_eq!(layout.config().dp, Some(4));
/// assert_eq!(config.to_string(), "tp=4 cp=2 pp=2 world_size=64");
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
#[non_exhaustive]
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
    /// Folded (default, Megatron-Core) or nested (Megatron-LM 2024) expert layout.
    pub expert_layout: ExpertLayout,
    /// Expert tensor-parallel size of the folded layout (default `tp`).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub etp: Option<u32>,
    /// Hierarchical context-parallel level sizes, innermost first, product
    /// `cp`; empty (the default): none.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub hierarchical_cp: Vec<u32>,
    /// Distributed-optimizer instances (default 1: none).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "is_one"))]
    pub dist_opt_instances: u32,
    /// Weight shards of the dense grid beyond tensor parallelism
    /// (Megatron-Core 0.19's `gtp_remat_size`; Megatron-LM's
    /// `--tensor-parallel-num-weight-shards` is `tp * gtp_remat`). Default 1:
    /// none. It counts in the model size: `dp = world / (tp*cp*pp*gtp_remat)`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "is_one"))]
    pub gtp_remat: u32,
    /// Weight shards of the folded expert grid (Megatron-Core 0.19's
    /// `expert_gtp_remat_size`; `--expert-tensor-parallel-num-weight-shards`
    /// is `etp * expert_gtp_remat`). Default 1: none. It counts in the
    /// expert model size: `edp = world / (etp*ep*pp*expert_gtp_remat)`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "is_one"))]
    pub expert_gtp_remat: u32,
}

#[cfg(feature = "serde")]
fn is_one(n: &u32) -> bool {
    *n == 1
}

impl Default for Config {
    /// Every size 1, default order, no encoder, folded experts
    /// (Megatron-Core's defaults).
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
            expert_layout: ExpertLayout::Folded,
            etp: None,
            hierarchical_cp: Vec::new(),
            dist_opt_instances: 1,
            gtp_remat: 1,
            expert_gtp_remat: 1,
        }
    }
}

impl Config {
    /// Every size 1, order `tp-cp-ep-dp-pp`, no encoder, folded experts:
    /// Megatron-Core's defaults. Chain the setters from here.
    pub fn new() -> Config {
        Config::default()
    }

    /// Sets `tp`, the tensor-parallel size.
    #[must_use]
    pub fn tp(mut self, tp: u32) -> Config {
        self.tp = tp;
        self
    }

    /// Sets `cp`, the context-parallel size.
    #[must_use]
    pub fn cp(mut self, cp: u32) -> Config {
        self.cp = cp;
        self
    }

    /// Sets `ep`, the expert-parallel size.
    #[must_use]
    pub fn ep(mut self, ep: u32) -> Config {
        self.ep = ep;
        self
    }

    /// Sets `dp`, the data-parallel size (`None`: derived from `world_size`).
    #[must_use]
    pub fn dp(mut self, dp: impl Into<Option<u32>>) -> Config {
        self.dp = dp.into();
        self
    }

    /// Sets `pp`, the pipeline-parallel size.
    #[must_use]
    pub fn pp(mut self, pp: u32) -> Config {
        self.pp = pp;
        self
    }

    /// Sets `world_size` (`None`: derived from `dp`).
    #[must_use]
    pub fn world_size(mut self, world_size: impl Into<Option<u32>>) -> Config {
        self.world_size = world_size.into();
        self
    }

    /// Sets the axis order, first fastest.
    #[must_use]
    pub fn order(mut self, order: Order) -> Config {
        self.order = order;
        self
    }

    /// Sets the first rank.
    #[must_use]
    pub fn rank_offset(mut self, rank_offset: u32) -> Config {
        self.rank_offset = rank_offset;
        self
    }

    /// Sets the encoder's tensor-parallel size (`Some`: an encoder + decoder layout).
    #[must_use]
    pub fn encoder_tp(mut self, encoder_tp: impl Into<Option<u32>>) -> Config {
        self.encoder_tp = encoder_tp.into();
        self
    }

    /// Sets the encoder's pipeline-parallel size (`Some`: an encoder + decoder layout).
    #[must_use]
    pub fn encoder_pp(mut self, encoder_pp: impl Into<Option<u32>>) -> Config {
        self.encoder_pp = encoder_pp.into();
        self
    }

    /// Sets the expert layout.
    #[must_use]
    pub fn expert_layout(mut self, expert_layout: ExpertLayout) -> Config {
        self.expert_layout = expert_layout;
        self
    }

    /// Sets `etp`, the expert tensor-parallel size (`None`: `tp`).
    #[must_use]
    pub fn etp(mut self, etp: impl Into<Option<u32>>) -> Config {
        self.etp = etp.into();
        self
    }

    /// Sets the hierarchical context-parallel levels (empty: none).
    #[must_use]
    pub fn hierarchical_cp(mut self, levels: impl Into<Vec<u32>>) -> Config {
        self.hierarchical_cp = levels.into();
        self
    }

    /// Sets the number of distributed-optimizer instances (1: none).
    #[must_use]
    pub fn dist_opt_instances(mut self, instances: u32) -> Config {
        self.dist_opt_instances = instances;
        self
    }

    /// Sets `gtp_remat`, the dense grid's weight-shard size (1: none).
    #[must_use]
    pub fn gtp_remat(mut self, gtp_remat: u32) -> Config {
        self.gtp_remat = gtp_remat;
        self
    }

    /// Sets `expert_gtp_remat`, the expert grid's weight-shard size (1: none).
    #[must_use]
    pub fn expert_gtp_remat(mut self, expert_gtp_remat: u32) -> Config {
        self.expert_gtp_remat = expert_gtp_remat;
        self
    }

    /// Whether the configuration asks for an encoder + decoder layout.
    pub fn has_encoder(&self) -> bool {
        self.encoder_tp.is_some() || self.encoder_pp.is_some()
    }
}

impl fmt::Display for Config {
    /// The keys that differ from [`Config::new`], as `key=value` separated
    /// by spaces, in the configuration file's key order (`tp=4 cp=2
    /// world_size=64 expert_layout=nested`); empty for the defaults.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = Config::default();
        let mut parts: Vec<String> = Vec::new();
        let mut size = |name: &str, v: u32, default: u32| {
            if v != default {
                parts.push(format!("{name}={v}"));
            }
        };
        size("tp", self.tp, d.tp);
        size("cp", self.cp, d.cp);
        size("ep", self.ep, d.ep);
        let parts_opt = |parts: &mut Vec<String>, name: &str, v: Option<u32>| {
            if let Some(v) = v {
                parts.push(format!("{name}={v}"));
            }
        };
        parts_opt(&mut parts, "dp", self.dp);
        if self.pp != d.pp {
            parts.push(format!("pp={}", self.pp));
        }
        parts_opt(&mut parts, "world_size", self.world_size);
        if self.order != d.order {
            parts.push(format!("order={}", self.order));
        }
        if self.rank_offset != d.rank_offset {
            parts.push(format!("rank_offset={}", self.rank_offset));
        }
        parts_opt(&mut parts, "encoder_tp", self.encoder_tp);
        parts_opt(&mut parts, "encoder_pp", self.encoder_pp);
        if self.expert_layout != d.expert_layout {
            parts.push(format!("expert_layout={}", self.expert_layout));
        }
        parts_opt(&mut parts, "etp", self.etp);
        if !self.hierarchical_cp.is_empty() {
            let levels: Vec<String> = self.hierarchical_cp.iter().map(u32::to_string).collect();
            parts.push(format!("hierarchical_cp={}", levels.join(",")));
        }
        if self.dist_opt_instances != d.dist_opt_instances {
            parts.push(format!("dist_opt_instances={}", self.dist_opt_instances));
        }
        if self.gtp_remat != d.gtp_remat {
            parts.push(format!("gtp_remat={}", self.gtp_remat));
        }
        if self.expert_gtp_remat != d.expert_gtp_remat {
            parts.push(format!("expert_gtp_remat={}", self.expert_gtp_remat));
        }
        f.write_str(&parts.join(" "))
    }
}
