//! The launcher files of a placement: each starts logical rank `r` on the
//! host of its node, GPU `r mod G`.

use crate::cast::to_u64;
use crate::machine::hosts::Hosts;
use crate::machine::place::NodePlan;

/// A launcher file format. New formats may be added: a `match` on it
/// needs a `_` arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Launcher {
    /// Slurm's `SLURM_HOSTFILE` for `srun --distribution=arbitrary`: one
    /// host per task, in rank order.
    SlurmHostfile,
    /// An Open MPI rankfile: `rank r=host slot=l`.
    Rankfile,
    /// torchrun with `--rdzv-backend=static`: `host node_rank` per line
    /// (c10d rendezvous ignores `--node-rank`: it orders agents itself).
    Torchrun,
    /// dlrover's `{host: domain}` JSON (`DLROVER_GROUP_TOPOLOGY_FILE`);
    /// hosts of an unknown domain are left out.
    Dlrover,
    /// A rank map for torch's `DeviceMesh` (or `Mesh`), for a job launched
    /// without the placement (ranks in the table's host order): a JSON list
    /// whose entry `r` is the launched rank that plays logical rank `r`, so
    /// `torch.tensor(map).reshape(dims)` is the `mesh=` tensor. Launched
    /// ranks are the plan's hosts in the table's canonical order, `G` per
    /// host, GPU = local rank (what `srun` over the job's nodelist or a
    /// hostfile in name order starts). torch sorts a group's members by
    /// rank, so inside each group the local ranks follow the launched
    /// ranks, not the mesh's order.
    DeviceMesh,
}

impl Launcher {
    /// Every format, in the order of [`Launcher::name`]s.
    pub const ALL: [Launcher; 5] = [
        Launcher::SlurmHostfile,
        Launcher::Rankfile,
        Launcher::Torchrun,
        Launcher::Dlrover,
        Launcher::DeviceMesh,
    ];

    /// Its name on the command line (`slurm-hostfile`, `rankfile`,
    /// `torchrun`, `dlrover`, `device-mesh`).
    pub fn name(self) -> &'static str {
        match self {
            Launcher::SlurmHostfile => "slurm-hostfile",
            Launcher::Rankfile => "rankfile",
            Launcher::Torchrun => "torchrun",
            Launcher::Dlrover => "dlrover",
            Launcher::DeviceMesh => "device-mesh",
        }
    }

    /// The format named `name`.
    pub fn from_name(name: &str) -> Option<Launcher> {
        Launcher::ALL.into_iter().find(|l| l.name() == name)
    }

    /// The file's text for `plan` on `hosts`.
    ///
    /// ```
    /// use rank_layout::machine::{place, Hosts, KindGroups, Launcher, PlaceOptions};
    /// let hosts = Hosts::parse_plain("b r1 2\na r0 2\n")?;
    /// let plan = place(4, &[], &[], &hosts, &PlaceOptions::default())?;
    /// assert_eq!(Launcher::SlurmHostfile.file(&plan, &hosts), "a\na\nb\nb\n");
    /// assert_eq!(Launcher::Rankfile.file(&plan, &hosts).lines().nth(1), Some("rank 1=a slot=1"));
    /// assert_eq!(Launcher::Torchrun.file(&plan, &hosts), "a 0\nb 1\n");
    /// assert_eq!(Launcher::Dlrover.file(&plan, &hosts), "{\"a\": \"r0\", \"b\": \"r1\"}\n");
    /// assert_eq!(Launcher::DeviceMesh.file(&plan, &hosts), "[0, 1, 2, 3]\n");
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    pub fn file(self, plan: &NodePlan, hosts: &Hosts) -> String {
        let name = |h: usize| hosts.get(h).map(|h| h.name.as_str()).unwrap_or("?");
        let g = plan.gpus_per_node;
        let mut out = String::new();
        match self {
            Launcher::SlurmHostfile => {
                for &h in &plan.node_hosts {
                    for _ in 0..g {
                        out.push_str(name(h));
                        out.push('\n');
                    }
                }
            }
            Launcher::Rankfile => {
                for (n, &h) in plan.node_hosts.iter().enumerate() {
                    for l in 0..g {
                        let r = to_u64(n) * u64::from(g) + u64::from(l);
                        out.push_str(&format!("rank {r}={} slot={l}\n", name(h)));
                    }
                }
            }
            Launcher::Torchrun => {
                for (n, &h) in plan.node_hosts.iter().enumerate() {
                    out.push_str(&format!("{} {n}\n", name(h)));
                }
            }
            Launcher::Dlrover => {
                let mut entries: Vec<(&str, &str)> = plan
                    .node_hosts
                    .iter()
                    .filter_map(|&h| hosts.get(h))
                    .filter_map(|h| h.domain().map(|d| (h.name.as_str(), d)))
                    .collect();
                entries.sort_unstable();
                out.push('{');
                for (i, (host, domain)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&format!("{}: {}", json_string(host), json_string(domain)));
                }
                out.push_str("}\n");
            }
            Launcher::DeviceMesh => {
                let ranks: Vec<String> = launched_ranks(plan).iter().map(u64::to_string).collect();
                out.push('[');
                out.push_str(&ranks.join(", "));
                out.push_str("]\n");
            }
        }
        out
    }

    /// The command line that uses the file saved as `path`, for a job of
    /// `plan`'s nodes (`...` where the program goes).
    pub fn command(self, plan: &NodePlan, hosts: &Hosts, path: &str) -> String {
        let g = plan.gpus_per_node;
        let nodes = plan.node_hosts.len();
        let ranks = to_u64(nodes) * u64::from(g);
        match self {
            Launcher::SlurmHostfile => format!(
                "SLURM_HOSTFILE={path} srun --distribution=arbitrary --ntasks={ranks} --nodes={nodes} ... \
                 (allocate with sbatch --segment={} so each unit of nodes shares a domain)",
                plan.unit_nodes
            ),
            Launcher::Rankfile => {
                format!("mpirun --rankfile {path} -n {ranks} ...")
            }
            Launcher::Torchrun => {
                let first = plan
                    .node_hosts
                    .first()
                    .and_then(|&h| hosts.get(h))
                    .map(|h| h.name.as_str())
                    .unwrap_or("HOST0");
                format!(
                    "on each host of {path}: torchrun --nnodes={nodes} --nproc-per-node={g} --node-rank=<its node_rank> \
                     --rdzv-backend=static --master-addr={first} --master-port=29500 ... \
                     (c10d rendezvous ignores --node-rank and orders hosts itself)"
                )
            }
            Launcher::Dlrover => format!("DLROVER_GROUP_TOPOLOGY_FILE={path} dlrover-run ..."),
            Launcher::DeviceMesh => format!(
                "launch {ranks} ranks on the {nodes} hosts in name order ({g} per host), then in each: \
                 mesh = DeviceMesh(\"cuda\", torch.tensor(json.load(open(\"{path}\"))).reshape(<dims, outermost first>), \
                 mesh_dim_names=(...)); warning: torch sorts each group's members by rank, so a group's \
                 local ranks follow the launched ranks, not the mesh's order"
            ),
        }
    }
}

/// The launched rank of each logical rank: the plan's hosts in the table's
/// canonical order (host indices ascending), `G` ranks per host, GPU =
/// local rank.
fn launched_ranks(plan: &NodePlan) -> Vec<u64> {
    let g = u64::from(plan.gpus_per_node);
    let mut by_index: Vec<(usize, usize)> = plan
        .node_hosts
        .iter()
        .enumerate()
        .map(|(node, &host)| (host, node))
        .collect();
    by_index.sort_unstable();
    // Logical node -> its host's position among the plan's hosts.
    let mut position = vec![0u64; plan.node_hosts.len()];
    for (p, &(_, node)) in by_index.iter().enumerate() {
        if let Some(slot) = position.get_mut(node) {
            *slot = to_u64(p);
        }
    }
    position
        .iter()
        .flat_map(|&p| (0..g).map(move |l| p * g + l))
        .collect()
}

/// `s` as a JSON string.
pub(crate) fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
