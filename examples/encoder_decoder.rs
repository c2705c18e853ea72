//! The encoder + decoder case Megatron-LM got wrong: tp=4, encoder_tp=2,
//! cp=2. Prints the joined pipelines, what list-position pairing would have
//! produced, and how the overlapping pipeline communicators are built in
//! rounds of disjoint groups.

use rank_layout::{Config, Kind, Layout};

fn main() -> Result<(), rank_layout::Error> {
    let layout = Layout::new(
        &Config::new()
            .tp(4)
            .cp(2)
            .encoder_tp(Some(2))
            .encoder_pp(Some(1)),
    )?;
    let cp = |r: u32| layout.placement(r).map(|p| p.coord.cp);
    println!("joined pp groups (by coordinates):");
    for g in layout.groups(Kind::PP)? {
        let cps = g.iter().map(cp).collect::<Result<Vec<_>, _>>()?;
        println!("  {:?}  cp slices {cps:?}", g.to_vec());
    }
    println!("list-position pairing, zip(cycle(encoder), decoder):");
    let encoder: Vec<u32> = (0..layout.encoder_world_size()).collect();
    for (e, d) in encoder
        .iter()
        .cycle()
        .zip(layout.encoder_world_size()..layout.world_size())
    {
        let mixed = if cp(*e)? != cp(d)? {
            "  <- mixes cp slices"
        } else {
            ""
        };
        println!("  [{e}, {d}]{mixed}");
    }
    let rounds = layout.split_rounds(Kind::PP)?;
    println!("pp communicators in {rounds} rounds of disjoint groups:");
    for round in 0..rounds {
        let plan: Vec<String> = (0..layout.world_size())
            .map(|r| match layout.split_in_round(r, Kind::PP, round) {
                Ok(Some(split)) => Ok(format!("{r}:{split}")),
                Ok(None) => Ok(format!("{r}:-")),
                Err(e) => Err(e),
            })
            .collect::<Result<_, _>>()?;
        println!("  round {round}: {}", plan.join(" "));
    }
    Ok(())
}
