//! Process-group rank layouts of distributed training: which ranks form the
//! tensor (TP), context (CP), expert (EP), data (DP) and pipeline (PP)
//! parallel groups, exactly as Megatron-LM orders them, for any axis order,
//! answered per rank in O(axes).
//!
//! ```
//! use rank_layout::{Config, Kind, Layout};
//!
//! // 64 GPUs: tp=4, cp=2, pp=2, so dp = 64 / (4*2*2) = 4.
//! let layout = Layout::new(&Config {
//!     tp: 4, cp: 2, pp: 2, world_size: Some(64), ..Config::default()
//! })?;
//! assert_eq!(layout.config().dp, Some(4));
//!
//! // Enumerate lazily, collect when you want vectors.
//! let tp = layout.groups(Kind::TP)?.to_vecs();
//! assert_eq!(tp[1], vec![4, 5, 6, 7]);
//!
//! // One rank's answers, computed arithmetically (no enumeration).
//! let m = &layout.memberships(5, Kind::CP)?[0];
//! assert_eq!((m.index, m.key), (1, 1));
//! assert_eq!(m.group.to_vec(), vec![1, 5]);
//! assert_eq!(layout.comm_split(37, Kind::PP)?, Some((5, 1)));
//!
//! // Bad input is a typed error naming the values, never a panic.
//! let err = Layout::new(&Config { tp: 4, world_size: Some(10), ..Config::default() }).unwrap_err();
//! assert_eq!(err.to_string(), "world_size (10) is not divisible by tp*cp*pp = 4");
//! # Ok::<(), rank_layout::Error>(())
//! ```
//!
//! # Layouts
//!
//! - **Nested** experts (SPEC 3.1, the default): Megatron-LM's 2024
//!   `RankGenerator`; expert parallelism carved out of dp. See [`RankGenerator`].
//! - **Folded** experts (SPEC 3.2): Megatron-Core's "MoE parallel folding",
//!   a second expert grid (`etp`, `ep`, `edp`, `pp`) over the same ranks.
//! - **Encoder + decoder** (SPEC 3.3): an encoder grid with its own tp and pp
//!   before the decoder grid, pipelines joined by coordinates; see
//!   [`pp_group_mapper`].
//! - Hierarchical context parallel and distributed-optimizer instances
//!   (SPEC 3.4) on top of them.
//!
//! The [`megatron`] page maps Megatron-LM and PyTorch DeviceMesh calls to
//! this crate.
//!
//! # Features
//!
//! - `serde` (default): `Serialize`/`Deserialize` for [`Config`], [`Order`],
//!   [`Kind`] and [`Layout`] (deserializing a layout re-validates it), and
//!   the JSON of the reports.
//! - `cli` (default): the `rank-layout` command-line tool.
//! - `mpi`: [`Layout::split`] and [`Layout::split_rounds`] build real
//!   communicators with `MPI_Comm_split` (needs an MPI library such as Open MPI).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod axis;
#[cfg(feature = "mpi")]
mod comm;
mod config;
mod coord;
mod error;
mod families;
mod folded;
mod grid;
mod group;
mod kind;
mod layout;
mod math;
pub mod megatron;
mod order;
mod plan;
pub mod pp_group_mapper;
mod rank_generator;
mod report;
#[cfg(feature = "serde")]
mod serde_layout;

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use axis::{Axis, AxisSet};
#[cfg(feature = "mpi")]
pub use comm::GroupComm;
pub use config::{Config, ExpertLayout};
pub use coord::{Coord, ExpertCoord, Part, Placement};
pub use error::{Error, Result};
pub use group::{Group, Members};
pub use kind::Kind;
pub use layout::{Layout, Membership};
pub use order::Order;
pub use plan::Groups;
pub use rank_generator::{RankGenerator, Sizes};
pub use report::{LayoutReport, RankReport};
