//! `rank-layout reshard`: the plan that moves a model's tensors from one
//! layout to another (or onto the layout after a failure): every transfer,
//! or one rank's, and what it costs.

use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use clap::{Args, FromArgMatches};
use rank_layout::machine::NodePlan;
use rank_layout::megatron::MegatronArgs;
use rank_layout::relayout::{self, Failure as Lost, Policy, RelayoutOptions, parse_rank_list};
use rank_layout::reshard::{
    Cost, CostTally, GptModel, LayerSplit, Locality, Model, Reshard, Side, Transfer,
};
use rank_layout::{Layout, Topology};
use serde_json::{Value, json};

use crate::args::{Format, HostsReadArgs, SetupArgs};
use crate::error::{Failure, Outcome};
use crate::hosts_file;
use crate::input::Input;
use crate::target::Target;
use crate::values::{policy, whole_u32};

/// What `reshard --help` adds.
const RESHARD_HELP: &str = "The layouts are files with the keys of --config (tp, cp, ep, etp, pp, dp, world_size, \
rank_offset, order, ..., or Megatron-LM's names); rank r of a layout is process r, so layouts at different \
rank_offsets are disjoint and at the same collocated. The model is a --tensors file (JSON: num_layers, \
num_experts, tensors with name, shape, element_bytes, layer, tp_dim, tp_stride or tp_sizes, expert or ep_dim, \
pp_dim, gtp, dp_dim) or Megatron-LM's model arguments (--model-args). --from-layers and --to-layers take \
Megatron-LM's layer arguments for one side (--decoder-first-pipeline-num-layers N, \
--decoder-last-pipeline-num-layers N, --num-virtual-stages-per-pipeline-rank V, \
--pipeline-model-parallel-layout L, ...); default: those of --model-args, else the even split. \
After a failure: --failed-ranks and --policy plan the re-layout of --from and reshard onto its new layout \
(no --to).";

/// Plan moving a model's tensors from one layout to another (a refit, a
/// KV handoff, after a failure): every transfer or one rank's, each piece
/// from a holder near its destination, and the cost.
#[derive(Debug, Args)]
#[command(after_help = RESHARD_HELP)]
pub struct ReshardArgs {
    /// The layout the tensors are in (a file with the keys of --config).
    #[arg(long, value_name = "FILE")]
    from: PathBuf,
    /// The layout they go to.
    #[arg(long, value_name = "FILE", required_unless_present = "failed_ranks")]
    to: Option<PathBuf>,
    /// The model's tensors (JSON).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "model_args",
        conflicts_with = "model_args"
    )]
    tensors: Option<PathBuf>,
    /// The model as Megatron-LM's arguments (a GPT or MoE: --num-layers,
    /// --hidden-size, --num-attention-heads, --vocab-size, ...), pasted.
    #[arg(long = "model-args", value_name = "TEXT", allow_hyphen_values = true)]
    model_args: Option<String>,
    /// Megatron-LM's layer arguments of the --from side.
    #[arg(long = "from-layers", value_name = "TEXT", allow_hyphen_values = true)]
    from_layers: Option<String>,
    /// Megatron-LM's layer arguments of the --to side.
    #[arg(long = "to-layers", value_name = "TEXT", allow_hyphen_values = true)]
    to_layers: Option<String>,
    /// GPUs (processes) per node.
    #[arg(long = "gpus-per-node", value_name = "N", default_value_t = 8, value_parser = whole_u32)]
    gpus_per_node: u32,
    /// Nodes per NVLink domain (default: none; a node is its own).
    #[arg(long = "nodes-per-domain", value_name = "M", value_parser = whole_u32)]
    nodes_per_domain: Option<u32>,
    /// A host table: process p runs on the host of logical node p /
    /// --gpus-per-node, the table's hosts in order; its domains are the
    /// hosts'.
    #[arg(long, value_name = "FILE", conflicts_with = "nodes_per_domain")]
    hosts: Option<PathBuf>,
    /// How to read it.
    #[command(flatten)]
    hosts_read: HostsReadArgs,
    /// Only this process's transfers (the same ids), and their cost.
    #[arg(long, value_name = "R", value_parser = whole_u32)]
    rank: Option<u32>,
    /// The ranks of --from that failed (`200-203,517`): reshard onto the
    /// re-layout's new layout.
    #[arg(
        long = "failed-ranks",
        value_name = "LIST",
        requires = "policy",
        conflicts_with = "to"
    )]
    failed_ranks: Option<String>,
    /// The re-layout policy after --failed-ranks.
    #[arg(long, value_name = "POLICY", value_parser = policy, requires = "failed_ranks")]
    policy: Option<Policy>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}


/// Runs `reshard`.
///
/// # Errors
/// Every error of the layouts, the model and the plan (exit status 2).
pub fn run(args: &ReshardArgs) -> Result<Outcome, Failure> {
    let from = layout(&args.from, "--from")?;
    let (model, model_layers) = model(args, &from, args.to.as_deref())?;
    let layers = |given: &Option<String>, flag: &str| -> Result<LayerSplit, Failure> {
        match given {
            Some(text) => {
                let a = MegatronArgs::parse_command_line(text)
                    .map_err(|e| Failure::Message(format!("{flag}: {e}")))?;
                Ok(LayerSplit::from_megatron_args(&a)?)
            }
            None => Ok(model_layers.clone()),
        }
    };
    let from_layers = layers(&args.from_layers, "--from-layers")?;
    let to_layers = layers(&args.to_layers, "--to-layers")?;
    let (from_side, to_side) = match (&args.to, &args.failed_ranks, args.policy) {
        (Some(path), _, _) => (
            Side::new(from).layers(from_layers),
            Side::new(layout(path, "--to")?).layers(to_layers),
        ),
        (None, Some(list), Some(policy)) => {
            let failed = parse_rank_list(list)
                .map_err(|e| Failure::Message(format!("--failed-ranks: {e}")))?;
            let lost = Lost::new(args.gpus_per_node, failed);
            lost.check(&from)?;
            let plan = relayout::relayout(&from, &lost, policy, &RelayoutOptions::default())?;
            (
                Side::before(&plan).layers(from_layers),
                Side::after(&plan)?.layers(to_layers),
            )
        }
        _ => {
            return Err(Failure::Message(
                "give --to, or --failed-ranks with --policy".to_string(),
            ));
        }
    };
    let locality = locality(args, &from_side, &to_side)?;
    let plan = Reshard::new(model, from_side, to_side, locality)?;
    match args.rank {
        Some(r) => {
            let mine = plan.plan_of(r)?.all();
            write(&plan, mine.into_iter().map(Ok), Some(r), args.format)
        }
        None => write(&plan, plan.transfers(), None, args.format),
    }?;
    Ok(Outcome::Done)
}

/// The layout of the file at `path`, read as `--config` reads it.
fn layout(path: &Path, flag: &str) -> Result<Layout, Failure> {
    let argv = [
        std::ffi::OsStr::new("reshard"),
        std::ffi::OsStr::new("--config"),
        path.as_os_str(),
    ];
    let matches = <SetupArgs as Args>::augment_args(clap::Command::new("reshard"))
        .try_get_matches_from(argv)
        .map_err(|e| Failure::Message(format!("{flag}: {e}")))?;
    let setup = SetupArgs::from_arg_matches(&matches)
        .map_err(|e| Failure::Message(format!("{flag}: {e}")))?;
    match Input::load(&setup)? {
        Input::One {
            target: Target::Layout { layout, .. },
            ..
        } => Ok(layout),
        _ => Err(Failure::Message(format!(
            "{flag} {}: a layout is needed (tp, cp, ep, dp, pp, ...), not a mesh",
            path.display()
        ))),
    }
}

/// The model (from --tensors or --model-args) and the layer split the
/// model's arguments give.
fn model(
    args: &ReshardArgs,
    from: &Layout,
    to: Option<&Path>,
) -> Result<(Model, LayerSplit), Failure> {
    if let Some(path) = &args.tensors {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Failure::Message(format!("--tensors {}: {e}", path.display())))?;
        let model = Model::from_json(&text)
            .map_err(|e| Failure::Message(format!("--tensors {}: {e}", path.display())))?;
        return Ok((model, LayerSplit::even()));
    }
    let text = args.model_args.as_deref().unwrap_or("");
    let margs = MegatronArgs::parse_command_line(text)
        .map_err(|e| Failure::Message(format!("--model-args: {e}")))?;
    let gpt = GptModel::from_megatron_args(&margs)
        .map_err(|e| Failure::Message(format!("--model-args: {e}")))?;
    let mut tps = vec![from.sizes().tp];
    if let Some(path) = to {
        tps.push(layout(path, "--to")?.sizes().tp);
    }
    let model = gpt.model(&tps)?;
    Ok((model, LayerSplit::from_megatron_args(&margs)?))
}

/// Where the processes run: --hosts, or --gpus-per-node and
/// --nodes-per-domain.
fn locality(args: &ReshardArgs, from: &Side, to: &Side) -> Result<Locality, Failure> {
    let topology = Topology::new(args.gpus_per_node, args.nodes_per_domain)?;
    let Some(path) = &args.hosts else {
        return Ok(Locality::new(topology));
    };
    let hosts = hosts_file::read(path, args.hosts_read.reader())?;
    let end = from.layout().rank_end().max(to.layout().rank_end());
    let processes = u32::try_from(end)
        .map_err(|_| Failure::Message("--hosts: the processes pass 2^32".to_string()))?;
    let g = args.gpus_per_node;
    let world = processes.div_ceil(g).saturating_mul(g);
    let plan = NodePlan::plain(world, &hosts, g)?;
    Ok(Locality::hosts(&plan, &hosts))
}

/// One transfer as JSON.
fn transfer_json(plan: &Reshard, t: &Transfer) -> Value {
    let name = plan
        .model()
        .tensor(t.tensor)
        .map_or("", |x| x.name.as_str());
    let region: Vec<[u64; 2]> = (0..t.region.dims())
        .filter_map(|d| t.region.range(d).map(|(lo, hi)| [lo, hi]))
        .collect();
    json!({
        "id": t.id,
        "tensor": name,
        "src": t.src,
        "dst": t.dst,
        "box": region,
        "src_offset": t.src_offset.to_vec(),
        "dst_offset": t.dst_offset.to_vec(),
        "bytes": t.bytes,
        "tier": t.tier.name(),
    })
}

/// The cost's keys.
fn cost_json(cost: &Cost) -> Vec<(&'static str, u64)> {
    vec![
        ("bytes", cost.bytes),
        ("local_bytes", cost.local_bytes),
        ("cross_node_bytes", cost.cross_node_bytes),
        ("cross_domain_bytes", cost.cross_domain_bytes),
        ("max_send_bytes", cost.max_send_bytes),
        ("max_recv_bytes", cost.max_recv_bytes),
        ("messages", cost.messages),
        ("local_copies", cost.local_copies),
    ]
}

/// Writes the transfers (streamed) and their cost.
fn write(
    plan: &Reshard,
    transfers: impl Iterator<Item = rank_layout::Result<Transfer>>,
    rank: Option<u32>,
    format: Format,
) -> Result<(), Failure> {
    let mut out = BufWriter::new(io::stdout().lock());
    let mut tally = CostTally::new();
    let locality = plan.locality();
    match format {
        Format::Json => {
            out.write_all(b"{\"transfers\": [")?;
            for (i, t) in transfers.enumerate() {
                let t = t?;
                tally.add(&t, locality);
                if i > 0 {
                    out.write_all(b", ")?;
                }
                serde_json::to_writer(&mut out, &transfer_json(plan, &t))
                    .map_err(io::Error::from)?;
            }
            out.write_all(b"]")?;
            if let Some(r) = rank {
                write!(out, ", \"rank\": {r}")?;
            }
            for (key, value) in cost_json(&tally.finish()) {
                write!(out, ", \"{key}\": {value}")?;
            }
            writeln!(out, "}}")?;
        }
        Format::Table => {
            let (f, t) = (plan.from().layout(), plan.to().layout());
            writeln!(out, "from {}", describe(f))?;
            writeln!(out, "to   {}", describe(t))?;
            writeln!(
                out,
                "model: {} tensors, {} layers, {} bytes{}",
                plan.model().tensors().len(),
                plan.model().num_layers(),
                plan.model().bytes().unwrap_or(0),
                rank.map_or(String::new(), |r| format!("; process {r}'s transfers"))
            )?;
            writeln!(out)?;
            writeln!(
                out,
                "{:>12}  {:<40} {:>7} {:>7}  {:<6} {:>12}  box",
                "id", "tensor", "src", "dst", "tier", "bytes"
            )?;
            for t in transfers {
                let t = t?;
                tally.add(&t, locality);
                let name = plan
                    .model()
                    .tensor(t.tensor)
                    .map_or("", |x| x.name.as_str());
                writeln!(
                    out,
                    "{:>12}  {:<40} {:>7} {:>7}  {:<6} {:>12}  {}",
                    t.id,
                    name,
                    t.src,
                    t.dst,
                    t.tier.name(),
                    t.bytes,
                    t.region
                )?;
            }
            writeln!(out)?;
            let mut line = String::new();
            for (key, value) in cost_json(&tally.finish()) {
                let _ = write!(line, "{key} {value}  ");
            }
            writeln!(out, "{}", line.trim_end())?;
        }
    }
    out.flush()?;
    Ok(())
}

/// `tp 8 cp 1 ep 1 dp 4 pp 4, ranks 0..127`.
fn describe(l: &Layout) -> String {
    let s = l.sizes();
    format!(
        "tp {} cp {} ep {} etp {} dp {} pp {}, ranks {}..{}",
        s.tp,
        s.cp,
        s.ep,
        s.etp,
        s.dp,
        s.pp,
        l.rank_offset(),
        l.rank_end().saturating_sub(1)
    )
}
