//! A GPT (or MoE GPT) model's tensors from Megatron-LM's arguments, with
//! Megatron-Core's parameter names (the Transformer Engine layer spec,
//! global layer and expert numbers) and partition dims.

use crate::error::{Error, Result};
use crate::megatron::{MegatronArgs, MegatronValue};
use crate::reshard::layers::LayerSplit;
use crate::reshard::model::Model;
use crate::reshard::tensor::{LayerRef, Tensor};

/// A GPT model's shape, as Megatron-LM's arguments give it, with
/// Megatron-Core's defaults. [`model`](Self::model) lists its tensors.
///
/// ```
/// use rank_layout::megatron::MegatronArgs;
/// use rank_layout::reshard::GptModel;
/// let args = MegatronArgs::parse_command_line(
///     "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --vocab-size 1000 \
///      --max-position-embeddings 128 --swiglu --untie-embeddings-and-output-weights",
/// )?;
/// let gpt = GptModel::from_megatron_args(&args)?;
/// assert_eq!(gpt.ffn_hidden_size, 128); // int(4 * 64 * 2 / 3 / 64) * 64
/// let model = gpt.model(&[4, 2])?; // both sides' tp
/// let fc1 = model.index_of("decoder.layers.1.mlp.linear_fc1.weight").unwrap();
/// assert_eq!(model.tensor(fc1).unwrap().shape, [256, 64]);
/// let embedding = model.index_of("embedding.word_embeddings.weight").unwrap();
/// assert_eq!(model.tensor(embedding).unwrap().shape, [1024, 64]); // 1000 padded to 128 * 4
/// assert!(GptModel::from_megatron_args(&MegatronArgs::parse_command_line("--num-layers 2")?).is_err());
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct GptModel {
    /// Transformer layers.
    pub num_layers: u32,
    /// The hidden size.
    pub hidden_size: u64,
    /// The MLP's hidden size.
    pub ffn_hidden_size: u64,
    /// Attention heads.
    pub num_attention_heads: u64,
    /// Key-value heads (the heads without grouped-query attention).
    pub num_query_groups: u64,
    /// Channels per head.
    pub kv_channels: u64,
    /// The vocabulary before padding.
    pub vocab_size: u64,
    /// The padded vocabulary when given (`--padded-vocab-size`).
    pub padded_vocab_size: Option<u64>,
    /// The vocabulary's padding, times tp (default 128).
    pub make_vocab_size_divisible_by: u64,
    /// A gated MLP (fc1 is [gate; up], partition stride 2).
    pub swiglu: bool,
    /// An output layer of its own.
    pub untie_embeddings: bool,
    /// Biases on the linear layers.
    pub add_bias_linear: bool,
    /// A bias on the QKV projection.
    pub add_qkv_bias: bool,
    /// LayerNorm (weight and bias) rather than RMSNorm (weight).
    pub layer_norm_bias: bool,
    /// Norms of the queries and keys.
    pub qk_layernorm: bool,
    /// The rows of a learned position embedding (none with rope).
    pub position_embeddings: Option<u64>,
    /// Experts of every MoE layer (0: a dense model).
    pub num_experts: u32,
    /// An expert's MLP hidden size.
    pub moe_ffn_hidden_size: u64,
    /// The shared experts' MLP hidden size.
    pub shared_expert_size: Option<u64>,
    /// Bytes per element (2: bf16).
    pub element_bytes: u32,
}

/// A positive integer argument.
fn int(args: &MegatronArgs, name: &'static str) -> Result<Option<u64>> {
    match args.model_value(name) {
        None => Ok(None),
        Some(MegatronValue::Int(n)) if *n >= 1 => Ok(Some(n.unsigned_abs())),
        Some(v) => Err(Error::ModelArgument {
            name,
            problem: format!("expected an integer of at least 1, got {v}"),
        }),
    }
}

/// A `u32` argument.
fn int32(args: &MegatronArgs, name: &'static str) -> Result<Option<u32>> {
    int(args, name)?
        .map(|n| {
            u32::try_from(n).map_err(|_| Error::ModelArgument {
                name,
                problem: format!("{n} is past 4294967295"),
            })
        })
        .transpose()
}

/// A required positive integer argument.
fn required(args: &MegatronArgs, name: &'static str) -> Result<u64> {
    int(args, name)?.ok_or(Error::ModelArgument {
        name,
        problem: "missing (give it)".to_string(),
    })
}

/// A switch (`default` when not given).
fn flag(args: &MegatronArgs, name: &'static str, default: bool) -> Result<bool> {
    match args.model_value(name) {
        None => Ok(default),
        Some(MegatronValue::Bool(b)) => Ok(*b),
        Some(v) => Err(Error::ModelArgument {
            name,
            problem: format!("expected true or false, got {v}"),
        }),
    }
}

/// A text argument.
fn text<'a>(args: &'a MegatronArgs, name: &'static str) -> Result<Option<&'a str>> {
    match args.model_value(name) {
        None => Ok(None),
        Some(MegatronValue::Text(t)) => Ok(Some(t.as_str())),
        Some(v) => Err(Error::ModelArgument {
            name,
            problem: format!("expected a word, got {v}"),
        }),
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl GptModel {
    /// The model of Megatron-LM's arguments (`num_layers`, `hidden_size`,
    /// `num_attention_heads`, `vocab_size` or `padded_vocab_size`
    /// required), with Megatron-Core's defaults: `ffn_hidden_size` 4 x
    /// hidden (with `swiglu`, `int(8 * hidden / 3 / 64) * 64`),
    /// `kv_channels` hidden / heads, query groups the heads unless
    /// `group_query_attention`, `make_vocab_size_divisible_by` 128,
    /// LayerNorm, biases on the linear layers, a learned position
    /// embedding (`max_position_embeddings` rows), tied embeddings,
    /// `moe_ffn_hidden_size` the `ffn_hidden_size`; every layer an MoE
    /// layer when `num_experts` is given (`--moe-layer-freq 1`).
    ///
    /// # Errors
    /// [`Error::ModelArgument`] naming an argument that is missing, not a
    /// positive integer (or a switch, or a word where one is taken), a
    /// hidden size the heads do not divide (without `kv_channels`), an
    /// unknown normalization, or a learned position embedding without
    /// `max_position_embeddings`.
    pub fn from_megatron_args(args: &MegatronArgs) -> Result<GptModel> {
        let num_layers = int32(args, "num_layers")?.ok_or(Error::ModelArgument {
            name: "num_layers",
            problem: "missing (give it)".to_string(),
        })?;
        let hidden = required(args, "hidden_size")?;
        let heads = required(args, "num_attention_heads")?;
        let swiglu = flag(args, "swiglu", false)?;
        let ffn = match int(args, "ffn_hidden_size")? {
            Some(f) => f,
            // Megatron-LM: int((4 * h * 2 / 3) / 64) * 64.
            None if swiglu => hidden.saturating_mul(8) / 3 / 64 * 64,
            None => hidden.saturating_mul(4),
        };
        let kv_channels = match int(args, "kv_channels")? {
            Some(k) => k,
            None if hidden % heads == 0 => hidden / heads,
            None => {
                return Err(Error::ModelArgument {
                    name: "kv_channels",
                    problem: format!(
                        "not given, and hidden_size ({hidden}) is not divisible by num_attention_heads ({heads})"
                    ),
                });
            }
        };
        let groups = if flag(args, "group_query_attention", false)? {
            int(args, "num_query_groups")?.unwrap_or(heads)
        } else {
            heads
        };
        let padded = int(args, "padded_vocab_size")?;
        let vocab = match (int(args, "vocab_size")?, padded) {
            (Some(v), _) => v,
            (None, Some(p)) => p,
            (None, None) => {
                return Err(Error::ModelArgument {
                    name: "vocab_size",
                    problem: "missing (give it, or padded_vocab_size)".to_string(),
                });
            }
        };
        let layer_norm_bias = match text(args, "normalization")? {
            None | Some("LayerNorm") => true,
            Some("RMSNorm") => false,
            Some(other) => {
                return Err(Error::ModelArgument {
                    name: "normalization",
                    problem: format!("{other:?} is neither LayerNorm nor RMSNorm"),
                });
            }
        };
        let position_embeddings = match text(args, "position_embedding_type")? {
            None | Some("learned_absolute") => Some(int(args, "max_position_embeddings")?.ok_or(
                Error::ModelArgument {
                    name: "max_position_embeddings",
                    problem: "missing: a learned position embedding (the default position_embedding_type) needs its rows".to_string(),
                },
            )?),
            Some(_) => None,
        };
        let num_experts = int32(args, "num_experts")?.unwrap_or(0);
        Ok(GptModel {
            num_layers,
            hidden_size: hidden,
            ffn_hidden_size: ffn,
            num_attention_heads: heads,
            num_query_groups: groups,
            kv_channels,
            vocab_size: vocab,
            padded_vocab_size: padded,
            make_vocab_size_divisible_by: int(args, "make_vocab_size_divisible_by")?.unwrap_or(128),
            swiglu,
            untie_embeddings: flag(args, "untie_embeddings_and_output_weights", false)?,
            add_bias_linear: flag(args, "add_bias_linear", true)?,
            add_qkv_bias: flag(args, "add_qkv_bias", false)?,
            layer_norm_bias,
            qk_layernorm: flag(args, "qk_layernorm", false)?,
            position_embeddings,
            num_experts,
            moe_ffn_hidden_size: int(args, "moe_ffn_hidden_size")?.unwrap_or(ffn),
            shared_expert_size: int(args, "moe_shared_expert_intermediate_size")?,
            element_bytes: 2,
        })
    }

    /// The padded vocabulary for sides of tensor-parallel sizes `tps`:
    /// `padded_vocab_size` when given, else the vocabulary rounded up to
    /// a multiple of `make_vocab_size_divisible_by` times the least common
    /// multiple of the tps, valid on every side (Megatron pads for one tp;
    /// when one side's tp divides the other's this is its padding for the
    /// larger).
    ///
    /// # Errors
    /// [`Error::ModelArgument`] when a given padded vocabulary is not
    /// divisible by a side's tp, or the multiple passes `u64`.
    pub fn padded_vocab(&self, tps: &[u32]) -> Result<u64> {
        let mut lcm = 1u64;
        for &tp in tps {
            let tp = u64::from(tp.max(1));
            lcm = (lcm / gcd(lcm, tp)).saturating_mul(tp);
        }
        if let Some(p) = self.padded_vocab_size {
            return match tps.iter().find(|tp| p % u64::from((**tp).max(1)) != 0) {
                Some(tp) => Err(Error::ModelArgument {
                    name: "padded_vocab_size",
                    problem: format!("{p} is not divisible by tp = {tp}"),
                }),
                None => Ok(p),
            };
        }
        let multiple =
            self.make_vocab_size_divisible_by
                .checked_mul(lcm)
                .ok_or(Error::ModelArgument {
                    name: "make_vocab_size_divisible_by",
                    problem: "times the tps passes 64 bits".to_string(),
                })?;
        Ok(self.vocab_size.div_ceil(multiple).saturating_mul(multiple))
    }

    /// The model's tensors for sides of tensor-parallel sizes `tps` (the
    /// vocabulary padded for all of them), named as Megatron-Core names
    /// them with global layer numbers (and global expert numbers, as its
    /// refit planner resolves them): the word embedding (on the first and
    /// last stages when tied, Megatron-Core's `output_layer.weight` of the
    /// last stage), the position embedding, per layer the QKV projection
    /// (its norm fused), the output projection, the MLP (fc1 with stride
    /// 2 for SwiGLU) or the router and every expert's fc1 and fc2
    /// (`TEGroupedMLP`'s `weight{e}`) and the shared experts, then the
    /// final norm and the untied output layer. The weights of the linear
    /// layers and the embeddings are cut by the weight-shard axis where a
    /// side has one.
    ///
    /// # Errors
    /// [`Error::ModelArgument`] for heads or query groups a side's tp does
    /// not divide (Megatron-Core splits attention by query groups), and
    /// the errors of [`padded_vocab`](Self::padded_vocab) and
    /// [`Model::new`].
    pub fn model(&self, tps: &[u32]) -> Result<Model> {
        for &tp in tps {
            for (name, n) in [
                ("num_attention_heads", self.num_attention_heads),
                ("num_query_groups", self.num_query_groups),
            ] {
                if n % u64::from(tp.max(1)) != 0 {
                    return Err(Error::ModelArgument {
                        name,
                        problem: format!("{n} is not divisible by tp = {tp}"),
                    });
                }
            }
        }
        let h = self.hidden_size;
        let vocab = self.padded_vocab(tps)?;
        let b = self.element_bytes;
        let new = |name: String, shape: Vec<u64>| Tensor::new(name, shape).element_bytes(b);
        let mut ts = Vec::new();
        // A norm fused into a Transformer Engine linear layer is named
        // `..layer_norm_weight`; a norm module of its own `..norm.weight`.
        let norm = |ts: &mut Vec<Tensor>, name: &str, fused: bool, layer: LayerRef, len: u64| {
            let sep = if fused { '_' } else { '.' };
            ts.push(new(format!("{name}{sep}weight"), vec![len]).layer(layer));
            if self.layer_norm_bias {
                ts.push(new(format!("{name}{sep}bias"), vec![len]).layer(layer));
            }
        };
        let embedding_at = if self.untie_embeddings {
            LayerRef::First
        } else {
            LayerRef::Ends
        };
        ts.push(
            new("embedding.word_embeddings.weight".into(), vec![vocab, h])
                .layer(embedding_at)
                .tp(0)
                .gtp(),
        );
        if let Some(rows) = self.position_embeddings {
            ts.push(
                new("embedding.position_embeddings.weight".into(), vec![rows, h])
                    .layer(LayerRef::First),
            );
        }
        let fc1_rows = |size: u64| if self.swiglu { size * 2 } else { size };
        let stride = if self.swiglu { 2 } else { 1 };
        for i in 0..self.num_layers {
            let at = LayerRef::Layer(i);
            let p = format!("decoder.layers.{i}.");
            let qkv = (self.num_attention_heads + 2 * self.num_query_groups) * self.kv_channels;
            norm(
                &mut ts,
                &format!("{p}self_attention.linear_qkv.layer_norm"),
                true,
                at,
                h,
            );
            ts.push(
                new(format!("{p}self_attention.linear_qkv.weight"), vec![qkv, h])
                    .layer(at)
                    .tp(0)
                    .gtp(),
            );
            if self.add_bias_linear || self.add_qkv_bias {
                ts.push(
                    new(format!("{p}self_attention.linear_qkv.bias"), vec![qkv])
                        .layer(at)
                        .tp(0),
                );
            }
            if self.qk_layernorm {
                norm(
                    &mut ts,
                    &format!("{p}self_attention.q_layernorm"),
                    false,
                    at,
                    self.kv_channels,
                );
                norm(
                    &mut ts,
                    &format!("{p}self_attention.k_layernorm"),
                    false,
                    at,
                    self.kv_channels,
                );
            }
            let proj_cols = self.num_attention_heads * self.kv_channels;
            ts.push(
                new(
                    format!("{p}self_attention.linear_proj.weight"),
                    vec![h, proj_cols],
                )
                .layer(at)
                .tp(1)
                .gtp(),
            );
            if self.add_bias_linear {
                ts.push(new(format!("{p}self_attention.linear_proj.bias"), vec![h]).layer(at));
            }
            if self.num_experts == 0 {
                let f = self.ffn_hidden_size;
                norm(
                    &mut ts,
                    &format!("{p}mlp.linear_fc1.layer_norm"),
                    true,
                    at,
                    h,
                );
                ts.push(
                    new(format!("{p}mlp.linear_fc1.weight"), vec![fc1_rows(f), h])
                        .layer(at)
                        .tp_stride(0, stride)
                        .gtp(),
                );
                if self.add_bias_linear {
                    ts.push(
                        new(format!("{p}mlp.linear_fc1.bias"), vec![fc1_rows(f)])
                            .layer(at)
                            .tp_stride(0, stride),
                    );
                }
                ts.push(
                    new(format!("{p}mlp.linear_fc2.weight"), vec![h, f])
                        .layer(at)
                        .tp(1)
                        .gtp(),
                );
                if self.add_bias_linear {
                    ts.push(new(format!("{p}mlp.linear_fc2.bias"), vec![h]).layer(at));
                }
                continue;
            }
            norm(&mut ts, &format!("{p}pre_mlp_layernorm"), false, at, h);
            ts.push(
                new(
                    format!("{p}mlp.router.weight"),
                    vec![u64::from(self.num_experts), h],
                )
                .layer(at),
            );
            let f = self.moe_ffn_hidden_size;
            for e in 0..self.num_experts {
                let x = format!("{p}mlp.experts.");
                ts.push(
                    new(format!("{x}linear_fc1.weight{e}"), vec![fc1_rows(f), h])
                        .layer(at)
                        .expert(e)
                        .tp_stride(0, stride)
                        .gtp(),
                );
                if self.add_bias_linear {
                    ts.push(
                        new(format!("{x}linear_fc1.bias{e}"), vec![fc1_rows(f)])
                            .layer(at)
                            .expert(e)
                            .tp_stride(0, stride),
                    );
                }
                ts.push(
                    new(format!("{x}linear_fc2.weight{e}"), vec![h, f])
                        .layer(at)
                        .expert(e)
                        .tp(1)
                        .gtp(),
                );
                if self.add_bias_linear {
                    ts.push(
                        new(format!("{x}linear_fc2.bias{e}"), vec![h])
                            .layer(at)
                            .expert(e),
                    );
                }
            }
            if let Some(s) = self.shared_expert_size {
                let x = format!("{p}mlp.shared_experts.");
                ts.push(
                    new(format!("{x}linear_fc1.weight"), vec![fc1_rows(s), h])
                        .layer(at)
                        .tp_stride(0, stride)
                        .gtp(),
                );
                ts.push(
                    new(format!("{x}linear_fc2.weight"), vec![h, s])
                        .layer(at)
                        .tp(1)
                        .gtp(),
                );
            }
        }
        norm(&mut ts, "decoder.final_layernorm", false, LayerRef::Last, h);
        if self.untie_embeddings {
            ts.push(
                new("output_layer.weight".into(), vec![vocab, h])
                    .layer(LayerRef::Last)
                    .tp(0)
                    .gtp(),
            );
        }
        Model::new(self.num_layers, self.num_experts, ts)
    }
}

impl LayerSplit {
    /// The layer split Megatron-LM's arguments give:
    /// `pipeline_model_parallel_layout` (chunks), else
    /// `decoder_first_pipeline_num_layers`,
    /// `decoder_last_pipeline_num_layers`,
    /// `num_virtual_stages_per_pipeline_rank` or
    /// `num_layers_per_virtual_pipeline_stage`,
    /// `account_for_embedding_in_pipeline_split` and
    /// `account_for_loss_in_pipeline_split` over the even split.
    ///
    /// ```
    /// use rank_layout::megatron::MegatronArgs;
    /// use rank_layout::reshard::LayerSplit;
    /// let args = MegatronArgs::parse_command_line("--decoder-first-pipeline-num-layers 1 --decoder-last-pipeline-num-layers 3")?;
    /// assert_eq!(LayerSplit::from_megatron_args(&args)?.resolve(10, 4)?.chunks(), &[1, 3, 3, 3]);
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::ModelArgument`] for a value of the wrong type;
    /// [`Error::LayerSplit`] for a layout string that does not read.
    pub fn from_megatron_args(args: &MegatronArgs) -> Result<LayerSplit> {
        if let Some(layout) = text(args, "pipeline_model_parallel_layout")? {
            return LayerSplit::parse_megatron_layout(layout);
        }
        let mut split = LayerSplit::even();
        if let Some(n) = int32(args, "decoder_first_pipeline_num_layers")? {
            split = split.first(n);
        }
        if let Some(n) = int32(args, "decoder_last_pipeline_num_layers")? {
            split = split.last(n);
        }
        if let Some(v) = int32(args, "num_virtual_stages_per_pipeline_rank")? {
            split = split.virtual_stages(v);
        }
        if let Some(n) = int32(args, "num_layers_per_virtual_pipeline_stage")? {
            split = split.layers_per_virtual_stage(n);
        }
        if flag(args, "account_for_embedding_in_pipeline_split", false)? {
            split = split.embedding_counts();
        }
        if flag(args, "account_for_loss_in_pipeline_split", false)? {
            split = split.loss_counts();
        }
        Ok(split)
    }
}
