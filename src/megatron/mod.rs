//! Megatron-LM's vocabulary: its parallelism arguments ([`MEGATRON_ARGS`],
//! [`MegatronArgs`], with Megatron-Core's defaults), its `RankGenerator`
//! ([`RankGenerator`]), an [`audit`] of its encoder + decoder pipeline
//! joins, Megatron-Core 0.19's inference shards ([`InferenceShards`]), and
//! a table of Megatron-LM and PyTorch DeviceMesh
//! calls with their rank-layout counterparts.
//!
//! # Calls
//!
//! | Megatron-LM (`parallel_state.py`) or DeviceMesh | rank-layout |
//! | --- | --- |
//! | `RankGenerator(tp, ep, dp, pp, cp, order, rank_offset)` | [`RankGenerator::new`], or [`Layout::new`](crate::Layout::new) with a [`Config`](crate::Config) |
//! | `RankGenerator.get_ranks(token, independent_ep)` | [`RankGenerator::get_ranks`] |
//! | `parse_args()` of a Megatron-LM command line | [`MegatronArgs::parse_command_line`], [`MegatronArgs::config`] |
//! | the arguments `initialize_model_parallel` is given | [`MEGATRON_ARGS`]: each modelled, refused ([`Handling`]) or listed as leaving the groups alone |
//! | `resolve_tensor_parallel_weight_shards(tp, num_weight_shards, ...)` | [`MegatronArgs::config`]: `gtp_remat`, `expert_gtp_remat` |
//! | `generate_masked_orthogonal_rank_groups(world, sizes, mask)` | [`Layout::groups`](crate::Layout::groups) of a kind of axes ([`Kind::of_axes`](crate::Kind::of_axes)) |
//! | `get_ranks("tp-dp")` | `layout.groups("tp-dp".parse()?)` |
//! | `get_ranks("dp", independent_ep=True)` | [`Kind::DP_MOD_EP`](crate::Kind::DP_MOD_EP) (`dp-mod-ep`) |
//! | `get_ranks("dp-cp", independent_ep=True)` | [`Kind::DP_CP_MOD_EP`](crate::Kind::DP_CP_MOD_EP) |
//! | `expert_tensor_parallel_size`, `expert_decoder_rank_generator` | [`ExpertLayout::Folded`](crate::ExpertLayout::Folded), `etp` |
//! | encoder + decoder `generator_wrapper("pp")` of 4ff9e66 or 5a3b6bcf1f | [`megatron_pipelines`], checked by [`audit`] against rank-layout's join |
//! | `_EMBEDDING_GROUP`, `_POSITION_EMBEDDING_GROUP` | [`Kind::EMBD`](crate::Kind::EMBD), [`Kind::POS_EMBD`](crate::Kind::POS_EMBD) |
//! | `hierarchical_context_parallel_sizes` | `hierarchical_cp`, kinds [`Kind::hcp`](crate::Kind::hcp) |
//! | `num_distributed_optimizer_instances` | `dist_opt_instances`, [`Kind::DP_CP_INTRA`](crate::Kind::DP_CP_INTRA) and friends |
//! | `get_tensor_model_parallel_rank()` | [`Layout::placement`](crate::Layout::placement)`(rank)?.coord.tp` |
//! | `get_pipeline_model_parallel_next_rank()` | [`Layout::pipeline_next`](crate::Layout::pipeline_next) (a list; no wrap-around) |
//! | `is_pipeline_first_stage()` / `is_pipeline_last_stage()` | [`Layout::is_first_stage`](crate::Layout::is_first_stage) / [`Layout::is_last_stage`](crate::Layout::is_last_stage) |
//! | `is_rank_in_embedding_group()` | [`Layout::is_embedding_rank`](crate::Layout::is_embedding_rank) |
//! | `torch.distributed.new_group(ranks)` on every rank, for every group of every kind | [`Layout::splits`](crate::Layout::splits): this rank's color and key for every kind, O(axes) each; with the `mpi` feature `Layout::communicators` builds the communicators with one `MPI_Comm_split` per kind and round |
//! | `parse_inference_shards_spec(spec, world_size)` (`--inference-shards`) | [`ShardSpec::parse_all`], [`InferenceShards::parse`] |
//! | `build_inference_pg_collections_for_shards(world, spec, use_tp_pp_dp_mapping)` | [`InferenceShards`]: each shard's [`Layout`](crate::Layout), [`InferenceShards::splits`] (one comm-split per kind for every shard) |
//! | `InferenceShard.pg_collection is not None` (a rank's own shard) | [`InferenceShards::shard_of`] |
//! | `DeviceMesh(mesh).get_coordinate()` | [`Layout::placement`](crate::Layout::placement), [`Mesh::coord`](crate::Mesh::coord) (O(axes), no mesh scan) |
//! | `mesh["tp"].mesh.tolist()` on one rank | `layout.memberships(rank, Kind::TP)?[0].group.to_vec()` |
//! | `mesh.mesh.reshape(...)` for every group at once | [`Groups::fill`](crate::Groups::fill) or [`Groups::table`](crate::Groups::table) |
//! | DeviceMesh, HyperCommGrid, torchtitan's `ParallelDims` | [`Mesh`](crate::Mesh), [`torchtitan_mesh`](crate::torchtitan_mesh): the table in [`semantics`](crate::semantics), section 8 |
//!
//! # Conventions
//!
//! - Orders are first-axis-fastest, as Megatron-LM's (`tp-cp-ep-dp-pp`
//!   puts tp neighbours on consecutive ranks). DeviceMesh shapes are
//!   last-axis-fastest: mesh dims `("pp", "dp", "tp")` are order `tp-dp-pp`.
//! - Ranks are `u32`: 4,294,967,296 ranks at most, half the memory of
//!   `usize`; a configuration that does not fit is an [`Error::Overflow`](crate::Error::Overflow).
//! - Group indices are the comm-split colors: contiguous from 0 in
//!   [`Layout::groups`](crate::Layout::groups) order.
//!
//! # Differences from Megatron-LM
//!
//! Each is explained in [`semantics`](crate::semantics).
//!
//! - **Encoder + decoder pipelines are joined by coordinates.** Megatron-LM
//!   2024 paired encoder and decoder pp groups by list position
//!   (`zip(cycle(encoder_groups), decoder_groups)`), which joins an encoder
//!   rank of one CP slice or DP replica to a decoder rank of another when
//!   cp * dp > 1. Its 2025 block fix still does when cp or dp precedes tp in
//!   the order, or when `tp % encoder_tp != 0` with cp * dp > 1.
//! - `encoder_tp > tp` (rejected by Megatron-LM) is supported: decoder ranks
//!   fan in from several encoder ranks.
//! - Pipeline neighbours are lists and do not wrap around from the last
//!   stage to the first.
//! - Folded layout: "order ends in pp" ignores axes of size 1 written after
//!   pp (Megatron-LM compares the order string).
//! - Distributed-optimizer instances are refused exactly when the intra and
//!   inter groups would not be what they claim (Megatron-Core does not
//!   check it).
//! - `encoder_pp = 0` is an error rather than "no encoder": leave both
//!   encoder sizes out for a decoder-only layout.
//! - Every check is a typed [`Error`](crate::Error), not an `assert`.

mod args;
mod audit;
mod command_line;
mod inference_shards;
mod rank_generator;

pub use crate::error::ShardProblem;
pub use args::{
    ArgType, Handling, MEGATRON_ARGS, MegatronArg, MegatronArgs, MegatronValue, Source,
    weight_shards,
};
pub use audit::{
    AUDIT_EXAMPLES, Audit, AuditExample, JoinClass, MegatronJoin, MegatronPipelines, audit,
    megatron_pipelines,
};
pub use inference_shards::{InferenceShard, InferenceShards, ShardMapping, ShardRole, ShardSpec};
pub use rank_generator::RankGenerator;
