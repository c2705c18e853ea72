//! Process-group rank layouts of distributed training: which ranks form the
//! tensor (TP), context (CP), expert (EP), data (DP) and pipeline (PP)
//! parallel groups, exactly as Megatron-LM orders them, for any axis order,
//! answered per rank in O(axes).
//!
//! ```
//! use rank_layout::{Config, Kind, Layout, Split};
//!
//! // 64 GPUs: tp=4, cp=2, pp=2, so dp = 64 / (4*2*2) = 4.
//! let layout = Layout::new(&Config::new().tp(4).cp(2).pp(2).world_size(64))?;
//! assert_eq!(layout.sizes().dp, 4);
//!
//! // Enumerate lazily, collect when you want vectors.
//! let tp = layout.groups(Kind::TP)?.to_vecs();
//! assert_eq!(tp[1], vec![4, 5, 6, 7]);
//!
//! // Or write every member into one buffer at memory speed.
//! let mut members = vec![0u32; 64];
//! layout.groups(Kind::CP)?.fill(&mut members)?;
//! assert_eq!(&members[..4], &[0, 4, 1, 5]);
//!
//! // One rank's answers, computed arithmetically (no enumeration).
//! let m = &layout.memberships(5, Kind::CP)?[0];
//! assert_eq!((m.color, m.key), (1, 1));
//! assert_eq!(m.group.to_vec(), vec![1, 5]);
//! assert_eq!(layout.split(37, Kind::PP)?, Some(Split { color: 5, key: 1 }));
//!
//! // Bad input is a typed error naming the values, never a panic.
//! let err = Layout::new(&Config::new().tp(4).world_size(10)).unwrap_err();
//! assert_eq!(err.to_string(), "world_size (10) is not divisible by tp*cp*pp = 4");
//! # Ok::<(), rank_layout::Error>(())
//! ```
//!
//! # Layouts
//!
//! - **Folded** experts (the default): Megatron-Core's "MoE parallel
//!   folding", a second expert grid (`etp`, `ep`, `edp`, `pp`) over the same
//!   ranks.
//! - **Nested** experts: Megatron-LM's 2024 `RankGenerator` (commit
//!   4ff9e66); expert parallelism carved out of dp.
//! - **Encoder + decoder**: an encoder grid with its own tp and pp before
//!   the decoder grid (folded or nested experts), pipelines joined by
//!   coordinates.
//! - Hierarchical context parallel and distributed-optimizer instances on
//!   top of them.
//! - **Modules**: named module meshes (MIMO's vision and audio encoders, a
//!   language model, a generator) on consecutive or shared rank spans,
//!   joined by the edges of a graph, with every edge's bridge plan built by
//!   coordinates ([`Modules`], semantics section 9).
//!
//! - **Reshard**: a model's tensors moved from one layout to another (an
//!   RL refit, a KV handoff, the state after a re-layout), planned per
//!   process from coordinates, each piece from a holder near its
//!   destination ([`reshard`], semantics section 12).
//!
//! [`semantics`] is the behaviour contract: what every layout and kind
//! means, the group and member order, and every choice made where
//! Megatron-LM is silent or wrong. [`megatron`] reads Megatron-LM's
//! arguments (one table, Megatron-Core's defaults), has its `RankGenerator`,
//! and maps Megatron-LM and PyTorch DeviceMesh calls to this crate.
//!
//! # Where things are
//!
//! The root holds the core: [`Layout`] and [`Config`], [`Kind`], [`Group`]
//! and [`Groups`], [`Split`], [`Placement`], [`Topology`], [`Error`], and
//! the two other targets, [`Mesh`] and [`Modules`]. Their helper types live
//! in [`mesh`] (selections, specifications, coordinates, torchtitan's
//! meshes) and [`modules`] (bridges, roles, edges, specifications);
//! Megatron-LM's vocabulary in [`megatron`], MPI communicators in `mpi`.
//! The 1.0 root paths of the mesh types still compile until 2.0
//! (CHANGELOG.md).
//!
//! # Which per-rank call to use when
//!
//! Every per-rank answer is O(axes) or O(dims), never a scan of groups.
//!
//! | you want, for one rank | layout | mesh | modules |
//! | --- | --- | --- | --- |
//! | where it sits (coordinates) | [`placement`](Layout::placement) | [`placement`](Mesh::placement), [`placement_in`](Mesh::placement_in) a view | [`module_of`](Modules::module_of), [`stage`](Modules::stage) |
//! | its color and key in one kind (a partition) | [`split`](Layout::split) (`None`: in no group, MPI's undefined color) | [`split`](Mesh::split) by name, [`split_selected`](Mesh::split_selected) by a parsed [`mesh::Selection`] | [`split`](Modules::split) |
//! | … in a kind whose groups overlap (joined pipelines) | [`split_rounds`](Layout::split_rounds), then [`split_in_round`](Layout::split_in_round) per round | (never overlap) | [`rounds`](Modules::rounds) |
//! | its color and key in every kind at once (set-up) | [`splits`](Layout::splits) (every kind and round), [`splits_of`](Layout::splits_of) (some kinds) | [`split_plan`](Mesh::split_plan) then `splits(rank)` | [`roles`](Modules::roles) |
//! | the group itself, with color and key | [`group_of`](Layout::group_of) (a partition), [`memberships`](Layout::memberships) (every group holding it) | [`groups`](Mesh::groups)`.nth(color)` | [`bridge_group_of`](Modules::bridge_group_of) |
//! | its pipeline neighbours and stage | [`stage`](Layout::stage), [`pipeline_next`](Layout::pipeline_next), [`pipeline_prev`](Layout::pipeline_prev) | | [`stage`](Modules::stage) |
//!
//! The words: `split` is one (color, key) pair, `splits` all of them; a
//! name ending in `_of` answers for a rank (`group_of`, `module_of`,
//! `splits_of` for a rank and some kinds), `_selected` takes a dim set
//! parsed once, `_in` a view or round. `Layout::split` is an `Option`
//! because `embd` and `pos-embd` leave ranks out; a mesh's dim sets cover
//! every rank. Modules count rounds as a length (`usize`) and their world
//! as `u64`: modules on consecutive spans may end at rank 2^32, which a
//! `u32` world cannot count; a layout or mesh stops one rank short.
//!
//! # Features
//!
//! None is on by default: the library alone depends on `thiserror`,
//! `arrayvec` and `fnv`. The docs on docs.rs are built with `serde` and mark
//! the items a feature gates.
//!
//! - `serde` (with `serde_json`): `Serialize`/`Deserialize` for [`Config`],
//!   [`Order`], [`Kind`] and [`Layout`] (deserializing a layout re-validates
//!   it), modules files ([`modules::ModulesSpec`]), and the reader of
//!   `kubectl get nodes -o json` (`machine::Hosts::parse_kubectl_nodes`).
//! - `mpi`: build real communicators with `MPI_Comm_split`
//!   (`Layout::communicators`; needs an MPI library such as Open MPI). The
//!   module `mpi` re-exports, by name, the rsmpi types its API uses.
//!
//! # Vocabulary
//!
//! A group's number among its kind's groups is its **color** (the
//! `MPI_Comm_split` color); a rank's position in its group is its **key**;
//! the pair is a [`Split`] (`split`, `splits`, `split_rounds`). Building
//! real communicators is `communicators` (MPI) or `new_groups` (Python).
//! Group sizes are `usize`, like every length; ranks, colors and keys are
//! `u32`. Rank ranges in messages are written `first..last`, both included.
#![forbid(unsafe_code)]
// docs.rs (Cargo.toml's `--cfg docsrs`): each item a feature gates says so.
#![cfg_attr(docsrs, feature(doc_cfg))]
// Integer conversions are checked (`try_from`) or go through `cast`, whose
// helpers state why they cannot lose a value. The library only: the tests
// and benches are left to `as`.
#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    clippy::cast_lossless
)]

mod axis;
mod cast;
mod config;
mod coord;
mod error;
mod grid;
mod group;
mod kind;
mod layout;
mod layout_shape;
pub mod machine;
mod math;
pub mod megatron;
pub mod mesh;
pub mod modules;
#[cfg(feature = "mpi")]
pub mod mpi;
mod order;
mod plan;
pub mod relayout;
pub mod reshard;
mod segment;
pub mod semantics;
#[cfg(feature = "serde")]
mod serde_layout;
mod split;
mod topology;

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use axis::{Axis, AxisSet};
pub use config::{Config, ExpertLayout};
pub use coord::{Coord, ExpertCoord, Part, Placement};
pub use error::{DistOptProblem, Error, Result};
pub use group::{Group, Members};
pub use kind::Kind;
pub use layout::{Layout, Membership, Sizes, SplitRound, Splits, Stage};
pub use layout_shape::LayoutShape;
pub use mesh::Mesh;
pub use modules::Modules;

// The paths of 1.0.0 (c190071): the mesh types at the root. They stay until
// 2.0 (hiding them from the docs would be a breaking change to `cargo
// semver-checks`); their home is `mesh::`. (Rust cannot mark a re-export
// deprecated: rust-lang/rust#30827.) The modules types came in 1.1, in
// `modules::` only.
pub use mesh::{
    FlattenSpec, MeshCoord, MeshSpec, MeshSplits, MeshSplitsIter, Selection, ViewSpec,
    torchtitan_mesh,
};
pub use order::Order;
pub use plan::groups::Groups;
pub use plan::spread::Spread;
pub use plan::table::{GroupTable, TableIter};
pub use split::Split;
pub use topology::Topology;
