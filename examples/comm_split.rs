//! What a launcher does on every rank: one `MPI_Comm_split(color, key)` per
//! kind and round, with the colour and key computed arithmetically for this
//! rank only (`Layout::splits`).
//!
//! `cargo run --example comm_split -- 98765` prints rank 98,765's plan in a
//! 131,072-rank job (tp=8, cp=2, ep=8, pp=16).

use rank_layout::{Config, Layout};

fn main() -> Result<(), rank_layout::Error> {
    let rank: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(98_765);
    let layout = Layout::new(
        &Config::new()
            .tp(8)
            .cp(2)
            .ep(8)
            .pp(16)
            .world_size(Some(131_072)),
    )?;
    let p = layout.placement(rank)?;
    println!(
        "rank {rank}: tp={} cp={} dp={} pp={} (ep={})",
        p.coord.tp, p.coord.cp, p.coord.dp, p.coord.pp, p.expert.ep
    );
    for s in layout.splits(rank)? {
        let kind = s.kind;
        match s.split {
            Some(split) => println!(
                "  {kind:<13} MPI_Comm_split(color={}, key={})",
                split.color, split.key
            ),
            None => println!("  {kind:<13} MPI_Comm_split(MPI_UNDEFINED)"),
        }
    }
    println!(
        "  pipeline: prev {:?}, next {:?}",
        layout.pipeline_prev(rank)?,
        layout.pipeline_next(rank)?
    );
    Ok(())
}
