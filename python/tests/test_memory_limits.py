"""Lists and arrays too large for the memory a process may use end in
MemoryError, under an address-space limit (``ulimit -v``) as under the
machine's memory: never a PanicException, a LayoutError or a hang.

Each call runs in a child process whose ``RLIMIT_AS`` is set before it
starts (``preexec_fn``), with and without ``RUST_BACKTRACE=1`` (a panic's
backtrace, captured with no memory left, once hung the process for good),
under a timeout.

Every answer is checked against the limits cheap to read (the
address-space limit, a system call; the cgroup levels with a limit, found
once per process), answers from 16 MiB against every limit read afresh
(``python/src/memory.rs`` says why): in a child that has used up its
address space but 4 MiB, answers on both sides of 16 MiB end in the
check's ``MemoryError``, Megatron-LM's ``RankGenerator`` (whose vectors
the crate allocates without a way to fail) among them.

A test cannot give its process a cgroup limit, so the cgroup part of the
check is run on cgroup trees written in a temporary directory, described
by ``/proc/self/cgroup`` and ``/proc/self/mountinfo`` texts (v2, v1 under
a container's root, the file cache, an ancestor's limit): what they cannot
hold is refused, one rank less is not."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

import rank_layout

#: The address-space limit of the children, in bytes (3 GB).
LIMIT = 3_000_000_000

#: A child: ``{imports}``, rank_layout, ``{prepare}``, then ``{call}``;
#: it exits 0 on MemoryError, 3 without one.
CHILD = """
import sys
{imports}
from rank_layout import Layout, Mesh, Modules
from rank_layout.megatron import CoreRankGenerator, RankGenerator
{prepare}
try:
    {call}
except MemoryError as e:
    print("MemoryError:", e)
    sys.exit(0)
print("no error")
sys.exit(3)
"""

CALLS = [
    "Layout(world_size=2**28, tp=2**27).groups('tp')",
    "Layout(world_size=2**31).groups_array('tp')",
    "Layout(world_size=2**31).groups_arrays(['tp', 'dp'])",
    "Layout(tp=2**28).group('tp', 0)",
    "Layout(tp=2**28).rank(5)",
    "Layout(tp=2**28).memberships(5, 'tp')",
    "Mesh([('tp', 2**28)]).groups('tp')",
    "Mesh([('tp', 2**31)]).groups_array('tp')",
    "RankGenerator(2**27, 1, 2, 1, 1, 'tp-dp').get_ranks('tp')",
    "Modules([('a', Mesh([('dp', 2**26)])), ('b', Mesh([('dp', 2**26)]))], [('a', 'b')]).bridge('a', 'b')",
]


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def run_limited(call: str, backtrace: bool) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("RUST_BACKTRACE", None)
    if backtrace:
        env["RUST_BACKTRACE"] = "1"
    return subprocess.run(
        [sys.executable, "-c", CHILD.format(imports="", prepare="", call=call)],
        preexec_fn=limited,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("backtrace", [False, True], ids=["plain", "RUST_BACKTRACE=1"])
@pytest.mark.parametrize("call", CALLS)
def test_too_large_for_the_address_space_is_a_memory_error(call: str, backtrace: bool) -> None:
    done = run_limited(call, backtrace)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    assert done.stdout.startswith("MemoryError:"), done.stdout
    assert "address-space limit" in done.stdout, done.stdout
    assert "Panic" not in done.stderr and "panicked" not in done.stderr, done.stderr


def test_what_fits_the_limit_still_works() -> None:
    done = run_limited("print(len(Layout(world_size=2**20, tp=2**10).groups('tp')))", False)
    assert done.stdout.splitlines()[0] == "1024", (done.stdout, done.stderr)


def proc_limit(name: str) -> int | None:
    for line in open("/proc/self/limits"):
        if line.startswith(name):
            soft = line[len(name) :].split()[0]
            return None if soft == "unlimited" else int(soft)
    return None


def cgroup_left() -> int | None:
    """The least memory left under a memory limit of this process's
    cgroups and their ancestors, their file cache counted as free, read
    here as the kernel's cgroup-v1/memory.rst and cgroup-v2.rst describe
    the files (None: no limit)."""
    mounts: dict[str, tuple[str, str]] = {}
    for line in open("/proc/self/mountinfo"):
        head, fs = line.split(" - ")
        root, point = head.split()[3:5]
        fs_type, _, options = fs.split()[:3]
        if fs_type == "cgroup2":
            mounts.setdefault("v2", (root, point))
        elif fs_type == "cgroup" and "memory" in options.split(","):
            mounts.setdefault("v1", (root, point))
    lefts = []
    for line in open("/proc/self/cgroup"):
        number, controllers, path = line.rstrip("\n").split(":", 2)
        v2 = number == "0" and not controllers
        if not v2 and "memory" not in controllers.split(","):
            continue
        root, point = mounts["v2" if v2 else "v1"]
        inside = path[len(root.rstrip("/")) :] if path.startswith(root.rstrip("/")) else path
        at = os.path.join(point, *[p for p in inside.split("/") if p and p != ".."])
        limit_file, usage_file, prefix = (
            ("memory.max", "memory.current", "") if v2 else ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_")
        )
        while at.startswith(point):
            text = open(os.path.join(at, limit_file)).read().strip() if os.path.exists(os.path.join(at, limit_file)) else "max"
            if text != "max" and (v2 or int(text) < 2**62):
                usage = int(open(os.path.join(at, usage_file)).read())
                stat = dict(line.split() for line in open(os.path.join(at, "memory.stat")))
                cache = int(stat.get(prefix + "active_file", 0)) + int(stat.get(prefix + "inactive_file", 0))
                lefts.append(max(int(text) - usage, 0) + cache)
            if at == point:
                break
            at = os.path.dirname(at)
    return min(lefts, default=None)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_limits_read() -> None:
    """The limits the check compares with: MemAvailable, the address
    space left, the cgroup's memory left with its file cache (each None
    where there is none)."""
    limits = rank_layout._native._memory_limits()
    assert set(limits) == {"meminfo", "address_space", "cgroup"}
    expected = cgroup_left()
    if expected is None:
        assert limits["cgroup"] is None
    else:
        assert abs(limits["cgroup"] - expected) < 2**26, (limits["cgroup"], expected)
    available = next(
        int(line.split()[1]) * 1024 for line in open("/proc/meminfo") if line.startswith("MemAvailable:")
    )
    assert abs(limits["meminfo"] - available) < 2**30
    if proc_limit("Max address space") is None:
        assert limits["address_space"] is None
    code = "import rank_layout; print(rank_layout._native._memory_limits()['address_space'])"
    done = subprocess.run(
        [sys.executable, "-c", code], preexec_fn=limited, capture_output=True, text=True, timeout=60
    )
    left = int(done.stdout)
    assert 0 < left < LIMIT, left


#: What makes a child be at its address-space limit: every address but
#: ``SPARE`` MiB mapped (not written: no memory used).
AT_LIMIT = """
import mmap
MiB = 2**20
spare = [mmap.mmap(-1, MiB) for _ in range({spare})]
held, size = [], 2**30
while size >= MiB:
    try:
        held.append(mmap.mmap(-1, size))
    except OSError:
        size //= 2
for m in spare:
    m.close()
"""

#: The address space the child at its limit keeps free, in MiB.
SPARE = 4

#: 16 MiB, from which an answer is checked against every limit read
#: afresh: 2**22 ranks as uint32, and 349,526 as Python ints (48 bytes
#: each; 349,525 take 16 B less).
READ_ALL_FROM = 16 * 2**20
#: The most ranks as uint32 and as Python ints checked against the limits
#: cheap to read only.
CHEAP_U32, CHEAP_INTS = (READ_ALL_FROM - 1) // 4, (READ_ALL_FROM - 1) // 48


def run_at_limit(call: str, numpy_first: bool = True) -> subprocess.CompletedProcess[str]:
    prepare = AT_LIMIT.format(spare=SPARE)
    code = CHILD.format(imports="import numpy" if numpy_first else "", prepare=prepare, call=call)
    return subprocess.run(
        [sys.executable, "-c", code],
        preexec_fn=limited,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "call",
    [
        # uint32 arrays, 4 bytes a rank
        "Layout(tp=2**21).groups_array('tp')",  # 8 MiB
        f"Layout(tp={CHEAP_U32}).groups_array('tp')",  # 16 MiB - 4 B
        f"Layout(tp={CHEAP_U32 + 1}).groups_array('tp')",  # 16 MiB
        "Layout(tp=2**21).groups_arrays(['tp'])",
        "Mesh([('tp', 2**21)]).groups_array('tp')",
        # Python ints, 48 bytes a rank
        "Layout(tp=2**18).group('tp', 0)",  # 12 MiB
        f"Layout(tp={CHEAP_INTS}).group('tp', 0)",  # 16 MiB - 16 B
        f"Layout(tp={CHEAP_INTS + 1}).group('tp', 0)",  # 16 MiB + 32 B
        "Layout(tp=2**18).groups('tp')",
        "Layout(tp=2**18).rank(5)",
        "Mesh([('tp', 2**18)]).groups('tp')",
        # the crate's vectors of one-rank groups (56 bytes a rank), then ints
        "RankGenerator(1, 1, 2**18, 1, 1, 'tp-dp').get_ranks('tp')",
        "CoreRankGenerator(1, 1, 2**18, 1, 1, 'tp-dp').get_ranks('tp')",
    ],
)
def test_answers_on_both_sides_of_16_mib_are_checked_against_the_address_space(call: str) -> None:
    """With 4 MiB of address space left, every answer here is too large,
    and the check says so before anything is made (its message names the
    address-space limit), under 16 MiB as from 16 MiB up: never a panic,
    never an abort (``RankGenerator.get_ranks``' vectors, unchecked,
    aborted the interpreter: ``memory allocation of 6291456 bytes
    failed``)."""
    done = run_at_limit(call)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    assert done.stdout.startswith("MemoryError:"), done.stdout
    assert "address-space limit" in done.stdout, done.stdout
    assert "Panic" not in done.stderr and "panicked" not in done.stderr, done.stderr


def test_what_fits_beside_the_limit_is_made() -> None:
    """An answer of 1 MiB with 4 MiB left is made."""
    done = run_at_limit("print(Layout(tp=2**18).groups_array('tp').shape)")
    assert done.stdout.splitlines()[0] == "(1, 262144)", (done.stdout, done.stderr)


def test_numpy_that_cannot_load_is_an_import_error() -> None:
    """A process at its limit before NumPy is imported cannot map NumPy's
    extension: the first answer raises NumPy's ``ImportError`` (the
    ``numpy`` crate, importing it on first use, panicked)."""
    done = run_at_limit("Layout(tp=2**10).group('tp', 0)", numpy_first=False)
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "ImportError" in done.stderr and "numpy" in done.stderr, done.stderr
    assert "Panic" not in done.stderr and "panicked" not in done.stderr, done.stderr


#: A child printing the read system calls (``/proc/self/io``'s ``syscr``)
#: a call makes, on average over many, for a small list, a small array and
#: the full reading of the limits, after one call of each to warm up
#: (NumPy's import, the cgroups found); then whether a cgroup limits it.
READS = """
import rank_layout
from rank_layout import Layout


def reads():
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("syscr:"))


def per_call(call, n):
    call()
    before = reads()
    for _ in range(n):
        call()
    return (reads() - before) / n


layout = Layout(tp=8, dp=4)
full = rank_layout._native._memory_limits
print(per_call(lambda: layout.group("tp", 0), 1000), per_call(lambda: layout.groups_array("dp"), 1000),
      per_call(full, 100), full()["cgroup"] is None)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="counts reads in /proc/self/io")
@pytest.mark.parametrize("address_space", [False, True], ids=["no address-space limit", "ulimit -v"])
def test_small_answers_read_only_the_limits_cheap_to_read(address_space: bool) -> None:
    """Reading every limit (eight files or more, 40 to 100 us) cost as
    much as a small answer. A small answer reads no file where neither an
    address-space limit nor a cgroup limit is set (``getrlimit`` is a
    system call, the cgroups are found once); where one is, its own files
    only (``VmSize``; each limited cgroup's limit and usage), fewer than
    the full reading."""
    done = subprocess.run(
        [sys.executable, "-c", READS],
        preexec_fn=limited if address_space else None,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    group, array, full, words = done.stdout.split()
    no_cgroup_limit = words == "True"
    assert float(full) >= 4, done.stdout  # meminfo, cgroup, mountinfo, the levels' limits
    for small in (float(group), float(array)):
        if no_cgroup_limit and not address_space:
            assert small < 0.01, done.stdout
        elif no_cgroup_limit:
            assert 0.5 < small <= 3, done.stdout  # /proc/self/status, in one read and its end
        else:
            assert small < float(full), done.stdout


MiB = 2**20


def write_level(directory, limit: str, usage: int, stat: dict[str, int], v2: bool) -> None:
    """One cgroup's memory files, as the kernel's cgroup-v2.rst
    (``memory.max``, ``memory.current``) and cgroup-v1/memory.rst
    (``memory.limit_in_bytes``, ``memory.usage_in_bytes``) describe them."""
    directory.mkdir(parents=True, exist_ok=True)
    limit_file, usage_file = ("memory.max", "memory.current") if v2 else ("memory.limit_in_bytes", "memory.usage_in_bytes")
    (directory / limit_file).write_text(limit + "\n")
    (directory / usage_file).write_text(f"{usage}\n")
    (directory / "memory.stat").write_text("".join(f"{key} {value}\n" for key, value in stat.items()))


def fits(members: int, cgroups: str, mountinfo: str) -> bool:
    """Whether the check lets ``members`` ranks as Python ints through;
    its refusal must name the cgroup's limit."""
    try:
        rank_layout._native._check_ints_in_cgroups(members, cgroups, mountinfo)
    except MemoryError as e:
        assert "left under its cgroup's memory limit" in str(e), e
        assert f"{members} ranks as Python ints" in str(e), e
        return False
    return True


def test_a_cgroup_v2_limit_refuses_what_it_cannot_hold(tmp_path) -> None:
    """cgroup v2: the job's ``memory.max`` less its ``memory.current`` is
    what the step below it (``max``: no limit of its own) may still use;
    48 bytes a rank as Python ints."""
    mount = tmp_path / "unified"
    write_level(mount / "job", str(100 * MiB), 40 * MiB, {"anon": 40 * MiB}, v2=True)
    write_level(mount / "job" / "step", "max", 30 * MiB, {"anon": 30 * MiB}, v2=True)
    mountinfo = f"41 31 0:38 / {mount} rw,relatime - cgroup2 cgroup2 rw\n"
    cgroups = "0::/job/step\n"
    most = 60 * MiB // 48
    assert fits(most, cgroups, mountinfo)
    assert not fits(most + 1, cgroups, mountinfo)
    assert not fits(2**28, cgroups, mountinfo)  # Layout(tp=2**28).group('tp', 0)


def test_a_cgroup_file_cache_counts_as_free_only_when_short(tmp_path) -> None:
    """Where the limit less the usage is short, the cgroup's file cache
    (``active_file`` and ``inactive_file`` of ``memory.stat``) counts as
    free: the kernel reclaims it before it ends a process."""
    mount = tmp_path / "unified"
    stat = {"anon": 20 * MiB, "active_file": 10 * MiB, "inactive_file": 6 * MiB}
    write_level(mount / "job", str(100 * MiB), 90 * MiB, stat, v2=True)
    mountinfo = f"41 31 0:38 / {mount} rw,relatime - cgroup2 cgroup2 rw\n"
    most = (10 + 16) * MiB // 48
    assert fits(most, "0::/job\n", mountinfo)
    assert not fits(most + 1, "0::/job\n", mountinfo)


def test_a_cgroup_v1_limit_of_an_ancestor_under_a_container_root(tmp_path) -> None:
    """cgroup v1's memory controller mounted from inside a container (the
    mount's root is the container's cgroup, which ``/proc/self/cgroup``
    names in full): the tightest level wins, a level at the kernel's
    "no limit" (9223372036854771712) is none, and v1's file cache is
    ``total_active_file`` and ``total_inactive_file``."""
    mount = tmp_path / "memory"
    unlimited = "9223372036854771712"
    write_level(mount, str(1000 * MiB), 100 * MiB, {}, v2=False)
    write_level(mount / "job", str(200 * MiB), 150 * MiB, {"total_active_file": 8 * MiB, "active_file": 64 * MiB}, v2=False)
    write_level(mount / "job" / "step", unlimited, 140 * MiB, {}, v2=False)
    mountinfo = (
        f"35 31 0:32 /docker/abc {mount} rw,relatime - cgroup cgroup rw,memory\n"
        f"32 31 0:29 /docker/abc {tmp_path / 'cpu'} rw,relatime - cgroup cgroup rw,cpu\n"
    )
    cgroups = "4:memory:/docker/abc/job/step\n1:cpu:/docker/abc\n"
    most = (50 + 8) * MiB // 48
    assert fits(most, cgroups, mountinfo)
    assert not fits(most + 1, cgroups, mountinfo)


def test_no_cgroup_limit_refuses_nothing(tmp_path) -> None:
    mount = tmp_path / "unified"
    write_level(mount / "job", "max", 40 * MiB, {}, v2=True)
    mountinfo = f"41 31 0:38 / {mount} rw,relatime - cgroup2 cgroup2 rw\n"
    assert fits(2**40, "0::/job\n", mountinfo)
