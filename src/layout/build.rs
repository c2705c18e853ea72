//! From a [`Config`] to a checked shape: every validation of a layout.

use crate::config::{Config, ExpertLayout};
use crate::coord::Part;
use crate::error::{Error, Result};
use crate::layout::families::{self, Families};
use crate::layout::folded::{encoder_view, folded};
use crate::layout::nested::nested;
use crate::layout::shape::Shape;
use crate::layout::sizes::Sizes;
use crate::math::checked_product;

/// Checks the sizes a user gave are not zero.
fn check_nonzero(config: &Config) -> Result<()> {
    let sizes = [
        ("tp", Some(config.tp)),
        ("cp", Some(config.cp)),
        ("ep", Some(config.ep)),
        ("dp", config.dp),
        ("pp", Some(config.pp)),
        ("world_size", config.world_size),
        ("encoder_tp", config.encoder_tp),
        ("encoder_pp", config.encoder_pp),
        ("etp", config.etp),
        ("dist_opt_instances", Some(config.dist_opt_instances)),
        ("gtp_remat", Some(config.gtp_remat)),
        ("expert_gtp_remat", Some(config.expert_gtp_remat)),
    ];
    for (what, size) in sizes {
        if size == Some(0) {
            return Err(Error::ZeroSize { what });
        }
    }
    if config.hierarchical_cp.contains(&0) {
        return Err(Error::ZeroSize {
            what: "a hierarchical_cp level",
        });
    }
    Ok(())
}

/// The data-parallel size: given, derived from the world size, or 1.
/// `unit` is the number of ranks of one data-parallel replica, spelled
/// `what`.
fn resolve_dp(config: &Config, unit: u32, what: &'static str) -> Result<u32> {
    match (config.dp, config.world_size) {
        (Some(dp), Some(world_size)) => {
            let expected = u64::from(unit) * u64::from(dp);
            if expected != u64::from(world_size) {
                return Err(Error::WorldSizeMismatch {
                    world_size,
                    dp,
                    what,
                    expected,
                });
            }
            Ok(dp)
        }
        (Some(dp), None) => Ok(dp),
        (None, Some(world_size)) => {
            if world_size % unit != 0 {
                return Err(Error::WorldNotDivisible {
                    world_size,
                    what,
                    divisor: unit,
                });
            }
            Ok(world_size / unit)
        }
        (None, None) => Ok(1),
    }
}

/// The sizes of `config` with `dp`; `etp` and `edp` are derived by the grid.
fn sizes(config: &Config, tp: u32, pp: u32, ep: u32, dp: u32) -> Sizes {
    Sizes {
        tp,
        cp: config.cp,
        ep,
        dp,
        pp,
        etp: config.etp.unwrap_or(tp),
        edp: dp,
        gtp_remat: config.gtp_remat,
        egtp_remat: config.expert_gtp_remat,
    }
}

/// Refuses a weight-shard axis with what no Megatron version combines it
/// with: the nested expert layout (Megatron-LM 2024 has no such axes), an
/// encoder (Megatron-Core 0.19 and Megatron-LM main have no encoder grid)
/// and distributed-optimizer instances (refused by Megatron-Core 0.19).
fn check_gtp(config: &Config) -> Result<()> {
    let shards = [
        ("gtp_remat", config.gtp_remat),
        ("expert_gtp_remat", config.expert_gtp_remat),
    ];
    let Some((what, size)) = shards.into_iter().find(|(_, s)| *s > 1) else {
        return Ok(());
    };
    let conflict = |with, why| {
        Err(Error::GtpConflict {
            what,
            size,
            with,
            why,
        })
    };
    if config.expert_layout == ExpertLayout::Nested {
        return conflict(
            "expert_layout = nested",
            "the nested expert layout is Megatron-LM 2024's, which has no weight-shard axes",
        );
    }
    if config.has_encoder() {
        return conflict(
            "an encoder (encoder_tp, encoder_pp)",
            "the weight-shard axes exist from Megatron-Core 0.19 on, which has no encoder grid",
        );
    }
    if config.dist_opt_instances > 1 {
        return conflict(
            "dist_opt_instances > 1",
            "Megatron-Core 0.19 refuses it (GTP_remat with num_distributed_optimizer_instances > 1 is not yet supported)",
        );
    }
    Ok(())
}

/// The encoder + decoder shape: the encoder grid (its expert view the
/// encoder grid itself, as Megatron-LM 5a3b6bcf1f builds it: no expert
/// grid on encoder ranks), then the decoder with nested or folded experts,
/// checked on its own.
fn encoder_decoder(config: &Config) -> Result<Shape> {
    let encoder_tp = config.encoder_tp.unwrap_or(config.tp);
    let encoder_pp = config.encoder_pp.unwrap_or(1);
    let unit = checked_product([encoder_tp, encoder_pp])
        .zip(checked_product([config.tp, config.pp]))
        .and_then(|(e, d)| e.checked_add(d))
        .and_then(|s| s.checked_mul(config.cp))
        .ok_or_else(|| Error::Overflow {
            what: format!(
                "(encoder_tp*encoder_pp + tp*pp)*cp = ({encoder_tp}*{encoder_pp} + {}*{})*{}",
                config.tp, config.pp, config.cp
            ),
        })?;
    let dp = resolve_dp(config, unit, "(encoder_tp*encoder_pp + tp*pp)*cp")?;
    let encoder_sizes = sizes(config, encoder_tp, encoder_pp, 1, dp);
    let encoder = match config.expert_layout {
        ExpertLayout::Nested => nested(
            encoder_sizes,
            &config.order,
            config.rank_offset,
            Part::Encoder,
        )?,
        _ => encoder_view(encoder_sizes, &config.order, config.rank_offset)?,
    };
    let encoder_world = encoder.attention.world();
    let decoder_offset = config
        .rank_offset
        .checked_add(encoder_world)
        .ok_or_else(|| Error::Overflow {
            what: format!(
                "rank_offset ({}) + encoder world ({encoder_world})",
                config.rank_offset
            ),
        })?;
    let decoder_sizes = sizes(config, config.tp, config.pp, config.ep, dp);
    let decoder = match config.expert_layout {
        ExpertLayout::Nested => {
            nested(decoder_sizes, &config.order, decoder_offset, Part::Decoder)?
        }
        _ => folded(decoder_sizes, &config.order, decoder_offset)?,
    };
    encoder_world
        .checked_add(decoder.attention.world())
        .ok_or_else(|| Error::Overflow {
            what: format!(
                "encoder world ({encoder_world}) + decoder world ({})",
                decoder.attention.world()
            ),
        })?;
    Ok(Shape::EncoderDecoder {
        encoder: Box::new(encoder),
        decoder,
    })
}

/// The nested or folded shape.
fn single_grid(config: &Config) -> Result<Shape> {
    let unit =
        checked_product([config.tp, config.cp, config.pp, config.gtp_remat]).ok_or_else(|| {
            Error::Overflow {
                what: format!(
                    "tp*cp*pp*gtp_remat = {}*{}*{}*{}",
                    config.tp, config.cp, config.pp, config.gtp_remat
                ),
            }
        })?;
    let what = if config.gtp_remat > 1 {
        "tp*cp*pp*gtp_remat"
    } else {
        "tp*cp*pp"
    };
    let dp = resolve_dp(config, unit, what)?;
    let sizes = sizes(config, config.tp, config.pp, config.ep, dp);
    let dense = match config.expert_layout {
        ExpertLayout::Nested => nested(sizes, &config.order, config.rank_offset, Part::Decoder)?,
        _ => folded(sizes, &config.order, config.rank_offset)?,
    };
    Ok(Shape::Single(dense))
}

/// Validates `config` and builds its shape and families.
///
/// # Errors
/// Every invalid configuration; see [`Layout::new`](crate::Layout::new).
pub(crate) fn build(config: &Config) -> Result<(Shape, Families)> {
    check_nonzero(config)?;
    check_gtp(config)?;
    let folded = config.expert_layout == ExpertLayout::Folded;
    if config.etp.is_some() && !folded {
        return Err(Error::NeedsFolded { what: "etp" });
    }
    if config.dist_opt_instances > 1 && !folded {
        return Err(Error::NeedsFolded {
            what: "dist_opt_instances",
        });
    }
    let shape = if config.has_encoder() {
        encoder_decoder(config)?
    } else {
        single_grid(config)?
    };
    let main = shape.main();
    let hierarchical_cp = config.hierarchical_cp.clone();
    families::check_hierarchical_cp(&hierarchical_cp, main.sizes.cp)?;
    let dist_opt_instances = config.dist_opt_instances;
    match shape.encoder() {
        // Megatron-LM 5a3b6bcf1f's one check: slices of the dp-cp groups.
        Some(_) => families::check_dist_opt_slices(dist_opt_instances, main)?,
        None => families::check_dist_opt(dist_opt_instances, main)?,
    }
    Ok((
        shape,
        Families {
            hierarchical_cp,
            dist_opt_instances,
        },
    ))
}

/// `config` with the sizes `shape` derived filled in: `dp`, `world_size`,
/// and `etp` or `encoder_tp`/`encoder_pp` where the layout has them.
pub(crate) fn resolved(config: &Config, shape: &Shape) -> Config {
    let main = shape.main();
    let mut out = Config {
        dp: Some(main.sizes.dp),
        world_size: Some(shape.world()),
        ..config.clone()
    };
    if main.experts == ExpertLayout::Folded {
        out.etp = Some(main.sizes.etp);
    }
    if let Some(encoder) = shape.encoder() {
        out.encoder_tp = Some(encoder.sizes.tp);
        out.encoder_pp = Some(encoder.sizes.pp);
    }
    out
}
