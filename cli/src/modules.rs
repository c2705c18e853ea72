//! `--modules FILE`: named modules on rank spans, the edges between them
//! and their bridges (the library's [`Modules`]), read from TOML or JSON.
//!
//! Every module is a mesh, so each command answers module by module
//! through the mesh code paths (a [`Target::Mesh`] per module), and adds
//! what only modules have: the spans, the graph's stages and, for `rank`,
//! the rank's role on every edge.

use std::fmt::{self, Write as _};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use rank_layout::{BridgeRole, MeshSpec, Modules, ModulesSpec, Topology};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::args::{Cli, Command, Format, Picture, SetupArgs};
use crate::check::CheckReport;
use crate::describe::DescribeReport;
use crate::error::{Failure, Outcome};
use crate::format::{count, join_ranks};
use crate::render;
use crate::report::groups::GroupsReport;
use crate::report::rank::RankReport;
use crate::report::{emit, print, print_json};
use crate::target::{DimSet, MeshTarget, Target};

/// The flags (as `SetupArgs` keys) that may be given with `--modules`:
/// the machine's.
const MACHINE_KEYS: [&str; 2] = ["gpus_per_node", "nodes_per_domain"];

/// The modules of a file, and each module as a mesh target.
pub struct ModulesTarget {
    /// The file, for the headings.
    pub path: PathBuf,
    /// The modules.
    pub modules: Modules,
    /// Each module's name and mesh, in declaration order.
    pub parts: Vec<(String, Target)>,
}

/// Reads the modules file `path`: TOML when its name ends in `.toml`,
/// else JSON, straight into a [`ModulesSpec`], then built.
///
/// # Errors
/// [`Failure::Message`] naming the file and the problem: unreadable,
/// invalid TOML or JSON (an unknown key, a missing one, a wrong type), or
/// modules the library rejects.
pub fn load(path: &Path) -> Result<ModulesTarget, Failure> {
    let file = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Message(format!("cannot read the modules file {file}: {e}")))?;
    let is_toml = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
    let spec: ModulesSpec = if is_toml {
        toml::from_str(&text).map_err(|e| {
            Failure::Message(format!(
                "{file}: invalid modules TOML: {}",
                e.to_string().trim_end()
            ))
        })?
    } else {
        serde_json::from_str(&text)
            .map_err(|e| Failure::Message(format!("{file}: invalid modules JSON: {e}")))?
    };
    let modules = spec
        .build()
        .map_err(|e| Failure::Message(format!("{file}: {e}")))?;
    let parts = modules
        .names()
        .map(|name| Ok((name.to_owned(), Target::Mesh(mesh_target(&modules, name)?))))
        .collect::<Result<Vec<_>, Failure>>()?;
    Ok(ModulesTarget {
        path: path.to_owned(),
        modules,
        parts,
    })
}

/// Module `name` as a mesh target (its dims as written, first fastest).
fn mesh_target(modules: &Modules, name: &str) -> Result<MeshTarget, Failure> {
    let mesh = modules.module(name)?.clone();
    let mut spec = MeshSpec::default();
    spec.dims = mesh.dims().map(|(n, s)| (n.to_owned(), s)).collect();
    spec.rank_offset = mesh.rank_offset();
    Ok(MeshTarget {
        mesh,
        spec,
        device_order: false,
    })
}

/// The modules file of `args`, checked to come alone: no layout key, no
/// mesh, no configuration file (the machine's flags are allowed).
///
/// # Errors
/// [`Failure::Message`] naming the flag given with `--modules`.
fn modules_file(args: &SetupArgs) -> Result<Option<&Path>, Failure> {
    let Some(path) = &args.modules else {
        return Ok(None);
    };
    let conflict = |flag: &str| {
        Failure::Message(format!(
            "--modules and {flag} cannot be given together: the modules file gives every module's mesh (only --gpus-per-node and --nodes-per-domain apply to it)"
        ))
    };
    if args.config.is_some() {
        return Err(conflict("--config"));
    }
    if args.megatron_args.is_some() {
        return Err(conflict("--megatron-args"));
    }
    if let Some((arg, _)) = args.megatron.args()?.given().next() {
        return Err(conflict(arg.flag));
    }
    let keys =
        serde_json::to_value(args).map_err(|e| Failure::Message(format!("the flags: {e}")))?;
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

/// The machine of `args` (`--gpus-per-node`, `--nodes-per-domain`).
fn topology(args: &SetupArgs) -> Result<Topology, Failure> {
    Ok(args.setup()?.topology)
}

/// Runs the command when it is about a modules file (`--modules`, or the
/// `bridge` command's), else `None`.
///
/// # Errors
/// Every error of the command.
pub fn run(cli: &Cli) -> Result<Option<Outcome>, Failure> {
    let setup = match &cli.command {
        Command::Groups { setup, .. }
        | Command::Rank { setup, .. }
        | Command::Check { setup, .. }
        | Command::Suggest { setup, .. }
        | Command::Describe { setup, .. }
        | Command::Render { setup, .. }
        | Command::Audit { setup, .. } => setup,
        Command::Bridge(_) => return Ok(None),
    };
    let Some(path) = modules_file(setup)? else {
        return Ok(None);
    };
    let topology = topology(setup)?;
    let m = load(path)?;
    match &cli.command {
        Command::Groups { output, .. } => {
            let sets = m.sets(&output.kinds, true)?;
            groups(&m, &sets, output.full, output.format)?;
        }
        Command::Rank { rank, output, .. } => {
            let sets = m.sets(&output.kinds, true)?;
            emit(
                &RankCard::new(&m, *rank, &sets, topology, output.full)?,
                output.format,
            )?;
        }
        Command::Check {
            kinds,
            format,
            require,
            strict,
            ..
        } => {
            let kinds = m.sets(kinds, false)?;
            let require = m.sets(require, false)?;
            let mut reports = Vec::with_capacity(m.parts.len());
            // The machine's last node or domain is the last span's: only
            // one module reports it (the last of separate spans, the first
            // of colocated ones).
            let keeps = if m.modules.is_colocated() {
                0
            } else {
                m.parts.len().saturating_sub(1)
            };
            for (i, ((_, target), (kinds, require))) in
                m.parts.iter().zip(kinds.iter().zip(&require)).enumerate()
            {
                let report = CheckReport::new(target, topology, kinds, require)?;
                reports.push(if i == keeps {
                    report
                } else {
                    report.without_machine_warnings()
                });
            }
            emit(
                &Checks {
                    m: &m,
                    reports: &reports,
                },
                *format,
            )?;
            let failed: Vec<String> = m
                .parts
                .iter()
                .zip(&reports)
                .flat_map(|((name, _), r)| r.failed().iter().map(move |k| format!("{name} {k}")))
                .collect();
            if *strict && !failed.is_empty() {
                return Ok(Some(Outcome::StrictFailed(format!(
                    "check --strict: {} groups cross node boundaries",
                    failed.join(", ")
                ))));
            }
        }
        Command::Describe { format, .. } => {
            emit(&Describe { m: &m, topology }, *format)?;
        }
        Command::Render {
            kinds,
            format,
            max_ranks,
            ..
        } => {
            let sets = m.sets(kinds, false)?;
            render_modules(&m, topology, &sets, *max_ranks, *format)?;
        }
        Command::Suggest { .. } => {
            return Err(Failure::Message(
                "suggest does not take --modules: give one module's mesh with --mesh".into(),
            ));
        }
        Command::Audit { .. } => {
            return Err(Failure::Message(
                "audit takes an encoder + decoder layout, not --modules".into(),
            ));
        }
        Command::Bridge(_) => return Ok(None),
    }
    Ok(Some(Outcome::Done))
}

/// `first..last` of a target's ranks.
fn span(target: &Target) -> (u32, u64) {
    (target.rank_offset(), target.rank_end().saturating_sub(1))
}

/// The heading of a module: `module llm: ranks 8..15 (8 ranks)`.
fn heading(name: &str, target: &Target) -> String {
    let (first, last) = span(target);
    format!(
        "module {name}: ranks {first}..{last} ({})",
        count(u64::from(target.world_size()), "rank", "ranks")
    )
}

impl ModulesTarget {
    /// Each module's sets of `names` (those it has); every module's own
    /// sets when `names` is empty and `all`, else none.
    ///
    /// # Errors
    /// [`Failure::Message`] for a name that no module has.
    fn sets(&self, names: &[String], all: bool) -> Result<Vec<Vec<DimSet>>, Failure> {
        let mut out: Vec<Vec<DimSet>> = self
            .parts
            .iter()
            .map(|(_, t)| {
                if names.is_empty() && all {
                    t.all_sets()
                } else {
                    Vec::new()
                }
            })
            .collect();
        for name in names {
            let mut first_error = None;
            let mut found = false;
            for ((_, target), sets) in self.parts.iter().zip(out.iter_mut()) {
                let set = target
                    .parse_set(name)
                    .and_then(|s| target.groups(&s).map(|_| s));
                match set {
                    Ok(set) => {
                        found = true;
                        if !sets.contains(&set) {
                            sets.push(set);
                        }
                    }
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            if !found {
                let why = first_error.map(|e| format!(": {e}")).unwrap_or_default();
                return Err(Failure::Message(format!(
                    "--kind {name}: no module has this dim set{why}"
                )));
            }
        }
        Ok(out)
    }

    /// The first line of every table: the file, the modules, their ranks.
    fn title(&self) -> String {
        let m = &self.modules;
        let first = m.rank_offset();
        let last = m.rank_end().saturating_sub(1);
        format!(
            "modules of {}: {} on ranks {first}..{last} ({}), {}; {} stages",
            self.path.display(),
            count(m.len() as u64, "module", "modules"),
            count(m.world_size(), "rank", "ranks"),
            if m.is_colocated() {
                "colocated (every module on the same ranks)"
            } else {
                "on consecutive spans"
            },
            m.total_stages()
        )
    }

    /// `first_stage..last_stage` of module `name`.
    fn stages(&self, name: &str, target: &Target) -> (u32, u32) {
        let first = self.modules.first_stage(name).unwrap_or(0);
        let pp = match target {
            Target::Mesh(m) => m
                .mesh
                .dims()
                .find(|(d, _)| *d == "pp")
                .map_or(1, |(_, s)| s),
            Target::Layout { .. } => 1,
        };
        (first, first + pp.max(1) - 1)
    }
}

/// A module's object: `name`, `first_rank`, `last_rank`, then `rest`'s
/// keys (those of a mesh's report, without the ones given here).
fn module_object(name: &str, target: &Target, rest: Value) -> Value {
    let (first, last) = span(target);
    let mut object = Map::new();
    object.insert("name".into(), name.into());
    object.insert("first_rank".into(), first.into());
    object.insert("last_rank".into(), last.into());
    if let Value::Object(rest) = rest {
        for (k, v) in rest {
            if !matches!(k.as_str(), "name" | "first_rank" | "last_rank" | "rank") {
                object.insert(k, v);
            }
        }
    }
    Value::Object(object)
}

/// A report as a JSON value.
fn to_value(value: &impl Serialize) -> Result<Value, Failure> {
    serde_json::to_value(value).map_err(|e| Failure::Output(io::Error::other(e)))
}

/// `groups --modules`: each module's groups, module by module.
fn groups(
    m: &ModulesTarget,
    sets: &[Vec<DimSet>],
    full: bool,
    format: Format,
) -> Result<(), Failure> {
    match format {
        Format::Table => {
            let mut text = String::new();
            let _ = writeln!(text, "{}", m.title());
            for ((name, target), sets) in m.parts.iter().zip(sets) {
                let _ = writeln!(text, "\n== {} ==", heading(name, target));
                let _ = write!(text, "{}", GroupsReport::new(target, sets.clone(), full));
            }
            print(&text)
        }
        Format::Json => {
            let mut modules = Vec::with_capacity(m.parts.len());
            for ((name, target), sets) in m.parts.iter().zip(sets) {
                let report = to_value(&GroupsReport::new(target, sets.clone(), false))?;
                let mut keep = Map::new();
                if let Value::Object(mut r) = report {
                    for key in ["mesh", "groups"] {
                        if let Some(v) = r.remove(key) {
                            keep.insert(key.into(), v);
                        }
                    }
                }
                modules.push(module_object(name, target, Value::Object(keep)));
            }
            print_json(&serde_json::json!({
                "world_size": m.modules.world_size(),
                "colocated": m.modules.is_colocated(),
                "modules": modules,
            }))
        }
    }
}

/// `rank R --modules`: the rank's module(s), its card in each, its stage
/// and its role on every edge.
struct RankCard {
    rank: u32,
    total_stages: u32,
    /// Name, stage, card, heading.
    modules: Vec<(String, u32, RankReport, String, Value)>,
    roles: Vec<BridgeRole>,
}

impl RankCard {
    fn new(
        m: &ModulesTarget,
        rank: u64,
        sets: &[Vec<DimSet>],
        topology: Topology,
        full: bool,
    ) -> Result<RankCard, Failure> {
        let outside = || {
            Failure::Message(format!(
                "rank {rank} is outside the modules (ranks {}..{}, both included)",
                m.modules.rank_offset(),
                m.modules.rank_end().saturating_sub(1)
            ))
        };
        let r = u32::try_from(rank).map_err(|_| outside())?;
        if m.modules.modules_of(r).next().is_none() {
            return Err(outside());
        }
        let mut modules = Vec::new();
        for ((name, target), sets) in m.parts.iter().zip(sets) {
            if !m.modules.modules_of(r).any(|n| n == name) {
                continue;
            }
            let stage = m.modules.stage_in(r, name)?;
            let card = RankReport::new(target, rank, sets, topology, full)?;
            let json = module_object(name, target, to_value(&card)?);
            modules.push((name.clone(), stage, card, heading(name, target), json));
        }
        Ok(RankCard {
            rank: r,
            total_stages: m.modules.total_stages(),
            modules,
            roles: m.modules.roles(r)?,
        })
    }
}

/// `bridge color 0 key 4` or `bridge: not a member`.
fn splits_text(role: &BridgeRole) -> String {
    role.splits
        .iter()
        .map(|(kind, split)| match split {
            Some(s) => format!("{kind} color {} key {}", s.color, s.key),
            None => format!("{kind} none"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for RankCard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, stage, card, heading, _)) in self.modules.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            writeln!(
                f,
                "rank {} in {heading}; global stage {stage} of 0..{}",
                self.rank,
                self.total_stages.saturating_sub(1)
            )?;
            let _ = name;
            write!(f, "{card}")?;
        }
        if self.roles.is_empty() {
            return writeln!(f, "\nbridges: none (the modules have no edge)");
        }
        writeln!(
            f,
            "\nbridges (color = the group's number, key = the rank's position in it):"
        )?;
        for role in &self.roles {
            let mut parts = Vec::new();
            if role.src_leader {
                parts.push(format!(
                    "source leader, sends to {}",
                    join_ranks(&role.sends_to, " ")
                ));
            }
            if role.dst_leader {
                parts.push(format!(
                    "destination leader, receives from {}",
                    join_ranks(&role.receives_from, " ")
                ));
            }
            if let Some(slot) = role.slot {
                parts.push(format!("slot {slot}"));
            }
            if parts.is_empty() {
                parts.push("no leader".into());
            }
            writeln!(f, "  {} -> {}: {}", role.src, role.dst, parts.join("; "))?;
            writeln!(f, "    {}", splits_text(role))?;
        }
        Ok(())
    }
}

/// A role's JSON: `{"src", "dst", "src_leader", "dst_leader", "sends_to",
/// "receives_from", "slot", "splits": {KIND: {"color", "key"} | null}}`.
pub fn role_json(role: &BridgeRole) -> Value {
    let splits: Map<String, Value> = role
        .splits
        .iter()
        .map(|(kind, s)| {
            (
                kind.to_string(),
                s.map_or(
                    Value::Null,
                    |s| serde_json::json!({"color": s.color, "key": s.key}),
                ),
            )
        })
        .collect();
    serde_json::json!({
        "src": role.src,
        "dst": role.dst,
        "src_leader": role.src_leader,
        "dst_leader": role.dst_leader,
        "sends_to": role.sends_to,
        "receives_from": role.receives_from,
        "slot": role.slot,
        "splits": splits,
    })
}

impl Serialize for RankCard {
    /// `{"rank", "total_stages", "modules": [{"name", "first_rank",
    /// "last_rank", "stage", ..the mesh card}], "roles": [..]}`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let modules: Vec<Value> = self
            .modules
            .iter()
            .map(|(_, stage, _, _, json)| {
                let mut json = json.clone();
                if let Value::Object(o) = &mut json {
                    o.insert("stage".into(), (*stage).into());
                }
                json
            })
            .collect();
        serde_json::json!({
            "rank": self.rank,
            "total_stages": self.total_stages,
            "modules": modules,
            "roles": self.roles.iter().map(role_json).collect::<Vec<_>>(),
        })
        .serialize(s)
    }
}

/// `check --modules`: each module's check.
struct Checks<'a> {
    m: &'a ModulesTarget,
    reports: &'a [CheckReport],
}

impl fmt::Display for Checks<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.m.title())?;
        for ((name, target), report) in self.m.parts.iter().zip(self.reports) {
            writeln!(f, "\n== {} ==", heading(name, target))?;
            write!(f, "{report}")?;
        }
        Ok(())
    }
}

impl Serialize for Checks<'_> {
    /// `{"modules": [{"name", "first_rank", "last_rank", ..the mesh's
    /// check}]}`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut modules = Vec::with_capacity(self.reports.len());
        for ((name, target), report) in self.m.parts.iter().zip(self.reports) {
            let value = serde_json::to_value(report).map_err(serde::ser::Error::custom)?;
            modules.push(module_object(name, target, value));
        }
        serde_json::json!({ "modules": modules }).serialize(s)
    }
}

/// `describe --modules`: the graph, every edge's plan in brief, and each
/// module described as a mesh.
struct Describe<'a> {
    m: &'a ModulesTarget,
    topology: Topology,
}

/// An edge in brief: direction, scale, mode and why.
struct EdgeBrief {
    src: String,
    dst: String,
    direction: String,
    scale: u32,
    mode: &'static str,
    reason: Option<String>,
}

impl Describe<'_> {
    fn edges(&self) -> Vec<EdgeBrief> {
        let m = &self.m.modules;
        m.edges()
            .filter_map(|(s, d)| m.edge_info(s, d).ok())
            .map(|e| EdgeBrief {
                src: e.src,
                dst: e.dst,
                direction: e.direction.to_string(),
                scale: e.scale,
                mode: e.mode.map_or("p2p", |m| m.name()),
                reason: e.reason,
            })
            .collect()
    }
}

impl fmt::Display for Describe<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.m;
        writeln!(f, "{}", m.title())?;
        writeln!(
            f,
            "\nmodules (stages: the longest path into the module, each module weighted by its pp):"
        )?;
        for (name, target) in &m.parts {
            let (first, last) = m.stages(name, target);
            let (a, b) = span(target);
            writeln!(f, "  {name}: ranks {a}..{b}, stages {first}..{last}")?;
        }
        let edges = self.edges();
        if edges.is_empty() {
            writeln!(f, "\nedges: none")?;
        } else {
            writeln!(
                f,
                "\nedges (direction: which side has more data lanes; scale: their ratio):"
            )?;
            for e in &edges {
                write!(
                    f,
                    "  {} -> {}: {}, scale {}, {}",
                    e.src,
                    e.dst,
                    e.direction,
                    e.scale,
                    match e.mode {
                        "collective" => "collective (all-gathers on the colocated ranks)",
                        _ => "p2p (leaders send to leaders, then broadcast)",
                    }
                )?;
                match &e.reason {
                    Some(r) => writeln!(f, ": {r}")?,
                    None => writeln!(f)?,
                }
            }
            writeln!(
                f,
                "  (`rank-layout bridge --modules FILE` lists every edge's groups)"
            )?;
        }
        for (name, target) in &m.parts {
            writeln!(f, "\n== {} ==", heading(name, target))?;
            write!(f, "{}", DescribeReport::new(target, self.topology))?;
        }
        Ok(())
    }
}

impl Serialize for Describe<'_> {
    /// `{"world_size", "rank_offset", "colocated", "total_stages",
    /// "modules": [{"name", "first_rank", "last_rank", "first_stage",
    /// "last_stage", ..the mesh's description}], "edges": [{"src", "dst",
    /// "direction", "scale", "mode", "reason"}]}`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.m;
        let mut modules = Vec::with_capacity(m.parts.len());
        for (name, target) in &m.parts {
            let value = serde_json::to_value(DescribeReport::new(target, self.topology))
                .map_err(serde::ser::Error::custom)?;
            let mut object = module_object(name, target, value);
            let (first, last) = m.stages(name, target);
            if let Value::Object(o) = &mut object {
                o.insert("first_stage".into(), first.into());
                o.insert("last_stage".into(), last.into());
            }
            modules.push(object);
        }
        let edges: Vec<Value> = self
            .edges()
            .into_iter()
            .map(|e| {
                serde_json::json!({
                    "src": e.src,
                    "dst": e.dst,
                    "direction": e.direction,
                    "scale": e.scale,
                    "mode": e.mode,
                    "reason": e.reason,
                })
            })
            .collect();
        serde_json::json!({
            "world_size": m.modules.world_size(),
            "rank_offset": m.modules.rank_offset(),
            "colocated": m.modules.is_colocated(),
            "total_stages": m.modules.total_stages(),
            "modules": modules,
            "edges": edges,
        })
        .serialize(s)
    }
}

/// The `width` and `height` of an SVG document's root element.
fn svg_size(svg: &str) -> (f64, f64) {
    let attr = |name: &str| {
        svg.find("<svg ")
            .and_then(|start| {
                let tag = svg.get(start..)?;
                let tag = tag.get(..tag.find('>')?)?;
                let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
                let rest = tag.get(at..)?;
                rest.get(..rest.find('"')?)?.parse::<f64>().ok()
            })
            .unwrap_or(0.0)
    };
    (attr("width"), attr("height"))
}

/// The style of the modules' page.
const MODULES_STYLE: &str = "body { font-family: system-ui, sans-serif; margin: 1.5em; color: #111; } .module { overflow: auto; }";

/// Height of a module's band label.
const BAND_H: f64 = 28.0;

/// `render --modules`: each module drawn as a mesh (the mesh picture,
/// nodes as rows), the pictures stacked top to bottom as bands, each
/// under a label naming the module, its ranks and stages.
fn render_modules(
    m: &ModulesTarget,
    topology: Topology,
    sets: &[Vec<DimSet>],
    max_ranks: u32,
    format: Picture,
) -> Result<(), Failure> {
    let mut bands = Vec::with_capacity(m.parts.len());
    for ((name, target), sets) in m.parts.iter().zip(sets) {
        let picture = render::Picture::new(target, topology, sets, max_ranks)?;
        let mut svg = Vec::new();
        render::svg::write_svg(&mut svg, &picture, false)?;
        let svg = String::from_utf8_lossy(&svg).into_owned();
        let (first, last) = m.stages(name, target);
        let label = format!("{}, stages {first}..{last}", heading(name, target));
        bands.push((name.clone(), label, svg));
    }
    let width = bands
        .iter()
        .map(|(_, _, svg)| svg_size(svg).0)
        .fold(640.0, f64::max);
    let height: f64 = 40.0
        + bands
            .iter()
            .map(|(_, _, svg)| svg_size(svg).1 + BAND_H)
            .sum::<f64>();
    let title = render::escape(&m.title());
    let mut out = BufWriter::new(io::stdout().lock());
    if format == Picture::Html {
        render::html::write_page_head(&mut out, &m.title(), MODULES_STYLE)?;
        for (name, label, svg) in &bands {
            writeln!(
                out,
                r#"<section class="module" data-module="{}"><h2>{}</h2>"#,
                render::escape(name),
                render::escape(label)
            )?;
            out.write_all(svg.as_bytes())?;
            writeln!(out, "</section>")?;
        }
        render::html::write_page_end(&mut out)?;
    } else {
        writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
        writeln!(
            out,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="11">
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="16" y="26" font-size="15" font-weight="bold" fill="#111">{title}</text>"##
        )?;
        let mut y = 40.0;
        for (name, label, svg) in &bands {
            let (_, h) = svg_size(svg);
            writeln!(
                out,
                r##"<g class="module" data-module="{}" transform="translate(0,{y:.1})">
<rect class="band" x="0" y="0" width="{width:.0}" height="{:.1}" fill="#e8eef6"/>
<text class="band-label" x="16" y="19" font-size="14" font-weight="bold" fill="#1a4f8b">{}</text>
<g transform="translate(0,{BAND_H})">"##,
                render::escape(name),
                BAND_H - 4.0,
                render::escape(label)
            )?;
            out.write_all(svg.as_bytes())?;
            writeln!(out, "</g>\n</g>")?;
            y += h + BAND_H;
        }
        writeln!(out, "</svg>")?;
    }
    out.flush()?;
    Ok(())
}
