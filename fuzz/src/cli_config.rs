//! The fuzz entry of the command line's configuration-file reader
//! (`rank_layout_cli::config_file`, what `rank-layout --config FILE`
//! reads before judging any key).
//!
//! It lives apart from `entries/` because it needs the CLI package, which
//! the library's replay test (`tests/fuzz_corpus.rs`) cannot depend on: the
//! CLI package's own test `cli/tests/fuzz_corpus.rs` includes this file as
//! a module and replays `corpus/cli_config/` through it.

use rank_layout_cli::config_file::{self, Format, MAX_DEPTH};
use serde_json::{Map, Value};

/// The bytes as a configuration file, read as JSON and as TOML.
///
/// Nothing panics, and every refusal has a message. JSON: an accepted file
/// is what serde_json reads (the reader only refuses more: a duplicate
/// key, an integer beyond 64 bits, nesting past `MAX_DEPTH`, a value that
/// is not a table), nests at most `MAX_DEPTH` deep, and reads back the
/// same once written out; a file nested deeper is refused. TOML: an
/// accepted file nests at most `MAX_DEPTH` deep and reads back the same
/// once written out as JSON.
pub fn cli_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = Format::of(std::path::Path::new("layout"), text);
    json(text);
    toml(text);
}

fn json(text: &str) {
    let ours = config_file::parse(text, Format::Json);
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    let theirs = serde_json::from_str::<Value>(body);
    let nesting = written_depth(body);
    match ours {
        Ok(map) => {
            assert!(nesting <= MAX_DEPTH, "{nesting} levels accepted: {text:?}");
            let theirs = theirs.unwrap_or_else(|e| panic!("accepted, serde_json: {e}: {text:?}"));
            assert_eq!(Value::Object(map.clone()), theirs, "{text:?}");
            round_trip(&map, text);
        }
        Err(message) => {
            assert!(!message.is_empty(), "{text:?}");
            if let Ok(value) = theirs {
                // Valid JSON refused: for one of the reader's own reasons.
                let known = [
                    "duplicate key",
                    "does not fit a u32",
                    "nesting deeper than",
                    "expected a table of keys",
                ];
                assert!(
                    known.iter().any(|k| message.contains(k)),
                    "{message}: {text:?}"
                );
                if message.contains("expected a table of keys") {
                    assert!(!value.is_object(), "{message}: {text:?}");
                }
                if message.starts_with("nesting deeper than") {
                    assert!(nesting > MAX_DEPTH, "{message}: {text:?}");
                }
            }
        }
    }
}

fn toml(text: &str) {
    match config_file::parse(text, Format::Toml) {
        Ok(map) => {
            let depth = value_depth(&Value::Object(map.clone()));
            assert!(depth <= MAX_DEPTH, "{depth} levels accepted: {text:?}");
            round_trip(&map, text);
        }
        Err(message) => assert!(!message.is_empty(), "{text:?}"),
    }
}

/// `map` written as JSON reads back equal (floats to their last digit or
/// so: serde_json's float parsing is not exact without its
/// `float_roundtrip` feature).
fn round_trip(map: &Map<String, Value>, text: &str) {
    let written = serde_json::to_string(map).expect("a value writes");
    let back = config_file::parse(&written, Format::Json)
        .unwrap_or_else(|e| panic!("{written} does not read back: {e} (from {text:?})"));
    let (back, map) = (Value::Object(back), Value::Object(map.clone()));
    assert!(same(&back, &map), "{back:?} != {map:?} (from {text:?})");
}

/// `a` and `b` are equal, floats within a relative 1e-12.
fn same(a: &Value, b: &Value) -> bool {
    let mut pairs = vec![(a, b)];
    while let Some((a, b)) = pairs.pop() {
        let equal = match (a, b) {
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                pairs.extend(x.iter().zip(y));
                true
            }
            (Value::Object(x), Value::Object(y)) if x.len() == y.len() => {
                x.iter().zip(y).all(|((k, v), (l, w))| {
                    pairs.push((v, w));
                    k == l
                })
            }
            (Value::Number(x), Value::Number(y)) if x.is_f64() && y.is_f64() => {
                let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
                (x - y).abs() <= 1e-12 * x.abs().max(y.abs())
            }
            (x, y) => x == y,
        };
        if !equal {
            return false;
        }
    }
    true
}

/// The deepest nesting of brackets in JSON text, strings skipped.
fn written_depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// How deeply a value nests arrays and tables, without recursion.
fn value_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((v, level)) = stack.pop() {
        match v {
            Value::Array(items) => {
                deepest = deepest.max(level);
                stack.extend(items.iter().map(|c| (c, level + 1)));
            }
            Value::Object(map) => {
                deepest = deepest.max(level);
                stack.extend(map.values().map(|c| (c, level + 1)));
            }
            _ => {}
        }
    }
    deepest
}
