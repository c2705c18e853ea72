"""Shared by the tests: where the project's reference data lives, and the
layouts the tests walk through."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

# One thread per process: the gloo tests run up to 16 processes on few
# cores (and worlds.py forks them from a server that has imported torch).
os.environ.setdefault("OMP_NUM_THREADS", "1")


def require(module: str) -> ModuleType:
    """Imports an optional package the tests need (torch, megatron.core).

    Under CI (the ``CI`` environment variable set, as ``.ci/run`` runs) a
    missing package fails the test run; elsewhere the tests that need it
    are reported as skipped, with the reason."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"{module} is not installed ({e}); CI installs it", allow_module_level=True)


#: The repository (python/tests -> the workspace root).
REPO = Path(__file__).resolve().parents[2]
VECTORS = REPO / "tests" / "data" / "vectors"


def vector_files() -> list[Path]:
    files = sorted(VECTORS.glob("*.json"))
    assert len(files) == 6, f"the six reference vector files are in {VECTORS}"
    return files


def vector_config(config: dict[str, Any]) -> dict[str, Any]:
    """A reference vector's config as Layout keywords (as tests/golden.rs reads it)."""
    mode = config["mode"]
    out = {k: config[k] for k in ("tp", "cp", "ep", "dp", "pp", "world_size", "order", "rank_offset") if k in config}
    if mode == "encdec":
        out["encoder_tp"] = config["encoder_tp"]
        out["encoder_pp"] = config["encoder_pp"]
    if mode == "folded":
        out["expert_layout"] = "folded"
        out["etp"] = config["etp"]
    else:
        out["expert_layout"] = "nested"
    return out


def load_vector(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


#: Layouts of every shape and family, for the tests that walk every kind.
LAYOUTS: dict[str, dict[str, Any]] = {
    "dense": dict(tp=2, cp=2, ep=2, dp=4, pp=2, expert_layout="nested"),
    "dense_offset": dict(tp=2, cp=3, pp=2, world_size=24, order="pp-dp-tp-cp", rank_offset=100, expert_layout="nested"),
    "megatron_tp2_dp3_pp4": dict(tp=2, dp=3, pp=4, order="tp-dp-pp", expert_layout="nested"),
    "folded": dict(tp=2, cp=2, dp=2, pp=2, ep=4, etp=1, expert_layout="folded"),
    "folded_dist_opt": dict(cp=2, dp=4, ep=2, etp=1, expert_layout="folded", dist_opt_instances=2),
    "folded_dist_opt_unsorted": dict(tp=2, cp=2, ep=2, dp=4, pp=2, etp=2, expert_layout="folded", dist_opt_instances=2),
    "hierarchical_cp": dict(tp=2, cp=4, expert_layout="folded", hierarchical_cp=[2, 2]),
    "encdec_fan_out": dict(tp=4, cp=2, encoder_tp=2),
    "encdec_fan_in": dict(tp=1, cp=2, dp=2, pp=2, encoder_tp=3, encoder_pp=2, expert_layout="nested"),
    "encdec_megatron": dict(tp=2, dp=2, encoder_tp=1, encoder_pp=1, order="tp-dp-pp", expert_layout="nested"),
    "encdec_folded_experts": dict(tp=2, cp=2, ep=2, dp=2, encoder_tp=1, encoder_pp=1, dist_opt_instances=2, hierarchical_cp=[2]),
}


@pytest.fixture(params=sorted(LAYOUTS), ids=sorted(LAYOUTS))
def layout_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    return LAYOUTS[request.param]
