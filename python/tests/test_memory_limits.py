"""Lists and arrays too large for the memory a process may use end in
MemoryError, under an address-space limit (``ulimit -v``) as under the
machine's memory: never a PanicException, a LayoutError or a hang.

Each call runs in a child process whose ``RLIMIT_AS`` is set before it
starts (``preexec_fn``), with and without ``RUST_BACKTRACE=1`` (a panic's
backtrace, captured with no memory left, once hung the process for good),
under a timeout."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap

import pytest

import rank_layout

#: The address-space limit of the children, in bytes (3 GB).
LIMIT = 3_000_000_000

CHILD = """
import sys
from rank_layout import Layout, Mesh, Modules
from rank_layout.megatron import RankGenerator
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
        [sys.executable, "-c", textwrap.dedent(CHILD.format(call=call))],
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
