//! The graph of modules: edges, the cycle check and the pipeline stages
//! along the longest path.

use crate::error::{Error, Result};

/// A directed acyclic graph over module indices, with each module's first
/// global pipeline stage.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Graph {
    /// The edges, `(source, destination)`, ordered by source's declaration,
    /// then as given.
    pub edges: Vec<(usize, usize)>,
    /// Each module's first stage: the longest path into it, each module
    /// weighted by its pp.
    pub first_stage: Vec<u32>,
    /// The longest path through the graph.
    pub total_stages: u32,
}

impl Graph {
    /// The graph of `edges` over modules with pipeline sizes `pp`; `names`
    /// name the modules in errors.
    ///
    /// # Errors
    /// [`Error::ModuleCycle`] for a cycle (an edge from a module to itself
    /// included), [`Error::DuplicateName`] for an edge given twice.
    pub fn new(names: &[&str], pp: &[u32], edges: &[(usize, usize)]) -> Result<Graph> {
        let n = names.len();
        let name = |i: usize| names.get(i).copied().unwrap_or("?");
        let mut sorted: Vec<(usize, usize)> = Vec::with_capacity(edges.len());
        for (i, e) in edges.iter().enumerate() {
            if edges.iter().take(i).any(|f| f == e) {
                return Err(Error::DuplicateName {
                    name: format!("edge {} -> {}", name(e.0), name(e.1)),
                    place: "the edges".into(),
                });
            }
        }
        for s in 0..n {
            sorted.extend(edges.iter().filter(|e| e.0 == s));
        }
        // Kahn's algorithm: a module is placed once every edge into it is.
        let mut indegree = vec![0usize; n];
        for &(_, d) in edges {
            if let Some(x) = indegree.get_mut(d) {
                *x += 1;
            }
        }
        let mut ready: Vec<usize> = (0..n).filter(|&i| indegree.get(i) == Some(&0)).collect();
        let mut first_stage = vec![0u32; n];
        let mut placed = 0usize;
        let mut total = 0u32;
        while let Some(m) = ready.pop() {
            placed += 1;
            let end = first_stage.get(m).copied().unwrap_or(0) + pp.get(m).copied().unwrap_or(1);
            total = total.max(end);
            for &(_, d) in sorted.iter().filter(|e| e.0 == m) {
                if let Some(f) = first_stage.get_mut(d) {
                    *f = (*f).max(end);
                }
                if let Some(x) = indegree.get_mut(d) {
                    *x -= 1;
                    if *x == 0 {
                        ready.push(d);
                    }
                }
            }
        }
        if placed < n {
            return Err(Error::ModuleCycle {
                cycle: cycle(names, &sorted, &indegree),
            });
        }
        Ok(Graph {
            edges: sorted,
            first_stage,
            total_stages: total,
        })
    }
}

/// A cycle among the modules Kahn's algorithm left (indegree > 0), written
/// `a -> b -> a`.
fn cycle(names: &[&str], edges: &[(usize, usize)], indegree: &[usize]) -> String {
    let left = |i: usize| indegree.get(i).is_some_and(|&d| d > 0);
    // Walk backwards along edges between left modules: every left module has
    // a left predecessor, so the walk repeats a module.
    let Some(start) = (0..indegree.len()).find(|&i| left(i)) else {
        return String::new();
    };
    let mut path = vec![start];
    let mut at = start;
    while let Some(&(p, _)) = edges.iter().find(|e| e.1 == at && left(e.0)) {
        if let Some(k) = path.iter().position(|&x| x == p) {
            let mut cyc: Vec<usize> = path.split_off(k);
            cyc.reverse();
            // Start at the module declared first.
            let first = (0..cyc.len()).min_by_key(|&i| cyc.get(i)).unwrap_or(0);
            cyc.rotate_left(first);
            cyc.push(*cyc.first().unwrap_or(&p));
            return cyc
                .iter()
                .map(|&i| names.get(i).copied().unwrap_or("?"))
                .collect::<Vec<_>>()
                .join(" -> ");
        }
        path.push(p);
        at = p;
    }
    String::new()
}
