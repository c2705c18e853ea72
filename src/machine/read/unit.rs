//! A unit of Slurm's topology: a switch or a block, as `topology.conf`,
//! `topology.yaml` and `scontrol show topology` list it.

/// A switch or a block: its name, the line it was read from, its nodes and
/// (a switch) its child switches, each a hostlist expression.
#[derive(Debug, Default)]
pub(crate) struct Unit {
    pub line: usize,
    pub name: String,
    pub nodes: Option<String>,
    pub children: Option<String>,
}

impl Unit {
    /// The note for a unit that lists no node (and, a switch, no child
    /// switch), or `None`. Slurm takes such a unit (an empty leaf switch,
    /// an empty block that still counts as a block of `BlockSizes`), so it
    /// is no error, but it holds no host: often a `Nodes=` left out.
    pub fn empty_note(&self, kind: &str) -> Option<String> {
        (self.nodes.is_none() && self.children.is_none()).then(|| {
            format!(
                "line {}: {kind} {:?} lists no node{}: it holds no host",
                self.line,
                self.name,
                if kind == "switch" {
                    " and no switch"
                } else {
                    ""
                }
            )
        })
    }
}
