//! Flags merged over a configuration file, in one place.
//!
//! The file is read by [`config_file`] (the library half of this package,
//! shared with the fuzz targets): JSON or TOML text into keys and values.
//! The file and the flags have the same keys: the flags are
//! serialized ([`SetupArgs`] field names are the keys), laid over the
//! file's keys, and the result is read as a library [`Config`], the
//! machine keys and the mesh keys. A new layout key is therefore one new
//! field of [`SetupArgs`]; the file reading and the merge never name keys.
//!
//! Megatron-LM's argument names (as file keys, as flags, or in a pasted
//! `--megatron-args` command line) are read through the library's table
//! ([`crate::megatron`]) and become the keys they decide. The layers, each
//! over the one before: the file, `--megatron-args` with the Megatron-LM
//! flags, our flags. Within one layer (the file, or the flags), a key and
//! a Megatron-LM name that give different layouts are an error naming both.
//! A weight-shard count (`tensor_parallel_num_weight_shards`) and
//! `gtp_remat` are two names of one key: the later layer's wins, and the
//! count is divided by the tp the merged keys end with (etp for the
//! expert count), as Megatron-Core divides it by the tp it is given with.
//! torchrun's world size (`--nproc-per-node` times `--nnodes` in a pasted
//! line) is what the launch starts: a world size that differs, from any
//! layer, is an error naming both. A mesh given by the flags replaces the
//! file's mesh with its views and flattens. Every key remembers where it
//! came from, for the messages.

use std::collections::HashMap;
use std::path::Path;

use rank_layout::machine::{Hosts, PlaceOptions, Shortfall};
use rank_layout::megatron::{MegatronArg, MegatronArgs, MegatronValue, Source, weight_shards};
use rank_layout::{Config, Error, Layout, Topology};
use rank_layout_cli::config_file;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::args::SetupArgs;
use crate::error::Failure;
use crate::megatron;

/// What a command works on: a layout's configuration or a mesh, and the
/// machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// The layout's configuration, as given (nothing derived yet); with a
    /// mesh, only its `rank_offset` is used.
    pub config: Config,
    /// The mesh, when one is given (`--mesh`, `--device-mesh` or the keys).
    pub mesh: Option<MeshInput>,
    /// GPUs per node and nodes per domain (8 GPUs per node unless given).
    pub topology: Topology,
    /// GPUs per node as given (the flag over the file), `None` when
    /// neither gives it: with a host table, the table's count applies
    /// ([`Setup::gpus_on`]).
    pub gpus_per_node: Option<u32>,
    /// Lines for stderr: the Megatron-LM arguments `--megatron-args` used.
    pub notes: Vec<String>,
}

impl Setup {
    /// The GPUs per node of the job on `hosts`: as given (the flag over
    /// the file), else the count of the table's healthy hosts, the
    /// library's one rule ([`Hosts::gpus_per_node`]).
    ///
    /// # Errors
    /// The library's, naming the command's flag and key where it names the
    /// library's field.
    pub fn gpus_on(&self, hosts: &Hosts) -> Result<u32, Failure> {
        hosts.gpus_per_node(self.gpus_per_node).map_err(|e| {
            Failure::Message(e.to_string().replace(
                "PlaceOptions::gpus_per_node",
                "--gpus-per-node (or gpus_per_node in --config)",
            ))
        })
    }

    /// How to place the job on `hosts`: its GPUs per node
    /// ([`Setup::gpus_on`]) and `shortfall`.
    ///
    /// # Errors
    /// As [`Setup::gpus_on`].
    pub fn place_options(
        &self,
        hosts: &Hosts,
        shortfall: Shortfall,
    ) -> Result<PlaceOptions, Failure> {
        Ok(PlaceOptions::default()
            .gpus_per_node(self.gpus_on(hosts)?)
            .shortfall(shortfall))
    }
}

/// A mesh as given: its text and those of its views and flattens, each
/// with where it came from (a flag, or a key of a file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshInput {
    /// `tp=2,cp=2,dp=4`.
    pub text: String,
    /// Written in DeviceMesh's order (`--device-mesh`, the last dim fastest).
    pub device_order: bool,
    /// `--mesh` or `mesh (in layout.toml)`.
    pub origin: String,
    /// The views' texts and origins.
    pub views: Vec<(String, String)>,
    /// The flattens' texts and origins.
    pub flattens: Vec<(String, String)>,
    /// The first rank.
    pub rank_offset: u32,
}

/// The keys of the machine, which are not the library's [`Config`].
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Machine {
    gpus_per_node: Option<u32>,
    nodes_per_domain: Option<u32>,
}

/// The keys of a mesh, which are not the library's [`Config`].
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MeshKeys {
    mesh: Option<String>,
    device_mesh: Option<String>,
    views: Option<Vec<String>>,
    flattens: Option<Vec<String>>,
}

/// The names of [`Machine`]'s keys, taken out of the merged keys before the
/// rest is read as a [`Config`]; the only flags `--modules` may be given
/// with.
const MACHINE_KEYS: [&str; 2] = ["gpus_per_node", "nodes_per_domain"];

/// The names of [`MeshKeys`]' keys, taken out as the machine's are.
const MESH_KEYS: [&str; 4] = ["mesh", "device_mesh", "views", "flattens"];

/// The layout keys a mesh may be given with: the first rank.
const MESH_LAYOUT_KEYS: [&str; 1] = ["rank_offset"];

/// Where a key came from.
#[derive(Debug, Clone)]
enum Origin {
    /// A key of the file at `path`.
    File {
        /// The file.
        path: std::path::PathBuf,
        /// The key as the file names it (a Megatron-LM name, maybe).
        key: String,
        /// Its value.
        value: Value,
    },
    /// Flags (`--tp 4`, `--tensor-model-parallel-size 8 (in --megatron-args)`).
    Flags(String),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::File { path, key, value } => {
                write!(f, "{key} = {value} (in {})", path.display())
            }
            Origin::Flags(text) => f.write_str(text),
        }
    }
}

/// Keys with where each came from.
#[derive(Debug, Clone, Default)]
struct Keys {
    values: Map<String, Value>,
    origins: HashMap<String, Origin>,
}

impl Keys {
    /// Sets `key` (`None`: back to its default), from `origin`; a key with
    /// two names ([`megatron::partner`]) loses its other name.
    fn set(&mut self, key: &str, value: Option<Value>, origin: Origin) {
        match value {
            Some(v) => {
                if let Some(other) = megatron::partner(key) {
                    self.values.remove(other);
                    self.origins.remove(other);
                }
                self.values.insert(key.to_owned(), v);
                self.origins.insert(key.to_owned(), origin);
            }
            None => {
                self.values.remove(key);
                self.origins.remove(key);
            }
        }
    }

    /// Where `key` came from (the key itself when unknown).
    fn origin(&self, key: &str) -> String {
        self.origins
            .get(key)
            .map_or_else(|| key.to_owned(), Origin::to_string)
    }

    /// `tp = 4 (--tp 4)`, `tp = 1 (the default)`: a size and where it came
    /// from.
    fn size_label(&self, key: &str, size: u64) -> String {
        match self.origins.get(key) {
            Some(origin) => format!("{key} = {size} ({origin})"),
            None if self.values.contains_key(key) => format!("{key} = {size}"),
            None => format!("{key} = {size} (the default)"),
        }
    }

    /// The weight-shard counts ([`megatron::SHARD_KEYS`]) turned into the
    /// keys they decide, by Megatron-Core's rule: `gtp_remat = S / tp` and
    /// `expert_gtp_remat = S / etp` (etp defaulting to tp), with the tp
    /// (etp) of these keys.
    ///
    /// # Errors
    /// A count below the tp, or that the tp does not divide, naming both
    /// and where they came from.
    fn resolve_shards(&mut self) -> Result<(), String> {
        for (shards_key, key) in megatron::SHARD_KEYS {
            let Some(value) = self.values.get(shards_key) else {
                continue;
            };
            let Some(shards) = value.as_u64() else {
                return Err(format!(
                    "{} is not a number of weight shards",
                    self.origin(shards_key)
                ));
            };
            let size = |k: &str| self.values.get(k).and_then(Value::as_u64);
            let (tp_key, tp) = match (key, size("etp")) {
                ("expert_gtp_remat", Some(etp)) => ("etp", etp),
                _ => ("tp", size("tp").unwrap_or(1)),
            };
            let tp_label = if key == "expert_gtp_remat" && tp_key == "tp" {
                format!("etp = tp, {}", self.size_label("tp", tp))
            } else {
                self.size_label(tp_key, tp)
            };
            // Megatron-Core's rule is the library's; a count or a tp beyond
            // 32 bits, or a tp of 0, is the layout's error (with the key).
            let per_rank = match (u32::try_from(shards), u32::try_from(tp)) {
                (Ok(s), Ok(t)) if t > 0 => match weight_shards(shards_key, s, tp_key, t) {
                    Ok(per_rank) => u64::from(per_rank),
                    Err(Error::WeightShardsBelowTp { .. }) => {
                        return Err(format!(
                            "{} must be >= {tp_label}: the weight-shard count is {tp_key} * {key}",
                            self.origin(shards_key)
                        ));
                    }
                    Err(_) => {
                        return Err(format!(
                            "{} must be divisible by {tp_label}: the weight-shard count is {tp_key} * {key}",
                            self.origin(shards_key)
                        ));
                    }
                },
                _ => shards,
            };
            let origin = self
                .origins
                .get(shards_key)
                .cloned()
                .unwrap_or_else(|| Origin::Flags(shards_key.to_owned()));
            self.set(key, Some(Value::from(per_rank)), origin);
        }
        Ok(())
    }
}

/// A value as a command line writes it: text unquoted, lists joined by `,`.
fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(plain).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// The flag of key `key`.
fn flag_of(key: &str) -> String {
    match key {
        "views" => "--view".into(),
        "flattens" => "--flatten".into(),
        _ => format!("--{}", key.replace('_', "-")),
    }
}

/// `--tp 4`, `--mesh tp=2,dp=4`: a key given as a flag.
fn flag_origin(key: &str, value: &Value) -> String {
    match value {
        Value::Bool(true) => flag_of(key),
        Value::Array(items) if key == "views" || key == "flattens" => items
            .iter()
            .map(|v| format!("{} {}", flag_of(key), plain(v)))
            .collect::<Vec<_>>()
            .join(" "),
        _ => format!("{} {}", flag_of(key), plain(value)),
    }
}

/// `tp = 4 (in layout.toml)`: a key given in a file.
fn file_origin(path: &Path, key: &str, value: &Value) -> Origin {
    Origin::File {
        path: path.to_owned(),
        key: key.to_owned(),
        value: value.clone(),
    }
}

impl SetupArgs {
    /// The configuration file, overridden by `--megatron-args` and the
    /// Megatron-LM flags, overridden by our flags.
    ///
    /// # Errors
    /// [`Failure::Message`] for a file that cannot be read or parsed or has an
    /// unknown key (the message names the file), for a key and a
    /// Megatron-LM name that disagree, for a mesh given with layout keys;
    /// [`Failure::Input`] for a Megatron-LM argument out of range or a
    /// machine size of 0.
    pub fn setup(&self) -> Result<Setup, Failure> {
        let mut keys = match &self.config {
            Some(path) => file_keys(path)?,
            None => Keys::default(),
        };

        let mut short = Keys::default();
        for (key, value) in self.flags()? {
            let origin = Origin::Flags(flag_origin(&key, &value));
            short.set(&key, Some(value), origin);
        }
        let explicit = self.megatron.args()?;
        let flag_label = |a: &MegatronArg, v: &MegatronValue| megatron::as_flag(a, v);
        conflicts(&short, &explicit, &flag_label).map_err(Failure::Message)?;

        let mut notes = Vec::new();
        let mut args = MegatronArgs::new();
        let mut pasted_names: Vec<&'static str> = Vec::new();
        if let Some(text) = &self.megatron_args {
            let pasted = MegatronArgs::parse_command_line(text)
                .map_err(|e| Failure::Message(format!("--megatron-args: {e}")))?;
            notes.push(used_note(&pasted, &explicit, &short));
            if !pasted.unexpanded().is_empty() {
                notes.push(format!(
                    "megatron-args: not expanded: {} (the arguments they hold were not read: paste their definitions too, or the command as it ran)",
                    pasted.unexpanded().join(", ")
                ));
            }
            for (a, v) in pasted.given() {
                args.set(a.name, v.clone())?;
                pasted_names.push(a.name);
            }
        }
        for (a, v) in explicit.given() {
            args.set(a.name, v.clone())?;
            pasted_names.retain(|n| *n != a.name);
        }
        let label = |a: &MegatronArg, v: &MegatronValue| {
            if pasted_names.contains(&a.name) {
                format!("{} (in --megatron-args)", megatron::as_flag(a, v))
            } else {
                megatron::as_flag(a, v)
            }
        };
        apply(&mut keys, &args, &label).map_err(Failure::Message)?;
        let launch = megatron::launch_world(&args)?;
        // A mesh given by the flags replaces the file's, views and
        // flattens included (they belong to the mesh they were written for).
        if short.values.contains_key("mesh") || short.values.contains_key("device_mesh") {
            for key in MESH_KEYS {
                keys.set(key, None, Origin::Flags(String::new()));
            }
        }
        for (key, value) in short.values {
            let origin = short
                .origins
                .remove(&key)
                .unwrap_or_else(|| Origin::Flags(flag_of(&key)));
            keys.set(&key, Some(value), origin);
        }

        if let Some(world) = launch {
            let merged = keys.values.get("world_size").and_then(Value::as_u64);
            if merged != Some(u64::from(world)) {
                // torchrun's flags come from a pasted line only.
                let torchrun = args
                    .given()
                    .filter(|(a, _)| a.source == Source::Torchrun)
                    .map(|(a, v)| megatron::as_flag(a, v))
                    .collect::<Vec<_>>()
                    .join(" ");
                return Err(Failure::Message(format!(
                    "{} and torchrun's {torchrun} (in --megatron-args, {world} ranks) differ: give one of them",
                    keys.origin("world_size")
                )));
            }
        }
        keys.resolve_shards().map_err(Failure::Message)?;
        let (config, machine, mesh) = read(keys.values.clone()).map_err(Failure::Message)?;
        let topology = Topology::new(
            machine
                .gpus_per_node
                .unwrap_or(Topology::default().gpus_per_node()),
            machine.nodes_per_domain,
        )?;
        let mesh = mesh_input(&keys, mesh, config.rank_offset)?;
        Ok(Setup {
            config,
            mesh,
            topology,
            gpus_per_node: machine.gpus_per_node,
            notes,
        })
    }

    /// The modules file (`--modules`), checked to come alone: no layout key, no
    /// mesh, no configuration file (the machine's flags are allowed).
    ///
    /// # Errors
    /// [`Failure::Message`] naming the flag given with `--modules`.
    pub fn modules_file(&self) -> Result<Option<&Path>, Failure> {
        let Some(path) = &self.modules else {
            return Ok(None);
        };
        let conflict = |flag: &str| {
            Failure::Message(format!(
                "--modules and {flag} cannot be given together: the modules file gives every module's mesh (only --gpus-per-node and --nodes-per-domain apply to it)"
            ))
        };
        if self.config.is_some() {
            return Err(conflict("--config"));
        }
        if self.megatron_args.is_some() {
            return Err(conflict("--megatron-args"));
        }
        if let Some((arg, _)) = self.megatron.args()?.given().next() {
            return Err(conflict(arg.flag));
        }
        let keys =
            serde_json::to_value(self).map_err(|e| Failure::Message(format!("the flags: {e}")))?;
        if let Value::Object(keys) = keys {
            for (key, value) in keys {
                let given = match &value {
                    Value::Null => false,
                    Value::Array(items) => !items.is_empty(),
                    _ => true,
                };
                if given && !MACHINE_KEYS.contains(&key.as_str()) {
                    return Err(conflict(&format!("--{}", key.replace('_', "-"))));
                }
            }
        }
        Ok(Some(path))
    }

    /// The flags given, as keys and values (flags left out are absent).
    fn flags(&self) -> Result<Map<String, Value>, Failure> {
        let value = serde_json::to_value(self).map_err(|e| Failure::Message(e.to_string()))?;
        let Value::Object(map) = value else {
            return Ok(Map::new());
        };
        Ok(map.into_iter().filter(|(_, v)| !v.is_null()).collect())
    }
}

/// The keys of the configuration file at `path`, its Megatron-LM names
/// turned into the keys they decide.
///
/// # Errors
/// [`Failure::Message`] naming the file: it cannot be read or parsed, a
/// key is unknown or of the wrong type, a key and a Megatron-LM name
/// disagree.
fn file_keys(path: &Path) -> Result<Keys, Failure> {
    let file = config_file::read(path).map_err(|e| file_error(path, e))?;
    // Within the file, keys are named plainly (the error names the file);
    // over the flags, with the file.
    let mut short = Keys::default();
    let mut named = MegatronArgs::new();
    let mut named_values: HashMap<&'static str, Value> = HashMap::new();
    for (key, value) in file {
        if megatron::is_megatron_key(&key) {
            let v = megatron::value_of(&value);
            named.set(&key, v).map_err(|e| file_error(path, e))?;
            named_values.insert(arg_name(&key), value);
        } else {
            let origin = Origin::Flags(format!("{key} = {value}"));
            short.set(&key, Some(value), origin);
        }
    }
    let plain_label = |a: &MegatronArg, _: &MegatronValue| {
        named_values
            .get(a.name)
            .map(|v| format!("{} = {v}", a.name))
            .unwrap_or_default()
    };
    conflicts(&short, &named, &plain_label).map_err(|e| file_error(path, e))?;
    let mut keys = Keys::default();
    for (key, value) in &short.values {
        keys.set(key, Some(value.clone()), file_origin(path, key, value));
    }
    let label = |a: &MegatronArg, _: &MegatronValue| {
        named_values
            .get(a.name)
            .map(|v| file_origin(path, a.name, v).to_string())
            .unwrap_or_default()
    };
    apply(&mut keys, &named, &label).map_err(|e| file_error(path, e))?;
    // Read the file alone first, so its mistakes name it.
    read(keys.values.clone()).map_err(|e| file_error(path, e))?;
    Ok(keys)
}

/// The table's name of the argument named `key` (a file's key).
fn arg_name(key: &str) -> &'static str {
    MegatronArg::find(key).map_or("", |a| a.name)
}

/// `megatron-args: used --tensor-model-parallel-size 8, ...`: the
/// arguments taken out of the pasted command line, and which flags
/// override them.
fn used_note(pasted: &MegatronArgs, explicit: &MegatronArgs, short: &Keys) -> String {
    let used: Vec<String> = pasted
        .given()
        .map(|(a, v)| {
            let text = megatron::as_flag(a, v);
            let by_flag = explicit
                .given()
                .find(|(b, _)| b.name == a.name)
                .map(|(b, w)| megatron::as_flag(b, w));
            let by_key = || {
                a.decides()
                    .iter()
                    .copied()
                    .find_map(|k| short.origins.get(k).map(Origin::to_string))
            };
            match by_flag.or_else(by_key) {
                Some(flag) => format!("{text} (overridden by {flag})"),
                None => text,
            }
        })
        .collect();
    if used.is_empty() {
        "megatron-args: no parallelism arguments found; Megatron-Core's defaults apply".into()
    } else {
        format!("megatron-args: used {}", used.join(", "))
    }
}

/// Lays the keys that `args` decide over `keys`, each from the arguments
/// that decide it (named by `label`).
fn apply(
    keys: &mut Keys,
    args: &MegatronArgs,
    label: &dyn Fn(&MegatronArg, &MegatronValue) -> String,
) -> Result<(), String> {
    for (key, value) in megatron::keys(args).map_err(|e| e.to_string())? {
        keys.set(key, value, Origin::Flags(deciders(args, key, label)));
    }
    Ok(())
}

/// The arguments of `args` that decide `key`, named by `label` and joined.
fn deciders(
    args: &MegatronArgs,
    key: &str,
    label: &dyn Fn(&MegatronArg, &MegatronValue) -> String,
) -> String {
    let key = megatron::canonical(key);
    args.given()
        .filter(|(a, _)| a.decides().contains(&key))
        .map(|(a, v)| label(a, v))
        .collect::<Vec<_>>()
        .join(" and ")
}

/// An error when one of `short`'s keys and a Megatron-LM argument of `args`
/// given alongside it decide a key differently: when the layout with the
/// key's value and the layout with the argument's differ (so `etp = 4`
/// with `tensor_model_parallel_size = 4` agree).
fn conflicts(
    short: &Keys,
    args: &MegatronArgs,
    label: &dyn Fn(&MegatronArg, &MegatronValue) -> String,
) -> Result<(), String> {
    let decided = megatron::keys(args).map_err(|e| e.to_string())?;
    let mut theirs = short.clone();
    for (key, value) in &decided {
        theirs.set(key, value.clone(), Origin::Flags(String::new()));
    }
    for (key, value) in &decided {
        // A weight-shard count is compared with gtp_remat by the layouts.
        let same_name = megatron::canonical(key) == *key;
        let key = megatron::canonical(key);
        let Some(ours) = short.values.get(key) else {
            continue;
        };
        if same_name && value.as_ref() == Some(ours) {
            continue;
        }
        let mut mine = theirs.clone();
        mine.set(key, Some(ours.clone()), Origin::Flags(String::new()));
        let (a, b) = (resolved(&theirs.values), resolved(&mine.values));
        if a.is_some() && a == b {
            continue;
        }
        return Err(format!(
            "{} and {} differ: give one of them",
            short.origin(key),
            deciders(args, key, label)
        ));
    }
    Ok(())
}

/// The layout configuration of `keys` as a layout resolves it (`etp`,
/// `encoder_tp`, `dp` filled in), or as given when it is no layout;
/// `None` when the keys are no configuration.
fn resolved(keys: &Map<String, Value>) -> Option<Config> {
    let (config, _, _) = read(keys.clone()).ok()?;
    Some(match Layout::new(&config) {
        Ok(layout) => layout.config().clone(),
        Err(_) => config,
    })
}

/// The mesh of the merged keys, checked: at most one of `mesh` and
/// `device_mesh`, views and flattens only with one, and no layout key but
/// `rank_offset` beside it.
fn mesh_input(keys: &Keys, mesh: MeshKeys, rank_offset: u32) -> Result<Option<MeshInput>, Failure> {
    let MeshKeys {
        mesh,
        device_mesh,
        views,
        flattens,
    } = mesh;
    let (text, device_order, key) = match (mesh, device_mesh) {
        (Some(_), Some(_)) => {
            return Err(Failure::Message(format!(
                "{} and {} cannot be given together: write the mesh once, first fastest (mesh) or last fastest (device_mesh)",
                keys.origin("mesh"),
                keys.origin("device_mesh")
            )));
        }
        (Some(text), None) => (text, false, "mesh"),
        (None, Some(text)) => (text, true, "device_mesh"),
        (None, None) => {
            if let Some(key) = ["views", "flattens"]
                .into_iter()
                .find(|k| keys.values.contains_key(*k))
            {
                return Err(Failure::Message(format!(
                    "{} needs a mesh: give --mesh or --device-mesh (or the key mesh or device_mesh)",
                    keys.origin(key)
                )));
            }
            return Ok(None);
        }
    };
    let layout_key = keys.values.keys().find(|k| {
        !MESH_KEYS.contains(&k.as_str())
            && !MACHINE_KEYS.contains(&k.as_str())
            && !MESH_LAYOUT_KEYS.contains(&k.as_str())
    });
    if let Some(layout_key) = layout_key {
        return Err(Failure::Message(format!(
            "{} and {} cannot be given together: a mesh names its own dims and sizes, so the layout's keys ({layout_key}, ...) do not apply to it (only rank_offset does)",
            keys.origin(key),
            keys.origin(layout_key)
        )));
    }
    let listed = |key: &str, items: Option<Vec<String>>| -> Vec<(String, String)> {
        items
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, text)| {
                let origin = match keys.origins.get(key) {
                    Some(Origin::File { path, .. }) => {
                        format!("{key}[{i}] (in {})", path.display())
                    }
                    _ => flag_of(key),
                };
                (text, origin)
            })
            .collect()
    };
    let origin = match keys.origins.get(key) {
        Some(Origin::File { path, .. }) => format!("{key} (in {})", path.display()),
        _ => flag_of(key),
    };
    Ok(Some(MeshInput {
        origin,
        text,
        device_order,
        views: listed("views", views),
        flattens: listed("flattens", flattens),
        rank_offset,
    }))
}

/// The merged keys read as a [`Config`], a [`Machine`] and [`MeshKeys`],
/// the weight-shard counts divided by their tp first.
fn read(keys: Map<String, Value>) -> Result<(Config, Machine, MeshKeys), String> {
    let mut plain = Keys {
        values: keys,
        origins: HashMap::new(),
    };
    plain.resolve_shards()?;
    let keys = plain.values;
    // The mesh keys' types, checked here to name the key (serde does not).
    for key in ["mesh", "device_mesh"] {
        match keys.get(key) {
            Some(v) if !v.is_string() => {
                return Err(format!(
                    "{key} = {v} is not a string (write {key} = \"tp=2,dp=4\")"
                ));
            }
            _ => {}
        }
    }
    for (key, example) in [("views", "expert:ep=4,edp=2"), ("flattens", "dp_cp=dp,cp")] {
        match keys.get(key) {
            Some(v)
                if !v
                    .as_array()
                    .is_some_and(|items| items.iter().all(Value::is_string)) =>
            {
                return Err(format!(
                    "{key} = {v} is not a list of strings (write {key} = [\"{example}\"])"
                ));
            }
            _ => {}
        }
    }
    read_keys(keys).map_err(|e| {
        let message = e.to_string();
        if message.starts_with("unknown field") {
            format!(
                "{message}, or the machine's {}, or the mesh's {}, or Megatron-LM's {}",
                MACHINE_KEYS.join(", "),
                MESH_KEYS.join(", "),
                megatron::megatron_keys().join(", ")
            )
        } else {
            message
        }
    })
}

/// [`read`], with serde's error.
fn read_keys(
    mut keys: Map<String, Value>,
) -> Result<(Config, Machine, MeshKeys), serde_json::Error> {
    let mut take = |names: &[&str]| {
        let mut taken = Map::new();
        for key in names {
            if let Some(v) = keys.remove(*key) {
                taken.insert((*key).to_owned(), v);
            }
        }
        Value::Object(taken)
    };
    let machine = take(&MACHINE_KEYS);
    let mesh = take(&MESH_KEYS);
    let machine = serde_json::from_value(machine)?;
    let mesh = serde_json::from_value(mesh)?;
    let config = serde_json::from_value(Value::Object(keys))?;
    Ok((config, machine, mesh))
}

/// An error about the configuration file at `path`.
fn file_error(path: &Path, e: impl std::fmt::Display) -> Failure {
    Failure::Message(format!(
        "invalid configuration: {}: {}",
        path.display(),
        e.to_string().trim_end()
    ))
}
