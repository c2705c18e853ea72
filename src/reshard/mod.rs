//! Reshard: move a model's tensors from one layout to another, planned
//! per process from the two layouts' coordinates, each piece taken from a
//! holder near its destination and the load spread over the replicas.
//!
//! - [`Tensor`] and [`Model`]: a tensor's global shape and how it is
//!   sharded (Megatron's `partition_dim`, `partition_stride`,
//!   `partition_sizes`; its layer's stage; its expert; a dim of layers
//!   split over the stages; GTP weight shards; the distributed
//!   optimizer's dp shards); [`GptModel`] builds a GPT's (or an MoE's)
//!   tensors from Megatron's arguments; with the feature `serde`,
//!   `Model::from_json` reads a tensors file (the command line's
//!   `--tensors`) and `Model::to_json` writes one.
//! - [`LayerSplit`] and [`LayerMap`]: which layers each stage holds.
//! - [`Side`]: a layout, its layers, which process runs each rank, which
//!   processes are dead ([`Side::before`] and [`Side::after`] a
//!   re-layout).
//! - [`Locality`]: the node and NVLink domain of every process.
//! - [`Reshard`]: the plan: one process's [`RankPlan`] in O(its own
//!   transfers), the whole plan as an iterator, and its [`Cost`].
//!
//! The rules, their bounds and a worked refit are in
//! [`semantics`](crate::semantics) section 12.
//!
//! ```
//! use rank_layout::reshard::{LayerRef, Locality, Model, Reshard, Side, Tensor, Tier};
//! use rank_layout::{Config, Layout, Topology};
//! // One fused QKV weight (3 blocks: q, k, v) from tp 4 to tp 2 (dp 2),
//! // collocated on 4 GPUs of one node.
//! let model = Model::new(1, 0, vec![Tensor::new("qkv", [24, 8]).layer(LayerRef::Layer(0)).tp_stride(0, 3)])?;
//! let from = Side::new(Layout::new(&Config::new().tp(4).world_size(4))?);
//! let to = Side::new(Layout::new(&Config::new().tp(2).world_size(4))?);
//! let plan = Reshard::new(model, from, to, Locality::new(Topology::new(4, None)?))?;
//! // Rank 0 (tp 0 of 2) needs rows 0-3, 8-11, 16-19 (segments 0, 2, 4 of
//! // 6); on tp 4 (segments of 2 rows, rank t holding t, t+4, t+8) rows 0-1,
//! // 8-9, 16-17 are its own (it copies them) and rows 2-3, 10-11, 18-19
//! // are rank 1's, on its node.
//! let r0 = plan.plan_of(0)?;
//! assert_eq!(r0.copies.len(), 3);
//! assert!(r0.recvs.iter().all(|t| t.src == 1 && t.tier == Tier::Node));
//! assert_eq!(r0.recvs[0].region.range(0), Some((2, 4)));
//! assert_eq!(&r0.recvs[0].dst_offset[..], &[2, 0]); // after its own rows 0-1
//! assert_eq!(&r0.recvs[0].src_offset[..], &[0, 0]); // rank 1's first rows
//! // tp 2 on 4 GPUs is 2 replicas: rank 1 sends each of its three pieces
//! // to ranks 0 and 2 (tp 0 of each), their only holder.
//! let to: Vec<u32> = plan.plan_of(1)?.sends.iter().map(|t| t.dst).collect();
//! assert_eq!(to, [0, 2, 0, 2, 0, 2]);
//! # Ok::<(), rank_layout::Error>(())
//! ```

mod cost;
mod dims;
mod gpt;
#[cfg(feature = "serde")]
mod json;
mod layers;
mod locality;
mod model;
mod plan;
mod region;
mod sharding;
mod side;
mod tensor;
mod transfer;

pub use cost::{Cost, CostTally};
pub use gpt::GptModel;
pub use layers::{LayerMap, LayerSplit};
pub use locality::Locality;
pub use model::Model;
#[cfg(feature = "mpi")]
pub(crate) use plan::for_each_index;
pub use plan::{Reshard, Transfers};
pub use region::{MAX_DIMS, Point, Region};
pub use side::Side;
pub use tensor::{Blocks, ExpertRef, LayerRef, Tensor, TpSplit};
pub use transfer::{RankPlan, Shard, Tier, Transfer};
