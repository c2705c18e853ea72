//! The largest valid grid of the layout's shape with a smaller
//! data-parallel size.

use crate::config::Config;
use crate::layout::Layout;
use crate::relayout::options::RelayoutOptions;

/// Whether `dp` keeps the global batch whole (`dp * micro` divides it).
pub(crate) fn batch_divides(options: &RelayoutOptions, dp: u32) -> bool {
    options.global_batch.is_none_or(|(global, micro)| {
        u64::from(dp) * u64::from(micro) != 0
            && u64::from(global) % (u64::from(dp) * u64::from(micro)) == 0
    })
}

/// `config` with `dp` replicas (the world size follows).
pub(crate) fn with_dp(config: &Config, dp: u32) -> Option<Layout> {
    Layout::new(&config.clone().dp(Some(dp)).world_size(None)).ok()
}

/// The layout of `config`'s shape with the largest data-parallel size in
/// `options.min_dp ..= max_dp` whose world is at most `max_world`, that is
/// valid and keeps the global batch.
pub(crate) fn largest(
    config: &Config,
    model: u32,
    max_dp: u32,
    max_world: u32,
    options: &RelayoutOptions,
) -> Option<Layout> {
    let top = max_dp.min(max_world / model.max(1));
    (options.min_dp.max(1)..=top)
        .rev()
        .filter(|&dp| batch_divides(options, dp))
        .filter_map(|dp| with_dp(config, dp))
        .find(|l| l.world_size() <= max_world)
}
