//! The file-level import graph of a crate's sources, shared by the
//! layering tests of the library (`tests/layering.rs`) and of the command
//! (`cli/tests/layering.rs`): every path of each file that names something
//! of the crate (`crate::...`, `super::...`, `self::...`, a path through a
//! module the file declares with `mod`, or through a name it imported), in
//! `use` lines, `use` groups (`use crate::{a, b::c}`) and inline code
//! alike, is an edge from the file to the file that defines the module.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

/// Every `.rs` file under `dir`, relative to `src`, `/`-separated.
fn rust_files(src: &Path, dir: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(src, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path.strip_prefix(src).unwrap();
            let parts: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.insert(parts.join("/"));
        }
    }
}

/// The module path of `file`: `main.rs` and `lib.rs` are the root,
/// `a/mod.rs` and `a.rs` are `a`, `a/b.rs` is `a::b`.
fn module_of(file: &str) -> Vec<String> {
    let stem = file.strip_suffix(".rs").unwrap();
    let mut parts: Vec<String> = stem.split('/').map(str::to_owned).collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "main" | "lib")
    ) {
        parts.pop();
    }
    parts
}

/// The file that defines the item at module path `path`: the longest
/// prefix of it that is a file (else the crate root, `root`).
fn file_of(path: &[String], files: &BTreeSet<String>, root: &str) -> String {
    for n in (1..=path.len()).rev() {
        let joined = path[..n].join("/");
        for candidate in [format!("{joined}.rs"), format!("{joined}/mod.rs")] {
            if files.contains(&candidate) {
                return candidate;
            }
        }
    }
    root.to_owned()
}

/// `text` without comments, string and character literals (a literal
/// becomes `""`), so that only code is read.
pub fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let ident = |ch: Option<&char>| ch.is_some_and(|ch| ch.is_alphanumeric() || *ch == '_');
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        let prev = if i > 0 { c.get(i - 1) } else { None };
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c[i] == 'r'
            && (!ident(prev)
                || (prev == Some(&'b') && !ident(if i > 1 { c.get(i - 2) } else { None })))
            && matches!(next, Some('"' | '#'))
        {
            // A raw string r"..." or r#"..."#, unless it is r#ident.
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (1..=hashes).all(|k| c.get(j + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c[i] == '"' {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                if c[j] == '\\' {
                    j += 1;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j + 1;
        } else if c[i] == '\'' {
            if next == Some('\\') {
                // An escaped character: '\n', '\'', '\u{..}'.
                let mut j = i + 2;
                j += 1;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                out.push_str("' '");
                i = j + 1;
            } else if c.get(i + 2) == Some(&'\'') {
                out.push_str("' '");
                i += 3;
            } else {
                // A lifetime or a label.
                out.push('\'');
                i += 1;
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The tokens of `code`: identifiers, `::` and single punctuation.
pub fn tokens(code: &str) -> Vec<String> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if c[i].is_alphanumeric() || c[i] == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(c[start..i].iter().collect());
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            out.push("::".to_owned());
            i += 2;
        } else if c[i].is_whitespace() {
            i += 1;
        } else {
            out.push(c[i].to_string());
            i += 1;
        }
    }
    out
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// A `use` tree from `tokens[*i]`, under `prefix`: its leaves (a path, and
/// the name it binds: its alias or last segment; none for a glob).
pub fn use_tree(
    tokens: &[String],
    i: &mut usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let mut path = prefix;
    while *i < tokens.len() {
        let t = tokens[*i].as_str();
        if t == "{" {
            *i += 1;
            while *i < tokens.len() && tokens[*i] != "}" {
                use_tree(tokens, i, path.clone(), out);
                if tokens.get(*i).is_some_and(|t| t == ",") {
                    *i += 1;
                }
            }
            *i += 1;
            return;
        }
        if t == "*" {
            *i += 1;
            out.push((path, None));
            return;
        }
        if t == "::" {
            // A leading `::`: an external crate.
            *i += 1;
            continue;
        }
        if !is_ident(t) {
            return;
        }
        path.push(t.to_owned());
        *i += 1;
        if tokens.get(*i).is_some_and(|t| t == "::") {
            *i += 1;
            continue;
        }
        if path.last().is_some_and(|s| s == "self") && path.len() > 1 {
            path.pop();
        }
        let mut name = path.last().cloned();
        if tokens.get(*i).is_some_and(|t| t == "as") {
            name = tokens.get(*i + 1).cloned();
            *i += 2;
        }
        out.push((path, name));
        return;
    }
}

/// What one file's paths resolve against.
struct Scope<'a> {
    /// The file's module path.
    module: Vec<String>,
    /// The modules the file declares (`mod x;`).
    children: &'a BTreeSet<String>,
    /// Names the file's `use` lines bind, to the module paths they name.
    bindings: &'a HashMap<String, Vec<String>>,
}

impl Scope<'_> {
    /// The absolute module path of `path`, written inside the inline
    /// modules `inline`; `None` for a path outside the crate.
    fn resolve(&self, path: &[String], inline: &[String]) -> Option<Vec<String>> {
        let (first, rest) = path.split_first()?;
        let mut here = self.module.clone();
        here.extend(inline.iter().cloned());
        let mut out = match first.as_str() {
            "crate" => Vec::new(),
            "self" => here,
            "super" => {
                here.pop();
                let mut rest = rest;
                while let Some(("super", more)) = rest.split_first().map(|(s, m)| (s.as_str(), m)) {
                    here.pop();
                    rest = more;
                }
                here.extend(rest.iter().cloned());
                return Some(here);
            }
            name if inline.is_empty() && self.children.contains(name) => {
                let mut p = self.module.clone();
                p.push(name.to_owned());
                p
            }
            name if path.len() > 1 => self.bindings.get(name)?.clone(),
            _ => return None,
        };
        out.extend(rest.iter().cloned());
        Some(out)
    }
}

/// The files each file under `src` imports (itself left out), `root`
/// the crate root's file (`main.rs`, `lib.rs`), paths relative to `src`
/// and `/`-separated.
pub fn graph(src: &Path, root: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = BTreeSet::new();
    rust_files(src, src, &mut files);
    let mut graph = BTreeMap::new();
    for file in &files {
        let text = std::fs::read_to_string(src.join(file)).unwrap();
        let tokens = tokens(&code_only(&text));
        let module = module_of(file);
        let mut children = BTreeSet::new();
        for w in tokens.windows(3) {
            if w[0] == "mod" && is_ident(&w[1]) && w[2] == ";" {
                children.insert(w[1].clone());
            }
        }
        // Pass 1: the `use` trees, with the inline modules they sit in.
        let mut uses = Vec::new();
        let mut inline: Vec<(String, usize)> = Vec::new();
        let mut depth = 0;
        let mut i = 0;
        let mut inline_paths = Vec::new();
        while i < tokens.len() {
            let t = tokens[i].as_str();
            let names: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
            match t {
                "{" => depth += 1,
                "}" => {
                    depth -= 1;
                    if inline.last().is_some_and(|(_, d)| *d == depth) {
                        inline.pop();
                    }
                }
                "mod" if tokens.get(i + 2).is_some_and(|t| t == "{") => {
                    inline.push((tokens[i + 1].clone(), depth));
                    i += 2;
                    continue;
                }
                "use" => {
                    i += 1;
                    let mut leaves = Vec::new();
                    use_tree(&tokens, &mut i, Vec::new(), &mut leaves);
                    uses.extend(leaves.into_iter().map(|l| (l, names.clone())));
                    continue;
                }
                _ if is_ident(t)
                    && tokens.get(i + 1).is_some_and(|t| t == "::")
                    && (i == 0 || tokens[i - 1] != "::") =>
                {
                    let mut path = vec![t.to_owned()];
                    let mut j = i + 1;
                    while tokens.get(j).is_some_and(|t| t == "::")
                        && tokens.get(j + 1).is_some_and(|t| is_ident(t))
                    {
                        path.push(tokens[j + 1].clone());
                        j += 2;
                    }
                    inline_paths.push((path, names));
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        let empty = HashMap::new();
        let mut bindings = HashMap::new();
        let mut targets = Vec::new();
        {
            let scope = Scope {
                module: module.clone(),
                children: &children,
                bindings: &empty,
            };
            for ((path, name), inline) in &uses {
                if let Some(absolute) = scope.resolve(path, inline) {
                    if let Some(name) = name {
                        bindings.insert(name.clone(), absolute.clone());
                    }
                    targets.push(absolute);
                }
            }
        }
        let scope = Scope {
            module,
            children: &children,
            bindings: &bindings,
        };
        for (path, inline) in &inline_paths {
            if let Some(absolute) = scope.resolve(path, inline) {
                targets.push(absolute);
            }
        }
        let imported: BTreeSet<String> = targets
            .iter()
            .map(|p| file_of(p, &files, root))
            .filter(|f| f != file)
            .collect();
        graph.insert(file.clone(), imported);
    }
    graph
}

/// The strongly connected components of `graph` (Tarjan's algorithm).
pub fn components(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: HashMap<&'a str, usize>,
        low: HashMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !graph.contains_key(w) {
                continue;
            }
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            component.sort();
            s.out.push(component);
        }
    }
    let mut s = State {
        graph,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}
