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
    /// health summary is `Unhealthy`.
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
            .map(|(name, text)| Ok((0, read_host(name, text, 0)?)))
            .collect::<Result<Vec<_>>>()?;
        Hosts::checked(rows)
    }

    /// Reads `nvidia-smi -q` of several hosts in one text, each host's
    /// output after a `==> NAME <==` line (what `head -n -0 gb*.txt` or
    /// `tail -n +1` print for several files). `NAME` may be a path: the host
    /// is its last component without a `.txt`, `.log` or `.out` ending.
    /// Line numbers in errors count from the top of the whole text. See
    /// [`Hosts::from_nvidia_smi`].
    ///
    /// ```
    /// use rank_layout::machine::Hosts;
    /// let text = "==> smi/gb01.txt <==\nGPU 00000008:01:00.0\n\n==> smi/gb02.txt <==\n";
    /// let hosts = Hosts::parse_nvidia_smi(text)?;
    /// assert_eq!(hosts.iter().map(|h| h.name.as_str()).collect::<Vec<_>>(), ["gb01", "gb02"]);
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Hosts::from_nvidia_smi`]; text before the first `==> NAME <==`.
    pub fn parse_nvidia_smi(text: &str) -> Result<Hosts> {
        let mut sections: Vec<(usize, String, String)> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let header = raw
                .trim()
                .strip_prefix("==> ")
                .and_then(|h| h.strip_suffix(" <=="));
            match (header, sections.last_mut()) {
                (Some(path), _) => sections.push((i + 1, host_of(path).to_string(), String::new())),
                (None, Some((_, _, body))) => {
                    body.push_str(raw);
                    body.push('\n');
                }
                (None, None) if raw.trim().is_empty() => {}
                (None, None) => {
                    return Err(bad(i + 1, raw, "expected a `==> HOST <==` line first"));
                }
            }
        }
        let rows = sections
            .iter()
            .map(|(line, name, body)| Ok((*line, read_host(name, body, *line)?)))
            .collect::<Result<Vec<_>>>()?;
        Hosts::checked(rows)
    }
}

/// The host of a section header: the path's last component, without a
/// `.txt`, `.log` or `.out` ending.
fn host_of(path: &str) -> &str {
    let last = path.rsplit('/').next().unwrap_or(path);
    [".txt", ".log", ".out"]
        .iter()
        .find_map(|ext| last.strip_suffix(ext))
        .unwrap_or(last)
}

/// One host's output; `offset` is added to its line numbers.
fn read_host(name: &str, text: &str, offset: usize) -> Result<Host> {
    let mut gpus: u32 = 0;
    let mut fabrics: Vec<Fabric> = Vec::new();
    // The indentation of the open `Fabric` block and of its `Health`.
    let mut fabric: Option<usize> = None;
    let mut health: Option<usize> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = offset + i + 1;
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
