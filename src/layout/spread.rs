//! Where a kind's groups fall on nodes and domains.

use crate::error::Result;
use crate::kind::Kind;
use crate::layout::Layout;
use crate::plan::spread::{Spread, spread};
use crate::topology::Topology;

impl Layout {
    /// How the groups of `kind` fall on the nodes (and domains) of
    /// `topology`: how many cross a node boundary, and the most nodes one
    /// spans.
    ///
    /// Computed from the grid's strides (each residue of a group's first
    /// rank modulo the node size once) for the grid kinds and their
    /// pipeline ends, and for the joined encoder + decoder kinds (`pp`,
    /// `embd`, `pos-embd`, `tp-pp`) from the strides and the join; only the
    /// strided slices of distributed-optimizer instances that are not boxes
    /// are listed.
    ///
    /// # Errors
    /// [`Error::KindNotInLayout`](crate::Error::KindNotInLayout).
    ///
    /// # Example
    /// ```
    /// use rank_layout::{Config, Kind, Layout, Topology};
    /// // tp=16 on 8-GPU nodes: every tp group spans 2 nodes.
    /// let layout = Layout::new(&Config::new().tp(16).world_size(Some(64)))?;
    /// let tp = layout.spread(Kind::TP, &Topology::new(8, None)?)?;
    /// assert_eq!((tp.groups, tp.cross_node_groups, tp.max_nodes_per_group), (4, 4, 2));
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn spread(&self, kind: Kind, topology: &Topology) -> Result<Spread> {
        Ok(spread(&self.plan(kind)?.plan, topology))
    }
}
