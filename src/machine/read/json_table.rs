//! The JSON host table: a list of hosts (or `{"hosts": [...]}`), each
//! `{"host", "domain" or "keys", "gpus", "healthy"}`.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::error::Result;
use crate::machine::hosts::{Host, Hosts, bad};

/// A JSON value as written: an object's keys in order, a key given twice
/// refused while reading (where serde_json's own value keeps the last).
#[derive(Debug)]
enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl std::fmt::Display for Json {
    /// The value as JSON text (for messages).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Json::Null => f.write_str("null"),
            Json::Bool(b) => write!(f, "{b}"),
            Json::Number(n) => write!(f, "{n}"),
            Json::String(s) => write!(f, "{}", crate::machine::launcher::json_string(s)),
            Json::Array(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            Json::Object(entries) => {
                f.write_str("{")?;
                for (i, (key, value)) in entries.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}: {value}", crate::machine::launcher::json_string(key))?;
                }
                f.write_str("}")
            }
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Json, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> std::result::Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<Json, E> {
        Ok(Json::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Json, E> {
        Ok(Json::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Json, E> {
        Ok(Json::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<Json, E> {
        serde_json::Number::from_f64(v)
            .map(Json::Number)
            .ok_or_else(|| E::custom(format!("{v} is not a JSON number")))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Json, E> {
        Ok(Json::String(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> std::result::Result<Json, E> {
        Ok(Json::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Json, A::Error> {
        let mut entries: Vec<(String, Json)> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if entries.iter().any(|(k, _)| *k == key) {
                return Err(de::Error::custom(format!("key {key:?} is given twice")));
            }
            let value = map.next_value()?;
            entries.push((key, value));
        }
        Ok(Json::Object(entries))
    }
}

/// The keys a host of the JSON table may have.
const KEYS: &str = "host (or name), domain or keys, gpus, healthy";

impl Hosts {
    /// Reads the JSON host table: a list of hosts, or `{"hosts": [...]}`,
    /// each `{"host": NAME, "domain": "cluster1/rack07" (or "keys":
    /// ["cluster1", "rack07"]), "gpus": 4, "healthy": true}` (`name` for
    /// `host`; `domain` `"-"`, `"unknown"`, `""` or `null` for none; every
    /// key but the name optional, `healthy` true by default). Needs the
    /// feature `serde`.
    ///
    /// ```
    /// use rank_layout::machine::Hosts;
    /// let hosts = Hosts::parse_json(r#"[{"host": "gb02", "domain": "c1/r7", "gpus": 4},
    ///                                   {"host": "gb01", "keys": ["c1", "r7"], "healthy": false}]"#)?;
    /// assert_eq!(hosts.get(1).unwrap().keys, ["c1", "r7"]);
    /// assert!(!hosts.get(0).unwrap().healthy);
    /// let bad = Hosts::parse_json(r#"[{"host": "gb01", "gpus": 4.5}]"#).unwrap_err();
    /// assert!(bad.to_string().contains("gpus = 4.5"));
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::BadHostTable`](crate::Error::BadHostTable): JSON that does
    /// not read, or a key given twice (with its line); a table that is not
    /// a list of objects, an unknown key, a value of the wrong type (`gpus`
    /// a whole number from 1, `healthy` a boolean, ...), both `domain` and
    /// `keys`, naming the host, the key and the value (line 0); and what
    /// [`Hosts::new`] refuses.
    pub fn parse_json(text: &str) -> Result<Hosts> {
        let doc: Json = serde_json::from_str(text).map_err(|e| {
            let line = e.line();
            let at = text.lines().nth(line.saturating_sub(1)).unwrap_or("");
            bad(line, at.trim(), &format!("not a JSON host table: {e}"))
        })?;
        let items = match doc {
            Json::Array(items) => items,
            Json::Object(entries) => {
                let mut hosts = None;
                for (key, value) in entries {
                    match (key.as_str(), value) {
                        ("hosts", Json::Array(items)) => hosts = Some(items),
                        ("hosts", other) => {
                            return Err(bad(0, &other.to_string(), "\"hosts\" is a list of hosts"));
                        }
                        (other, _) => {
                            return Err(bad(
                                0,
                                other,
                                "unknown key: a JSON host table is a list of hosts, or {\"hosts\": [...]}",
                            ));
                        }
                    }
                }
                hosts.ok_or_else(|| bad(0, "{}", "expected {\"hosts\": [...]}"))?
            }
            other => {
                return Err(bad(
                    0,
                    &other.to_string(),
                    "a JSON host table is a list of hosts, or {\"hosts\": [...]}",
                ));
            }
        };
        let rows = items
            .into_iter()
            .enumerate()
            .map(|(i, item)| json_host(i, item))
            .collect::<Result<Vec<_>>>()?;
        Hosts::new(rows)
    }
}

/// Host `i` of the table.
fn json_host(i: usize, item: Json) -> Result<Host> {
    let Json::Object(entries) = item else {
        return Err(bad(
            0,
            &item.to_string(),
            &format!("host {i} of the list is not an object ({KEYS})"),
        ));
    };
    let name = entries
        .iter()
        .filter(|(k, _)| k == "host" || k == "name")
        .map(|(k, v)| match v {
            Json::String(s) => Ok(s.clone()),
            other => Err(bad(
                0,
                &format!("{k} = {other}"),
                &format!("host {i} of the list: its name is a string"),
            )),
        })
        .collect::<Result<Vec<_>>>()?;
    let name = match name.as_slice() {
        [one] => one.clone(),
        [] => {
            return Err(bad(
                0,
                &Json::Object(entries).to_string(),
                &format!("host {i} of the list has no \"host\" name"),
            ));
        }
        _ => {
            return Err(bad(
                0,
                "name",
                &format!("host {i} of the list: give \"host\" or \"name\", not both"),
            ));
        }
    };
    let mut host = Host::new(name.clone(), None);
    let mut domain = None;
    let mut keys = None;
    for (key, value) in entries {
        let wrong = |want: &str| {
            bad(
                0,
                &format!("{key} = {value}"),
                &format!("host {name:?}: {key} is {want}"),
            )
        };
        match key.as_str() {
            "host" | "name" => {}
            "domain" => {
                domain = Some(match &value {
                    Json::Null => Vec::new(),
                    Json::String(d) if d.is_empty() || d == "-" || d == "unknown" => Vec::new(),
                    Json::String(d) => d.split('/').map(str::to_string).collect(),
                    _ => return Err(wrong("a string (keys joined by `/`) or null")),
                });
            }
            "keys" => {
                let Json::Array(items) = &value else {
                    return Err(wrong("a list of strings, outermost first"));
                };
                keys = Some(
                    items
                        .iter()
                        .map(|k| match k {
                            Json::String(s) => Ok(s.clone()),
                            _ => Err(wrong("a list of strings, outermost first")),
                        })
                        .collect::<Result<Vec<_>>>()?,
                );
            }
            "gpus" => {
                host.gpus = match &value {
                    Json::Null => None,
                    Json::Number(n) => Some(
                        n.as_u64()
                            .and_then(|g| u32::try_from(g).ok())
                            .filter(|&g| g > 0)
                            .ok_or_else(|| wrong("a whole number of GPUs from 1 to 4294967295"))?,
                    ),
                    _ => return Err(wrong("a whole number of GPUs from 1 to 4294967295")),
                };
            }
            "healthy" => {
                let Json::Bool(b) = value else {
                    return Err(wrong("true or false"));
                };
                host.healthy = b;
            }
            other => {
                return Err(bad(
                    0,
                    &format!("{other} = {value}"),
                    &format!("host {name:?}: unknown key {other:?} (expected {KEYS})"),
                ));
            }
        }
    }
    host.keys = match (domain, keys) {
        (Some(_), Some(_)) => {
            return Err(bad(
                0,
                "domain",
                &format!("host {name:?}: give \"domain\" or \"keys\", not both"),
            ));
        }
        (Some(k), None) | (None, Some(k)) => k,
        (None, None) => Vec::new(),
    };
    Ok(host)
}
