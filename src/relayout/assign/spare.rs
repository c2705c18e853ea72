//! Spare nodes in the failed nodes' places.

use crate::cast::to_usize;
use crate::error::Result;
use crate::relayout::assign::{Assigned, Job, no};

pub(crate) fn assign(job: &Job<'_>) -> Result<Assigned> {
    let g = job.failure.gpus_per_node();
    if job.world % g != 0 {
        return Err(no(format!(
            "the job's {} ranks are not whole nodes of {g} GPUs",
            job.world
        )));
    }
    let mut dead: Vec<u32> = job
        .failed
        .iter()
        .filter(|&&p| p < job.world)
        .map(|p| p / g)
        .collect();
    dead.dedup();
    let spares = job.failure.spares();
    // A spare node with a failed rank is no spare.
    let mut broken_spares: Vec<u32> = job
        .failed
        .iter()
        .filter(|&&p| p >= job.world)
        .map(|p| (p - job.world) / g)
        .collect();
    broken_spares.dedup();
    // The broken spares are distinct spare nodes: at most `spares`.
    let usable = spares.saturating_sub(u32::try_from(broken_spares.len()).unwrap_or(u32::MAX));
    if dead.len() > to_usize(usable) {
        return Err(no(format!(
            "{} node(s) failed and there are {usable} spare node(s) left",
            dead.len()
        )));
    }
    let domains = job.failure.node_domains();
    let job_domain = |n: u32| {
        domains
            .and_then(|d| d.job.get(to_usize(n)))
            .and_then(Option::as_deref)
    };
    let spare_domain = |s: u32| {
        domains
            .and_then(|d| d.spares.get(to_usize(s)))
            .and_then(Option::as_deref)
    };
    let mut used = vec![false; to_usize(spares)];
    for &s in &broken_spares {
        if let Some(u) = used.get_mut(to_usize(s)) {
            *u = true;
        }
    }
    let mut by: Vec<Option<u32>> = vec![None; dead.len()];
    // Same domain first, then any, lowest spare first.
    for same in [true, false] {
        for (i, &n) in dead.iter().enumerate() {
            if by.get(i).copied().flatten().is_some() {
                continue;
            }
            let fits = |s: u32| !same || job_domain(n).is_some_and(|d| spare_domain(s) == Some(d));
            let pick = (0..spares).find(|&s| used.get(to_usize(s)) == Some(&false) && fits(s));
            if let Some(s) = pick {
                if let (Some(u), Some(b)) = (used.get_mut(to_usize(s)), by.get_mut(i)) {
                    *u = true;
                    *b = Some(s);
                }
            }
        }
    }
    let mut map = job.blank_map();
    let mut notes = Vec::new();
    let mut next_dead = dead.iter().peekable();
    for p in 0..job.world {
        let node = p / g;
        while next_dead.peek().is_some_and(|&&n| n < node) {
            next_dead.next();
        }
        if next_dead.peek() != Some(&&node) && map.is_free(p) {
            map.assign(p, p);
        }
    }
    for (&n, s) in dead.iter().zip(&by) {
        let Some(s) = *s else { continue };
        for l in 0..g {
            map.assign(job.world + s * g + l, n * g + l);
        }
        if let Some(d) = job_domain(n) {
            if spare_domain(s) != Some(d) {
                notes.push(format!(
                    "spare node {s} ({}) takes node {n} of domain {d}: no spare of that domain is left",
                    spare_domain(s).map_or_else(|| "domain unknown".to_string(), |x| format!("domain {x}"))
                ));
            }
        }
    }
    notes.insert(
        0,
        format!(
            "{} failed node(s) replaced by spares: {}",
            dead.len(),
            dead.iter()
                .zip(&by)
                .map(|(n, s)| format!("node {n} <- spare {}", s.unwrap_or(0)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    Ok(Assigned {
        layout: job.layout.clone(),
        map,
        notes,
    })
}
