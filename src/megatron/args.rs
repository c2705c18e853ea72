//! Megatron-LM's parallelism arguments: one table of their names, and how
//! Megatron-Core's defaults turn them into a [`Config`].

use std::fmt;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::megatron::inference_shards::{InferenceShards, ShardMapping, ShardSpec};
use crate::order::Order;

/// The value of one Megatron-LM argument, as a command line, a JSON or TOML
/// file, or Python gives it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MegatronValue {
    /// An integer (sizes).
    Int(i64),
    /// A switch (`--use-tp-pp-dp-mapping`).
    Bool(bool),
    /// A list of integers (`--hierarchical-context-parallel-sizes 2 4`).
    Ints(Vec<i64>),
    /// Text that is none of these (reported in errors).
    Text(String),
}

impl fmt::Display for MegatronValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MegatronValue::Int(n) => write!(f, "{n}"),
            MegatronValue::Bool(b) => write!(f, "{b}"),
            MegatronValue::Ints(list) => {
                let items: Vec<String> = list.iter().map(i64::to_string).collect();
                write!(f, "[{}]", items.join(", "))
            }
            MegatronValue::Text(t) => write!(f, "{t:?}"),
        }
    }
}

/// What kind of value an argument takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ArgType {
    /// One integer.
    Int,
    /// A switch, given without a value on a command line.
    Flag,
    /// One or more integers (`nargs='+'`).
    Ints,
    /// One string (`--inference-shards SPEC`).
    Text,
    /// One or more strings (`--high-priority-stream-groups dp_cp ep_dp`).
    Texts,
}

/// What rank-layout does with an argument of [`MEGATRON_ARGS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Handling {
    /// Read: it sets the [`Config`] key of [`MegatronArg::key`].
    Modelled,
    /// It changes which ranks form Megatron-LM's process groups, and
    /// rank-layout does not model that: given (a flag on a command line, a
    /// value other than `None` or `False` from Python), it is an
    /// [`Error::UnmodelledArgument`] naming it.
    Refused,
    /// Passed to Megatron-Core's group construction, or thought to shape
    /// it, but it does not change which ranks form a group: ignored.
    /// Listed to say so.
    NoGroupChange,
    /// It shapes the model (its layers, sizes, vocabulary, which layers
    /// each pipeline stage holds) and changes no group: kept apart
    /// ([`MegatronArgs::model_args`]) for a reshard's model
    /// ([`GptModel`](crate::reshard::GptModel)) and layer map.
    Model,
    /// Read, but into layouts apart from the [`Config`]: `--inference-shards`
    /// describes inference shards, each a layout of its own
    /// ([`MegatronArgs::inference_shards`]); given, it makes
    /// [`MegatronArgs::config`] an error.
    Separate,
}

/// Where an argument of [`MEGATRON_ARGS`] is defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Source {
    /// Megatron-LM main's `megatron/training/arguments.py` defines the
    /// flag, with the argument's name as its `dest` (checked against
    /// `tests/data/megatron/arguments_d98e8a64dd.json`, commit d98e8a64dd).
    Main,
    /// Earlier Megatron-LM versions defined the flag; main does not.
    Removed,
    /// No Megatron-LM flag: an attribute of Megatron-LM's `args` that it
    /// computes (`world_size` from `WORLD_SIZE`, `data_parallel_size`),
    /// read from Python's `get_args()`; rank-layout accepts it as a flag.
    Attribute,
    /// A flag of torchrun (`torch.distributed.run`), read from a pasted
    /// command line only.
    Torchrun,
}

/// One argument of [`MEGATRON_ARGS`]: its name, flag, what rank-layout
/// does with it and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct MegatronArg {
    /// The argument's name, its `dest` in `megatron.training.arguments`
    /// (`tensor_model_parallel_size`).
    pub name: &'static str,
    /// The command-line flag (`--tensor-model-parallel-size`).
    pub flag: &'static str,
    /// The [`Config`] key it sets (`tp`); empty for an argument not
    /// [`Handling::Modelled`].
    pub key: &'static str,
    /// The value it takes.
    pub takes: ArgType,
    /// For an argument modelled, Megatron-Core's default and meaning; for
    /// the others, what it does to the process groups (or why it does not
    /// change them), in words.
    pub meaning: &'static str,
    /// Modelled, refused, or listed as not changing the groups.
    pub handling: Handling,
    /// Where the flag is defined.
    pub source: Source,
}

/// Every Megatron-LM argument that decides which ranks form a process
/// group, and the arguments that look as if they might but do not: one
/// table behind the command line's flags, configuration files with
/// Megatron-LM names as keys, `--megatron-args` and Python's
/// `Layout.from_megatron_args`.
///
/// The rows [`Handling::Modelled`] are read with Megatron-Core's defaults;
/// those [`Handling::Refused`] are an error naming them; those
/// [`Handling::NoGroupChange`] are ignored, as is every argument not in the
/// table. `tests/megatron.rs` checks the table against Megatron-LM
/// main's parser (d98e8a64dd): every [`Source::Main`] flag exists there with
/// this name and value type, no flag of another source does, and every
/// argument main's `initialize_model_parallel` call reads is in the table.
///
/// ```
/// use rank_layout::megatron::{Handling, MEGATRON_ARGS};
/// let refused: Vec<&str> = MEGATRON_ARGS
///     .iter()
///     .filter(|a| a.handling == Handling::Refused)
///     .map(|a| a.flag)
///     .collect();
/// assert!(refused.contains(&"--hybrid-context-parallel"));
/// ```
pub const MEGATRON_ARGS: &[MegatronArg] = &[
    modelled(
        "tensor_model_parallel_size",
        "--tensor-model-parallel-size",
        "tp",
        ArgType::Int,
        "default 1",
        Source::Main,
    ),
    modelled(
        "pipeline_model_parallel_size",
        "--pipeline-model-parallel-size",
        "pp",
        ArgType::Int,
        "default 1",
        Source::Main,
    ),
    modelled(
        "context_parallel_size",
        "--context-parallel-size",
        "cp",
        ArgType::Int,
        "default 1",
        Source::Main,
    ),
    modelled(
        "expert_model_parallel_size",
        "--expert-model-parallel-size",
        "ep",
        ArgType::Int,
        "default 1",
        Source::Main,
    ),
    modelled(
        "expert_tensor_parallel_size",
        "--expert-tensor-parallel-size",
        "etp",
        ArgType::Int,
        "default: tp (the folded expert grid)",
        Source::Main,
    ),
    modelled(
        "tensor_parallel_num_weight_shards",
        "--tensor-parallel-num-weight-shards",
        "gtp_remat",
        ArgType::Int,
        "each weight's shards over tp and the weight-shard axis: gtp_remat = S / tp; S >= tp and divisible by it; default tp (gtp_remat 1)",
        Source::Main,
    ),
    modelled(
        "expert_tensor_parallel_num_weight_shards",
        "--expert-tensor-parallel-num-weight-shards",
        "expert_gtp_remat",
        ArgType::Int,
        "each expert weight's shards over etp and the expert weight-shard axis: expert_gtp_remat = S / etp; S >= etp and divisible by it; default etp (expert_gtp_remat 1)",
        Source::Main,
    ),
    modelled(
        "data_parallel_size",
        "--data-parallel-size",
        "dp",
        ArgType::Int,
        "derived from the world; checked against it when both are given",
        Source::Attribute,
    ),
    modelled(
        "world_size",
        "--world-size",
        "world_size",
        ArgType::Int,
        "the number of ranks",
        Source::Attribute,
    ),
    modelled(
        "encoder_tensor_model_parallel_size",
        "--encoder-tensor-model-parallel-size",
        "encoder_tp",
        ArgType::Int,
        "0 (the default): tp",
        Source::Removed,
    ),
    modelled(
        "encoder_pipeline_model_parallel_size",
        "--encoder-pipeline-model-parallel-size",
        "encoder_pp",
        ArgType::Int,
        "0 (the default): no encoder",
        Source::Removed,
    ),
    modelled(
        "hierarchical_context_parallel_sizes",
        "--hierarchical-context-parallel-sizes",
        "hierarchical_cp",
        ArgType::Ints,
        "sizes of the context-parallel levels, innermost first; none by default",
        Source::Main,
    ),
    modelled(
        "num_distributed_optimizer_instances",
        "--num-distributed-optimizer-instances",
        "dist_opt_instances",
        ArgType::Int,
        "default 1 (none)",
        Source::Main,
    ),
    modelled(
        "use_tp_pp_dp_mapping",
        "--use-tp-pp-dp-mapping",
        "order",
        ArgType::Flag,
        "order tp-cp-ep-pp-dp instead of tp-cp-ep-dp-pp",
        Source::Main,
    ),
    modelled(
        "nproc_per_node",
        "--nproc-per-node",
        "world_size",
        ArgType::Int,
        "torchrun's processes per node (default 1): the world size is nproc_per_node * nnodes",
        Source::Torchrun,
    ),
    modelled(
        "nnodes",
        "--nnodes",
        "world_size",
        ArgType::Int,
        "torchrun's nodes (default 1); a range MIN:MAX is refused, its world size is not fixed",
        Source::Torchrun,
    ),
    refused(
        "hybrid_context_parallel",
        "--hybrid-context-parallel",
        ArgType::Flag,
        "it adds, in every dp-cp group, subgroups of each power-of-two size (create_hybrid_dp_cp_groups) to balance packed sequences",
        Source::Main,
    ),
    refused(
        "rl_inference_tensor_model_parallel_size",
        "--rl-inference-tensor-model-parallel-size",
        ArgType::Int,
        RL_INFERENCE,
        Source::Main,
    ),
    refused(
        "rl_inference_pipeline_model_parallel_size",
        "--rl-inference-pipeline-model-parallel-size",
        ArgType::Int,
        RL_INFERENCE,
        Source::Main,
    ),
    refused(
        "rl_inference_expert_model_parallel_size",
        "--rl-inference-expert-model-parallel-size",
        ArgType::Int,
        RL_INFERENCE,
        Source::Main,
    ),
    refused(
        "rl_inference_expert_tensor_model_parallel_size",
        "--rl-inference-expert-tensor-model-parallel-size",
        ArgType::Int,
        RL_INFERENCE,
        Source::Main,
    ),
    MegatronArg {
        name: "inference_shards",
        flag: "--inference-shards",
        key: "",
        takes: ArgType::Text,
        meaning: "it partitions the world into inference models, each with groups of its own parallelism (build_inference_pg_collections_for_shards): read as inference shards (MegatronArgs::inference_shards), with --use-tp-pp-dp-mapping as their rank order",
        handling: Handling::Separate,
        source: Source::Main,
    },
    refused(
        "model_parallel_size",
        "--model-parallel-size",
        ArgType::Int,
        "Megatron-LM refuses it too (no longer valid): give --tensor-model-parallel-size",
        Source::Main,
    ),
    refused(
        "pipeline_model_parallel_split_rank",
        "--pipeline-model-parallel-split-rank",
        ArgType::Int,
        "Megatron-LM before July 2025 made it the encoder's pipeline size and also added the split rank to the embedding and position-embedding groups; give --encoder-pipeline-model-parallel-size",
        Source::Removed,
    ),
    ignored(
        "virtual_pipeline_model_parallel_size",
        "--virtual-pipeline-model-parallel-size",
        ArgType::Int,
        "model chunks per pipeline rank (the interleaved schedule): which layers a rank runs, not which ranks form a group; main computes it from the three arguments below",
        Source::Removed,
    ),
    model(
        "num_layers_per_virtual_pipeline_stage",
        "--num-layers-per-virtual-pipeline-stage",
        ArgType::Int,
        LAYERS_ONLY,
        Source::Main,
    ),
    model(
        "num_virtual_stages_per_pipeline_rank",
        "--num-virtual-stages-per-pipeline-rank",
        ArgType::Int,
        LAYERS_ONLY,
        Source::Main,
    ),
    model(
        "pipeline_model_parallel_layout",
        "--pipeline-model-parallel-layout",
        ArgType::Text,
        LAYERS_ONLY,
        Source::Main,
    ),
    model(
        "decoder_first_pipeline_num_layers",
        "--decoder-first-pipeline-num-layers",
        ArgType::Int,
        LAYERS_ONLY,
        Source::Main,
    ),
    model(
        "decoder_last_pipeline_num_layers",
        "--decoder-last-pipeline-num-layers",
        ArgType::Int,
        LAYERS_ONLY,
        Source::Main,
    ),
    ignored(
        "use_sharp",
        "--use-sharp",
        ArgType::Flag,
        "SHARP for the data-parallel collectives (a barrier on the dp-cp groups): the same groups",
        Source::Main,
    ),
    ignored(
        "sharp_enabled_group",
        "--sharp-enabled-group",
        ArgType::Text,
        "which group (dp or dp_replica) gets SHARP, through NCCL_COLLNET_ENABLE: the same groups",
        Source::Main,
    ),
    ignored(
        "high_priority_stream_groups",
        "--high-priority-stream-groups",
        ArgType::Texts,
        "high-priority CUDA streams for the groups named: the same groups",
        Source::Main,
    ),
    ignored(
        "nccl_communicator_config_path",
        "--nccl-communicator-config-path",
        ArgType::Text,
        "NCCL options of each group: the same groups",
        Source::Main,
    ),
    ignored(
        "distributed_timeout_minutes",
        "--distributed-timeout-minutes",
        ArgType::Int,
        "the groups' timeout: the same groups",
        Source::Main,
    ),
    ignored(
        "pipeline_model_parallel_comm_backend",
        "--pipeline-model-parallel-comm-backend",
        ArgType::Text,
        "the backend of the pp groups (nccl or ucc): the same groups",
        Source::Main,
    ),
    ignored(
        "use_gloo_process_groups",
        "--disable-gloo-process-groups",
        ArgType::Flag,
        "no gloo copies of the data-parallel groups: the NCCL groups are the same",
        Source::Main,
    ),
    model(
        "num_layers",
        "--num-layers",
        ArgType::Int,
        "the number of transformer layers",
        Source::Main,
    ),
    model(
        "hidden_size",
        "--hidden-size",
        ArgType::Int,
        "the hidden size",
        Source::Main,
    ),
    model(
        "ffn_hidden_size",
        "--ffn-hidden-size",
        ArgType::Int,
        "the MLP's hidden size; default 4 * hidden, with --swiglu int(8 * hidden / 3 / 64) * 64",
        Source::Main,
    ),
    model(
        "num_attention_heads",
        "--num-attention-heads",
        ArgType::Int,
        "the attention heads",
        Source::Main,
    ),
    model(
        "group_query_attention",
        "--group-query-attention",
        ArgType::Flag,
        "grouped-query attention: --num-query-groups applies",
        Source::Main,
    ),
    model(
        "num_query_groups",
        "--num-query-groups",
        ArgType::Int,
        "the key-value heads with --group-query-attention (default: the heads)",
        Source::Main,
    ),
    model(
        "kv_channels",
        "--kv-channels",
        ArgType::Int,
        "the channels per head (default hidden / heads)",
        Source::Main,
    ),
    model(
        "max_position_embeddings",
        "--max-position-embeddings",
        ArgType::Int,
        "the learned position embedding's rows",
        Source::Main,
    ),
    model(
        "position_embedding_type",
        "--position-embedding-type",
        ArgType::Text,
        "learned_absolute (the default: a position embedding), rope, mrope, relative or none",
        Source::Main,
    ),
    model(
        "normalization",
        "--normalization",
        ArgType::Text,
        "LayerNorm (the default: weight and bias) or RMSNorm (weight)",
        Source::Main,
    ),
    model(
        "qk_layernorm",
        "--qk-layernorm",
        ArgType::Flag,
        "norms of the queries and keys",
        Source::Main,
    ),
    model(
        "add_bias_linear",
        "--disable-bias-linear",
        ArgType::Flag,
        "given: the linear layers have no bias",
        Source::Main,
    ),
    model(
        "add_qkv_bias",
        "--add-qkv-bias",
        ArgType::Flag,
        "a bias on the QKV projection only",
        Source::Main,
    ),
    model(
        "swiglu",
        "--swiglu",
        ArgType::Flag,
        "a gated MLP: fc1 holds [gate; up] (partition stride 2)",
        Source::Main,
    ),
    model(
        "untie_embeddings_and_output_weights",
        "--untie-embeddings-and-output-weights",
        ArgType::Flag,
        "an output layer of its own (default: the word embedding, also on the last stage)",
        Source::Main,
    ),
    model(
        "vocab_size",
        "--vocab-size",
        ArgType::Int,
        "the vocabulary, padded to a multiple of --make-vocab-size-divisible-by times tp",
        Source::Main,
    ),
    model(
        "padded_vocab_size",
        "--padded-vocab-size",
        ArgType::Int,
        "the padded vocabulary, given",
        Source::Main,
    ),
    model(
        "make_vocab_size_divisible_by",
        "--make-vocab-size-divisible-by",
        ArgType::Int,
        "the vocabulary's padding (default 128, times tp)",
        Source::Main,
    ),
    model(
        "num_experts",
        "--num-experts",
        ArgType::Int,
        "the experts of every MoE layer (default: none)",
        Source::Main,
    ),
    model(
        "moe_ffn_hidden_size",
        "--moe-ffn-hidden-size",
        ArgType::Int,
        "an expert's MLP hidden size (default --ffn-hidden-size)",
        Source::Main,
    ),
    model(
        "moe_shared_expert_intermediate_size",
        "--moe-shared-expert-intermediate-size",
        ArgType::Int,
        "the shared experts' MLP hidden size (default: none)",
        Source::Main,
    ),
    model(
        "account_for_embedding_in_pipeline_split",
        "--account-for-embedding-in-pipeline-split",
        ArgType::Flag,
        "the embedding counts as a layer of the first stage",
        Source::Main,
    ),
    model(
        "account_for_loss_in_pipeline_split",
        "--account-for-loss-in-pipeline-split",
        ArgType::Flag,
        "the loss counts as a layer of the last stage",
        Source::Main,
    ),
];

/// Why the RL inference sizes are refused.
const RL_INFERENCE: &str = "with --perform-rl-step it builds a second set of groups, for a separate inference model (build_inference_pg_collection); describe that model as a layout of its own";

/// Why the arguments placing layers on pipeline stages are ignored.
const LAYERS_ONLY: &str =
    "which layers each pipeline stage (or virtual stage) runs: the same groups";

const fn modelled(
    name: &'static str,
    flag: &'static str,
    key: &'static str,
    takes: ArgType,
    meaning: &'static str,
    source: Source,
) -> MegatronArg {
    MegatronArg {
        name,
        flag,
        key,
        takes,
        meaning,
        handling: Handling::Modelled,
        source,
    }
}

const fn refused(
    name: &'static str,
    flag: &'static str,
    takes: ArgType,
    why: &'static str,
    source: Source,
) -> MegatronArg {
    MegatronArg {
        name,
        flag,
        key: "",
        takes,
        meaning: why,
        handling: Handling::Refused,
        source,
    }
}

const fn model(
    name: &'static str,
    flag: &'static str,
    takes: ArgType,
    meaning: &'static str,
    source: Source,
) -> MegatronArg {
    MegatronArg {
        name,
        flag,
        key: "",
        takes,
        meaning,
        handling: Handling::Model,
        source,
    }
}

const fn ignored(
    name: &'static str,
    flag: &'static str,
    takes: ArgType,
    why: &'static str,
    source: Source,
) -> MegatronArg {
    MegatronArg {
        name,
        flag,
        key: "",
        takes,
        meaning: why,
        handling: Handling::NoGroupChange,
        source,
    }
}

impl MegatronArg {
    /// The [`Config`] keys this argument decides: its own, both encoder
    /// keys for either encoder argument (whether there is an encoder, and
    /// its tp, depend on both), none for an argument not modelled.
    ///
    /// ```
    /// use rank_layout::megatron::MegatronArg;
    /// let arg = MegatronArg::find("--encoder-pipeline-model-parallel-size").unwrap();
    /// assert_eq!(arg.decides(), &["encoder_tp", "encoder_pp"]);
    /// assert!(MegatronArg::find("--use-sharp").unwrap().decides().is_empty());
    /// ```
    pub fn decides(&self) -> &[&'static str] {
        const ENCODER: [&str; 2] = ["encoder_tp", "encoder_pp"];
        if self.handling != Handling::Modelled {
            return &[];
        }
        match self.key {
            "encoder_tp" | "encoder_pp" => &ENCODER,
            _ => std::slice::from_ref(&self.key),
        }
    }

    /// The argument named `name`: its underscore name
    /// (`tensor_model_parallel_size`), its flag
    /// (`--tensor-model-parallel-size`), or the flag with underscores
    /// (`--nproc_per_node`, torchrun's other spelling) or without dashes.
    pub fn find(name: &str) -> Option<&'static MegatronArg> {
        let bare = name.trim_start_matches('-').replace('-', "_");
        MEGATRON_ARGS
            .iter()
            .find(|a| a.name == bare || a.flag.trim_start_matches('-').replace('-', "_") == bare)
    }

    /// Whether `value` leaves the argument off: `false`, as Python's
    /// `get_args()` holds a switch not given (a value not given at all is
    /// `None` there, and never reaches the table).
    fn is_off(value: &MegatronValue) -> bool {
        matches!(value, MegatronValue::Bool(false))
    }
}

/// Megatron-LM arguments collected from a command line, a file or Python,
/// turned into a [`Config`] with Megatron-Core's defaults.
///
/// ```
/// use rank_layout::megatron::{MegatronArgs, MegatronValue};
/// use rank_layout::{Error, Layout};
/// let mut args = MegatronArgs::new();
/// args.set("tensor_model_parallel_size", MegatronValue::Int(2))?;
/// args.set("--context-parallel-size", MegatronValue::Int(2))?;
/// args.set("expert_model_parallel_size", MegatronValue::Int(4))?;
/// args.set("world_size", MegatronValue::Int(64))?;
/// assert!(!args.set("lr", MegatronValue::Int(1))?); // not a parallelism argument: ignored
/// assert!(!args.set("use_sharp", MegatronValue::Bool(true))?); // the same groups: ignored
/// let layout = Layout::new(&args.config()?)?;
/// assert_eq!(layout.sizes().edp, 8); // folded experts: 64 / (etp 2 * ep 4)
/// assert!(args.set("tensor_model_parallel_size", MegatronValue::Int(-1)).is_err());
/// // Groups rank-layout does not model: refused, not ignored.
/// let refused = args.set("hybrid_context_parallel", MegatronValue::Bool(true));
/// assert!(matches!(refused, Err(Error::UnmodelledArgument { .. })));
/// assert!(!args.set("hybrid_context_parallel", MegatronValue::Bool(false))?);
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MegatronArgs {
    given: Vec<(&'static MegatronArg, MegatronValue)>,
    model: Vec<(&'static MegatronArg, MegatronValue)>,
    unexpanded: Vec<String>,
}

/// An integer argument as a `u32`, or the error naming it.
fn to_u32(arg: &MegatronArg, n: i64, min: u32) -> Result<u32> {
    u32::try_from(n)
        .ok()
        .filter(|v| *v >= min)
        .ok_or_else(|| Error::InvalidArgument {
            name: arg.name.to_owned(),
            value: n.to_string(),
            expected: if min == 0 {
                "an integer from 0 to 4294967295"
            } else {
                "an integer from 1 to 4294967295"
            },
        })
}

/// The number of weight shards per tensor-parallel rank of `shards` weight
/// shards over `tp` ranks, as Megatron-Core's
/// `resolve_tensor_parallel_weight_shards` computes it: `shards / tp`, or
/// its error when `shards < tp` or `tp` does not divide `shards`. `name`
/// and `tp_name` name the count and the size in the errors
/// (`tensor_parallel_num_weight_shards` and `tensor_model_parallel_size`,
/// or the expert ones).
///
/// ```
/// use rank_layout::megatron::weight_shards;
/// let s = "tensor_parallel_num_weight_shards";
/// assert_eq!(weight_shards(s, 8, "tensor_model_parallel_size", 2)?, 4);
/// assert!(weight_shards(s, 5, "tensor_model_parallel_size", 2).is_err());
/// # Ok::<(), rank_layout::Error>(())
/// ```
///
/// # Errors
/// [`Error::ZeroSize`] for a `tp` of 0; [`Error::WeightShardsBelowTp`],
/// [`Error::WeightShardsNotDivisible`].
pub fn weight_shards(
    name: &'static str,
    shards: u32,
    tp_name: &'static str,
    tp: u32,
) -> Result<u32> {
    if tp == 0 {
        return Err(Error::ZeroSize { what: "tp" });
    }
    if shards < tp {
        return Err(Error::WeightShardsBelowTp {
            name,
            shards,
            tp_name,
            tp,
        });
    }
    if shards % tp != 0 {
        return Err(Error::WeightShardsNotDivisible {
            name,
            shards,
            tp_name,
            tp,
        });
    }
    Ok(shards / tp)
}

impl MegatronArgs {
    /// No arguments: [`config`](Self::config) gives Megatron-Core's defaults.
    pub fn new() -> MegatronArgs {
        MegatronArgs::default()
    }

    /// Records argument `name` (its name or flag) with `value`: `Ok(true)`
    /// for an argument [`Handling::Modelled`] or [`Handling::Separate`];
    /// `Ok(false)` for a name
    /// that is not in [`MEGATRON_ARGS`] or is listed as not changing the
    /// groups (ignored), and for a refused switch given as `false`. A later
    /// value of the same argument replaces an earlier one, as on a command
    /// line.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a value of the wrong type or range
    /// (`tensor_model_parallel_size = -1`), naming the argument and value;
    /// [`Error::UnmodelledArgument`] for an argument [`Handling::Refused`]
    /// given any other value than `false`.
    pub fn set(&mut self, name: &str, value: MegatronValue) -> Result<bool> {
        let Some(arg) = MegatronArg::find(name) else {
            return Ok(false);
        };
        match arg.handling {
            Handling::Modelled | Handling::Separate => {}
            Handling::Model => {
                // Judged when the model is built: a launch script's
                // `--num-layers $NL` must not stop a layout's reading.
                self.model.retain(|(a, _)| a.name != arg.name);
                self.model.push((arg, value));
                return Ok(false);
            }
            Handling::Refused if MegatronArg::is_off(&value) => return Ok(false),
            Handling::Refused => {
                return Err(Error::UnmodelledArgument {
                    flag: arg.flag,
                    why: arg.meaning,
                });
            }
            _ => return Ok(false),
        }
        let bad = |expected: &'static str| Error::InvalidArgument {
            name: arg.name.to_owned(),
            value: value.to_string(),
            expected,
        };
        let value = match (arg.takes, value.clone()) {
            (ArgType::Int, MegatronValue::Int(n)) => {
                let min = if arg.name.starts_with("encoder_") {
                    0
                } else {
                    1
                };
                to_u32(arg, n, min)?;
                MegatronValue::Int(n)
            }
            (ArgType::Flag, MegatronValue::Bool(b)) => MegatronValue::Bool(b),
            (ArgType::Ints, MegatronValue::Ints(list)) => {
                for n in &list {
                    to_u32(arg, *n, 1)?;
                }
                MegatronValue::Ints(list)
            }
            (ArgType::Ints, MegatronValue::Int(n)) => {
                to_u32(arg, n, 1)?;
                MegatronValue::Ints(vec![n])
            }
            (ArgType::Text, MegatronValue::Text(text)) => MegatronValue::Text(text),
            (ArgType::Flag, _) => return Err(bad("true or false")),
            (ArgType::Text, _) => return Err(bad("a text")),
            (ArgType::Ints, _) => return Err(bad("a list of integers")),
            _ => return Err(bad("an integer")),
        };
        self.given.retain(|(a, _)| a.name != arg.name);
        self.given.push((arg, value));
        Ok(true)
    }

    /// The [`Config`] keys the recorded arguments decide, each once, in the
    /// order given ([`MegatronArg::decides`]): the keys of
    /// [`config`](Self::config) these arguments set, default or not.
    pub fn keys(&self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for key in self.given.iter().flat_map(|(a, _)| a.decides()) {
            if !out.contains(key) {
                out.push(key);
            }
        }
        out
    }

    /// The arguments recorded, in the order given, with their values.
    pub fn given(&self) -> impl Iterator<Item = (&'static MegatronArg, &MegatronValue)> + '_ {
        self.given.iter().map(|(a, v)| (*a, v))
    }

    /// The model arguments recorded ([`Handling::Model`]), in the order
    /// given, with their values as given (judged by what reads them).
    pub fn model_args(&self) -> impl Iterator<Item = (&'static MegatronArg, &MegatronValue)> + '_ {
        self.model.iter().map(|(a, v)| (*a, v))
    }

    /// The value of model argument `name` (its name or flag), if given.
    pub fn model_value(&self, name: &str) -> Option<&MegatronValue> {
        let arg = MegatronArg::find(name)?;
        self.model
            .iter()
            .find(|(a, _)| a.name == arg.name)
            .map(|(_, v)| v)
    }

    /// The shell variables a pasted command line
    /// ([`parse_command_line`](Self::parse_command_line)) uses as
    /// arguments without defining them (`$GPT_ARGS`, `${MODEL_ARGS[@]}`),
    /// in the order met: the arguments they hold were not read. Empty for
    /// arguments set otherwise.
    pub fn unexpanded(&self) -> &[String] {
        &self.unexpanded
    }

    pub(crate) fn set_unexpanded(&mut self, names: Vec<String>) {
        self.unexpanded = names;
    }

    fn int(&self, name: &str) -> Option<u32> {
        self.given.iter().find_map(|(a, v)| match v {
            MegatronValue::Int(n) if a.name == name => u32::try_from(*n).ok(),
            _ => None,
        })
    }

    /// The world size torchrun's `--nproc-per-node` and `--nnodes` give
    /// (each 1 when left out), when either is given.
    ///
    /// # Errors
    /// [`Error::Overflow`] when the product does not fit a `u32`.
    fn launch_world(&self) -> Result<Option<(u32, u32, u32)>> {
        let (nproc, nnodes) = (self.int("nproc_per_node"), self.int("nnodes"));
        if nproc.is_none() && nnodes.is_none() {
            return Ok(None);
        }
        let (nproc, nnodes) = (nproc.unwrap_or(1), nnodes.unwrap_or(1));
        let world = nproc.checked_mul(nnodes).ok_or_else(|| Error::Overflow {
            what: format!("nproc_per_node*nnodes = {nproc}*{nnodes}"),
        })?;
        Ok(Some((nproc, nnodes, world)))
    }

    /// The configuration Megatron-Core builds from these arguments: sizes
    /// default to 1; folded experts with `etp` = `tp` unless given; an
    /// encoder when `encoder_pipeline_model_parallel_size` > 0, its tp
    /// `encoder_tensor_model_parallel_size` or, when 0, `tp`;
    /// `use_tp_pp_dp_mapping` gives order `tp-cp-ep-pp-dp`;
    /// `tensor_parallel_num_weight_shards` S gives `gtp_remat = S / tp`
    /// and `expert_tensor_parallel_num_weight_shards` S gives
    /// `expert_gtp_remat = S / etp` (Megatron-Core's
    /// `resolve_tensor_parallel_weight_shards`); torchrun's
    /// `nproc_per_node * nnodes` is the world size; `data_parallel_size`
    /// and `world_size` both kept, so that
    /// [`Layout::new`](crate::Layout::new) checks one against the other.
    ///
    /// ```
    /// use rank_layout::megatron::{MegatronArgs, MegatronValue::Int};
    /// let mut args = MegatronArgs::new();
    /// args.set("tensor_model_parallel_size", Int(2))?;
    /// args.set("tensor_parallel_num_weight_shards", Int(8))?;
    /// let config = args.config()?;
    /// assert_eq!((config.tp, config.gtp_remat, config.expert_gtp_remat), (2, 4, 1));
    /// args.set("tensor_parallel_num_weight_shards", Int(5))?;
    /// assert_eq!(
    ///     args.config().unwrap_err().to_string(),
    ///     "tensor_parallel_num_weight_shards (5) must be divisible by tensor_model_parallel_size (2)"
    /// );
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::WeightShardsBelowTp`] and [`Error::WeightShardsNotDivisible`]
    /// for a weight-shard count the tensor-parallel size does not divide
    /// into whole shards; [`Error::LaunchMismatch`] when torchrun's process
    /// count and `world_size` differ; [`Error::Overflow`] when torchrun's
    /// product does not fit a `u32`; [`Error::InferenceShardsNotOneLayout`]
    /// when `inference_shards` is given ([`inference_shards`](Self::inference_shards)
    /// reads them).
    pub fn config(&self) -> Result<Config> {
        if self.shards_text().is_some() {
            return Err(Error::InferenceShardsNotOneLayout);
        }
        self.layout_config()
    }

    /// The text of `inference_shards`, when given.
    fn shards_text(&self) -> Option<&str> {
        self.given.iter().find_map(|(a, v)| match v {
            MegatronValue::Text(text) if a.handling == Handling::Separate => Some(text.as_str()),
            _ => None,
        })
    }

    /// The inference shards of `inference_shards` (`--inference-shards`),
    /// or `None` when it is not given: over the world size of the
    /// arguments (`world_size`, or torchrun's `nproc_per_node * nnodes`),
    /// or as many ranks as the shards hold when they give none; in the
    /// rank order of `use_tp_pp_dp_mapping` ([`ShardMapping::from_flag`]).
    /// The other sizes (`tensor_model_parallel_size`, ...) are the
    /// training layout's and do not change the shards.
    ///
    /// ```
    /// use rank_layout::megatron::{MegatronArgs, ShardRole};
    /// let args = MegatronArgs::parse_command_line(
    ///     "torchrun --nproc-per-node 8 serve.py --inference-shards 'tp=4,role=prefill+tp=2,dp=2,role=decode' --use-tp-pp-dp-mapping",
    /// )?;
    /// let shards = args.inference_shards()?.unwrap();
    /// assert_eq!(shards.len(), 2);
    /// assert_eq!(shards.role_of(7)?, Some(ShardRole::Decode));
    /// assert!(shards.mapping().is_tp_pp_dp());
    /// assert!(args.config().is_err()); // the shards are not one layout
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// Those of [`InferenceShards::parse`]; [`Error::LaunchMismatch`] and
    /// [`Error::Overflow`] for torchrun's world size, as
    /// [`config`](Self::config).
    pub fn inference_shards(&self) -> Result<Option<InferenceShards>> {
        let Some(text) = self.shards_text() else {
            return Ok(None);
        };
        let world = self.layout_config()?.world_size;
        let mapping = ShardMapping::from_flag(self.given.iter().any(|(a, v)| {
            a.name == "use_tp_pp_dp_mapping" && matches!(v, MegatronValue::Bool(true))
        }));
        InferenceShards::parse(text, world, mapping).map(Some)
    }

    /// Whether the arguments describe layouts: the shards when
    /// `inference_shards` is given (their text alone: the world may come
    /// later), else the configuration.
    ///
    /// # Errors
    /// Those of [`config`](Self::config) or of [`ShardSpec::parse_all`].
    pub(crate) fn check(&self) -> Result<()> {
        self.layout_config()?;
        if let Some(text) = self.shards_text() {
            ShardSpec::parse_all(text)?;
        }
        Ok(())
    }

    /// The configuration of the arguments but `inference_shards`.
    fn layout_config(&self) -> Result<Config> {
        let mut c = Config::new();
        c.tp = self.int("tensor_model_parallel_size").unwrap_or(1);
        c.pp = self.int("pipeline_model_parallel_size").unwrap_or(1);
        c.cp = self.int("context_parallel_size").unwrap_or(1);
        c.ep = self.int("expert_model_parallel_size").unwrap_or(1);
        c.dp = self.int("data_parallel_size");
        c.world_size = self.int("world_size");
        if let Some((nproc_per_node, nnodes, world)) = self.launch_world()? {
            match c.world_size {
                Some(world_size) if world_size != world => {
                    return Err(Error::LaunchMismatch {
                        world_size,
                        nproc_per_node,
                        nnodes,
                        ranks: u64::from(world),
                    });
                }
                _ => c.world_size = Some(world),
            }
        }
        // etp defaults to tp: kept only when it differs, so that the nested
        // layout (which has no etp of its own) can be asked for on top.
        let etp = self.int("expert_tensor_parallel_size");
        c.etp = etp.filter(|etp| *etp != c.tp);
        if let Some(shards) = self.int("tensor_parallel_num_weight_shards") {
            c.gtp_remat = weight_shards(
                "tensor_parallel_num_weight_shards",
                shards,
                "tensor_model_parallel_size",
                c.tp,
            )?;
        }
        if let Some(shards) = self.int("expert_tensor_parallel_num_weight_shards") {
            c.expert_gtp_remat = weight_shards(
                "expert_tensor_parallel_num_weight_shards",
                shards,
                "expert_tensor_parallel_size",
                etp.unwrap_or(c.tp),
            )?;
        }
        if let Some(encoder_pp) = self
            .int("encoder_pipeline_model_parallel_size")
            .filter(|n| *n > 0)
        {
            c.encoder_pp = Some(encoder_pp);
            c.encoder_tp = self
                .int("encoder_tensor_model_parallel_size")
                .filter(|n| *n > 0);
        }
        for (a, v) in &self.given {
            match (a.name, v) {
                ("hierarchical_context_parallel_sizes", MegatronValue::Ints(list)) => {
                    c.hierarchical_cp =
                        list.iter().filter_map(|n| u32::try_from(*n).ok()).collect();
                }
                ("num_distributed_optimizer_instances", MegatronValue::Int(n)) => {
                    c.dist_opt_instances = u32::try_from(*n).unwrap_or(1);
                }
                ("use_tp_pp_dp_mapping", MegatronValue::Bool(true)) => {
                    c.order = "tp-cp-ep-pp-dp".parse::<Order>()?;
                }
                _ => {}
            }
        }
        Ok(c)
    }
}
