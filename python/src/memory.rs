//! Whether the members asked for fit the memory this process may still
//! use, checked before any is made: a list of two billion ranks fails as
//! `MemoryError` instead of taking the machine (or the interpreter) down.
//!
//! The memory a process may use is the least of three limits, each read
//! where it can be (Linux) and skipped where it cannot:
//!
//! - the system's: `/proc/meminfo`'s `MemAvailable`;
//! - the address-space limit (`ulimit -v`, `RLIMIT_AS`): the soft limit of
//!   `/proc/self/limits` less the address space in use (`VmSize` of
//!   `/proc/self/status`);
//! - the cgroup's (a container's or a job's): for the process's cgroup and
//!   each of its ancestors, `memory.max` less `memory.current` (cgroup v2)
//!   or `memory.limit_in_bytes` less `memory.usage_in_bytes` (v1), found
//!   through `/proc/self/cgroup` and `/proc/self/mountinfo`.
//!
//! Past the check every large allocation is fallible (the crate's
//! `try_reserve`, NumPy's `tolist` for the ints: [`crate::lists`]), so a
//! check that guessed too little still ends in `MemoryError`.
//!
//! Only answers of [`CHECKED_FROM`] bytes or more are checked. Reading the
//! limits reads eight or more files (40 to 100 us), as long as making a
//! kind's array at 131,072 ranks (512 KiB) or a group of a few thousand
//! ranks; every call paid it, which made the arrays 1.8x the cost of
//! their fresh memory and Megatron-Core's set-up twice as slow. From 16 MiB
//! up, writing the answer's fresh memory alone takes milliseconds, and the
//! check under 2% of that. Below, what the check guards against is no
//! different from any other allocation of the program's: under an
//! address-space limit the allocation itself fails, cleanly, as
//! `MemoryError` (the same fallible allocations); under a cgroup's limit or
//! the machine's memory, an allocation succeeds and the kernel reclaims or
//! ends the process when its pages are first written, as it does for a
//! Python list or a NumPy array of that size, which nothing checks. The
//! check exists for answers the size of a huge world's ranks (gigabytes at
//! 2^28 ranks), which only these calls make.

use std::path::{Path, PathBuf};

use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Bytes one rank takes as a Python int in a list: the int object (28 to
/// 32 bytes, in 32-byte blocks), the list's pointer (8), and the `u32` the
/// list is made from (4), rounded up.
const BYTES_PER_INT: u64 = 48;

/// The bytes from which an answer is checked against the limits before it
/// is made (16 MiB: 4 Mi ranks as a `uint32` array, 350,000 as Python
/// ints); smaller ones are made unchecked (the module's documentation says
/// why).
const CHECKED_FROM: u64 = 16 << 20;

/// A cgroup v1 limit at or above this is "no limit" (the kernel writes
/// `9223372036854771712`).
const V1_UNLIMITED: u64 = 1 << 62;

/// The three limits, in bytes still free (`None`: not there, or unreadable).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Limits {
    /// The system's `MemAvailable`.
    pub meminfo: Option<u64>,
    /// `RLIMIT_AS` less the address space in use.
    pub address_space: Option<u64>,
    /// The tightest cgroup limit less its usage.
    pub cgroup: Option<u64>,
}

impl Limits {
    /// The limits of this process now.
    pub(crate) fn now() -> Limits {
        Limits {
            meminfo: mem_available(),
            address_space: address_space_left(),
            cgroup: cgroup_left(),
        }
    }

    /// The least limit, and what it is (for messages).
    fn least(&self) -> Option<(u64, &'static str)> {
        [
            (self.meminfo, "available on this machine"),
            (
                self.address_space,
                "left under this process's address-space limit (ulimit -v)",
            ),
            (self.cgroup, "left under its cgroup's memory limit"),
        ]
        .into_iter()
        .filter_map(|(bytes, what)| bytes.map(|b| (b, what)))
        .min_by_key(|(bytes, _)| *bytes)
    }
}

/// The number in kB of the line of `text` starting with `key`, in bytes.
fn kb_line(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kb: u64 = line
        .get(key.len()..)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}

/// `/proc/meminfo`'s `MemAvailable`.
fn mem_available() -> Option<u64> {
    kb_line(
        &std::fs::read_to_string("/proc/meminfo").ok()?,
        "MemAvailable:",
    )
}

/// The soft `RLIMIT_AS` of `/proc/self/limits` (`None` when unlimited).
fn address_space_limit(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    let soft = line
        .get("Max address space".len()..)?
        .split_whitespace()
        .next()?;
    soft.parse().ok()
}

/// The address space this process may still map.
fn address_space_left() -> Option<u64> {
    let limit = address_space_limit(&std::fs::read_to_string("/proc/self/limits").ok()?)?;
    let used = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| kb_line(&s, "VmSize:"))
        .unwrap_or(0);
    Some(limit.saturating_sub(used))
}

/// A number of a cgroup file (`None` for `max`, a missing file or none).
fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Where a cgroup hierarchy is mounted: the mount point and the part of
/// the hierarchy mounted there.
struct Mount {
    point: PathBuf,
    root: String,
}

/// The mount of the cgroup v2 hierarchy (`v2`) or of v1's memory
/// controller, from `/proc/self/mountinfo` (fields: id, parent, device,
/// root, mount point, options, optional fields, `-`, type, source,
/// super options).
fn mount_of(mountinfo: &str, v2: bool) -> Option<Mount> {
    mountinfo.lines().find_map(|line| {
        let (mount, fs) = line.split_once(" - ")?;
        let mut fields = mount.split_whitespace().skip(3);
        let root = fields.next()?;
        let point = fields.next()?;
        let mut fs = fs.split_whitespace();
        let fs_type = fs.next()?;
        let options = fs.nth(1).unwrap_or("");
        let wanted = if v2 {
            fs_type == "cgroup2"
        } else {
            fs_type == "cgroup" && options.split(',').any(|o| o == "memory")
        };
        wanted.then(|| Mount {
            point: PathBuf::from(point),
            root: root.to_owned(),
        })
    })
}

/// The directory of cgroup `path` (as `/proc/self/cgroup` gives it) under
/// `mount`, when it is mounted.
fn cgroup_dir(mount: &Mount, path: &str) -> PathBuf {
    let inside = path
        .strip_prefix(mount.root.trim_end_matches('/'))
        .unwrap_or(path);
    let mut dir = mount.point.clone();
    for part in inside.split('/').filter(|p| !p.is_empty() && *p != "..") {
        dir.push(part);
    }
    dir
}

/// The least `limit - usage` of `dir` and its ancestors up to `top`, each
/// read from the files `limit` and `usage` (limits at or above
/// `unlimited` skipped).
fn least_left(dir: &Path, top: &Path, limit: &str, usage: &str, unlimited: u64) -> Option<u64> {
    let mut least: Option<u64> = None;
    let mut at = Some(dir);
    while let Some(d) = at {
        if let Some(max) = read_number(&d.join(limit)).filter(|m| *m < unlimited) {
            let used = read_number(&d.join(usage)).unwrap_or(0);
            let left = max.saturating_sub(used);
            least = Some(least.map_or(left, |l| l.min(left)));
        }
        if d == top {
            break;
        }
        at = d.parent().filter(|p| p.starts_with(top));
    }
    least
}

/// The memory the process's cgroups (v2 and v1) leave it.
fn cgroup_left() -> Option<u64> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut least: Option<u64> = None;
    for line in cgroups.lines() {
        // `id:controllers:path`: v2 has id 0 and no controllers.
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let v2 = id == "0" && controllers.is_empty();
        if !v2 && !controllers.split(',').any(|c| c == "memory") {
            continue;
        }
        let mount = mount_of(&mountinfo, v2).unwrap_or_else(|| Mount {
            point: PathBuf::from(if v2 {
                "/sys/fs/cgroup"
            } else {
                "/sys/fs/cgroup/memory"
            }),
            root: "/".into(),
        });
        let dir = cgroup_dir(&mount, path);
        let left = if v2 {
            least_left(&dir, &mount.point, "memory.max", "memory.current", u64::MAX)
        } else {
            least_left(
                &dir,
                &mount.point,
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
                V1_UNLIMITED,
            )
        };
        if let Some(left) = left {
            least = Some(least.map_or(left, |l| l.min(left)));
        }
    }
    least
}

/// The limits as a dict (`meminfo`, `address_space`, `cgroup`: bytes
/// still free, or ``None``), for tests and diagnostics: what the check
/// before a large list compares with.
#[pyfunction]
#[pyo3(name = "_memory_limits")]
pub(crate) fn memory_limits(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let limits = Limits::now();
    let d = PyDict::new(py);
    d.set_item("meminfo", limits.meminfo)?;
    d.set_item("address_space", limits.address_space)?;
    d.set_item("cgroup", limits.cgroup)?;
    Ok(d)
}

/// `Ok` when `members` ranks fit as Python ints in the memory this process
/// may still use (always where no limit can be read: the allocations are
/// fallible then), or take less than [`CHECKED_FROM`] bytes.
///
/// # Errors
/// `MemoryError` naming the count, the memory they would need and the
/// limit.
pub(crate) fn check_ints(members: u64) -> PyResult<()> {
    check(
        members,
        BYTES_PER_INT,
        "Python ints",
        "use groups_array (4 bytes a rank), or ask for one rank's answers (split, splits)",
    )
}

/// `Ok` when `members` ranks fit as a `uint32` array in the memory this
/// process may still use, or take less than [`CHECKED_FROM`] bytes.
///
/// # Errors
/// `MemoryError` naming the count, the memory they would need and the
/// limit.
pub(crate) fn check_array(members: u64) -> PyResult<()> {
    check(
        members,
        4,
        "a uint32 array",
        "ask for fewer kinds, or one rank's answers (split, splits)",
    )
}

fn check(members: u64, each: u64, what: &str, instead: &str) -> PyResult<()> {
    let needed = members.saturating_mul(each);
    if needed < CHECKED_FROM {
        return Ok(());
    }
    match Limits::now().least() {
        Some((free, limit)) if needed > free => Err(PyMemoryError::new_err(format!(
            "{members} ranks as {what} need about {:.1} GB, more than the {:.1} GB {limit}; {instead}",
            needed as f64 / 1e9,
            free as f64 / 1e9
        ))),
        _ => Ok(()),
    }
}
