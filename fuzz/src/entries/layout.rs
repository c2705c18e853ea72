//! The `layout` target: layouts decoded from the bytes.

use rank_layout::Config;

use super::shared::{Input, build, check_layout};

/// Layout construction and per-rank queries: a `Config` decoded from the
/// bytes (sizes that may be 0, huge or overflowing, any order, nested or
/// folded experts, an encoder, hierarchical cp, distributed-optimizer
/// instances, a rank offset), then, when it builds, every kind and a few
/// more asked of sampled ranks in and out of range, with the invariants
/// of [`check_layout`].
pub fn layout(data: &[u8]) {
    let mut input = Input::new(data);
    let config = input.config();
    if let Some(layout) = build(&config) {
        check_layout(&layout, &mut input);
    }
}

/// The configuration the `layout` target decodes from `data` (for the
/// regression tests, which show what an input means).
pub fn layout_config(data: &[u8]) -> Config {
    Input::new(data).config()
}
