//! The command line: subcommands, their flags (with Megatron-LM's names as
//! aliases) and the help text listing every layout's kinds.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use rank_layout::megatron::MegatronJoin;
use rank_layout::relayout::Policy;
use rank_layout::{Config, ExpertLayout, Layout, Order};
use rank_layout_cli::hosts_file::Format as HostsFormat;
use serde::Serialize;

use crate::megatron::MegatronFlags;
use crate::values::{at_least_one, parse_levels, policy, whole_u32, whole_u64};

/// Process-group rank layouts of distributed training (Megatron-LM
/// ordering) and named meshes (--mesh, DeviceMesh's --device-mesh): print
/// the groups, one rank's view, and check, rank, describe or draw a layout
/// on a machine of nodes and domains before launching it.
#[derive(Debug, Parser)]
#[command(name = "rank-layout", version, about, after_help = kinds_help())]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the groups of every kind (or of the --kind given).
    #[command(after_help = kinds_help())]
    Groups {
        /// The layout and the machine.
        #[command(flatten)]
        setup: SetupArgs,
        /// Kinds and format.
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Print one rank's card: grid, coordinates, node, groups, pipeline
    /// neighbours (computed arithmetically, instant at any size).
    #[command(after_help = kinds_help())]
    Rank {
        /// The rank.
        #[arg(value_parser = whole_u64, allow_negative_numbers = true)]
        rank: u64,
        /// The layout and the machine.
        #[command(flatten)]
        setup: SetupArgs,
        /// Kinds and format.
        #[command(flatten)]
        output: OutputArgs,
        /// The hosts the job got: where the rank runs, and which of its
        /// groups cross a domain.
        #[command(flatten)]
        machine: MachineArgs,
    },
    /// Check where each kind's groups fall on nodes and domains, and warn
    /// when bandwidth-critical groups (tp, cp, ep, etp, gtp_remat) leave a node.
    ///
    /// The table's size is the groups' size; in an encoder + decoder layout
    /// it reads encoder/decoder (2/4: encoder groups of 2, decoder groups of
    /// 4) where the two differ (JSON: "encoder_size" and "decoder_size").
    /// Also warns when the layout's ranks fill the last node, or the last
    /// domain, only partly.
    #[command(after_help = kinds_help())]
    Check {
        /// The layout and the machine.
        #[command(flatten)]
        setup: SetupArgs,
        /// A kind (a mesh's dim set) to check (repeatable); default: every
        /// kind of the layout (every dim set of the mesh).
        #[arg(long = "kind", value_name = "KIND")]
        kinds: Vec<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Kinds that must stay inside a node (replaces the default tp, cp,
        /// ep, etp and weight shards gtp_remat, egtp_remat; hcp-0 instead
        /// of cp with hierarchical cp; a mesh's dims of those names, in the
        /// mesh or a view).
        #[arg(long = "require-intra-node", value_name = "KIND", num_args = 1..)]
        require: Vec<String>,
        /// Exit with status 1 when a kind that must stay inside a node does not.
        #[arg(long)]
        strict: bool,
        /// The hosts the job got: how many groups of each kind cross a
        /// domain (and each topology level) there.
        #[command(flatten)]
        machine: MachineArgs,
    },
    /// Rank every order of the layout's axes (the mesh's dims) by how well
    /// it keeps bandwidth-hungry groups inside nodes and domains, best
    /// first.
    Suggest {
        /// The layout and the machine.
        #[command(flatten)]
        setup: SetupArgs,
        /// What matters most, most important first: tiers separated by ','
        /// and kinds of one tier joined by '+' (default tp,cp+ep+etp,pp,dp;
        /// for a mesh its dim sets, default its dims so named, the others
        /// last).
        #[arg(long, value_name = "TIERS")]
        priority: Option<String>,
        /// Print only the best N orders, N >= 1 (default: all).
        #[arg(long, value_name = "N", value_parser = at_least_one, allow_negative_numbers = true)]
        top: Option<u32>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Explain the layout: derived sizes and why, groups per kind, and what
    /// listing every group would cost.
    Describe {
        /// The layout and the machine.
        #[command(flatten)]
        setup: SetupArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Draw the layout: nodes as rows, GPUs as cells labelled with their
    /// rank, one panel per kind, each group its own colour.
    #[command(after_help = kinds_help())]
    Render {
        /// The layout and the machine.
        #[command(flatten)]
        setup: SetupArgs,
        /// A kind to draw (repeatable; default tp, cp, pp, dp; a mesh's
        /// every dim set).
        #[arg(long = "kind", value_name = "KIND")]
        kinds: Vec<String>,
        /// svg: the picture; html: the picture with a legend and a tooltip per cell.
        #[arg(long, value_enum, default_value_t = Picture::Svg)]
        format: Picture,
        /// Draw every rank up to this many; past it, draw the first nodes and
        /// the last and say so in the picture.
        #[arg(long, value_name = "N", default_value_t = 4096, value_parser = at_least_one, allow_negative_numbers = true)]
        max_ranks: u32,
    },
    /// Audit Megatron-LM's encoder + decoder pipeline joins: rebuild the
    /// joined pipelines a Megatron-LM commit makes for the layout, and count
    /// those that mix cp slices or dp replicas and those that pair other tp
    /// ranks than rank-layout's join by coordinates.
    Audit {
        /// The Megatron-LM commit: 2024 (4ff9e66, zip(cycle(...))) or 2025
        /// (5a3b6bcf1f, its block map).
        #[arg(long, value_name = "COMMIT")]
        megatron: MegatronJoin,
        /// The layout (an encoder + decoder one).
        #[command(flatten)]
        setup: SetupArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Print the bridge plan of every edge of a --modules file (or of one
    /// --edge): leaders, pairs, broadcast, cp and gather groups.
    Bridge(BridgeArgs),
    /// Place the layout (or mesh) on the hosts the job got: the node order
    /// that keeps tp, cp and the expert tensor x expert groups (or the
    /// --must-fit kinds) inside NVLink domains, how every kind's groups
    /// then fall, and the launcher files that start each rank there.
    #[command(after_help = HOSTS_HELP)]
    Place(PlaceArgs),
    /// Plan the re-layout after ranks fail: the new layout, every rank's new
    /// rank, and which tp, cp, ep, dp and pp groups are kept, shrunk, new or
    /// gone, under one --policy or every policy side by side
    #[command(after_help = RELAYOUT_HELP)]
    Relayout(RelayoutArgs),
    /// Plan moving a model's tensors from one layout to another (a refit,
    /// a KV handoff, after a failure): every transfer or one rank's, each
    /// piece from a holder near its destination, and the cost
    #[command(after_help = RESHARD_HELP)]
    Reshard(ReshardArgs),
}

/// The policies, for `relayout --help`.
pub const RELAYOUT_HELP: &str = "Policies: drop-replica (drop the data-parallel replicas holding a failed rank; \
tp, cp and pp groups kept, dp groups shrunk), spare (--spare-hosts whole nodes take the failed nodes' places), \
next-grid (the largest valid smaller grid, fewer dp first, then smaller cp, ep, pp or tp), shift-ranks and \
fill-gaps (nvidia-resiliency-ext's ShiftRanks and FillGaps, then the world trimmed to a valid grid). \
Without --policy every policy is compared.";

/// The flags of `relayout`.
#[derive(Debug, Args)]
pub struct RelayoutArgs {
    /// The layout before the failure; --gpus-per-node sizes the nodes (and
    /// the spare nodes).
    #[command(flatten)]
    pub setup: SetupArgs,
    /// The failed ranks: ranks and inclusive ranges, `200-203,517`.
    #[arg(
        long = "failed-ranks",
        value_name = "LIST",
        required_unless_present = "failed_hosts"
    )]
    pub failed_ranks: Option<String>,
    /// Whole spare nodes numbered after the old world, --gpus-per-node
    /// ranks each (without --hosts).
    #[arg(long = "spare-hosts", value_name = "N", default_value_t = 0, value_parser = whole_u32, conflicts_with = "hosts")]
    pub spare_hosts: u32,
    /// The host table the job was placed on (as `place` places it): the
    /// failed hosts' nodes fail, the idle healthy hosts are the spares, and
    /// the spare policy takes a spare of the failed host's domain first.
    #[arg(long, value_name = "FILE")]
    pub hosts: Option<PathBuf>,
    /// Failed hosts of --hosts, comma-separated (each node's ranks fail).
    #[arg(
        long = "failed-hosts",
        value_name = "HOSTS",
        value_delimiter = ',',
        requires = "hosts"
    )]
    pub failed_hosts: Vec<String>,
    /// The policy (default: every policy, side by side).
    #[arg(long, value_name = "POLICY", value_parser = policy)]
    pub policy: Option<Policy>,
    /// The smallest data-parallel size the new layout may have.
    #[arg(long = "min-dp", value_name = "N", default_value_t = 1, value_parser = at_least_one)]
    pub min_dp: u32,
    /// The global batch to keep by gradient accumulation: the new dp times
    /// --micro-batch must divide it.
    #[arg(long = "global-batch", value_name = "N", value_parser = at_least_one)]
    pub global_batch: Option<u32>,
    /// The micro-batch size (with --global-batch).
    #[arg(long = "micro-batch", value_name = "N", default_value_t = 1, value_parser = at_least_one)]
    pub micro_batch: u32,
    /// A kind to classify (repeatable; `all`: every kind of the layout;
    /// default: tp, cp, ep, dp, pp, and etp, edp with experts, those of
    /// more than one rank per group).
    #[arg(long = "kind", value_name = "KIND")]
    pub kinds: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// The host table's formats, for `place --help`.
pub const HOSTS_HELP: &str = "Host table (--hosts FILE): one host per line, `host domain [gpus] [state]` \
(host may be a Slurm hostlist, gb[001-018]), `#` comments; domain `-` or `unknown` for none, or keys from the outermost joined by `/` \
(`cluster1/rack07`); state `up` (default) or `down`/`drain`. Or JSON: a list of \
{\"host\", \"domain\" (or \"keys\": [...]), \"gpus\", \"healthy\"}. \
Other formats by --hosts-format: nvidia-smi, topology-conf, topology-yaml, scontrol, \
slurm-topology-addr, kubectl (see docs/semantics.md, section 10).";

/// The flags of `place`.
#[derive(Debug, Args)]
pub struct PlaceArgs {
    /// The layout (or mesh); --gpus-per-node when the table gives no GPUs.
    #[command(flatten)]
    pub setup: SetupArgs,
    /// The host table.
    #[arg(long, value_name = "FILE")]
    pub hosts: PathBuf,
    /// How to read it.
    #[command(flatten)]
    pub hosts_read: HostsReadArgs,
    /// A kind that must stay inside a domain (repeatable; default: tp, cp
    /// and etp-ep of a layout, the tp, cp, ep dims of a mesh).
    #[arg(long = "must-fit", value_name = "KIND")]
    pub must_fit: Vec<String>,
    /// When the domains cannot hold every unit whole: straddle (use every
    /// rank, fewest crossing groups), shrink (a smaller dp that idles the
    /// remainders; layouts only) or fail (exit 2).
    #[arg(long, value_enum, default_value_t = OnShortfall::Straddle)]
    pub on_shortfall: OnShortfall,
    /// Output format of the report.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Print this launcher file instead of the report (its command line
    /// goes to stderr).
    #[arg(long, value_enum)]
    pub emit: Option<Emit>,
}

/// `check --hosts` and `rank --hosts`: the host table the job got, and the
/// order its ranks run in on it.
#[derive(Debug, Args)]
pub struct MachineArgs {
    /// The host table the job got (as `place --hosts`): ranks run on its
    /// usable hosts in the table's order (names sorted, digits as numbers:
    /// Slurm's order), node after node, unless --placed.
    #[arg(long, value_name = "FILE")]
    pub hosts: Option<PathBuf>,
    /// How to read it.
    #[command(flatten)]
    pub hosts_read: HostsReadArgs,
    /// The job runs in `place`'s node order (its default must-fit kinds)
    /// instead of the table's.
    #[arg(long, requires = "hosts")]
    pub placed: bool,
}

/// How to read the `--hosts` file: its format and what some formats take.
#[derive(Debug, Args)]
pub struct HostsReadArgs {
    /// The --hosts file's format.
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "auto")]
    pub hosts_format: HostsFormat,
    /// kubectl: the node label that holds the NVLink domain.
    #[arg(long, value_name = "LABEL")]
    pub clique_label: Option<String>,
    /// topology-yaml: the topology to read (default: the cluster default).
    #[arg(long, value_name = "NAME")]
    pub topology: Option<String>,
    /// Keep only these hosts of the table, a Slurm hostlist (e.g.
    /// "$SLURM_JOB_NODELIST"); a host the table lacks has no domain.
    #[arg(long, value_name = "HOSTLIST")]
    pub nodelist: Option<String>,
}

impl HostsReadArgs {
    /// The reader's options.
    pub fn options(&self) -> rank_layout_cli::hosts_file::Options {
        rank_layout_cli::hosts_file::Options {
            format: self.hosts_format,
            clique_label: self.clique_label.clone(),
            topology: self.topology.clone(),
            nodelist: self.nodelist.clone(),
        }
    }
}

/// `place --on-shortfall`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnShortfall {
    /// Every rank used; the fewest units straddle domains.
    Straddle,
    /// A smaller job (fewer data-parallel replicas) that fits whole.
    Shrink,
    /// Exit 2.
    Fail,
}

/// `place --emit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Emit {
    /// Slurm's SLURM_HOSTFILE (srun --distribution=arbitrary).
    SlurmHostfile,
    /// An Open MPI rankfile.
    Rankfile,
    /// torchrun's host -> --node-rank table (--rdzv-backend=static).
    Torchrun,
    /// dlrover's {host: domain} JSON.
    Dlrover,
    /// A rank map for torch DeviceMesh's mesh= tensor (entry r: the rank,
    /// launched in host name order, that plays logical rank r).
    DeviceMesh,
}

/// The layout keys (the same as a `--config` file's) and the machine.
///
/// Serialized, the flags given are the keys that override the file's: the
/// field names are the file's keys, so a new key is one new field here
/// (see [`crate::config`]).
#[derive(Debug, Args, Serialize)]
pub struct SetupArgs {
    /// Tensor-parallel size (default 1).
    #[arg(long, value_name = "N", value_parser = whole_u32, allow_negative_numbers = true)]
    pub tp: Option<u32>,
    /// Context-parallel size (default 1).
    #[arg(long, value_name = "N", value_parser = whole_u32, allow_negative_numbers = true)]
    pub cp: Option<u32>,
    /// Expert-parallel size (default 1).
    #[arg(long, value_name = "N", value_parser = whole_u32, allow_negative_numbers = true)]
    pub ep: Option<u32>,
    /// Data-parallel size (default: derived from --world-size, else 1).
    #[arg(long, value_name = "N", value_parser = whole_u32, allow_negative_numbers = true)]
    pub dp: Option<u32>,
    /// Pipeline-parallel size (default 1).
    #[arg(long, value_name = "N", value_parser = whole_u32, allow_negative_numbers = true)]
    pub pp: Option<u32>,
    /// World size: derives dp, or is checked against it.
    #[arg(long, value_name = "N", value_parser = whole_u32, allow_negative_numbers = true)]
    pub world_size: Option<u32>,
    /// Axis order, first fastest (default tp-cp-ep-dp-pp).
    #[arg(long, value_name = "ORDER")]
    pub order: Option<Order>,
    /// First rank (default 0), of the layout or the mesh.
    #[arg(long, value_name = "N", value_parser = whole_u32, allow_negative_numbers = true)]
    pub rank_offset: Option<u32>,
    /// Encoder tensor-parallel size: makes an encoder + decoder layout.
    #[arg(
        long,
        value_name = "N",
        value_parser = whole_u32,
        allow_negative_numbers = true
    )]
    pub encoder_tp: Option<u32>,
    /// Encoder pipeline-parallel size: makes an encoder + decoder layout.
    #[arg(
        long,
        value_name = "N",
        value_parser = whole_u32,
        allow_negative_numbers = true
    )]
    pub encoder_pp: Option<u32>,
    /// folded (default: Megatron-Core) or nested (Megatron-LM 2024).
    #[arg(long, value_name = "LAYOUT")]
    pub expert_layout: Option<ExpertLayout>,
    /// Expert tensor-parallel size (folded; default tp).
    #[arg(long, value_name = "N", value_parser = whole_u32, allow_negative_numbers = true)]
    pub etp: Option<u32>,
    /// Hierarchical context-parallel sizes, innermost first: S0,S1,... (or
    /// Megatron-LM's space-separated S0 S1 ...).
    #[arg(
        long,
        value_name = "S0,S1,...",
        num_args = 1..,
        value_parser = parse_levels,
        allow_negative_numbers = true
    )]
    #[serde(serialize_with = "flat_levels")]
    pub hierarchical_cp: Option<Vec<Vec<u32>>>,
    /// Distributed-optimizer instances (folded).
    #[arg(
        long,
        value_name = "N",
        value_parser = whole_u32,
        allow_negative_numbers = true
    )]
    pub dist_opt_instances: Option<u32>,
    /// Weight shards per tensor-parallel rank (Megatron-Core 0.19's GTP
    /// axis after tp; default 1): Megatron-LM's
    /// --tensor-parallel-num-weight-shards is tp * gtp_remat.
    #[arg(
        long,
        value_name = "N",
        value_parser = whole_u32,
        allow_negative_numbers = true
    )]
    pub gtp_remat: Option<u32>,
    /// Expert weight shards per expert-tensor-parallel rank (folded; after
    /// ep; default 1): --expert-tensor-parallel-num-weight-shards is etp *
    /// expert_gtp_remat.
    #[arg(
        long,
        value_name = "N",
        value_parser = whole_u32,
        allow_negative_numbers = true
    )]
    pub expert_gtp_remat: Option<u32>,
    /// GPUs per node: ranks [n*N, (n+1)*N) are node n (default 8).
    #[arg(long, value_name = "N", help_heading = "Machine", value_parser = whole_u32, allow_negative_numbers = true)]
    pub gpus_per_node: Option<u32>,
    /// Nodes per domain: an NVLink domain or rack (a GB200 NVL72 rack is 18
    /// nodes of 4 GPUs: --gpus-per-node 4 --nodes-per-domain 18).
    #[arg(long, value_name = "M", help_heading = "Machine", value_parser = whole_u32, allow_negative_numbers = true)]
    pub nodes_per_domain: Option<u32>,
    /// A named mesh instead of a layout, first dim fastest (Megatron's and
    /// HyperCommGrid's order): tp=2,cp=2,dp=4.
    #[arg(long, value_name = "DIMS", help_heading = "Mesh")]
    pub mesh: Option<String>,
    /// A named mesh in PyTorch DeviceMesh's order, the last dim fastest:
    /// pp=2,dp=4,tp=2 (init_device_mesh's shape and mesh_dim_names).
    #[arg(long, value_name = "DIMS", help_heading = "Mesh")]
    pub device_mesh: Option<String>,
    /// Another factorisation of the mesh's ranks (repeatable):
    /// expert:etp=1,ep=4,edp=2,pp; a dim without a size (or named like
    /// one of the mesh's) is the mesh's, and must enumerate the same ranks.
    #[arg(long = "view", value_name = "NAME:DIMS", help_heading = "Mesh")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub views: Vec<String>,
    /// A named dim set (repeatable): dp_cp=dp,cp (or name=view:dims), then
    /// usable as --kind dp_cp.
    #[arg(long = "flatten", value_name = "NAME=DIMS", help_heading = "Mesh")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flattens: Vec<String>,
    /// A JSON or TOML file with the same keys (snake_case: tp, world_size,
    /// gpus_per_node, mesh, views, ...; Megatron-LM's names too:
    /// tensor_model_parallel_size, ...); flags override it.
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// A TOML or JSON file of named modules on rank spans and the edges
    /// between them (examples/mimo.toml): the command answers module by
    /// module, with the bridges; not with the layout or mesh flags.
    #[arg(long, value_name = "FILE", help_heading = "Modules")]
    #[serde(skip)]
    pub modules: Option<PathBuf>,
    /// A whole Megatron-LM command line or launch script (quoted), read as
    /// bash reads its words, unexpanded: its parallelism arguments are used
    /// (listed on stderr), torchrun's --nproc-per-node times --nnodes is
    /// the world size, arguments that change the groups in a way
    /// rank-layout does not model are errors, the others are ignored; the
    /// flags override it.
    #[arg(long, value_name = "COMMAND LINE", allow_hyphen_values = true)]
    #[serde(skip)]
    pub megatron_args: Option<String>,
    /// The Megatron-LM arguments given as flags, named by the library's table.
    #[command(flatten)]
    #[serde(skip)]
    pub megatron: MegatronFlags,
}

/// The flags of `bridge`.
#[derive(Debug, Args)]
pub struct BridgeArgs {
    /// The modules file (TOML or JSON, as for --modules elsewhere).
    #[arg(long, value_name = "FILE")]
    pub modules: PathBuf,
    /// Only this edge: SRC:DST (module names).
    #[arg(long, value_name = "SRC:DST")]
    pub edge: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Table format: list every member and every group instead of
    /// shortening long lists.
    #[arg(long)]
    pub full: bool,
}

/// Output format of the reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Text for people.
    Table,
    /// One JSON object.
    Json,
}

/// Output format of `render`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Picture {
    /// A standalone SVG picture.
    Svg,
    /// An HTML page: the picture, a legend and a tooltip per cell.
    Html,
}

/// Kinds, format and length of a report.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// A kind to print (repeatable), or a mesh's dim set; default: every
    /// kind of the layout (every dim, view dim and flatten of the mesh).
    #[arg(long = "kind", value_name = "KIND")]
    pub kinds: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Table format: list every member and every group instead of
    /// shortening long lists.
    #[arg(long)]
    pub full: bool,
}

/// Serializes the `--hierarchical-cp` values as one list of levels.
fn flat_levels<S: serde::Serializer>(
    levels: &Option<Vec<Vec<u32>>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match levels {
        Some(values) => s.collect_seq(values.iter().flatten()),
        None => s.serialize_none(),
    }
}

/// The help text listing the `--kind` names of each layout.
pub fn kinds_help() -> String {
    let names = |config: Config| {
        Layout::new(&config)
            .map(|l| {
                l.kinds()
                    .iter()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default()
    };
    let nested = Config::new().expert_layout(ExpertLayout::Nested);
    let encoder = Config::new().encoder_tp(1);
    format!(
        "Kinds (--kind) of each layout:\n  \
         folded (default):  {}\n  \
         nested:            {}\n  \
         encoder+decoder:   {}\n  \
         with --hierarchical-cp S0,S1,...: hcp-0 hcp-1 ... (one per level)\n  \
         with --dist-opt-instances N > 1 (folded): dp-cp-intra edp-intra dp-cp-inter dist-opt-instance\n  \
         (dp-cp-intra dp-cp-inter with an encoder)\n  \
         and any set of the layout's axes joined by '-' (tp-cp-pp; cp-dp is dp-cp)\n  \
         with --mesh or --device-mesh: any set of its dims joined by '-' (cp-dp),\n  \
         a view's dims after its name (expert:ep), a flatten's name (dp_cp)",
        names(Config::default()),
        names(nested),
        names(encoder)
    )
}

/// What `reshard --help` adds.
pub const RESHARD_HELP: &str = "The layouts are files with the keys of --config (tp, cp, ep, etp, pp, dp, world_size, \
rank_offset, order, ..., or Megatron-LM's names); rank r of a layout is process r, so layouts at different \
rank_offsets are disjoint and at the same collocated. The model is a --tensors file (JSON: num_layers, \
num_experts, tensors with name, shape, element_bytes, layer, tp_dim, tp_stride or tp_sizes, expert or ep_dim, \
pp_dim, gtp, dp_dim) or Megatron-LM's model arguments (--model-args). --from-layers and --to-layers take \
Megatron-LM's layer arguments for one side (--decoder-first-pipeline-num-layers N, \
--decoder-last-pipeline-num-layers N, --num-virtual-stages-per-pipeline-rank V, \
--pipeline-model-parallel-layout L, ...); default: those of --model-args, else the even split. \
After a failure: --failed-ranks and --policy plan the re-layout of --from and reshard onto its new layout \
(no --to).";

/// The flags of `reshard`.
#[derive(Debug, Args)]
pub struct ReshardArgs {
    /// The layout the tensors are in (a file with the keys of --config).
    #[arg(long, value_name = "FILE")]
    pub from: PathBuf,
    /// The layout they go to.
    #[arg(long, value_name = "FILE", required_unless_present = "failed_ranks")]
    pub to: Option<PathBuf>,
    /// The model's tensors (JSON).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "model_args",
        conflicts_with = "model_args"
    )]
    pub tensors: Option<PathBuf>,
    /// The model as Megatron-LM's arguments (a GPT or MoE: --num-layers,
    /// --hidden-size, --num-attention-heads, --vocab-size, ...), pasted.
    #[arg(long = "model-args", value_name = "TEXT", allow_hyphen_values = true)]
    pub model_args: Option<String>,
    /// Megatron-LM's layer arguments of the --from side.
    #[arg(long = "from-layers", value_name = "TEXT", allow_hyphen_values = true)]
    pub from_layers: Option<String>,
    /// Megatron-LM's layer arguments of the --to side.
    #[arg(long = "to-layers", value_name = "TEXT", allow_hyphen_values = true)]
    pub to_layers: Option<String>,
    /// GPUs (processes) per node.
    #[arg(long = "gpus-per-node", value_name = "N", default_value_t = 8, value_parser = whole_u32)]
    pub gpus_per_node: u32,
    /// Nodes per NVLink domain (default: none; a node is its own).
    #[arg(long = "nodes-per-domain", value_name = "M", value_parser = whole_u32)]
    pub nodes_per_domain: Option<u32>,
    /// A host table (plain text): process p runs on the host of logical
    /// node p / --gpus-per-node, the table's hosts in order; its domains
    /// are the hosts'.
    #[arg(long, value_name = "FILE", conflicts_with = "nodes_per_domain")]
    pub hosts: Option<PathBuf>,
    /// Only this process's transfers (the same ids), and their cost.
    #[arg(long, value_name = "R", value_parser = whole_u32)]
    pub rank: Option<u32>,
    /// The ranks of --from that failed (`200-203,517`): reshard onto the
    /// re-layout's new layout.
    #[arg(
        long = "failed-ranks",
        value_name = "LIST",
        requires = "policy",
        conflicts_with = "to"
    )]
    pub failed_ranks: Option<String>,
    /// The re-layout policy after --failed-ranks.
    #[arg(long, value_name = "POLICY", value_parser = policy, requires = "failed_ranks")]
    pub policy: Option<Policy>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}
