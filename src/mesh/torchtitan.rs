//! torchtitan's `ParallelDims`: its meshes as one [`Mesh`].

use crate::error::{Error, Result};
use crate::math::checked_product;
use crate::mesh::Mesh;

/// The meshes torchtitan's `ParallelDims(dp_replicate, dp_shard, cp, tp,
/// pp, ep, world_size).build_mesh()` builds (torchtitan 0.3.0), as one mesh:
///
/// - dims, first fastest, `tp`, `cp`, `dp_shard`, `dp_replicate`, `pp`
///   (torchtitan's DeviceMesh `("pp", "dp_replicate", "dp_shard", "cp",
///   "tp")`, last fastest);
/// - the view `expert`: `ep`, `efsdp`, `dp_replicate`, `pp` with
///   `efsdp = dp_shard * cp * tp / ep` (its `("pp", "dp_replicate",
///   "efsdp", "ep")`), sharing `dp_replicate` and `pp`;
/// - the flattens `batch` and `dp` (`dp_replicate` x `dp_shard`), `loss`
///   (`dp_replicate` x `dp_shard` x `cp`), `fsdp` (`dp_shard` x `cp`),
///   `ep` and `efsdp` (the view's dims): every name its `get_mesh` accepts,
///   whatever its `spmd_backend`, is a dim set of the mesh.
///
/// `dp_shard` `None` is torchtitan's `-1`: `world_size / (dp_replicate *
/// cp * tp * pp)`.
///
/// ```
/// use rank_layout::torchtitan_mesh;
/// let mesh = torchtitan_mesh(2, Some(2), 2, 2, 2, 4, 32)?;
/// let of_5 = |name: &str| mesh.groups(name).unwrap().find(|g| g.iter().any(|r| r == 5)).unwrap().to_vec();
/// assert_eq!(of_5("loss"), vec![1, 3, 5, 7, 9, 11, 13, 15]);
/// assert_eq!(of_5("ep"), vec![4, 5, 6, 7]);
/// assert_eq!(of_5("efsdp"), vec![1, 5]);
/// assert!(torchtitan_mesh(1, None, 1, 2, 1, 3, 8).is_err()); // ep must divide dp_shard*cp*tp
/// # Ok::<(), rank_layout::Error>(())
/// ```
///
/// # Errors
/// As torchtitan refuses them, as typed errors naming the values: a
/// degree of 0 ([`Error::ZeroDim`]); `dp_shard` inferred below 1 or the
/// degrees not multiplying to `world_size` ([`Error::BadSpec`]); `ep` not
/// dividing `dp_shard * cp * tp` (which torchtitan finds only inside
/// DeviceMesh); [`Error::Overflow`].
pub fn torchtitan_mesh(
    dp_replicate: u32,
    dp_shard: Option<u32>,
    cp: u32,
    tp: u32,
    pp: u32,
    ep: u32,
    world_size: u32,
) -> Result<Mesh> {
    for (name, degree) in [
        ("dp_replicate", dp_replicate),
        ("cp", cp),
        ("tp", tp),
        ("pp", pp),
        ("ep", ep),
        ("world_size", world_size),
    ] {
        if degree == 0 {
            return Err(Error::ZeroDim { name: name.into() });
        }
    }
    let text = || {
        format!(
            "dp_replicate={dp_replicate} dp_shard={} cp={cp} tp={tp} pp={pp} ep={ep} world_size={world_size}",
            dp_shard.map_or("-1".to_owned(), |d| d.to_string())
        )
    };
    let bad = |problem: String| Error::BadSpec {
        what: "torchtitan parallel dims",
        text: text(),
        problem,
    };
    let others = checked_product([dp_replicate, cp, tp, pp]).ok_or_else(|| Error::Overflow {
        what: format!("dp_replicate*cp*tp*pp = {dp_replicate}*{cp}*{tp}*{pp}"),
    })?;
    let dp_shard = match dp_shard {
        Some(0) => {
            return Err(Error::ZeroDim {
                name: "dp_shard".into(),
            });
        }
        Some(d) => d,
        None => world_size / others,
    };
    if dp_shard == 0 {
        return Err(bad(format!(
            "dp_shard = world_size / (dp_replicate*cp*tp*pp) = {world_size} / {others} is 0"
        )));
    }
    if u64::from(others) * u64::from(dp_shard) != u64::from(world_size) {
        return Err(bad(format!(
            "dp_replicate*dp_shard*cp*tp*pp = {} is not world_size {world_size}",
            u64::from(others) * u64::from(dp_shard)
        )));
    }
    let sharded = dp_shard * cp * tp;
    if sharded % ep != 0 {
        return Err(bad(format!(
            "ep ({ep}) must divide dp_shard*cp*tp = {dp_shard}*{cp}*{tp} = {sharded} (the expert mesh is ep x efsdp over those ranks)"
        )));
    }
    Mesh::new([
        ("tp", tp),
        ("cp", cp),
        ("dp_shard", dp_shard),
        ("dp_replicate", dp_replicate),
        ("pp", pp),
    ])?
    .view(
        "expert",
        &[
            ("ep", ep),
            ("efsdp", sharded / ep),
            ("dp_replicate", dp_replicate),
            ("pp", pp),
        ],
        &["dp_replicate", "pp"],
    )?
    .flatten("batch", "dp_shard-dp_replicate")?
    .flatten("dp", "dp_shard-dp_replicate")?
    .flatten("loss", "cp-dp_shard-dp_replicate")?
    .flatten("fsdp", "cp-dp_shard")?
    .flatten("ep", "expert:ep")?
    .flatten("efsdp", "expert:efsdp")
}
