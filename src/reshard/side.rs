//! One side of a reshard: a layout, its layer map, the process running
//! each of its ranks, and the processes that are dead.

use crate::cast::{low32, to_u64, to_usize};
use fnv::FnvHashMap;

use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::relayout::{Fate, Relayout};
use crate::reshard::layers::LayerSplit;

/// Which process runs each rank of a side.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Processes {
    /// Rank `r` is process `r`.
    Ranks,
    /// Rank `rank_offset + i` is process `of_rank[i]`.
    Listed {
        of_rank: Vec<u32>,
        rank_of: FnvHashMap<u32, u32>,
    },
}

/// One side of a reshard (the layout the tensors are in, or the one they
/// go to): the layout, how its layers sit on its stages, which process
/// runs each of its ranks, and which processes are dead (they hold
/// nothing and receive nothing).
///
/// Processes are numbered as the job numbers them (its global ranks);
/// by default a layout's rank `r` is process `r`, so two layouts at
/// different `rank_offset`s are disjoint and two at the same are
/// collocated.
///
/// ```
/// use rank_layout::reshard::{LayerSplit, Side};
/// use rank_layout::{Config, Layout};
/// let train = Side::new(Layout::new(&Config::new().tp(2).pp(2).world_size(8))?)
///     .layers(LayerSplit::even().first(1).last(3));
/// assert_eq!(train.process_of(5), Some(5));
/// let infer = Side::new(Layout::new(&Config::new().tp(4).world_size(4))?)
///     .with_processes(vec![11, 10, 9, 8])?;
/// assert_eq!((infer.process_of(0), infer.rank_of(9)), (Some(11), Some(2)));
/// assert!(infer.clone().with_processes(vec![1, 1, 2, 3]).is_err());
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    layout: Layout,
    layers: LayerSplit,
    processes: Processes,
    dead: Vec<u32>,
}

impl Side {
    /// The side of `layout`, its layers split evenly, rank `r` run by
    /// process `r`, nobody dead.
    pub fn new(layout: Layout) -> Side {
        Side {
            layout,
            layers: LayerSplit::even(),
            processes: Processes::Ranks,
            dead: Vec::new(),
        }
    }

    /// With the layers placed on the stages by `layers`.
    #[must_use]
    pub fn layers(mut self, layers: LayerSplit) -> Side {
        self.layers = layers;
        self
    }

    /// With rank `rank_offset + i` run by process `processes[i]`.
    ///
    /// # Errors
    /// [`Error::ReshardLayout`] when there is not one process per rank, or
    /// a process is given twice.
    pub fn with_processes(mut self, processes: Vec<u32>) -> Result<Side> {
        let world = to_usize(self.layout.world_size());
        if processes.len() != world {
            return Err(Error::ReshardLayout {
                side: "given",
                problem: format!(
                    "{} processes for {world} ranks (one per rank)",
                    processes.len()
                ),
            });
        }
        let mut rank_of = FnvHashMap::default();
        rank_of.reserve(world);
        let offset = self.layout.rank_offset();
        for (i, &p) in processes.iter().enumerate() {
            // i < world <= 2^32 - offset: the rank fits.
            let rank = offset.wrapping_add(low32(to_u64(i)));
            if rank_of.insert(p, rank).is_some() {
                return Err(Error::ReshardLayout {
                    side: "given",
                    problem: format!("process {p} runs two ranks"),
                });
            }
        }
        self.processes = Processes::Listed {
            of_rank: processes,
            rank_of,
        };
        Ok(self)
    }

    /// With `processes` dead: they hold nothing, send nothing and receive
    /// nothing.
    #[must_use]
    pub fn dead(mut self, processes: impl IntoIterator<Item = u32>) -> Side {
        self.dead.extend(processes);
        self.dead.sort_unstable();
        self.dead.dedup();
        self
    }

    /// The side before a re-layout: its old layout, the failed processes
    /// dead (processes are the old ranks; an idle process still holds its
    /// shards).
    pub fn before(relayout: &Relayout) -> Side {
        let old = relayout.old_layout();
        let offset = old.rank_offset();
        let map = relayout.rank_map();
        let failed = (0..map.old_world())
            .filter(|p| map.fate(*p) == Some(Fate::Failed))
            .map(|p| offset.wrapping_add(p));
        Side::new(old.clone()).dead(failed)
    }

    /// The side after a re-layout: its new layout, each new rank run by
    /// the process the rank map gives it (the old layout's ranks, then
    /// the spares after them).
    ///
    /// # Errors
    /// [`Error::ReshardLayout`] when a new rank has no process or a
    /// process number passes `u32`.
    pub fn after(relayout: &Relayout) -> Result<Side> {
        let new = relayout.layout();
        let base = relayout.old_layout().rank_offset();
        let map = relayout.rank_map();
        let processes = (0..new.world_size())
            .map(|n| {
                map.process(n)
                    .and_then(|p| base.checked_add(p))
                    .ok_or_else(|| Error::ReshardLayout {
                        side: "to",
                        problem: format!("new rank {n} has no process"),
                    })
            })
            .collect::<Result<Vec<u32>>>()?;
        Side::new(new.clone()).with_processes(processes)
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// How its layers sit on its stages.
    pub fn layer_split(&self) -> &LayerSplit {
        &self.layers
    }

    /// The dead processes, sorted.
    pub fn dead_processes(&self) -> &[u32] {
        &self.dead
    }

    /// Whether `process` is dead.
    pub fn is_dead(&self, process: u32) -> bool {
        self.dead.binary_search(&process).is_ok()
    }

    /// The process running `rank`, `None` outside the layout.
    pub fn process_of(&self, rank: u32) -> Option<u32> {
        let i = rank.checked_sub(self.layout.rank_offset())?;
        if i >= self.layout.world_size() {
            return None;
        }
        match &self.processes {
            Processes::Ranks => Some(rank),
            Processes::Listed { of_rank, .. } => of_rank.get(to_usize(i)).copied(),
        }
    }

    /// The rank `process` runs, `None` when it runs none.
    pub fn rank_of(&self, process: u32) -> Option<u32> {
        match &self.processes {
            Processes::Ranks => {
                let layout = &self.layout;
                (process >= layout.rank_offset() && u64::from(process) < layout.rank_end())
                    .then_some(process)
            }
            Processes::Listed { rank_of, .. } => rank_of.get(&process).copied(),
        }
    }

    /// The largest process number plus one (`u64`: it may be 2^32).
    pub(crate) fn process_end(&self) -> u64 {
        match &self.processes {
            Processes::Ranks => self.layout.rank_end(),
            Processes::Listed { of_rank, .. } => {
                of_rank.iter().max().map_or(0, |p| u64::from(*p) + 1)
            }
        }
    }

    /// Its processes, as text for messages (`0..7`, or `8 processes`).
    pub(crate) fn describe(&self) -> String {
        match &self.processes {
            Processes::Ranks => format!(
                "{}..{}",
                self.layout.rank_offset(),
                self.layout.rank_end().saturating_sub(1)
            ),
            Processes::Listed { of_rank, .. } => format!("{} listed processes", of_rank.len()),
        }
    }
}
