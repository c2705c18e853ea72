//! The old -> new rank map of a re-layout.

use crate::cast::to_usize;

/// What becomes of one process of the old job (or one spare): its new
/// rank, or none. What becomes of its groups, kind by kind, is
/// [`Relayout::fate_of`](crate::relayout::Relayout::fate_of).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fate {
    /// It runs rank `n` of the new layout.
    Rank(u32),
    /// It is alive and waits (left out of the new layout, or a spare not
    /// needed): a standby for the next failure.
    Idle,
    /// It failed.
    Failed,
}

const IDLE: u32 = u32::MAX - 1;
const FAILED: u32 = u32::MAX;

/// Every process's [`Fate`]: the old job's ranks `0..old_world` (counted
/// from the layout's `rank_offset`), then the spares' ranks after them;
/// and, the other way, the process of every new rank.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RankMap {
    old_world: u32,
    fates: Vec<u32>,
    processes: Vec<u32>,
}

impl RankMap {
    /// A map of `old_world + spares` processes, every one idle.
    pub(crate) fn idle(old_world: u32, spares: u32) -> RankMap {
        let n = to_usize(old_world) + to_usize(spares);
        RankMap {
            old_world,
            fates: vec![IDLE; n],
            processes: Vec::new(),
        }
    }

    /// Marks `failed` processes (indexes into the map).
    pub(crate) fn fail(&mut self, failed: &[u32]) {
        for &p in failed {
            if let Some(f) = self.fates.get_mut(to_usize(p)) {
                *f = FAILED;
            }
        }
    }

    /// Process `p` runs new rank `n`.
    pub(crate) fn assign(&mut self, p: u32, n: u32) {
        if let Some(f) = self.fates.get_mut(to_usize(p)) {
            *f = n;
        }
    }

    /// Whether process `p` is alive and not yet given a rank.
    pub(crate) fn is_free(&self, p: u32) -> bool {
        self.fates.get(to_usize(p)) == Some(&IDLE)
    }

    /// Builds the inverse for a new world of `new_world` ranks; `false`
    /// when the new ranks are not exactly `0..new_world`, each once.
    pub(crate) fn seal(&mut self, new_world: u32) -> bool {
        let mut processes = vec![FAILED; to_usize(new_world)];
        // Processes are numbered as u32s (`0u32..`): the old world and the
        // spares after it fit a u32 (`Job::new` checks the sum).
        for (p, &f) in (0u32..).zip(&self.fates) {
            if f < IDLE {
                match processes.get_mut(to_usize(f)) {
                    Some(slot) if *slot == FAILED => *slot = p,
                    _ => return false,
                }
            }
        }
        let whole = processes.iter().all(|&p| p != FAILED);
        self.processes = processes;
        whole
    }

    /// The old job's ranks.
    pub fn old_world(&self) -> u32 {
        self.old_world
    }

    /// Every process: the old job's and the spares'.
    pub fn len(&self) -> u32 {
        // Built from `old_world + spares` processes, a sum checked to fit
        // a u32 (`Job::new`).
        u32::try_from(self.fates.len()).unwrap_or(u32::MAX)
    }

    /// Whether there is no process at all.
    pub fn is_empty(&self) -> bool {
        self.fates.is_empty()
    }

    /// The new layout's ranks.
    pub fn new_world(&self) -> u32 {
        // Built from the new layout's world size, a u32.
        u32::try_from(self.processes.len()).unwrap_or(u32::MAX)
    }

    /// What becomes of process `p` (`None` past the last spare).
    pub fn fate(&self, p: u32) -> Option<Fate> {
        self.fates.get(to_usize(p)).map(|&f| match f {
            FAILED => Fate::Failed,
            IDLE => Fate::Idle,
            n => Fate::Rank(n),
        })
    }

    /// The new rank of process `p`, if it has one.
    pub fn new_rank(&self, p: u32) -> Option<u32> {
        match self.fate(p)? {
            Fate::Rank(n) => Some(n),
            Fate::Idle | Fate::Failed => None,
        }
    }

    /// The process that runs new rank `n`.
    pub fn process(&self, n: u32) -> Option<u32> {
        self.processes.get(to_usize(n)).copied()
    }

    /// Whether process `p` is a spare (numbered after the old job).
    pub fn is_spare(&self, p: u32) -> bool {
        p >= self.old_world
    }

    /// Every process's new rank, in process order (`None`: idle or failed).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Option<u32>> + '_ {
        self.fates.iter().map(|&f| (f < IDLE).then_some(f))
    }

    /// The raw fates for hashing.
    pub(crate) fn raw(&self) -> &[u32] {
        &self.fates
    }
}
