//! `nvidia-smi -q` per host: the NVLink domain of its GPUs from the
//! `Fabric` block.

use crate::error::Result;
use crate::machine::hosts::{Host, Hosts, bad};

/// What one `Fabric` block says.
#[derive(Debug, Default)]
struct Fabric {
    line: usize,
    state: Option<String>,
    status: Option<String>,
    clique: Option<String>,
    cluster: Option<String>,
    summary: Option<String>,
}

impl Fabric {
    /// `"<ClusterUUID>.<CliqueId>"`, or `None` when unknown: the state is
    /// not `Completed`, the UUID is `N/A` or all zeros, the clique is not a
    /// number.
    fn domain(&self) -> Option<String> {
        if self.state.as_deref().is_some_and(|s| s != "Completed") {
            return None;
        }
        let cluster = self.cluster.as_deref()?;
        let zero = cluster.chars().all(|c| c == '0' || c == '-');
        let clique = self.clique.as_deref()?;
        if zero || cluster.contains(' ') || cluster.contains('/') || !is_number(clique) {
            return None;
        }
        Some(format!("{cluster}.{clique}"))
    }

    /// Unhealthy: registration completed with an error status, or the
    /// health summary `Unhealthy`.
    fn healthy(&self) -> bool {
        let failed = self.state.as_deref() == Some("Completed")
            && self.status.as_deref().is_some_and(|s| s != "Success");
        !failed && self.summary.as_deref() != Some("Unhealthy")
    }
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

impl Hosts {
    /// Reads `nvidia-smi -q` of each host, given as (host name, output)
    /// pairs. A host's GPUs are its `GPU <bus id>` sections (not given when
    /// there are none, as in a `grep`ped excerpt); its domain is
    /// `"<ClusterUUID>.<CliqueId>"` of the `Fabric` blocks, unknown when
    /// the state is not `Completed`, the UUID is `N/A` or all zeros or there
    /// is no `Fabric` block; it is unhealthy when a GPU's fabric
    /// registration completed with a status other than `Success` or its
    /// health summary is `Unhealthy`. An excerpt with no `Fabric` line
    /// (`nvidia-smi -q | grep "ClusterUUID\|CliqueId" | sort -u`, as NVIDIA
    /// topograph ran it) is read from its `ClusterUUID` and `CliqueId`
    /// lines.
    ///
    /// ```
    /// use rank_layout::machine::Hosts;
    /// let gpu = "GPU 00000008:01:00.0\n    Fabric\n        State      : Completed\n        Status     : Success\n        CliqueId   : 7\n        ClusterUUID : 0b9e38ae-5c65-4d53-a4b8-4e0a7f1c2d3e\n";
    /// let hosts = Hosts::from_nvidia_smi(&[("gb01", &gpu.repeat(4)), ("gb02", "")])?;
    /// let gb01 = hosts.get(0).unwrap();
    /// assert_eq!(gb01.domain(), Some("0b9e38ae-5c65-4d53-a4b8-4e0a7f1c2d3e.7"));
    /// assert_eq!(gb01.gpus, Some(4));
    /// assert_eq!(hosts.get(1).unwrap().domain(), None);
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::BadHostTable`](crate::Error::BadHostTable) naming the line
    /// (of the host's output) and the bad value: GPUs of one host in
    /// different domains (or some known, some unknown), a host named twice
    /// or not one word.
    pub fn from_nvidia_smi(outputs: &[(&str, &str)]) -> Result<Hosts> {
        let rows = outputs
            .iter()
            .map(|(name, text)| {
                let lines: Vec<(usize, &str)> =
                    text.lines().enumerate().map(|(i, l)| (i + 1, l)).collect();
                Ok((0, read_host(name, &lines)?))
            })
            .collect::<Result<Vec<_>>>()?;
        Hosts::checked(rows)
    }

    /// [`Hosts::from_nvidia_smi`] of files named after their hosts: a
    /// host is its file's last path component without a `.txt`, `.log`
    /// or `.out` ending (`smi/gb01.txt` is `gb01`).
    ///
    /// ```
    /// use rank_layout::machine::Hosts;
    /// let hosts = Hosts::from_nvidia_smi_files(&[("smi/gb01.txt", "GPU 00000008:01:00.0\n")])?;
    /// assert_eq!((hosts.get(0).unwrap().name.as_str(), hosts.get(0).unwrap().gpus), ("gb01", Some(1)));
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Hosts::from_nvidia_smi`].
    pub fn from_nvidia_smi_files(files: &[(&str, &str)]) -> Result<Hosts> {
        let named: Vec<(&str, &str)> = files
            .iter()
            .map(|(path, text)| (host_of(path), *text))
            .collect();
        Hosts::from_nvidia_smi(&named)
    }

    /// Reads `nvidia-smi -q` of several hosts in one text, in either of
    /// the forms tools print for several hosts: each host's output after a
    /// `==> NAME <==` line (what `head -n -0 gb*.txt` or `tail -n +1` print
    /// for several files; `NAME` may be a path: the host is its last
    /// component without a `.txt`, `.log` or `.out` ending), or every line
    /// prefixed by its host, `NAME: line` (what `pdsh -w HOSTS nvidia-smi -q`
    /// prints; a host's lines may be interleaved with others'). Line numbers
    /// in errors count from the top of the whole text. See
    /// [`Hosts::from_nvidia_smi`]; one host's output without either names
    /// no host: give it with its name there.
    ///
    /// ```
    /// use rank_layout::machine::Hosts;
    /// let text = "==> smi/gb01.txt <==\nGPU 00000008:01:00.0\n\n==> smi/gb02.txt <==\n";
    /// let hosts = Hosts::parse_nvidia_smi(text)?;
    /// assert_eq!(hosts.iter().map(|h| h.name.as_str()).collect::<Vec<_>>(), ["gb01", "gb02"]);
    /// let pdsh = "node-10:         CliqueId                          : 4000000004\n\
    ///             node-10:         ClusterUUID                       : 50000000-0000-0000-0000-000000000005\n";
    /// let hosts = Hosts::parse_nvidia_smi(pdsh)?;
    /// assert_eq!(hosts.get(0).unwrap().domain(), Some("50000000-0000-0000-0000-000000000005.4000000004"));
    /// assert!(Hosts::parse_nvidia_smi("GPU 00000008:01:00.0\n").is_err());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Hosts::from_nvidia_smi`]; text that is neither form (one
    /// host's output names no host), a line of the `NAME: line` form
    /// without its host.
    pub fn parse_nvidia_smi(text: &str) -> Result<Hosts> {
        let sections = match Form::of(text) {
            Form::Headers => headed_sections(text),
            Form::Pdsh => pdsh_sections(text)?,
            Form::One(line, raw) => {
                return Err(bad(
                    line,
                    raw,
                    "one host's nvidia-smi -q names no host: give it after a `==> HOST <==` line, or its lines as `HOST: line` (pdsh), or read it with its host's name",
                ));
            }
        };
        let rows = sections
            .iter()
            .map(|(line, name, lines)| Ok((*line, read_host(name, lines)?)))
            .collect::<Result<Vec<_>>>()?;
        Hosts::checked(rows)
    }
}

/// Reads `nvidia-smi -q` text: its sections or pdsh lines, or, when it is
/// one host's output with neither, that host's named `name` (`None`: an
/// error, as [`Hosts::parse_nvidia_smi`]).
pub(crate) fn read_named(text: &str, name: Option<&str>) -> Result<Hosts> {
    match (Form::of(text), name) {
        (Form::One(..), Some(name)) => Hosts::from_nvidia_smi(&[(name, text)]),
        _ => Hosts::parse_nvidia_smi(text),
    }
}

/// The form of a text of `nvidia-smi -q` output, from its first line that
/// is not blank.
enum Form<'a> {
    /// `==> NAME <==` sections.
    Headers,
    /// `NAME: line` lines (pdsh).
    Pdsh,
    /// One host's output with no name (the first line and its number).
    One(usize, &'a str),
}

impl<'a> Form<'a> {
    fn of(text: &'a str) -> Form<'a> {
        let first = text.lines().enumerate().find(|(_, l)| !l.trim().is_empty());
        match first {
            None => Form::Headers,
            Some((_, l)) if header(l).is_some() => Form::Headers,
            Some((_, l)) if pdsh_line(l).is_some() => Form::Pdsh,
            Some((i, l)) => Form::One(i + 1, l),
        }
    }
}

/// The host of a `==> NAME <==` line.
fn header(raw: &str) -> Option<&str> {
    raw.trim()
        .strip_prefix("==> ")
        .and_then(|h| h.strip_suffix(" <=="))
}

/// A pdsh line, `NAME: line` (pdsh prints `"%s: %s"`): the host and the
/// remote line, its indentation kept. The host is one word at the start
/// of the line that ends in the first `:`, followed by a blank or the end
/// of the line; an `nvidia-smi -q` line never reads so (its keys are
/// padded with blanks before their `:`, a bus id has no blank after one).
fn pdsh_line(raw: &str) -> Option<(&str, &str)> {
    let (host, rest) = raw.split_once(':')?;
    let fits = !host.is_empty()
        && !host.starts_with("==>")
        && !host.chars().any(char::is_whitespace)
        && (rest.is_empty() || rest.starts_with(' '));
    fits.then(|| (host, rest.strip_prefix(' ').unwrap_or(rest)))
}

/// A host's section: the line it starts at, its name and its lines (each
/// with its number in the whole text).
type Section<'a> = (usize, String, Vec<(usize, &'a str)>);

/// The `==> NAME <==` sections of `text` (its first line that is not blank
/// is a header).
fn headed_sections(text: &str) -> Vec<Section<'_>> {
    let mut sections: Vec<Section<'_>> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        match (header(raw), sections.last_mut()) {
            (Some(path), _) => sections.push((i + 1, host_of(path).to_string(), Vec::new())),
            (None, Some((_, _, lines))) => lines.push((i + 1, raw)),
            (None, None) => {}
        }
    }
    sections
}

/// The hosts of pdsh lines, in the order they first appear, each with its
/// lines.
///
/// # Errors
/// A line that is not blank and not `NAME: line`.
fn pdsh_sections(text: &str) -> Result<Vec<Section<'_>>> {
    let mut sections: Vec<Section<'_>> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let Some((host, line)) = pdsh_line(raw) else {
            return Err(bad(
                i + 1,
                raw,
                "expected `HOST: line`, as pdsh prints every line of the others",
            ));
        };
        match sections.iter_mut().find(|(_, name, _)| name == host) {
            Some((_, _, lines)) => lines.push((i + 1, line)),
            None => sections.push((i + 1, host.to_string(), vec![(i + 1, line)])),
        }
    }
    Ok(sections)
}

/// The host of a section header: the path's last component, without a
/// `.txt`, `.log` or `.out` ending.
pub(crate) fn host_of(path: &str) -> &str {
    let last = path.rsplit('/').next().unwrap_or(path);
    [".txt", ".log", ".out"]
        .iter()
        .find_map(|ext| last.strip_suffix(ext))
        .unwrap_or(last)
}

/// One host's output, its lines with their numbers.
fn read_host(name: &str, lines: &[(usize, &str)]) -> Result<Host> {
    let mut gpus: u32 = 0;
    let mut fabrics: Vec<Fabric> = Vec::new();
    // The indentation of the open `Fabric` block and of its `Health`.
    let mut fabric: Option<usize> = None;
    let mut health: Option<usize> = None;
    // An excerpt without `Fabric` lines: each value of its ClusterUUID and
    // CliqueId lines, with the line it was first seen at.
    let excerpt = !lines.iter().any(|(_, raw)| raw.trim() == "Fabric");
    let mut uuids: Vec<(usize, String)> = Vec::new();
    let mut cliques: Vec<(usize, String)> = Vec::new();
    for &(line, raw) in lines {
        let body = raw.trim_start();
        if body.is_empty() {
            continue;
        }
        let indent = raw.len() - body.len();
        if fabric.is_some_and(|f| indent <= f) {
            fabric = None;
        }
        if health.is_some_and(|h| indent <= h) {
            health = None;
        }
        if is_gpu_header(body, indent) {
            gpus = gpus.saturating_add(1);
            continue;
        }
        let body = body.trim_end();
        if excerpt {
            if let Some((key, value)) = body.split_once(':') {
                let seen = match key.trim() {
                    "ClusterUUID" => &mut uuids,
                    "CliqueId" => &mut cliques,
                    _ => continue,
                };
                let value = value.trim().to_string();
                if !seen.iter().any(|(_, v)| *v == value) {
                    seen.push((line, value));
                }
            }
            continue;
        }
        if body == "Fabric" {
            fabric = Some(indent);
            fabrics.push(Fabric {
                line,
                ..Fabric::default()
            });
            continue;
        }
        if fabric.is_none() {
            continue;
        }
        if body == "Health" {
            health = Some(indent);
            continue;
        }
        let Some((key, value)) = body.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim().to_string());
        let Some(f) = fabrics.last_mut() else {
            continue;
        };
        let slot = match (key, health.is_some()) {
            ("State", false) => &mut f.state,
            ("Status", false) => &mut f.status,
            ("CliqueId", false) => &mut f.clique,
            ("ClusterUUID", false) => &mut f.cluster,
            ("Summary", true) => &mut f.summary,
            _ => continue,
        };
        *slot = Some(value);
    }
    if excerpt {
        for (what, seen) in [("ClusterUUID", &uuids), ("CliqueId", &cliques)] {
            if let [(first, a), (line, b), ..] = seen.as_slice() {
                return Err(bad(
                    *line,
                    b,
                    &format!(
                        "host {name:?}: its GPUs disagree on the NVLink domain ({what} {a} at line {first}, {b} here)"
                    ),
                ));
            }
        }
        if let (Some((line, cluster)), Some((_, clique))) = (uuids.first(), cliques.first()) {
            fabrics.push(Fabric {
                line: *line,
                cluster: Some(cluster.clone()),
                clique: Some(clique.clone()),
                ..Fabric::default()
            });
        }
    }
    let mut domain: Option<(usize, Option<String>)> = None;
    for f in &fabrics {
        let d = f.domain();
        match &domain {
            None => domain = Some((f.line, d)),
            Some((first, known)) if *known != d => {
                let show = |d: &Option<String>| d.clone().unwrap_or_else(|| "unknown".to_string());
                return Err(bad(
                    f.line,
                    &show(&d),
                    &format!(
                        "host {name:?}: its GPUs disagree on the NVLink domain ({} at line {first}, {} here)",
                        show(known),
                        show(&d)
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(Host {
        name: name.to_string(),
        gpus: (gpus > 0).then_some(gpus),
        healthy: fabrics.iter().all(Fabric::healthy),
        keys: domain.and_then(|(_, d)| d).into_iter().collect(),
    })
}

/// `GPU 00000008:01:00.0`: a GPU's section, unindented.
fn is_gpu_header(body: &str, indent: usize) -> bool {
    let Some(bus) = body.trim_end().strip_prefix("GPU ") else {
        return false;
    };
    indent == 0
        && !bus.is_empty()
        && bus
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
}
