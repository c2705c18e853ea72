//! Slurm's higher block levels: the aggregated blocks the topology/block
//! plugin forms from `BlockSizes=` (topology.conf) or `block_sizes`
//! (topology.yaml), as `src/plugins/topology/block/block_record.c` forms
//! them.

use crate::error::Result;
use crate::machine::hosts::bad;
use crate::machine::read::unit::Unit;

/// The most levels Slurm takes (a block of `2^15` base blocks).
const MAX_LEVEL: u32 = 15;

/// `BlockSizes=` as given: the line it was read from and the sizes, in
/// nodes.
#[derive(Debug, Clone)]
pub(crate) struct BlockSizes {
    pub line: usize,
    pub sizes: Vec<u32>,
}

impl BlockSizes {
    /// Each block's outer keys (of `blocks`, in the order listed: a block's
    /// index is its place), the highest level first: the first size is the
    /// base block's; every other must be a power-of-two multiple of it,
    /// `2^l` base blocks making level `l`. The levels are taken smallest
    /// first, up to the first that holds every block. At level `l`, block
    /// `i` with `i % 2^l == 0` starts an aggregated block of blocks `i ..
    /// i + 2^l`, except a last one shorter than the level whose blocks the
    /// level below already holds whole. An aggregated block's key is
    /// [`span_key`] of its blocks' names; a block in none at a level has the
    /// key it has at the level below (it stands alone there), so every
    /// block has a key at every level.
    ///
    /// # Errors
    /// [`Error::BadHostTable`](crate::Error::BadHostTable) naming the size
    /// that is not a power-of-two multiple of the base block's (up to
    /// `2^15`).
    pub fn outer_keys(&self, blocks: &[Unit]) -> Result<Vec<Vec<String>>> {
        let Some(&base) = self.sizes.first() else {
            return Ok(vec![Vec::new(); blocks.len()]);
        };
        let mut levels = 0u32;
        for &size in &self.sizes {
            let ratio = size / base;
            if size % base != 0 || !ratio.is_power_of_two() || ratio.trailing_zeros() > MAX_LEVEL {
                return Err(bad(
                    self.line,
                    &size.to_string(),
                    &format!(
                        "a block size is the base block's ({base}) times a power of two up to 2^{MAX_LEVEL}"
                    ),
                ));
            }
            levels |= 1 << ratio.trailing_zeros();
        }
        // Sizes in base blocks, smallest first, up to one holding all.
        let mut sizes: Vec<usize> = Vec::new();
        for level in 0..=MAX_LEVEL {
            if levels & (1 << level) != 0 {
                sizes.push(1 << level);
                if sizes.last().is_some_and(|&s| s >= blocks.len()) {
                    break;
                }
            }
        }
        // Level by level, upwards: each block's aggregated block there (its
        // first block and its last), or none.
        let mut keys: Vec<Vec<String>> = vec![Vec::new(); blocks.len()];
        let mut below: Vec<String> = blocks.iter().map(|b| b.name.clone()).collect();
        for pair in sizes.windows(2) {
            let (&[lower, size], n) = (pair, blocks.len()) else {
                continue;
            };
            let mut here = below.clone();
            let mut start = 0;
            while start < n {
                let remaining = n - start;
                let end = start + size.min(remaining);
                if !(size > remaining && lower >= remaining) {
                    let names: Vec<&str> = blocks
                        .get(start..end)
                        .unwrap_or_default()
                        .iter()
                        .map(|b| b.name.as_str())
                        .collect();
                    let name = span_key(&names);
                    for key in here.get_mut(start..end).unwrap_or_default() {
                        key.clone_from(&name);
                    }
                }
                start = end;
            }
            for (k, key) in keys.iter_mut().zip(&here) {
                k.push(key.clone());
            }
            below = here;
        }
        for k in &mut keys {
            k.reverse();
        }
        Ok(keys)
    }
}

/// The key of an aggregated block of consecutive blocks `names`: its first
/// and last block, `b1..b4` (O(1) in its size; one block is its name).
pub(crate) fn span_key(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_string(),
        [first, .., last] => format!("{first}..{last}"),
    }
}
