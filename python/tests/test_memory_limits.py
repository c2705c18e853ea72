"""Lists and arrays too large for the memory a process may use end in
MemoryError, under an address-space limit (``ulimit -v``) as under the
machine's memory: never a PanicException, a LayoutError or a hang.

Each call runs in a child process whose ``RLIMIT_AS`` is set before it
starts (``preexec_fn``), with and without ``RUST_BACKTRACE=1`` (a panic's
backtrace, captured with no memory left, once hung the process for good),
under a timeout.

Answers under 16 MiB are made without reading the limits (``python/src/memory.rs``
says why): in a child that has used up its address space but 4 MiB, they
end in the ``MemoryError`` of their own allocation, those from 16 MiB up in
the check's."""

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
from rank_layout.megatron import RankGenerator
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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_limits_read() -> None:
    """The limits the check compares with: MemAvailable, the address
    space left, the cgroup's memory left (each None where there is none)."""
    limits = rank_layout._native._memory_limits()
    assert set(limits) == {"meminfo", "address_space", "cgroup"}
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

#: 16 MiB, from which an answer is checked: 2**22 ranks as uint32, and
#: 349,526 as Python ints (48 bytes each; 349,525 take 16 B less).
CHECKED_FROM = 16 * 2**20
#: The most ranks as uint32 and as Python ints made unchecked.
UNCHECKED_U32, UNCHECKED_INTS = (CHECKED_FROM - 1) // 4, (CHECKED_FROM - 1) // 48


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
    "call, checked",
    [
        # uint32 arrays, 4 bytes a rank
        ("Layout(tp=2**21).groups_array('tp')", False),  # 8 MiB
        (f"Layout(tp={UNCHECKED_U32}).groups_array('tp')", False),  # 16 MiB - 4 B
        (f"Layout(tp={UNCHECKED_U32 + 1}).groups_array('tp')", True),  # 16 MiB
        ("Layout(tp=2**21).groups_arrays(['tp'])", False),
        ("Mesh([('tp', 2**21)]).groups_array('tp')", False),
        # Python ints, 48 bytes a rank
        ("Layout(tp=2**18).group('tp', 0)", False),  # 12 MiB
        (f"Layout(tp={UNCHECKED_INTS}).group('tp', 0)", False),  # 16 MiB - 16 B
        (f"Layout(tp={UNCHECKED_INTS + 1}).group('tp', 0)", True),  # 16 MiB + 32 B
        ("Layout(tp=2**18).groups('tp')", False),
        ("Layout(tp=2**18).rank(5)", False),
        ("Mesh([('tp', 2**18)]).groups('tp')", False),
    ],
)
def test_answers_under_16_mib_are_made_unchecked_and_fail_in_their_allocation(call: str, checked: bool) -> None:
    """With 4 MiB of address space left, every answer here is too large:
    from 16 MiB up the check says so before anything is made (its message
    names the address-space limit); below, the answer is made unchecked
    and its own allocation (``try_reserve``, NumPy's ``tolist``) fails,
    a ``MemoryError`` all the same, never a panic."""
    done = run_at_limit(call)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    assert done.stdout.startswith("MemoryError:"), done.stdout
    assert ("address-space limit" in done.stdout) == checked, done.stdout
    assert "Panic" not in done.stderr and "panicked" not in done.stderr, done.stderr


def test_what_fits_beside_the_limit_is_made_unchecked() -> None:
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
