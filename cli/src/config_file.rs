//! Reading a configuration file (`--config FILE`): JSON or TOML text into
//! its keys and values, in the order written, before any key is judged
//! (the binary's `config` module merges them with the flags and reads
//! them as a layout).
//!
//! Refused, each with a message naming what is wrong (the caller adds the
//! file's name): text that is neither JSON nor TOML, a key given twice, an
//! integer too large for any key (named as written, not as the float
//! serde_json rounds it to), nesting deeper than [`MAX_DEPTH`] levels, and
//! a file that is not a table of keys.
//!
//! JSON is parsed once, by serde_json, into a [`Value`]; the depth is
//! checked as each array or object opens, so a file nested 100,000 deep
//! stops at its 65th bracket, and the stack holds at most [`MAX_DEPTH`]
//! levels (serde_json's own limit, 128, is never reached). TOML is parsed
//! by the `toml` crate (which stops at 80 levels) and then held to the same
//! limit.

use std::fmt::Write as _;
use std::path::Path;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// The deepest nesting of a configuration file: the file's table is level
/// 1, a list in it level 2. A valid file needs 2; the limit only keeps a
/// hostile file from exhausting the stack.
pub const MAX_DEPTH: usize = 64;

/// The largest value of a key (sizes and ranks are `u32`).
pub const KEY_MAX: u32 = u32::MAX;

/// How a configuration file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON: `{"tp": 2, "world_size": 8}`.
    Json,
    /// TOML: `tp = 2`.
    Toml,
}

impl Format {
    /// TOML for a `.toml` file, JSON for a `.json` one, else JSON when the
    /// text (after a byte-order mark and blanks) starts with `{` and TOML
    /// otherwise.
    pub fn of(path: &Path, text: &str) -> Format {
        let extension = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match extension.as_deref() {
            Some("toml") => Format::Toml,
            Some("json") => Format::Json,
            _ if without_bom(text).trim_start().starts_with('{') => Format::Json,
            _ => Format::Toml,
        }
    }
}

/// The keys of the configuration file at `path`, in the order written
/// ([`Format::of`] decides how it is read).
///
/// # Errors
/// The problem in words, without the file's name (the caller adds it):
/// the file cannot be read, or any refusal of [`parse`].
pub fn read(path: &Path) -> Result<Map<String, Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    parse(&text, Format::of(path, &text))
}

/// The keys of the configuration `text` written in `format`, in the order
/// written. A UTF-8 byte-order mark is skipped.
///
/// # Errors
/// The problem in words: invalid JSON or TOML (with its line and column),
/// a key given twice, an integer too large for any key, nesting deeper
/// than [`MAX_DEPTH`] levels, or a value that is not a table of keys.
pub fn parse(text: &str, format: Format) -> Result<Map<String, Value>, String> {
    let text = without_bom(text);
    let value = match format {
        Format::Json => json(text)?,
        Format::Toml => {
            let value: Value = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
            if depth(&value) > MAX_DEPTH {
                return Err(too_deep());
            }
            value
        }
    };
    match value {
        Value::Object(map) => Ok(map),
        other => Err(format!(
            "expected a table of keys (tp, cp, world_size, ...), found {}",
            found(&other)
        )),
    }
}

/// `text` without a leading UTF-8 byte-order mark.
fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// What a value is, for messages: `an array`, `the number 5`.
fn found(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(_) => "a string".into(),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "a table".into(),
    }
}

/// The message for nesting past [`MAX_DEPTH`] (serde_json adds where).
fn too_deep() -> String {
    format!("nesting deeper than {MAX_DEPTH} levels (the most a configuration file may have)")
}

/// How deeply `value` nests arrays and tables (a scalar is 0, a table of
/// scalars 1), without recursion.
fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((v, level)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        deepest = deepest.max(level);
        stack.extend(children.map(|c| (c, level + 1)));
    }
    deepest
}

/// `tp = 100000000000000000000000 does not fit ...`: an integer too large
/// for any key, named as written.
fn too_large(key: &str, literal: &str) -> String {
    if key.is_empty() {
        return format!(
            "the integer {literal} does not fit a u32 (sizes and ranks are at most {KEY_MAX})"
        );
    }
    format!("{key} = {literal} does not fit a u32 (sizes and ranks are at most {KEY_MAX})")
}

/// Whether `text` is a JSON integer: an optional minus and digits.
fn is_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// One step of the way to a value: a key or an index.
enum Step {
    Key(String),
    Index(usize),
}

/// `hierarchical_cp[1]`, `a.b`: where a value is (empty for the whole).
fn spelled(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Step::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
        }
    }
    out
}

/// What the JSON reader remembers while serde_json walks the text.
#[derive(Default)]
struct State {
    /// The way to the value being read.
    path: Vec<Step>,
    /// The numbers read so far (the index of the next in the text).
    numbers: usize,
    /// Numbers serde_json gave as floats although they may be written as
    /// integers (beyond 64 bits): their index and where they are.
    rounded: Vec<(usize, String)>,
}

impl State {
    /// The first number of [`Self::rounded`] written as an integer, as an
    /// error naming it as written.
    fn too_large(&self, text: &str) -> Option<String> {
        if self.rounded.is_empty() {
            return None;
        }
        let literals = number_literals(text);
        self.rounded.iter().find_map(|(i, path)| {
            let literal = literals.get(*i)?;
            is_integer(literal).then(|| too_large(path, literal))
        })
    }

    /// serde_json's error `e` in words: a number out of range (an integer of
    /// hundreds of digits) is named as written.
    fn explain(&self, text: &str, e: &serde_json::Error) -> String {
        let message = e.to_string();
        if message.starts_with("number out of range") {
            let literals = number_literals(text);
            if let Some(literal) = literals.get(self.numbers).filter(|l| is_integer(l)) {
                return too_large(&spelled(&self.path), literal);
            }
        }
        message
    }
}

/// The numbers of the JSON `text` as written, in order (strings skipped).
/// serde_json reads them in the same order, so the `i`-th number it gives
/// is the `i`-th here.
fn number_literals(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'"' => {
                i += 1;
                while let Some(&c) = bytes.get(i) {
                    i += 1;
                    match c {
                        b'\\' => i += 1,
                        b'"' => break,
                        _ => {}
                    }
                }
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while bytes
                    .get(i)
                    .is_some_and(|c| matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                {
                    i += 1;
                }
                out.push(text.get(start..i).unwrap_or_default());
            }
            _ => i += 1,
        }
    }
    out
}

/// The JSON `text` as a value, read once.
fn json(text: &str) -> Result<Value, String> {
    let mut state = State::default();
    let mut de = serde_json::Deserializer::from_str(text);
    let read = Node {
        state: &mut state,
        depth: 1,
    }
    .deserialize(&mut de)
    .and_then(|value| de.end().map(|()| value));
    match read {
        Ok(value) => match state.too_large(text) {
            Some(message) => Err(message),
            None => Ok(value),
        },
        Err(e) => Err(state.explain(text, &e)),
    }
}

/// A value at `depth` (the file's table is 1), read into a [`Value`].
struct Node<'s> {
    state: &'s mut State,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        self.state.numbers += 1;
        Ok(v.into())
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        self.state.numbers += 1;
        Ok(v.into())
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        // An integer beyond 64 bits comes as a float: remember where, to
        // name it as written if it was written as an integer.
        if v.is_finite() && v.fract() == 0.0 && v.abs() >= 9_223_372_036_854_775_808.0 {
            let path = spelled(&self.state.path);
            self.state.rounded.push((self.state.numbers, path));
        }
        self.state.numbers += 1;
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let Node { state, depth } = self;
        if depth > MAX_DEPTH {
            return Err(A::Error::custom(too_deep()));
        }
        let mut items = Vec::new();
        loop {
            state.path.push(Step::Index(items.len()));
            let item = seq.next_element_seed(Node {
                state: &mut *state,
                depth: depth + 1,
            })?;
            state.path.pop();
            match item {
                Some(v) => items.push(v),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let Node { state, depth } = self;
        if depth > MAX_DEPTH {
            return Err(A::Error::custom(too_deep()));
        }
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            if map.contains_key(&key) {
                let within = spelled(&state.path);
                return Err(A::Error::custom(if within.is_empty() {
                    format!("duplicate key `{key}`")
                } else {
                    format!("duplicate key `{key}` in {within}")
                }));
            }
            state.path.push(Step::Key(key.clone()));
            let value = access.next_value_seed(Node {
                state: &mut *state,
                depth: depth + 1,
            })?;
            state.path.pop();
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

/// A TOML error in words: a duplicate key, an integer too large and
/// nesting too deep are named (TOML shows them only under the line it
/// quotes, and the line may be the whole file).
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let spanned = e.span().and_then(|span| {
        let line_start = text.get(..span.start)?.rfind('\n').map_or(0, |i| i + 1);
        let line = text.get(..span.start)?.matches('\n').count() + 1;
        let item = text.get(span.clone())?.trim();
        Some((item, span.start, line_start, line))
    });
    if e.message().contains("recursion") {
        return match spanned {
            Some((_, _, _, line)) => format!("{} at line {line}", too_deep()),
            None => too_deep(),
        };
    }
    let Some((item, span_start, line_start, line)) = spanned else {
        return e.to_string();
    };
    if e.message().contains("duplicate key") {
        return format!("duplicate key `{item}` at line {line}");
    }
    let literal: String = item.chars().filter(|c| *c != '_').collect();
    let literal = literal.strip_prefix('+').unwrap_or(&literal);
    if is_integer(literal) && e.message().contains("out of range") {
        // The key is what the line assigns to, when it is on that line
        // (with the item's index in a one-line array).
        let before = text.get(line_start..span_start).unwrap_or("");
        return match before.split_once('=') {
            Some((key, rest)) if !key.trim().is_empty() => {
                let key = key.trim();
                match rest.split_once('[') {
                    Some((_, items)) => {
                        too_large(&format!("{key}[{}]", items.matches(',').count()), literal)
                    }
                    None => too_large(key, literal),
                }
            }
            _ => format!(
                "the integer {literal} at line {line} does not fit a u32 (sizes and ranks are at most {KEY_MAX})"
            ),
        };
    }
    e.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_read_in_order_with_its_integers() {
        let map = parse(
            r#"{"world_size": 8, "tp": 2, "hierarchical_cp": [2, -3], "order": "tp-dp"}"#,
            Format::Json,
        )
        .unwrap();
        let keys: Vec<&str> = map.keys().map(String::as_str).collect();
        assert_eq!(keys, ["world_size", "tp", "hierarchical_cp", "order"]);
        assert_eq!(map["hierarchical_cp"], serde_json::json!([2, -3]));
    }

    #[test]
    fn refusals_name_the_problem() {
        let err = |text: &str| parse(text, Format::Json).unwrap_err();
        assert!(err(r#"{"tp": 2, "tp": 4}"#).starts_with("duplicate key `tp`"));
        assert!(err(r#"{"a": {"b": 1, "b": 2}}"#).starts_with("duplicate key `b` in a"));
        let big = "100000000000000000000000";
        assert!(err(&format!(r#"{{"tp": {big}}}"#)).starts_with(&format!("tp = {big} does")));
        assert!(
            err(&format!(r#"{{"x": "1", "cp": [2, -{big}]}}"#))
                .starts_with(&format!("cp[1] = -{big} does"))
        );
        let huge = "9".repeat(400);
        assert!(err(&format!(r#"{{"a": [{{"b": {huge}}}]}}"#)).starts_with("a[0].b = 999"));
        // A float stays a float (the key's reader refuses it).
        assert!(parse(r#"{"tp": 1e30}"#, Format::Json).is_ok());
        assert!(err("[1, 2]").contains("found an array"));
        let deep = format!("{{\"tp\": {}{}}}", "[".repeat(64), "]".repeat(64));
        assert!(err(&deep).starts_with("nesting deeper than 64 levels"));
        let deep = format!("tp = {}{}", "[".repeat(64), "]".repeat(64));
        assert!(
            parse(&deep, Format::Toml)
                .unwrap_err()
                .starts_with("nesting deeper than 64")
        );
        let deep = format!("tp = {}{}", "[".repeat(63), "]".repeat(63));
        assert!(parse(&deep, Format::Toml).is_ok());
    }
}
