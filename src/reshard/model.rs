//! A model: its layers, its experts and its tensors, checked once.

use crate::cast::to_usize;
use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::reshard::region::MAX_DIMS;
use crate::reshard::tensor::{Blocks, ExpertRef, LayerRef, Tensor};

/// The tensors of a model, with the number of layers the pipeline stages
/// split and the number of experts the expert-parallel ranks split:
/// checked once, independent of any layout.
///
/// ```
/// use rank_layout::reshard::{LayerRef, Model, Tensor};
/// let model = Model::new(4, 0, vec![
///     Tensor::new("embedding", [96, 48]).layer(LayerRef::First).tp(0),
///     Tensor::new("l0.qkv", [144, 48]).layer(LayerRef::Layer(0)).tp_stride(0, 3),
/// ])?;
/// assert_eq!(model.index_of("l0.qkv"), Some(1));
/// let bad = Model::new(4, 0, vec![Tensor::new("l9", [8]).layer(LayerRef::Layer(9))]);
/// assert_eq!(bad.unwrap_err().to_string(), "tensor l9: layer 9 is out of range (the model has 4 layers)");
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    num_layers: u32,
    num_experts: u32,
    tensors: Vec<Tensor>,
    names: HashMap<String, u32>,
}

impl Model {
    /// A model of `num_layers` layers, `num_experts` experts (0: none) and
    /// `tensors`, each checked.
    ///
    /// # Errors
    /// - [`Error::ZeroTensorDim`] for a dim of size 0;
    /// - [`Error::LayerOutOfRange`], [`Error::ExpertOutOfRange`];
    /// - [`Error::BadTensor`] for no dims or more than
    ///   [`MAX_DIMS`](crate::reshard::MAX_DIMS), 0 bytes per element, a dim
    ///   index past the shape, one dim split twice, a `tp_stride` that
    ///   does not divide its dim, packed block lengths
    ///   that do not add up to the dim, a stride of 0, a `pp_dim` with a
    ///   layer or a length not a multiple of the layers, a fused expert dim
    ///   not a multiple of the experts, a name given twice, more than
    ///   2^32 tensors, or a size past `u64`.
    pub fn new(num_layers: u32, num_experts: u32, tensors: Vec<Tensor>) -> Result<Model> {
        let mut names = HashMap::with_capacity(tensors.len());
        for (i, t) in tensors.iter().enumerate() {
            check(t, num_layers, num_experts)?;
            let index =
                u32::try_from(i).map_err(|_| bad(t, "a model holds at most 2^32 tensors"))?;
            if names.insert(t.name.clone(), index).is_some() {
                return Err(bad(t, "the name is given twice"));
            }
        }
        Ok(Model {
            num_layers,
            num_experts,
            tensors,
            names,
        })
    }

    /// The number of layers.
    pub fn num_layers(&self) -> u32 {
        self.num_layers
    }

    /// The number of experts (0: none).
    pub fn num_experts(&self) -> u32 {
        self.num_experts
    }

    /// The tensors, in order (a transfer names its tensor by its index here).
    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }

    /// The tensor numbered `index`.
    pub fn tensor(&self, index: u32) -> Option<&Tensor> {
        self.tensors.get(to_usize(index))
    }

    /// The index of the tensor named `name`.
    pub fn index_of(&self, name: &str) -> Option<u32> {
        self.names.get(name).copied()
    }

    /// Checks that `other` (the same model described for the other side,
    /// from its own arguments, say) has the same layers, experts and
    /// tensors, each of the same name, shape and element size, in the
    /// same order: a reshard moves one model.
    ///
    /// ```
    /// use rank_layout::reshard::{Model, Tensor};
    /// let a = Model::new(1, 0, vec![Tensor::new("w", [8, 4])])?;
    /// let b = Model::new(1, 0, vec![Tensor::new("w", [8, 6])])?;
    /// assert!(a.same_as(&a.clone()).is_ok());
    /// assert_eq!(a.same_as(&b).unwrap_err().to_string(), "tensor w's shape differs between the sides: [8, 4] (from) and [8, 6] (to)");
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::ModelMismatch`] naming the first difference.
    pub fn same_as(&self, other: &Model) -> Result<()> {
        let differ = |what: String, a: String, b: String| {
            Err(Error::ModelMismatch {
                what,
                from: a,
                to: b,
            })
        };
        if self.num_layers != other.num_layers {
            return differ(
                "num_layers".into(),
                self.num_layers.to_string(),
                other.num_layers.to_string(),
            );
        }
        if self.num_experts != other.num_experts {
            return differ(
                "num_experts".into(),
                self.num_experts.to_string(),
                other.num_experts.to_string(),
            );
        }
        if self.tensors.len() != other.tensors.len() {
            return differ(
                "the number of tensors".into(),
                self.tensors.len().to_string(),
                other.tensors.len().to_string(),
            );
        }
        for (a, b) in self.tensors.iter().zip(&other.tensors) {
            if a.name != b.name {
                return differ("a tensor's name".into(), a.name.clone(), b.name.clone());
            }
            if a.shape != b.shape {
                return differ(
                    format!("tensor {}'s shape", a.name),
                    format!("{:?}", a.shape),
                    format!("{:?}", b.shape),
                );
            }
            if a.element_bytes != b.element_bytes {
                return differ(
                    format!("tensor {}'s element_bytes", a.name),
                    a.element_bytes.to_string(),
                    b.element_bytes.to_string(),
                );
            }
        }
        Ok(())
    }

    /// Every tensor's elements, summed (`None` past `u64`).
    pub fn numel(&self) -> Option<u64> {
        self.tensors
            .iter()
            .try_fold(0u64, |a, t| a.checked_add(t.numel()?))
    }

    /// Every tensor's bytes, summed (`None` past `u64`).
    pub fn bytes(&self) -> Option<u64> {
        self.tensors
            .iter()
            .try_fold(0u64, |a, t| a.checked_add(t.bytes()?))
    }
}

fn bad(t: &Tensor, problem: impl Into<String>) -> Error {
    Error::BadTensor {
        tensor: t.name.clone(),
        problem: problem.into(),
    }
}

/// Checks one tensor against the model's layers and experts.
fn check(t: &Tensor, num_layers: u32, num_experts: u32) -> Result<()> {
    let dims = t.shape.len();
    if dims == 0 || dims > MAX_DIMS {
        return Err(bad(t, format!("it has {dims} dims (from 1 to {MAX_DIMS})")));
    }
    if let Some(dim) = t.shape.iter().position(|d| *d == 0) {
        return Err(Error::ZeroTensorDim {
            tensor: t.name.clone(),
            dim,
        });
    }
    if t.element_bytes == 0 {
        return Err(bad(t, "element_bytes must be at least 1"));
    }
    if t.bytes().is_none() {
        return Err(bad(t, "its size in bytes does not fit 64 bits"));
    }
    let dim_of = |what: &str, dim: usize| -> Result<u64> {
        t.shape.get(dim).copied().ok_or_else(|| {
            bad(
                t,
                format!("{what} {dim} is past its {dims} dims (counted from 0)"),
            )
        })
    };
    let mut split: Vec<(&str, usize)> = Vec::new();
    if let LayerRef::Layer(layer) = t.layer {
        if layer >= num_layers {
            return Err(Error::LayerOutOfRange {
                tensor: t.name.clone(),
                layer: u64::from(layer),
                num_layers,
            });
        }
    }
    if let Some(tp) = &t.tp {
        let len = dim_of("tp_dim", tp.dim)?;
        match &tp.blocks {
            Blocks::Stride(0) => return Err(bad(t, "tp_stride must be at least 1")),
            Blocks::Stride(stride) if len % stride != 0 => {
                return Err(bad(
                    t,
                    format!(
                        "tp_dim {} ({len}) is not divisible by tp_stride {stride}",
                        tp.dim
                    ),
                ));
            }
            Blocks::Stride(_) => {}
            Blocks::Sizes(sizes) => {
                if sizes.is_empty() || sizes.contains(&0) {
                    return Err(bad(t, "tp_sizes must be block lengths of at least 1"));
                }
                let sum = sizes.iter().try_fold(0u64, |a, s| a.checked_add(*s));
                if sum != Some(len) {
                    return Err(bad(
                        t,
                        format!(
                            "tp_sizes {sizes:?} add up to {}, not dim {} ({len})",
                            sum.map_or("more than 2^64".to_string(), |s| s.to_string()),
                            tp.dim
                        ),
                    ));
                }
            }
        }
        split.push(("tp_dim", tp.dim));
    }
    match t.expert {
        Some(ExpertRef::One(e)) if e >= num_experts => {
            return Err(Error::ExpertOutOfRange {
                tensor: t.name.clone(),
                expert: u64::from(e),
                num_experts,
            });
        }
        Some(ExpertRef::Fused { dim }) => {
            let len = dim_of("ep_dim", dim)?;
            if num_experts == 0 || len % u64::from(num_experts) != 0 {
                return Err(bad(
                    t,
                    format!(
                        "ep_dim {dim} ({len}) is not a multiple of the model's {num_experts} experts"
                    ),
                ));
            }
            split.push(("ep_dim", dim));
        }
        _ => {}
    }
    if let Some(dim) = t.pp_dim {
        let len = dim_of("pp_dim", dim)?;
        if t.layer != LayerRef::Every {
            return Err(bad(
                t,
                "a tensor with pp_dim is split over every stage: give it no layer",
            ));
        }
        if num_layers == 0 || len % u64::from(num_layers) != 0 {
            return Err(bad(
                t,
                format!(
                    "pp_dim {dim} ({len}) is not a multiple of the model's {num_layers} layers"
                ),
            ));
        }
        split.push(("pp_dim", dim));
    }
    for (i, (a, da)) in split.iter().enumerate() {
        if let Some((b, _)) = split.iter().skip(i + 1).find(|(_, db)| db == da) {
            return Err(bad(t, format!("{a} and {b} are both dim {da}")));
        }
    }
    if let Some(dim) = t.dp_dim {
        dim_of("dp_dim", dim)?;
    }
    Ok(())
}
