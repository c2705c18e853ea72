//! The name of a layout's shape: one grid with nested or folded experts,
//! or an encoder's grid and a decoder's.

use std::fmt;

/// Which of the three shapes a layout has.
///
/// ```
/// use rank_layout::{Config, Layout, LayoutShape};
/// let layout = Layout::new(&Config::new().tp(4).encoder_tp(Some(2)))?;
/// assert_eq!(layout.shape(), LayoutShape::EncoderDecoder);
/// assert_eq!(layout.shape().to_string(), "encoder+decoder");
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LayoutShape {
    /// One grid, expert parallelism carved out of data parallelism
    /// (Megatron-LM's 2024 `RankGenerator`).
    Nested,
    /// One grid with a second, folded, expert grid over the same ranks
    /// (Megatron-Core's "MoE parallel folding").
    Folded,
    /// An encoder grid with its own tp and pp, then a nested decoder grid,
    /// pipelines joined by coordinates.
    EncoderDecoder,
}

impl LayoutShape {
    /// `"nested"`, `"folded"` or `"encoder+decoder"`.
    pub const fn name(self) -> &'static str {
        match self {
            LayoutShape::Nested => "nested",
            LayoutShape::Folded => "folded",
            LayoutShape::EncoderDecoder => "encoder+decoder",
        }
    }
}

impl fmt::Display for LayoutShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}
