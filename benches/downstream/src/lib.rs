//! The layouts and the per-rank loop of the main crate's `rank/*` benches
//! (`benches/enumerate.rs`), shared by this package's bench and its
//! instruction-count binary.

use std::hint::black_box;

use rank_layout::{Config, ExpertLayout, Layout};

/// The rank the `rank/*` benches ask about.
pub const RANK: u32 = 98_765;

/// tp=8, cp=2, ep=8, pp=16 and `world` ranks (dp = world / 256).
pub fn dense(world: u32) -> Layout {
    Layout::new(
        &Config::new()
            .tp(8)
            .cp(2)
            .ep(8)
            .pp(16)
            .world_size(Some(world))
            .expert_layout(ExpertLayout::Nested),
    )
    .expect("a valid layout")
}

/// Encoder tp=4 pp=2 before a decoder with tp=8, cp=2, pp=8, dp=1024: 147,456 ranks.
pub fn encdec() -> Layout {
    Layout::new(
        &Config::new()
            .tp(8)
            .cp(2)
            .pp(8)
            .dp(Some(1024))
            .encoder_tp(Some(4))
            .encoder_pp(Some(2))
            .expert_layout(ExpertLayout::Nested),
    )
    .expect("a valid layout")
}

/// The benches' layouts: name, layout, and how many steps `splits` yields.
pub fn layouts() -> [(&'static str, Layout, usize); 2] {
    [
        ("all-kinds", dense(131_072), 16),
        ("encdec-all-kinds", encdec(), 16 + 2 * 2 - 2),
    ]
}

/// One timed call: `rank`'s splits in every kind and round, color and key
/// read, the step count checked (the body of `rank/all-kinds/131072`).
#[inline(always)]
pub fn one_rank(layout: &Layout, rank: u32, steps: usize) -> u32 {
    let mut n = 0;
    let mut sum = 0u32;
    for s in layout
        .splits(black_box(rank))
        .expect("a rank of the layout")
    {
        n += 1;
        if let Some(s) = s.split {
            sum = sum.wrapping_add(s.color ^ s.key);
        }
    }
    assert_eq!(n, steps);
    sum
}
