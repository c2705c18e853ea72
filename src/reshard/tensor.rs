//! One tensor of a model and how it is sharded: its global shape, the
//! layer that places it on a pipeline stage, its tensor-parallel split,
//! its expert, and the splits over stages, weight shards and the
//! distributed optimizer's data-parallel ranks.

/// Which pipeline stages hold a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum LayerRef {
    /// Every stage holds it (no layer), or its `pp_dim` is split over the
    /// stages.
    #[default]
    Every,
    /// The stage holding this layer (counted from 0 over the whole model).
    Layer(u32),
    /// The first stage (Megatron's embedding).
    First,
    /// The last stage (the final norm, an untied output layer).
    Last,
    /// The first and the last stage (a tied word embedding, which
    /// Megatron-Core keeps on the last stage too, as `output_layer.weight`);
    /// one stage when there is one.
    Ends,
}

/// How a tensor-parallel split cuts its dim into blocks before each block
/// is cut into `tp` equal pieces.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Blocks {
    /// `s` equal blocks (Megatron's `partition_stride`; 1: the dim in `tp`
    /// contiguous pieces). With tp `t` the dim is cut into `t * s` equal
    /// segments and tp rank `r` holds segments `r, r + t, r + 2t, ...`.
    Stride(u64),
    /// Packed blocks of these global lengths, in order (Megatron's
    /// `partition_sizes` times tp: Mamba's `in_proj`).
    Sizes(Vec<u64>),
}

/// A tensor-parallel split: dim `dim` cut by [`Blocks`] over the tensor
/// (or, for an expert tensor, expert tensor) parallel group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct TpSplit {
    /// The dim split (Megatron's `partition_dim`).
    pub dim: usize,
    /// Its blocks.
    pub blocks: Blocks,
}

/// Where an expert tensor sits on the expert grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExpertRef {
    /// The tensor of global expert `e`, held by the expert-parallel rank
    /// owning it (experts split evenly over `ep`, in order).
    One(u32),
    /// A fused tensor of every expert whose dim `dim` is split evenly over
    /// `ep` (its length a multiple of the number of experts).
    Fused {
        /// The dim of experts.
        dim: usize,
    },
}

/// A tensor of a model: its global shape and how every side shards it.
///
/// Build it with [`Tensor::new`] and the setters; it is checked when a
/// [`Model`](crate::reshard::Model) is made of it, and each side's split
/// when a [`Reshard`](crate::reshard::Reshard) is planned.
///
/// ```
/// use rank_layout::reshard::{LayerRef, Tensor};
/// // A fused QKV weight of layer 0: 144 rows split over tp in 3 blocks.
/// let qkv = Tensor::new("l0.qkv", [144, 48]).layer(LayerRef::Layer(0)).tp_stride(0, 3);
/// assert_eq!(qkv.bytes(), Some(144 * 48 * 2));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Tensor {
    /// Its name (Megatron-Core's parameter name, with global layer and
    /// expert numbers).
    pub name: String,
    /// Its global shape (every dim at least 1, at most
    /// [`MAX_DIMS`](crate::reshard::MAX_DIMS) dims).
    pub shape: Vec<u64>,
    /// Bytes per element (default 2).
    pub element_bytes: u32,
    /// The stages holding it.
    pub layer: LayerRef,
    /// Its tensor-parallel split; `None`: replicated over tp.
    pub tp: Option<TpSplit>,
    /// Its place on the expert grid; `None`: a dense tensor.
    pub expert: Option<ExpertRef>,
    /// A dim of layers split over the pipeline stages by the side's layer
    /// map (a KV cache); its length a multiple of the model's layers.
    pub pp_dim: Option<usize>,
    /// Whether the weight-shard axis (`gtp_remat`, `expert_gtp_remat` for
    /// an expert tensor) cuts the tensor-parallel shard along its dim 0,
    /// as Megatron-Core 0.19's GTP shards weights.
    pub gtp: bool,
    /// A dim of the rank's shard cut contiguously over the distributed
    /// optimizer's data-parallel group (optimizer state): `dp-cp` (the
    /// `dp-cp-intra` slices with several instances), `edp` for an expert
    /// tensor.
    pub dp_dim: Option<usize>,
}

impl Tensor {
    /// A dense tensor of `shape`, 2 bytes per element, on every stage,
    /// replicated over tp.
    pub fn new(name: impl Into<String>, shape: impl Into<Vec<u64>>) -> Tensor {
        Tensor {
            name: name.into(),
            shape: shape.into(),
            element_bytes: 2,
            layer: LayerRef::Every,
            tp: None,
            expert: None,
            pp_dim: None,
            gtp: false,
            dp_dim: None,
        }
    }

    /// With `bytes` bytes per element.
    #[must_use]
    pub fn element_bytes(mut self, bytes: u32) -> Tensor {
        self.element_bytes = bytes;
        self
    }

    /// On the stages of `layer`.
    #[must_use]
    pub fn layer(mut self, layer: LayerRef) -> Tensor {
        self.layer = layer;
        self
    }

    /// Dim `dim` split contiguously over tp.
    #[must_use]
    pub fn tp(self, dim: usize) -> Tensor {
        self.tp_stride(dim, 1)
    }

    /// Dim `dim` split over tp with Megatron's `partition_stride` `stride`.
    #[must_use]
    pub fn tp_stride(mut self, dim: usize, stride: u64) -> Tensor {
        self.tp = Some(TpSplit {
            dim,
            blocks: Blocks::Stride(stride),
        });
        self
    }

    /// Dim `dim` made of packed blocks of the given global lengths, each
    /// split over tp.
    #[must_use]
    pub fn tp_blocks(mut self, dim: usize, sizes: impl Into<Vec<u64>>) -> Tensor {
        self.tp = Some(TpSplit {
            dim,
            blocks: Blocks::Sizes(sizes.into()),
        });
        self
    }

    /// The tensor of global expert `e`.
    #[must_use]
    pub fn expert(mut self, e: u32) -> Tensor {
        self.expert = Some(ExpertRef::One(e));
        self
    }

    /// A fused tensor of every expert, dim `dim` split over ep.
    #[must_use]
    pub fn experts_dim(mut self, dim: usize) -> Tensor {
        self.expert = Some(ExpertRef::Fused { dim });
        self
    }

    /// Dim `dim` of layers split over the pipeline stages.
    #[must_use]
    pub fn pp_dim(mut self, dim: usize) -> Tensor {
        self.pp_dim = Some(dim);
        self
    }

    /// Cut by the weight-shard axis (GTP) along dim 0 of its tp shard.
    #[must_use]
    pub fn gtp(mut self) -> Tensor {
        self.gtp = true;
        self
    }

    /// Dim `dim` of its shard cut over the distributed optimizer's
    /// data-parallel group.
    #[must_use]
    pub fn dp_dim(mut self, dim: usize) -> Tensor {
        self.dp_dim = Some(dim);
        self
    }

    /// Its elements, `None` past `u64`.
    pub fn numel(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |a, d| a.checked_mul(*d))
    }

    /// Its bytes, `None` past `u64`.
    pub fn bytes(&self) -> Option<u64> {
        self.numel()?.checked_mul(u64::from(self.element_bytes))
    }
}
