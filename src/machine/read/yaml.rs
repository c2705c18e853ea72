//! The small subset of YAML that Slurm's `topology.yaml` is written in:
//! block mappings and sequences by indentation, `- key: value` items,
//! flow sequences of scalars (`[4, 16]`), plain, single- and double-quoted
//! scalars on one line, `#` comments, a leading `---`. Anything else
//! (anchors, aliases, tags, flow mappings, multi-line scalars, several
//! documents, tabs in indentation) is refused with its line, never read
//! wrongly. Nesting is bounded ([`MAX_DEPTH`]), so no input can exhaust the
//! stack.

use crate::error::Result;
use crate::machine::hosts::bad;

/// The deepest nesting read.
const MAX_DEPTH: usize = 64;

/// A YAML value, with the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    /// A scalar (its text, unquoted); an empty value is `Scalar` of "" with
    /// `null` true.
    Scalar {
        line: usize,
        text: String,
        null: bool,
    },
    /// A sequence.
    Seq { line: usize, items: Vec<Node> },
    /// A mapping, in the order written (no key twice).
    Map {
        line: usize,
        entries: Vec<(String, Node)>,
    },
}

impl Node {
    /// The line it starts on.
    pub fn line(&self) -> usize {
        match self {
            Node::Scalar { line, .. } | Node::Seq { line, .. } | Node::Map { line, .. } => *line,
        }
    }
}

#[derive(Debug, Clone)]
struct Line {
    number: usize,
    indent: usize,
    content: String,
}

/// The document of `text`.
///
/// # Errors
/// `BadHostTable` naming the line: a YAML feature outside the subset, bad
/// indentation, a key given twice, nesting deeper than [`MAX_DEPTH`].
pub(crate) fn parse(text: &str) -> Result<Node> {
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let number = i + 1;
        let body = strip_comment(raw).trim_end();
        let content = body.trim_start_matches(' ');
        if content.starts_with('\t') {
            return Err(bad(number, raw, "a tab in the indentation"));
        }
        if content.is_empty() {
            continue;
        }
        if content == "---" || content.starts_with("--- ") {
            if lines.is_empty() && content == "---" {
                continue;
            }
            return Err(bad(number, raw, "one YAML document is read"));
        }
        if content == "..." {
            break;
        }
        if content.starts_with('%') {
            return Err(bad(number, raw, "YAML directives are not read"));
        }
        lines.push(Line {
            number,
            indent: body.len() - content.len(),
            content: content.to_string(),
        });
    }
    let mut parser = Parser { lines, pos: 0 };
    let Some(first) = parser.lines.first() else {
        return Ok(Node::Scalar {
            line: 1,
            text: String::new(),
            null: true,
        });
    };
    let indent = first.indent;
    let node = parser.node(indent, 0)?;
    if let Some(extra) = parser.lines.get(parser.pos) {
        return Err(bad(extra.number, &extra.content, "bad indentation"));
    }
    Ok(node)
}

/// The text before a comment: `#` at the start or after a blank, outside
/// quotes.
fn strip_comment(raw: &str) -> &str {
    let mut quote = None;
    let mut prev_blank = true;
    for (i, c) in raw.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '#' && prev_blank => return raw.get(..i).unwrap_or(raw),
            None if (c == '"' || c == '\'') && prev_blank => quote = Some(c),
            None => {}
        }
        prev_blank = c == ' ' || c == '\t';
    }
    raw
}

fn is_item(content: &str) -> bool {
    content == "-" || content.starts_with("- ")
}

/// `key: value` (value possibly empty): the key and the value, when the
/// content is a mapping entry.
fn entry(content: &str) -> Option<(String, &str)> {
    let (key, rest) = if let Some(q) = content.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let close = content.get(1..)?.find(q)? + 1;
        (
            content.get(..=close)?.to_string(),
            content.get(close + 1..)?,
        )
    } else {
        let at = content
            .find(": ")
            .or_else(|| content.ends_with(':').then(|| content.len() - 1))?;
        (content.get(..at)?.to_string(), content.get(at..)?)
    };
    let value = rest.trim_start().strip_prefix(':')?;
    if !(value.is_empty() || value.starts_with(' ')) {
        return None;
    }
    Some((key, value.trim()))
}

struct Parser {
    lines: Vec<Line>,
    pos: usize,
}

impl Parser {
    fn current(&self) -> Option<&Line> {
        self.lines.get(self.pos)
    }

    /// The node starting at the current line, indented `indent`.
    fn node(&mut self, indent: usize, depth: usize) -> Result<Node> {
        let Some(line) = self.current().cloned() else {
            return Ok(null(0));
        };
        if depth >= MAX_DEPTH {
            return Err(bad(
                line.number,
                &line.content,
                &format!("nested more than {MAX_DEPTH} levels"),
            ));
        }
        if is_item(&line.content) {
            self.seq(indent, depth)
        } else if entry(&line.content).is_some() {
            self.map(indent, depth)
        } else {
            self.pos += 1;
            value(line.number, &line.content)
        }
    }

    fn seq(&mut self, indent: usize, depth: usize) -> Result<Node> {
        let start = self.current().map_or(0, |l| l.number);
        let mut items = Vec::new();
        while let Some(line) = self.current().cloned() {
            if line.indent != indent || !is_item(&line.content) {
                break;
            }
            let rest = line.content.get(1..).unwrap_or("").trim_start_matches(' ');
            if rest.is_empty() {
                self.pos += 1;
                match self.current() {
                    Some(next) if next.indent > indent => {
                        let inner = next.indent;
                        items.push(self.node(inner, depth + 1)?);
                    }
                    _ => items.push(null(line.number)),
                }
            } else {
                // The item's content starts a node at its own column.
                let column = indent + line.content.len() - rest.len();
                if let Some(slot) = self.lines.get_mut(self.pos) {
                    slot.indent = column;
                    slot.content = rest.to_string();
                }
                items.push(self.node(column, depth + 1)?);
            }
        }
        self.no_deeper(indent)?;
        Ok(Node::Seq { line: start, items })
    }

    fn map(&mut self, indent: usize, depth: usize) -> Result<Node> {
        let start = self.current().map_or(0, |l| l.number);
        let mut entries: Vec<(String, Node)> = Vec::new();
        while let Some(line) = self.current().cloned() {
            if line.indent != indent || is_item(&line.content) {
                break;
            }
            let Some((key, text)) = entry(&line.content) else {
                return Err(bad(line.number, &line.content, "expected `key: value`"));
            };
            let key = unquote(line.number, &key)?;
            if entries.iter().any(|(k, _)| *k == key) {
                return Err(bad(
                    line.number,
                    &key,
                    &format!("key {key:?} is given twice"),
                ));
            }
            self.pos += 1;
            let node = if text.is_empty() {
                match self.current() {
                    Some(next)
                        if next.indent > indent
                            || (next.indent == indent && is_item(&next.content)) =>
                    {
                        let inner = next.indent;
                        self.node(inner, depth + 1)?
                    }
                    _ => null(line.number),
                }
            } else {
                value(line.number, text)?
            };
            entries.push((key, node));
        }
        self.no_deeper(indent)?;
        Ok(Node::Map {
            line: start,
            entries,
        })
    }

    /// After a block at `indent`, the next line is not deeper.
    fn no_deeper(&self, indent: usize) -> Result<()> {
        match self.current() {
            Some(next) if next.indent > indent => {
                Err(bad(next.number, &next.content, "bad indentation"))
            }
            _ => Ok(()),
        }
    }
}

fn null(line: usize) -> Node {
    Node::Scalar {
        line,
        text: String::new(),
        null: true,
    }
}

/// A value on one line: a flow sequence of scalars or a scalar.
fn value(line: usize, text: &str) -> Result<Node> {
    if let Some(inner) = text.strip_prefix('[') {
        let Some(inner) = inner.strip_suffix(']') else {
            return Err(bad(line, text, "a flow sequence ends on its line with `]`"));
        };
        if inner.contains(['[', ']', '{', '}', '"', '\'']) {
            return Err(bad(
                line,
                text,
                "a flow sequence holds plain scalars only (this reader's YAML subset)",
            ));
        }
        let items = if inner.trim().is_empty() {
            Vec::new()
        } else {
            inner
                .split(',')
                .map(|item| scalar(line, item.trim()))
                .collect::<Result<_>>()?
        };
        return Ok(Node::Seq { line, items });
    }
    scalar(line, text)
}

fn scalar(line: usize, text: &str) -> Result<Node> {
    if text.is_empty() || text == "~" || text == "null" {
        return Ok(null(line));
    }
    Ok(Node::Scalar {
        line,
        text: unquote(line, text)?,
        null: false,
    })
}

/// A scalar's text: quotes removed (`''` in single quotes, `\"` and `\\` in
/// double quotes).
fn unquote(line: usize, text: &str) -> Result<String> {
    if let Some(c) = text.chars().next() {
        if "&*!|>{}%@`[]".contains(c) {
            return Err(bad(
                line,
                text,
                "a YAML feature this reader does not read (anchors, aliases, tags, block scalars, flow mappings)",
            ));
        }
    }
    let unclosed = || bad(line, text, "a quoted scalar ends on its line");
    if let Some(inner) = text.strip_prefix('\'') {
        let inner = inner.strip_suffix('\'').ok_or_else(unclosed)?;
        if inner.replace("''", "").contains('\'') {
            return Err(unclosed());
        }
        return Ok(inner.replace("''", "'"));
    }
    if let Some(inner) = text.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => {
                    return if chars.as_str().is_empty() {
                        Ok(out)
                    } else {
                        Err(bad(line, text, "text after a quoted scalar"))
                    };
                }
                '\\' => match chars.next() {
                    Some(e @ ('"' | '\\' | '/')) => out.push(e),
                    _ => {
                        return Err(bad(
                            line,
                            text,
                            "an escape other than \\\" \\\\ \\/ (this reader's YAML subset)",
                        ));
                    }
                },
                c => out.push(c),
            }
        }
        return Err(unclosed());
    }
    Ok(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(text: &str) -> Node {
        Node::Scalar {
            line: 0,
            text: text.to_string(),
            null: false,
        }
    }

    /// The node with every line set to 0, to compare shapes.
    fn shape(node: Node) -> Node {
        match node {
            Node::Scalar { text, null, .. } => Node::Scalar {
                line: 0,
                text,
                null,
            },
            Node::Seq { items, .. } => Node::Seq {
                line: 0,
                items: items.into_iter().map(shape).collect(),
            },
            Node::Map { entries, .. } => Node::Map {
                line: 0,
                entries: entries.into_iter().map(|(k, v)| (k, shape(v))).collect(),
            },
        }
    }

    #[test]
    fn subset() {
        let doc = "---\n- a: 1 # c\n  b:\n  - x\n  - 'y''s'\n  c: [4, 16]\n-\n  - \"q#\"\n";
        let got = shape(parse(doc).unwrap());
        let want = Node::Seq {
            line: 0,
            items: vec![
                Node::Map {
                    line: 0,
                    entries: vec![
                        ("a".into(), s("1")),
                        (
                            "b".into(),
                            Node::Seq {
                                line: 0,
                                items: vec![s("x"), s("y's")],
                            },
                        ),
                        (
                            "c".into(),
                            Node::Seq {
                                line: 0,
                                items: vec![s("4"), s("16")],
                            },
                        ),
                    ],
                },
                Node::Seq {
                    line: 0,
                    items: vec![s("q#")],
                },
            ],
        };
        assert_eq!(got, want);
        for (text, line) in [
            ("a: 1\na: 2\n", 2),
            ("a: &x 1\n", 1),
            ("a:\n  b: 1\n    c: 2\n", 3),
            ("a: 'x\n", 1),
            ("a: 1\n--- \nb: 2\n", 2),
        ] {
            match parse(text) {
                Err(crate::Error::BadHostTable { line: got, .. }) => {
                    assert_eq!(got, line, "{text}")
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        let deep = "- ".repeat(10_000) + "x\n";
        assert!(parse(&deep).is_err());
    }
}
