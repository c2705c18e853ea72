//! The next valid smaller grid: fewer replicas first, then smaller other
//! axes.

use crate::config::Config;
use crate::error::Result;
use crate::relayout::assign::{Assigned, Job, no, replicas, smaller};

/// Sets one axis of a configuration.
type SetAxis = fn(Config, u32) -> Config;

pub(crate) fn assign(job: &Job<'_>) -> Result<Assigned> {
    let old = job.layout;
    let sizes = old.sizes();
    let dp = sizes.dp;
    let max_world = job.alive().min(job.world);
    let model = job.world / dp.max(1);
    let mut map = job.blank_map();
    if let Some(new) = smaller::largest(old.config(), model, dp, max_world, job.options) {
        let moved = replicas::fill(job, &new, &mut map, &[])?;
        let notes = vec![format!(
            "dp {dp} -> {}: intact replicas kept in place, {moved} place(s) filled by survivors of other positions or spares",
            new.sizes().dp
        )];
        return Ok(Assigned {
            layout: new,
            map,
            notes,
        });
    }
    // Then the other axes, each alone, largest smaller size first.
    let others: [(&str, u32, SetAxis); 4] = [
        ("cp", sizes.cp, |c, v| c.cp(v)),
        ("ep", sizes.ep, |c, v| c.ep(v)),
        ("pp", sizes.pp, |c, v| c.pp(v)),
        ("tp", sizes.tp, |c, v| c.tp(v)),
    ];
    for (name, size, set) in others {
        for v in (1..size).rev().filter(|v| size % v == 0) {
            let config = set(old.config().clone(), v);
            let Some(one) = smaller::with_dp(&config, 1) else {
                continue;
            };
            let model2 = one.world_size();
            let Some(new) = smaller::largest(&config, model2, u32::MAX, max_world, job.options)
            else {
                continue;
            };
            let mut p = 0u32;
            for n in 0..new.world_size() {
                while p < map.len() && !map.is_free(p) {
                    p += 1;
                }
                map.assign(p, n);
                p += 1;
            }
            let notes = vec![format!(
                "no smaller dp fits; {name} {size} -> {v}, dp {dp} -> {}: the grid's shape changed, so ranks follow the survivors' order (the cost's moved ranks receive model state); a group is kept only where its members, in order, happen to be an old group's, and a group of one process is alone",
                new.sizes().dp
            )];
            return Ok(Assigned {
                layout: new,
                map,
                notes,
            });
        }
    }
    Err(no(format!(
        "no smaller grid fits {} surviving ranks: dp from {dp} down to {}{}, nor a smaller cp, ep, pp or tp",
        job.alive(),
        job.options.min_dp,
        if job.options.global_batch.is_some() {
            " dividing the global batch"
        } else {
            ""
        }
    )))
}
