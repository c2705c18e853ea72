//! The flag groups every command shares: the layout and machine
//! ([`SetupArgs`], with Megatron-LM's names as aliases), the host table
//! the job got ([`MachineArgs`], [`HostsReadArgs`]), the kinds and format
//! of a report ([`OutputArgs`], [`Format`]), and the help text listing
//! every layout's kinds. Each command's own flags are in its file
//! (`commands/*.rs`).

use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, ValueEnum};
use rank_layout::machine::{HostsFormat, HostsReader};
use rank_layout::{Config, ExpertLayout, Layout, Order};
use serde::Serialize;

use crate::megatron::MegatronFlags;
use crate::values::{parse_levels, whole_u32};

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
    #[arg(long, value_name = "FORMAT", default_value = "auto", value_parser = hosts_format())]
    pub hosts_format: HostsFormat,
    /// kubectl: the node label that holds the NVLink domain (default
    /// nvidia.com/gpu.clique).
    #[arg(long, value_name = "LABEL")]
    pub clique_label: Option<String>,
    /// topology-yaml: the topology to read (default: the cluster default).
    #[arg(long, value_name = "NAME")]
    pub topology: Option<String>,
    /// Keep only these hosts of the table, a Slurm hostlist (e.g.
    /// "$SLURM_JOB_NODELIST"); a host the table lacks has no domain (a
    /// warning names it), and a list none of whose hosts the table has is
    /// an error.
    #[arg(long, value_name = "HOSTLIST")]
    pub nodelist: Option<String>,
}

impl HostsReadArgs {
    /// The library's reader of these flags.
    pub fn reader(&self) -> HostsReader {
        let mut reader = HostsReader::new(self.hosts_format);
        if let Some(label) = &self.clique_label {
            reader = reader.clique_label(label);
        }
        if let Some(topology) = &self.topology {
            reader = reader.topology(topology);
        }
        if let Some(list) = &self.nodelist {
            reader = reader.nodelist(list);
        }
        reader
    }
}

/// `--hosts-format`: the library's formats, by name, each with its help.
fn hosts_format() -> impl TypedValueParser<Value = HostsFormat> {
    PossibleValuesParser::new(
        HostsFormat::ALL.map(|f| PossibleValue::new(f.name()).help(f.about())),
    )
    .try_map(|name| name.parse::<HostsFormat>())
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
    /// GPUs per node: ranks [n*N, (n+1)*N) are node n (default 8; with
    /// --hosts, the GPU count the table gives its healthy hosts, needed
    /// when it gives none, as Slurm's topology files do).
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

/// Output format of the reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Text for people.
    Table,
    /// One JSON object.
    Json,
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
