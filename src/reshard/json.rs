//! The tensors file: a model as JSON (feature `serde`), read with a
//! message naming the tensor and the key, and written back.
//!
//! ```json
//! {"num_layers": 4, "num_experts": 8, "tensors": [
//!   {"name": "l0.qkv", "shape": [144, 48], "element_bytes": 2, "layer": 0, "tp_dim": 0, "tp_stride": 3},
//!   {"name": "embedding", "shape": [96, 48], "layer": "first", "tp_dim": 0},
//!   {"name": "l1.e5.fc1", "shape": [48, 48], "layer": 1, "expert": 5, "tp_dim": 0, "tp_stride": 2},
//!   {"name": "l1.experts", "shape": [8, 48, 48], "layer": 1, "ep_dim": 0, "tp_dim": 1},
//!   {"name": "kv", "shape": [4, 8, 64], "pp_dim": 0, "tp_dim": 1}]}
//! ```

use crate::cast::{low32, saturating_usize};
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::reshard::model::Model;
use crate::reshard::tensor::{Blocks, ExpertRef, LayerRef, Tensor};

/// The keys of the file's table.
const TOP: [&str; 3] = ["num_layers", "num_experts", "tensors"];

/// The keys of a tensor.
const KEYS: [&str; 13] = [
    "name",
    "shape",
    "element_bytes",
    "layer",
    "tp_dim",
    "tp_stride",
    "tp_sizes",
    "expert",
    "ep_dim",
    "pp_dim",
    "gtp",
    "dp_dim",
    "comment",
];

fn bad(message: String) -> Error {
    Error::BadTensorsFile { message }
}

/// What a value is, for messages.
fn found(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a table".into(),
        other => other.to_string(),
    }
}

/// A reader of one table's keys, naming where it is in messages.
struct Keys<'a> {
    map: &'a Map<String, Value>,
    at: String,
}

impl Keys<'_> {
    fn fail(&self, key: &str, expected: &str, got: &Value) -> Error {
        bad(format!(
            "{}: key {key:?} must be {expected}, got {}",
            self.at,
            found(got)
        ))
    }

    fn int(&self, key: &str, min: u64, max: u64) -> Result<Option<u64>> {
        match self.map.get(key) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if n >= min && n <= max => Ok(Some(n)),
                _ => Err(self.fail(key, &format!("an integer from {min} to {max}"), v)),
            },
        }
    }

    fn dim(&self, key: &str) -> Result<Option<usize>> {
        // A dim index; the model checks it against the shape.
        Ok(self.int(key, 0, 255)?.map(saturating_usize))
    }

    fn ints(&self, key: &str) -> Result<Option<Vec<u64>>> {
        match self.map.get(key) {
            None => Ok(None),
            Some(v) => {
                let list = v.as_array().and_then(|items| {
                    items
                        .iter()
                        .map(|x| x.as_u64().filter(|n| *n >= 1))
                        .collect::<Option<Vec<u64>>>()
                });
                match list {
                    Some(list) if !list.is_empty() => Ok(Some(list)),
                    _ => Err(self.fail(key, "a list of integers of at least 1", v)),
                }
            }
        }
    }

    fn unknown(&self, known: &[&str]) -> Result<()> {
        match self.map.keys().find(|k| !known.contains(&k.as_str())) {
            Some(k) => Err(bad(format!(
                "{}: unknown key {k:?} (the keys: {})",
                self.at,
                known.join(", ")
            ))),
            None => Ok(()),
        }
    }
}

/// One tensor of the file.
fn tensor(i: usize, v: &Value) -> Result<Tensor> {
    let map = v
        .as_object()
        .ok_or_else(|| bad(format!("tensors[{i}] must be a table, got {}", found(v))))?;
    let name = match map.get("name") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(other) => {
            return Err(bad(format!(
                "tensors[{i}]: key \"name\" must be a non-empty string, got {}",
                found(other)
            )));
        }
        None => return Err(bad(format!("tensors[{i}]: missing key \"name\""))),
    };
    let k = Keys {
        map,
        at: format!("tensors[{i}] ({name})"),
    };
    k.unknown(&KEYS)?;
    let shape = match map.get("shape") {
        None => return Err(bad(format!("{}: missing key \"shape\"", k.at))),
        Some(v) => v
            .as_array()
            .and_then(|items| {
                items
                    .iter()
                    .map(Value::as_u64)
                    .collect::<Option<Vec<u64>>>()
            })
            .ok_or_else(|| k.fail("shape", "a list of integers", v))?,
    };
    let mut t = Tensor::new(name, shape);
    if let Some(b) = k.int("element_bytes", 1, u64::from(u32::MAX))? {
        // Bounded by u32::MAX just above.
        t.element_bytes = low32(b);
    }
    t.layer = match map.get("layer") {
        None => LayerRef::Every,
        Some(Value::String(s)) => match s.as_str() {
            "first" => LayerRef::First,
            "last" => LayerRef::Last,
            "ends" => LayerRef::Ends,
            "every" => LayerRef::Every,
            _ => {
                return Err(k.fail(
                    "layer",
                    "a layer number, \"first\", \"last\", \"ends\" or \"every\"",
                    &Value::String(s.clone()),
                ));
            }
        },
        Some(_) => LayerRef::Layer(k.int("layer", 0, u64::from(u32::MAX))?.map_or(0, low32)),
    };
    let stride = k.int("tp_stride", 1, u64::MAX)?;
    let sizes = k.ints("tp_sizes")?;
    match (k.dim("tp_dim")?, stride, sizes) {
        (Some(_), Some(_), Some(_)) => {
            return Err(bad(format!(
                "{}: give tp_stride or tp_sizes, not both",
                k.at
            )));
        }
        (Some(dim), _, Some(sizes)) => t = t.tp_blocks(dim, sizes),
        (Some(dim), stride, None) => t = t.tp_stride(dim, stride.unwrap_or(1)),
        (None, Some(_), _) | (None, _, Some(_)) => {
            return Err(bad(format!(
                "{}: tp_stride and tp_sizes need a tp_dim",
                k.at
            )));
        }
        (None, None, None) => {}
    }
    match (k.int("expert", 0, u64::from(u32::MAX))?, k.dim("ep_dim")?) {
        (Some(_), Some(_)) => {
            return Err(bad(format!(
                "{}: give expert (one expert's tensor) or ep_dim (every expert's), not both",
                k.at
            )));
        }
        // Bounded by u32::MAX just above.
        (Some(e), None) => t.expert = Some(ExpertRef::One(low32(e))),
        (None, Some(dim)) => t.expert = Some(ExpertRef::Fused { dim }),
        (None, None) => {}
    }
    t.pp_dim = k.dim("pp_dim")?;
    t.dp_dim = k.dim("dp_dim")?;
    t.gtp = match map.get("gtp") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => return Err(k.fail("gtp", "true or false", other)),
    };
    Ok(t)
}

impl Model {
    /// The model of a tensors file (needs the feature `serde`): a table
    /// with `num_layers`, `num_experts` (default 0) and `tensors`, each
    /// tensor a table with `name`, `shape` and optionally `element_bytes`
    /// (default 2), `layer` (a number, `"first"`, `"last"`, `"ends"`;
    /// absent: every stage), `tp_dim` with `tp_stride` or `tp_sizes`,
    /// `expert` or `ep_dim`, `pp_dim`, `gtp`, `dp_dim`, and a free
    /// `comment`.
    ///
    /// ```
    /// use rank_layout::reshard::Model;
    /// let model = Model::from_json(r#"{"num_layers": 2, "tensors": [
    ///     {"name": "l0.qkv", "shape": [144, 48], "layer": 0, "tp_dim": 0, "tp_stride": 3}]}"#)?;
    /// assert_eq!(Model::from_json(&model.to_json())?, model);
    /// let err = Model::from_json(r#"{"num_layers": 2, "tensors": [{"name": "x"}]}"#).unwrap_err();
    /// assert_eq!(err.to_string(), "invalid tensors file: tensors[0] (x): missing key \"shape\"");
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::BadTensorsFile`] naming the tensor and key: text that is
    /// not JSON (with its line), a missing or unknown key, a value of the
    /// wrong type or range, `tp_stride` with `tp_sizes`, `expert` with
    /// `ep_dim`; then every error of [`Model::new`].
    pub fn from_json(text: &str) -> Result<Model> {
        let doc: Value = serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
        let map = doc.as_object().ok_or_else(|| {
            bad(format!(
                "expected a table with num_layers and tensors, got {}",
                found(&doc)
            ))
        })?;
        let k = Keys {
            map,
            at: "the file".to_string(),
        };
        k.unknown(&TOP)?;
        let num_layers = k
            .int("num_layers", 0, u64::from(u32::MAX))?
            .ok_or_else(|| bad("the file: missing key \"num_layers\"".to_string()))?;
        let num_experts = k.int("num_experts", 0, u64::from(u32::MAX))?.unwrap_or(0);
        let tensors = match map.get("tensors") {
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| tensor(i, v))
                .collect::<Result<Vec<Tensor>>>()?,
            Some(other) => return Err(k.fail("tensors", "a list of tables", other)),
            None => return Err(bad("the file: missing key \"tensors\"".to_string())),
        };
        // Both bounded by u32::MAX above.
        Model::new(low32(num_layers), low32(num_experts), tensors)
    }

    /// The model as a tensors file ([`from_json`](Self::from_json) reads
    /// it back to an equal model; needs the feature `serde`).
    pub fn to_json(&self) -> String {
        let tensors: Vec<Value> = self
            .tensors()
            .iter()
            .map(|t| {
                let mut m = Map::new();
                m.insert("name".into(), json!(t.name));
                m.insert("shape".into(), json!(t.shape));
                m.insert("element_bytes".into(), json!(t.element_bytes));
                match t.layer {
                    LayerRef::Layer(l) => {
                        m.insert("layer".into(), json!(l));
                    }
                    LayerRef::First => {
                        m.insert("layer".into(), json!("first"));
                    }
                    LayerRef::Last => {
                        m.insert("layer".into(), json!("last"));
                    }
                    LayerRef::Ends => {
                        m.insert("layer".into(), json!("ends"));
                    }
                    LayerRef::Every => {}
                }
                if let Some(tp) = &t.tp {
                    m.insert("tp_dim".into(), json!(tp.dim));
                    match &tp.blocks {
                        Blocks::Stride(s) => m.insert("tp_stride".into(), json!(s)),
                        Blocks::Sizes(sizes) => m.insert("tp_sizes".into(), json!(sizes)),
                    };
                }
                match t.expert {
                    Some(ExpertRef::One(e)) => {
                        m.insert("expert".into(), json!(e));
                    }
                    Some(ExpertRef::Fused { dim }) => {
                        m.insert("ep_dim".into(), json!(dim));
                    }
                    None => {}
                }
                if let Some(d) = t.pp_dim {
                    m.insert("pp_dim".into(), json!(d));
                }
                if t.gtp {
                    m.insert("gtp".into(), json!(true));
                }
                if let Some(d) = t.dp_dim {
                    m.insert("dp_dim".into(), json!(d));
                }
                Value::Object(m)
            })
            .collect();
        json!({
            "num_layers": self.num_layers(),
            "num_experts": self.num_experts(),
            "tensors": tensors,
        })
        .to_string()
    }
}
