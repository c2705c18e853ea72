//! The host table: one row per host, with its GPUs, its health and its
//! topology keys, and the plain-text reader.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::machine::hostlist::expand_hostlist;

/// One host of the job's allocation.
///
/// `keys` are its topology keys from the outermost level to the innermost
/// (for example a cluster, then a rack or NVLink domain); the innermost is
/// its *domain*. A host with no keys has an unknown domain: it never joins
/// a domain, so a group that spans it and another host crosses domains.
/// Keys are opaque strings, compared as written.
///
/// ```
/// use rank_layout::machine::Host;
/// let host = Host::new("gb01", None).keys(vec!["spine1".into(), "rack07".into()]).gpus(Some(4));
/// assert_eq!((host.domain(), host.gpus, host.healthy), (Some("rack07"), Some(4), true));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Host {
    /// The host's name, as the launcher knows it.
    pub name: String,
    /// Its GPUs (`None`: not given; the placement's GPUs per node apply).
    pub gpus: Option<u32>,
    /// Whether it may run the job (a drained or failed host is not placed).
    pub healthy: bool,
    /// Topology keys, outermost first; empty when unknown.
    pub keys: Vec<String>,
}

impl Host {
    /// A healthy host in `domain` (`None`: unknown), GPUs not given.
    pub fn new(name: impl Into<String>, domain: Option<&str>) -> Host {
        Host {
            name: name.into(),
            gpus: None,
            healthy: true,
            keys: domain.map(|d| vec![d.to_string()]).unwrap_or_default(),
        }
    }

    /// With `gpus` GPUs (`None`: not given).
    #[must_use]
    pub fn gpus(mut self, gpus: Option<u32>) -> Host {
        self.gpus = gpus;
        self
    }

    /// Healthy or not.
    #[must_use]
    pub fn healthy(mut self, healthy: bool) -> Host {
        self.healthy = healthy;
        self
    }

    /// With the topology keys `keys`, outermost first (empty: unknown).
    #[must_use]
    pub fn keys(mut self, keys: Vec<String>) -> Host {
        self.keys = keys;
        self
    }

    /// Its domain: the innermost topology key, `None` when unknown.
    pub fn domain(&self) -> Option<&str> {
        self.keys.last().map(String::as_str)
    }
}

/// The table of hosts a job got, in a canonical order: sorted by name
/// (digit runs compared as numbers, so `gb2` comes before `gb10`), so the
/// same hosts in any row order make the same table, and everything
/// computed from it is the same.
///
/// ```
/// use rank_layout::machine::Hosts;
/// let hosts = Hosts::parse_plain("# host domain gpus\ngb10 rack1 4\ngb2 rack1 4\ngb3 - 4 down\n")?;
/// let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
/// assert_eq!(names, ["gb2", "gb3", "gb10"]);
/// assert_eq!(hosts.get(1).unwrap().domain(), None);
/// assert!(!hosts.get(1).unwrap().healthy);
/// # Ok::<(), rank_layout::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Hosts {
    hosts: Vec<Host>,
}

impl Hosts {
    /// The table of `hosts`, put in the canonical order.
    ///
    /// # Errors
    /// [`Error::BadHostTable`] for an empty name, a name with a blank, a
    /// name or key with a control character, or a name given twice (line
    /// 0: not read from text).
    pub fn new(hosts: Vec<Host>) -> Result<Hosts> {
        Hosts::checked(hosts.into_iter().map(|h| (0, h)).collect())
    }

    /// The table of `rows` (each with the line it was read from), checked
    /// and put in the canonical order: what every reader ends with.
    pub(crate) fn checked(mut rows: Vec<(usize, Host)>) -> Result<Hosts> {
        for (_, host) in &mut rows {
            if host.keys.last().is_some_and(|k| is_placeholder(k)) {
                host.keys.clear();
            }
        }
        let mut seen = BTreeSet::new();
        for (line, host) in &rows {
            if host.name.is_empty() || host.name.chars().any(char::is_whitespace) {
                return Err(bad(*line, &host.name, "a host name is one word"));
            }
            // A launcher file writes names and keys as they are: a control
            // character (NUL, ESC, ...) would end or corrupt its line.
            if host.name.chars().any(char::is_control) {
                return Err(bad(
                    *line,
                    &host.name,
                    "a host name has no control characters",
                ));
            }
            if let Some(key) = host.keys.iter().find(|k| k.chars().any(char::is_control)) {
                return Err(bad(*line, key, "a topology key has no control characters"));
            }
            if host.gpus == Some(0) {
                return Err(bad(*line, &host.name, "a host has at least one GPU"));
            }
            if let Some(key) = host.keys.iter().find(|k| k.is_empty()) {
                return Err(bad(*line, key, "a topology key is not empty"));
            }
            if !seen.insert(host.name.as_str()) {
                return Err(bad(
                    *line,
                    &host.name,
                    &format!("host {:?} is listed twice", host.name),
                ));
            }
        }
        rows.sort_by(|a, b| natural(&a.1.name, &b.1.name));
        Ok(Hosts {
            hosts: rows.into_iter().map(|(_, h)| h).collect(),
        })
    }

    /// Reads the plain table: one host per line, `host domain [gpus]
    /// [state]` (`host` may be a Slurm hostlist expression, `gb[01-18]`,
    /// for several hosts alike: [`expand_hostlist`]), words separated by blanks, `#` to the end of a line a
    /// comment. `domain` is `-` or `unknown` for none, or the topology keys
    /// joined by `/` from the outermost (`cluster1/rack07`); `gpus` a
    /// positive integer; `state` `up` (the default; also `ok`, `healthy`)
    /// or `down` (also `drain`, `drained`, `fail`, `failed`, `unhealthy`).
    ///
    /// # Errors
    /// [`Error::BadHostTable`] naming the line and the bad word.
    pub fn parse_plain(text: &str) -> Result<Hosts> {
        let mut rows = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let body = raw.split('#').next().unwrap_or("");
            let words: Vec<&str> = body.split_whitespace().collect();
            let (name, domain, rest) = match words.as_slice() {
                [] => continue,
                [name, domain, rest @ ..] if rest.len() <= 2 => (*name, *domain, rest),
                _ => {
                    return Err(bad(
                        line,
                        raw.trim(),
                        "expected `host domain [gpus] [state]`",
                    ));
                }
            };
            let keys = match domain {
                "-" | "unknown" => Vec::new(),
                d => d.split('/').map(str::to_string).collect(),
            };
            let mut host = Host {
                name: String::new(),
                gpus: None,
                healthy: true,
                keys,
            };
            for word in rest {
                if word.bytes().all(|b| b.is_ascii_digit()) {
                    if host.gpus.is_some() {
                        return Err(bad(line, word, "the GPUs are given twice"));
                    }
                    host.gpus = Some(word.parse().map_err(|_| {
                        bad(line, word, "the GPUs are an integer from 1 to 4294967295")
                    })?);
                } else {
                    host.healthy = state(word).ok_or_else(|| {
                        bad(
                            line,
                            word,
                            "expected a GPU count or a state (up, ok, healthy, down, drain, drained, fail, failed, unhealthy)",
                        )
                    })?;
                }
            }
            let mut listed = rows.len();
            let names = expand_at(line, name, &mut listed)?;
            for name in names {
                rows.push((
                    line,
                    Host {
                        name,
                        ..host.clone()
                    },
                ));
            }
        }
        Hosts::checked(rows)
    }

    /// The hosts, in the canonical order.
    pub fn iter(&self) -> std::slice::Iter<'_, Host> {
        self.hosts.iter()
    }

    /// The `i`-th host of the canonical order.
    pub fn get(&self, i: usize) -> Option<&Host> {
        self.hosts.get(i)
    }

    /// The number of hosts.
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    /// Whether the table has no host.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }

    /// The host named `name`, by its index in the canonical order.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.hosts.binary_search_by(|h| natural(&h.name, name)).ok()
    }

    /// The deepest topology level of any host (1 for a table of domains).
    pub fn levels(&self) -> usize {
        self.hosts.iter().map(|h| h.keys.len()).max().unwrap_or(0)
    }

    /// The hosts of `nodelist`, a Slurm hostlist expression such as the
    /// job's `SLURM_JOB_NODELIST`: a topology file lists the whole cluster,
    /// the job got some of it. Each host keeps its row of this table; a
    /// host this table does not list joins with an unknown domain.
    ///
    /// ```
    /// use rank_layout::machine::Hosts;
    /// let cluster = Hosts::parse_topology_conf("BlockName=b1 Nodes=gb[01-18]\n")?;
    /// let job = cluster.restrict_to("gb[17-18],gpu7")?;
    /// let domains: Vec<_> = job.iter().map(|h| (h.name.as_str(), h.domain())).collect();
    /// assert_eq!(domains, [("gb17", Some("b1")), ("gb18", Some("b1")), ("gpu7", None)]);
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::BadHostTable`] (line 1) for a bad expression, a host named
    /// twice, or a nodelist none of whose hosts the table lists (the wrong
    /// table, or the wrong list).
    pub fn restrict_to(&self, nodelist: &str) -> Result<Hosts> {
        self.restrict(nodelist).map(|(hosts, _)| hosts)
    }

    /// The plain table of these hosts (what [`Hosts::parse_plain`] reads
    /// back to the same table).
    pub fn to_plain(&self) -> String {
        let mut out = String::new();
        for h in &self.hosts {
            out.push_str(&h.name);
            out.push(' ');
            if h.keys.is_empty() {
                out.push('-');
            } else {
                out.push_str(&h.keys.join("/"));
            }
            if let Some(g) = h.gpus {
                out.push_str(&format!(" {g}"));
            }
            if !h.healthy {
                out.push_str(" down");
            }
            out.push('\n');
        }
        out
    }
}

impl<'a> IntoIterator for &'a Hosts {
    type Item = &'a Host;
    type IntoIter = std::slice::Iter<'a, Host>;
    fn into_iter(self) -> Self::IntoIter {
        self.hosts.iter()
    }
}

/// Whether `key` names no place: `unknown` (any case), the switch or block
/// name Slurm's tools give nodes whose place they do not know. A host whose
/// innermost key is one has an unknown domain: the hosts under it share no
/// NVLink domain.
fn is_placeholder(key: &str) -> bool {
    key.eq_ignore_ascii_case("unknown")
}

fn state(word: &str) -> Option<bool> {
    match word.to_ascii_lowercase().as_str() {
        "up" | "ok" | "healthy" => Some(true),
        "down" | "drain" | "drained" | "fail" | "failed" | "unhealthy" => Some(false),
        _ => None,
    }
}

/// The host names of the hostlist expression `expr` read at `line`, with
/// `listed` (the names listed so far) counted up: more than
/// [`MAX_HOSTS`](crate::machine::MAX_HOSTS) in all is an error.
pub(crate) fn expand_at(line: usize, expr: &str, listed: &mut usize) -> Result<Vec<String>> {
    let names = expand_hostlist(expr).map_err(|e| match e {
        Error::BadSpec { problem, .. } => bad(line, expr, &problem),
        other => other,
    })?;
    *listed = listed.saturating_add(names.len());
    if *listed > crate::machine::hostlist::MAX_HOSTS {
        return Err(bad(
            line,
            expr,
            &format!(
                "the table lists more than {} hosts",
                crate::machine::hostlist::MAX_HOSTS
            ),
        ));
    }
    Ok(names)
}

/// The host table's error: `line` (from 1; 0 when not read from a line),
/// the bad `text` (cut to 200 characters) and the `problem`.
pub(crate) fn bad(line: usize, text: &str, problem: &str) -> Error {
    Error::BadHostTable {
        line,
        text: text.chars().take(200).collect(),
        problem: problem.to_string(),
    }
}

/// Names compared with their digit runs as numbers (`gb2` < `gb10`), then
/// as text (so `gb02` and `gb2` differ and the order is total).
pub(crate) fn natural(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    while let (Some(&cx), Some(&cy)) = (x.first(), y.first()) {
        if cx.is_ascii_digit() && cy.is_ascii_digit() {
            let (dx, rx) = digits(x);
            let (dy, ry) = digits(y);
            let (tx, ty) = (trim_zeros(dx), trim_zeros(dy));
            let by_value = tx.len().cmp(&ty.len()).then_with(|| tx.cmp(ty));
            if by_value != Ordering::Equal {
                return by_value;
            }
            x = rx;
            y = ry;
        } else {
            if cx != cy {
                return cx.cmp(&cy);
            }
            x = x.get(1..).unwrap_or_default();
            y = y.get(1..).unwrap_or_default();
        }
    }
    x.len().cmp(&y.len()).then_with(|| a.cmp(b))
}

fn digits(s: &[u8]) -> (&[u8], &[u8]) {
    let n = s.iter().take_while(|b| b.is_ascii_digit()).count();
    s.split_at(n)
}

fn trim_zeros(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|&&b| b == b'0').count();
    s.get(n..).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order() {
        let mut names = vec!["gb10", "gb2", "gb002", "a", "gb1x", "gb"];
        names.sort_by(|a, b| natural(a, b));
        assert_eq!(names, ["a", "gb", "gb1x", "gb002", "gb2", "gb10"]);
    }

    #[test]
    fn plain_round_trip_and_errors() {
        let hosts = Hosts::parse_plain("n1 c/r1 4\nn2 unknown\nn3 r2 8 drain # gone\n").unwrap();
        let listed = Hosts::parse_plain("n[1-2] r1 4\nn3 r2\n").unwrap();
        assert_eq!(listed.len(), 3);
        assert_eq!(listed.get(1).unwrap().name, "n2");
        assert_eq!(listed.get(1).unwrap().gpus, Some(4));
        assert_eq!(Hosts::parse_plain(&hosts.to_plain()).unwrap(), hosts);
        assert_eq!(hosts.levels(), 2);
        assert_eq!(hosts.index_of("n3"), Some(2));
        for (text, word) in [
            ("n1\n", "n1"),
            ("n1 r1 0\n", "n1"),
            ("n1 r1 4 4\n", "4"),
            ("n1 r1 sideways\n", "sideways"),
            ("n1 r1\nn1 r2\n", "n1"),
            ("n1 r1 99999999999\n", "99999999999"),
            ("n1 a//b\n", ""),
        ] {
            match Hosts::parse_plain(text) {
                Err(Error::BadHostTable { text: got, .. }) => assert_eq!(got, word, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }
}
