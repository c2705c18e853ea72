"""The type stubs of the compiled module (``_native.pyi``) against the
runtime, by mypy's stubtest: every name, class, function and method the
stubs declare is there at runtime with the same parameters (name, kind,
default), and every public runtime name has a stub; the whole installed
package type-checks with mypy. And the defaults the runtime states are
checked against what it does.

Without mypy the mypy tests are reported as skipped, with the reason;
under CI it fails (conftest.require; ``python/ci.sh`` installs mypy)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import require

from rank_layout import Layout, _native

#: A parameter without a default.
NO_DEFAULT = "<no default>"

Param = tuple[str, Any, bool]  # name, default, keyword-only


def runtime_params(obj: Any) -> list[Param]:
    params = []
    for p in inspect.signature(obj).parameters.values():
        if p.name in ("self", "cls") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        default = NO_DEFAULT if p.default is p.empty else p.default
        params.append((p.name, default, p.kind is p.KEYWORD_ONLY))
    return params


def test_stubtest(tmp_path: Any) -> None:
    """``python -m mypy.stubtest rank_layout._native`` finds nothing, with
    no allowlist. ``--ignore-disjoint-bases``: stubtest asks for PEP 800's
    ``@disjoint_base`` on the classes that can be subclassed (Layout,
    Mesh), a decorator only the newest type checkers know (typing_extensions
    4.15): an older checker, not knowing it, could lose the class's type.
    Run in a scratch directory, where mypy leaves its cache."""
    require("mypy")
    cmd = [sys.executable, "-m", "mypy.stubtest", "--concise", "--ignore-disjoint-bases", "rank_layout._native"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"stubtest (exit {done.returncode}):\n{done.stdout}{done.stderr}"


def test_the_installed_package_type_checks(tmp_path: Any) -> None:
    """``mypy -p rank_layout`` on the installed package (the wheel ships
    ``py.typed``, so a user's type checker reads these files) finds no
    error: the Python modules agree with the stubs and with themselves.
    Megatron-Core ships no types: imports of it are not checked."""
    require("mypy")
    # Reading torch's types takes a minute: CI keeps mypy's cache with the
    # environment (python/ci.sh sets RANK_LAYOUT_MYPY_CACHE).
    root = os.environ.get("RANK_LAYOUT_MYPY_CACHE")
    cache = Path(root) / "package" if root else tmp_path / ".mypy_cache"
    cmd = [sys.executable, "-m", "mypy", "--cache-dir", str(cache), "--disable-error-code", "import-untyped"]
    cmd += ["-p", "rank_layout"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"mypy (exit {done.returncode}):\n{done.stdout}{done.stderr}"
    assert "Success: no issues found" in done.stdout, done.stdout


def test_layout_defaults_are_what_layout_does() -> None:
    """The defaults of Layout's signature are those of Layout(): each
    given explicitly builds the same layout, and each that is not None is
    the configuration's value (the signature once said
    expert_layout='nested', but the default is folded)."""
    default = Layout()
    config = default.config
    for name, value, _ in runtime_params(_native.Layout):
        assert Layout(**{name: value}) == default, name
        if value is not None:
            assert config[name] == value, (name, config[name], value)
    assert config["expert_layout"] == "folded"
    assert Layout(ep=2, world_size=8).shape == "folded"
