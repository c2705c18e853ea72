//! Reading a modules file (feature `serde`): the forms a [`ModulesSpec`]
//! may be written in, each turned into the one value.
//!
//! - The file: a table (JSON object) with `modules`, and optionally
//!   `edges` or `topology`, `colocated` and `rank_offset`; anything else
//!   is an error saying so and naming what was found.
//! - `modules`: an array of tables with a `name`, or a table of tables by
//!   name, in the order written.
//! - A module: `mesh = "tp=2,dp=4"`; or `dims` as that text, as `[[name,
//!   size], ...]` or as a table in order; or the dims as keys (`tp`, `gtp`,
//!   `cp`, `dp`, `pp`, in MIMO's order unless `order = "dp-tp"` says
//!   another); or `megatron = {...}`; and `views`.
//! - Edges: `[[edges]]` with `src`/`dst` (or `from`/`to`), or Megatron-Core's
//!   `topology = { vision = ["llm"], llm = [] }`, which names every module.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::config::Config;
use crate::modules::lanes::MODULE_DIMS;
use crate::modules::spec::{EdgeSpec, ModuleSpec, ModulesSpec};

/// Entries of a map in the order the deserializer gives them.
struct Ordered<T>(Vec<(String, T)>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Ordered<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Ordered<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered<T>, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, T>()? {
                    if out.iter().any(|(o, _): &(String, T)| *o == k) {
                        return Err(de::Error::custom(format!("{k:?} is given twice")));
                    }
                    out.push((k, v));
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

/// A module's `dims`: text, pairs, or a table in order.
struct Dims(DimsForm);

enum DimsForm {
    Text(String),
    Pairs(Vec<(String, u32)>),
}

impl<'de> Deserialize<'de> for Dims {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Dims;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    r#"dims as "tp=2,dp=4", [["tp", 2], ["dp", 4]] or a table { tp = 2, dp = 4 }"#,
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Dims, E> {
                Ok(Dims(DimsForm::Text(v.to_owned())))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Dims, A::Error> {
                let mut out = Vec::new();
                while let Some(pair) = seq.next_element::<(String, u32)>()? {
                    out.push(pair);
                }
                Ok(Dims(DimsForm::Pairs(out)))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Dims, A::Error> {
                let Ordered(pairs) =
                    Ordered::<u32>::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Dims(DimsForm::Pairs(pairs)))
            }
        }
        d.deserialize_any(V)
    }
}

/// One module as written.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModule {
    name: Option<String>,
    mesh: Option<String>,
    dims: Option<Dims>,
    order: Option<String>,
    tp: Option<u32>,
    gtp: Option<u32>,
    cp: Option<u32>,
    dp: Option<u32>,
    pp: Option<u32>,
    #[serde(default)]
    views: Vec<String>,
    megatron: Option<Config>,
}

impl RawModule {
    /// The module named `name` (the table's key, or its `name`).
    fn spec<E: de::Error>(self, name: String) -> Result<ModuleSpec, E> {
        let keys: Vec<(&str, u32)> = MODULE_DIMS
            .iter()
            .zip([self.tp, self.gtp, self.cp, self.dp, self.pp])
            .filter_map(|(n, s)| s.map(|s| (*n, s)))
            .collect();
        let given = [
            self.mesh.is_some(),
            self.dims.is_some(),
            !keys.is_empty(),
            self.megatron.is_some(),
        ];
        if given.iter().filter(|g| **g).count() > 1 {
            return Err(E::custom(format!(
                "module {name}: give one of mesh, dims, the dim keys (tp, gtp, cp, dp, pp) and megatron"
            )));
        }
        if self.order.is_some() && keys.is_empty() {
            return Err(E::custom(format!(
                "module {name}: order goes with the dim keys (tp = 2, dp = 4)"
            )));
        }
        let mut spec = ModuleSpec::dims(&name, Vec::<(String, u32)>::new());
        spec.views = self.views;
        spec.megatron = self.megatron;
        match self.dims {
            Some(Dims(DimsForm::Text(t))) => spec.mesh = Some(t),
            Some(Dims(DimsForm::Pairs(p))) => spec.dims = p,
            None => {}
        }
        if let Some(m) = self.mesh {
            spec.mesh = Some(m);
        }
        if !keys.is_empty() {
            spec.dims = match self.order {
                None => keys.iter().map(|(n, s)| ((*n).to_owned(), *s)).collect(),
                Some(order) => {
                    let names: Vec<&str> = order.split('-').map(str::trim).collect();
                    let mut out = Vec::with_capacity(names.len());
                    for n in &names {
                        let size = keys.iter().find(|(k, _)| k == n).map(|(_, s)| *s).ok_or_else(|| {
                            E::custom(format!("module {name}: order {order:?} names {n:?}, which has no size here"))
                        })?;
                        out.push(((*n).to_owned(), size));
                    }
                    if let Some((k, _)) = keys.iter().find(|(k, _)| !names.contains(k)) {
                        return Err(E::custom(format!(
                            "module {name}: order {order:?} leaves out {k}"
                        )));
                    }
                    out
                }
            };
        }
        Ok(spec)
    }
}

/// `modules`: an array of tables with names, or a table of tables.
struct RawModules(Vec<ModuleSpec>);

impl<'de> Deserialize<'de> for RawModules {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawModules;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "modules as an array of tables with a name, or a table of tables by name",
                )
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawModules, A::Error> {
                let mut out = Vec::new();
                while let Some(m) = seq.next_element::<RawModule>()? {
                    let name = m
                        .name
                        .clone()
                        .ok_or_else(|| de::Error::missing_field("name"))?;
                    out.push(m.spec(name)?);
                }
                Ok(RawModules(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawModules, A::Error> {
                let Ordered(entries) =
                    Ordered::<RawModule>::deserialize(de::value::MapAccessDeserializer::new(map))?;
                let mut out = Vec::with_capacity(entries.len());
                for (key, m) in entries {
                    if let Some(n) = m.name.as_ref().filter(|n| **n != key) {
                        return Err(de::Error::custom(format!(
                            "module {key} is named {n:?} inside"
                        )));
                    }
                    out.push(m.spec(key)?);
                }
                Ok(RawModules(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// The whole file as written.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    #[serde(default)]
    colocated: bool,
    #[serde(default)]
    rank_offset: u32,
    #[serde(default)]
    modules: Option<RawModules>,
    #[serde(default)]
    edges: Vec<EdgeSpec>,
    topology: Option<Ordered<Vec<String>>>,
}

/// What a modules file must be, for the error when it is something else.
const FILE_IS_A_TABLE: &str = "a modules file must be a table with `modules` (and optionally `edges` or `topology`, `colocated`, `rank_offset`)";

/// The whole file: a table, read as [`RawSpec`]; anything else is an error
/// saying what the file must be and what it is (serde would otherwise read
/// an array as the fields in order: "expected a boolean").
struct FileVisitor;

impl FileVisitor {
    fn not_a_table<E: de::Error>(found: &str) -> Result<RawSpec, E> {
        Err(E::custom(format!("{FILE_IS_A_TABLE}; found {found}")))
    }
}

impl<'de> Visitor<'de> for FileVisitor {
    type Value = RawSpec;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(FILE_IS_A_TABLE)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawSpec, A::Error> {
        RawSpec::deserialize(de::value::MapAccessDeserializer::new(map))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<RawSpec, A::Error> {
        Self::not_a_table("an array")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<RawSpec, E> {
        Self::not_a_table(&format!("the boolean {v}"))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawSpec, E> {
        Self::not_a_table(&format!("the number {v}"))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawSpec, E> {
        Self::not_a_table(&format!("the number {v}"))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<RawSpec, E> {
        Self::not_a_table(&format!("the number {v}"))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<RawSpec, E> {
        Self::not_a_table("a string")
    }
    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<RawSpec, E> {
        Self::not_a_table("bytes")
    }
    fn visit_unit<E: de::Error>(self) -> Result<RawSpec, E> {
        Self::not_a_table("null")
    }
    fn visit_none<E: de::Error>(self) -> Result<RawSpec, E> {
        Self::not_a_table("null")
    }
}

impl<'de> Deserialize<'de> for ModulesSpec {
    /// Any of the forms of the module documentation (`modules::spec_file`).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = d.deserialize_any(FileVisitor)?;
        let modules = raw.modules.map(|m| m.0).unwrap_or_default();
        let mut spec = ModulesSpec::new(modules);
        spec.colocated = raw.colocated;
        spec.rank_offset = raw.rank_offset;
        spec.edges = raw.edges;
        if let Some(Ordered(topology)) = raw.topology {
            if let Some(m) = spec
                .modules
                .iter()
                .find(|m| !topology.iter().any(|(k, _)| *k == m.name))
            {
                return Err(de::Error::custom(format!(
                    "module {} is not in the topology (Megatron-Core's topology names every module, with [] for one without an outgoing edge)",
                    m.name
                )));
            }
            if let Some((k, _)) = topology
                .iter()
                .find(|(k, _)| !spec.modules.iter().any(|m| m.name == *k))
            {
                return Err(de::Error::custom(format!(
                    "the topology names {k:?}, which is not a module"
                )));
            }
            for (src, dsts) in topology {
                for dst in dsts {
                    spec = spec.edge(&src, &dst);
                }
            }
        }
        Ok(spec)
    }
}
