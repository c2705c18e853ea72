//! Whether the members asked for fit the memory this process may still
//! use, checked before any is made: a list of two billion ranks fails as
//! `MemoryError` instead of taking the machine (or the interpreter) down.
//!
//! The memory a process may use is the least of three limits, each read
//! where it can be (Linux) and skipped where it cannot:
//!
//! - the system's: `/proc/meminfo`'s `MemAvailable`;
//! - the address-space limit (`ulimit -v`, `RLIMIT_AS`): the soft limit
//!   (`getrlimit`) less the address space in use (`VmSize` of
//!   `/proc/self/status`, read only where a limit is set);
//! - the cgroup's (a container's or a job's): for the process's cgroup and
//!   each of its ancestors, `memory.max` less `memory.current` (cgroup v2)
//!   or `memory.limit_in_bytes` less `memory.usage_in_bytes` (v1), found
//!   through `/proc/self/cgroup` and `/proc/self/mountinfo`. Where that is
//!   short of the answer, the cgroup's file cache (`active_file` and
//!   `inactive_file` of `memory.stat`, v1's `total_` ones) counts as free:
//!   the kernel reclaims it before it ends a process, and the cgroup of a
//!   job that has read its data is full of it.
//!
//! Past the check the members are collected with `try_reserve` and NumPy's
//! `tolist` makes the ints ([`crate::lists`]), both failing as
//! `MemoryError`. The one answer the crate makes in vectors that are not
//! fallible, `RankGenerator.get_ranks`' (Megatron-LM's generator), is
//! checked for those vectors too ([`check_vectors`]): the check is what
//! keeps them from aborting the interpreter under an address-space limit.
//!
//! What is read depends on the answer's size, since reading every limit
//! (eight files or more: 40 to 100 us) costs as much as making a kind's
//! array at 131,072 ranks (512 KiB):
//!
//! - every answer is checked against the limits that are cheap to read:
//!   the address-space limit (one system call; the address space in use is
//!   read where a limit is set), and the cgroup levels that had a memory
//!   limit at the process's first check (found once per process; their
//!   limit and usage read again at each check, a few microseconds a level;
//!   nothing is read where no cgroup limits the process's memory);
//! - answers of [`READ_ALL_FROM`] bytes or more (16 MiB; writing their
//!   fresh memory alone takes milliseconds) read everything afresh: the
//!   machine's `MemAvailable` too, and the cgroups found again.
//!
//! So an answer under 16 MiB is not checked against the machine's memory
//! nor against a cgroup limit set, after the process's first check, on a
//! level that had none then (or a cgroup the process was moved to). Where
//! such an answer does not fit, its allocation succeeds (memory is only
//! charged when written) and the kernel, as its pages are first written,
//! reclaims what it can and then ends a process of the cgroup or of the
//! machine: the OOM killer's `SIGKILL`, no exception (under cgroup v1 with
//! `oom_kill_disable`, the process waits for memory instead), as for any
//! other allocation of the program's. No check closes the window between
//! the reading and the allocation, in which other threads and processes
//! of the cgroup allocate too.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Bytes one rank takes as a Python int in a list: the int object (28 to
/// 32 bytes, in 32-byte blocks), the list's pointer (8), and the `u32` the
/// list is made from (4), rounded up.
const BYTES_PER_INT: u64 = 48;

/// Bytes one rank takes at most in the crate's vectors of groups
/// (`Vec<Vec<u32>>`): a group of one rank is 24 bytes in the outer vector
/// and an allocation of 32 bytes (the allocator's least).
const BYTES_PER_VEC_RANK: u64 = 56;

/// The bytes from which an answer is checked against every limit, read
/// afresh (16 MiB: 4 Mi ranks as a `uint32` array, 350,000 as Python
/// ints); smaller ones against the limits cheap to read (the module's
/// documentation says which, and why).
const READ_ALL_FROM: u64 = 16 << 20;

/// A cgroup v1 limit at or above this is "no limit" (the kernel writes
/// `9223372036854771712`).
const V1_UNLIMITED: u64 = 1 << 62;

/// The three limits, in bytes still free (`None`: not there, unreadable,
/// or not read).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Limits {
    /// The system's `MemAvailable`.
    pub meminfo: Option<u64>,
    /// `RLIMIT_AS` less the address space in use.
    pub address_space: Option<u64>,
    /// The tightest cgroup limit less its usage (and its file cache, where
    /// the limit less the usage is short of `needed`).
    pub cgroup: Option<u64>,
}

impl Limits {
    /// Every limit of this process now, its cgroups found afresh, for an
    /// answer of `needed` bytes.
    pub(crate) fn now(needed: u64) -> Limits {
        Limits {
            meminfo: mem_available(),
            address_space: address_space_left(),
            cgroup: least_left(&cgroup_levels(), needed),
        }
    }

    /// The limits cheap to read, for an answer of `needed` bytes: the
    /// address space, and the cgroup levels limited at the first check.
    fn cheap(needed: u64) -> Limits {
        static LIMITED: OnceLock<Vec<Level>> = OnceLock::new();
        let limited = LIMITED.get_or_init(|| {
            cgroup_levels()
                .into_iter()
                .filter(|level| level.limit().is_some())
                .collect()
        });
        Limits {
            meminfo: None,
            address_space: address_space_left(),
            cgroup: least_left(limited, needed),
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

/// The text of `path`, read in one system call where it is under 8 KiB
/// (and one more to find its end): files of `/proc` and `/sys` give no size,
/// and `fs::read_to_string` finds it by reads of 32 bytes, then more.
fn read_text(path: impl AsRef<Path>) -> Option<String> {
    let mut text = String::with_capacity(8 << 10);
    std::fs::File::open(path)
        .ok()?
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The number in kB of the line of `text` starting with `key`, in bytes.
fn kb_line(text: &str, key: &str) -> Option<u64> {
    number_after(text, key)?.checked_mul(1024)
}

/// The number after `key` on the line of `text` starting with it.
fn number_after(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    line.get(key.len()..)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `/proc/meminfo`'s `MemAvailable`.
fn mem_available() -> Option<u64> {
    kb_line(&read_text("/proc/meminfo")?, "MemAvailable:")
}

/// The soft `RLIMIT_AS` (`None` when unlimited).
#[cfg(all(unix, not(target_os = "openbsd")))]
fn address_space_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::As).current
}

/// No address-space limit is read here.
#[cfg(not(all(unix, not(target_os = "openbsd"))))]
fn address_space_limit() -> Option<u64> {
    None
}

/// The address space this process may still map (`None` when unlimited).
fn address_space_left() -> Option<u64> {
    let limit = address_space_limit()?;
    let used = read_text("/proc/self/status")
        .and_then(|s| kb_line(&s, "VmSize:"))
        .unwrap_or(0);
    Some(limit.saturating_sub(used))
}

/// A number of a cgroup file (`None` for `max`, a missing file or none).
fn read_number(path: &Path) -> Option<u64> {
    read_text(path)?.trim().parse().ok()
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

/// One cgroup of the process (or an ancestor) in the memory hierarchy:
/// its directory, and whether it is cgroup v2's.
struct Level {
    dir: PathBuf,
    v2: bool,
}

impl Level {
    /// The names of the limit and usage files, and the limit from which
    /// there is none.
    fn files(&self) -> (&'static str, &'static str, u64) {
        if self.v2 {
            ("memory.max", "memory.current", u64::MAX)
        } else {
            (
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
                V1_UNLIMITED,
            )
        }
    }

    /// The memory limit, when one is set.
    fn limit(&self) -> Option<u64> {
        let (limit, _, unlimited) = self.files();
        read_number(&self.dir.join(limit)).filter(|m| *m < unlimited)
    }

    /// The memory left under the limit, when one is set: the limit less
    /// the usage, plus the file cache when that is short of `needed`.
    fn left(&self, needed: u64) -> Option<u64> {
        let max = self.limit()?;
        let (_, usage, _) = self.files();
        let left = max.saturating_sub(read_number(&self.dir.join(usage)).unwrap_or(0));
        if left >= needed {
            return Some(left);
        }
        Some(left.saturating_add(self.file_cache().unwrap_or(0)))
    }

    /// The cgroup's file cache (its descendants' included), from
    /// `memory.stat`.
    fn file_cache(&self) -> Option<u64> {
        let stat = read_text(self.dir.join("memory.stat"))?;
        let prefix = if self.v2 { "" } else { "total_" };
        let of = |key: &str| number_after(&stat, &format!("{prefix}{key} ")).unwrap_or(0);
        Some(of("active_file").saturating_add(of("inactive_file")))
    }
}

/// The least memory left of `levels`, for an answer of `needed` bytes.
fn least_left(levels: &[Level], needed: u64) -> Option<u64> {
    levels.iter().filter_map(|level| level.left(needed)).min()
}

/// The process's cgroups (v2 and v1's memory controller) and their
/// ancestors up to each hierarchy's mount point.
fn cgroup_levels() -> Vec<Level> {
    let Some(cgroups) = read_text("/proc/self/cgroup") else {
        return Vec::new();
    };
    let mountinfo = read_text("/proc/self/mountinfo").unwrap_or_default();
    levels_of(&cgroups, &mountinfo)
}

/// The cgroups of `cgroups` (the text of `/proc/self/cgroup`) in the
/// memory hierarchies mounted as `mountinfo` (the text of
/// `/proc/self/mountinfo`) says, and their ancestors up to each
/// hierarchy's mount point.
fn levels_of(cgroups: &str, mountinfo: &str) -> Vec<Level> {
    let mut levels = Vec::new();
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
        let mount = mount_of(mountinfo, v2).unwrap_or_else(|| Mount {
            point: PathBuf::from(if v2 {
                "/sys/fs/cgroup"
            } else {
                "/sys/fs/cgroup/memory"
            }),
            root: "/".into(),
        });
        let mut at = Some(cgroup_dir(&mount, path));
        while let Some(dir) = at {
            at = dir
                .parent()
                .filter(|p| p.starts_with(&mount.point) && dir != mount.point)
                .map(Path::to_path_buf);
            levels.push(Level { dir, v2 });
        }
    }
    levels
}

/// The limits as a dict (`meminfo`, `address_space`, `cgroup`: bytes
/// still free, or ``None``), for tests and diagnostics: every limit, read
/// afresh as for an answer of 16 MiB or more (the cgroup's file cache
/// counted as free).
#[pyfunction]
#[pyo3(name = "_memory_limits")]
pub(crate) fn memory_limits(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let limits = Limits::now(u64::MAX);
    let d = PyDict::new(py);
    d.set_item("meminfo", limits.meminfo)?;
    d.set_item("address_space", limits.address_space)?;
    d.set_item("cgroup", limits.cgroup)?;
    Ok(d)
}

/// What an answer is made of, for the check and its message.
struct Answer {
    /// The bytes a rank takes in it.
    each: u64,
    /// What the ranks are made into.
    what: &'static str,
    /// What to ask for instead.
    instead: &'static str,
}

/// Ranks as Python ints in lists.
const INTS: Answer = Answer {
    each: BYTES_PER_INT,
    what: "Python ints",
    instead: "use groups_array (4 bytes a rank), or ask for one rank's answers (split, splits)",
};

/// Ranks in a `uint32` array.
const ARRAY: Answer = Answer {
    each: 4,
    what: "a uint32 array",
    instead: "ask for fewer kinds, or one rank's answers (split, splits)",
};

/// Ranks in the crate's vectors of groups, then as Python ints.
const VECTORS: Answer = Answer {
    each: BYTES_PER_VEC_RANK + BYTES_PER_INT,
    what: "vectors of groups, then Python ints",
    instead: "use Layout.groups_array (4 bytes a rank), or ask for one rank's answers (split, splits)",
};

/// `Ok` when `members` ranks fit as Python ints in the memory this process
/// may still use, as far as the module's checks read it (always where no
/// limit can be read: the allocations are fallible then).
///
/// # Errors
/// `MemoryError` naming the count, the memory they would need and the
/// limit.
pub(crate) fn check_ints(members: u64) -> PyResult<()> {
    check(members, &INTS)
}

/// `Ok` when `members` ranks fit as a `uint32` array in the memory this
/// process may still use, as far as the module's checks read it.
///
/// # Errors
/// `MemoryError` naming the count, the memory they would need and the
/// limit.
pub(crate) fn check_array(members: u64) -> PyResult<()> {
    check(members, &ARRAY)
}

/// `Ok` when `members` ranks fit the memory this process may still use
/// first as the crate's vectors of groups, whose allocations are not
/// fallible (`RankGenerator::get_ranks`), then beside them as Python ints.
///
/// # Errors
/// `MemoryError` naming the count, the memory they would need and the
/// limit.
pub(crate) fn check_vectors(members: u64) -> PyResult<()> {
    check(members, &VECTORS)
}

fn check(members: u64, answer: &Answer) -> PyResult<()> {
    let needed = members.saturating_mul(answer.each);
    let limits = if needed < READ_ALL_FROM {
        Limits::cheap(needed)
    } else {
        Limits::now(needed)
    };
    refuse(members, needed, answer, &limits)
}

/// `check_ints` against the cgroups of `cgroups` (a `/proc/self/cgroup`
/// text) in the hierarchies mounted as `mountinfo` (a
/// `/proc/self/mountinfo` text) says, and no other limit: for tests, which
/// cannot give their process a cgroup limit.
///
/// # Errors
/// `MemoryError` as `check_ints`'.
#[pyfunction]
#[pyo3(name = "_check_ints_in_cgroups")]
pub(crate) fn check_ints_in_cgroups(members: u64, cgroups: &str, mountinfo: &str) -> PyResult<()> {
    let needed = members.saturating_mul(INTS.each);
    let limits = Limits {
        cgroup: least_left(&levels_of(cgroups, mountinfo), needed),
        ..Limits::default()
    };
    refuse(members, needed, &INTS, &limits)
}

/// `MemoryError` when `needed` bytes for `members` ranks as `answer` are
/// more than the least of `limits`.
fn refuse(members: u64, needed: u64, answer: &Answer, limits: &Limits) -> PyResult<()> {
    match limits.least() {
        Some((free, limit)) if needed > free => Err(PyMemoryError::new_err(format!(
            "{members} ranks as {} need about {}, more than the {} {limit}; {}",
            answer.what,
            bytes(needed),
            bytes(free),
            answer.instead
        ))),
        _ => Ok(()),
    }
}

/// `bytes` for a message: in GB from 1 GB, in MB below.
fn bytes(bytes: u64) -> String {
    if bytes >= 1_000_000_000 {
        format!("{:.1} GB", bytes as f64 / 1e9)
    } else {
        format!("{:.1} MB", bytes as f64 / 1e6)
    }
}
