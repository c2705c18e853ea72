"""The same Megatron-LM arguments mean the same layout from Python and
from the command line (`--megatron-args`, the Megatron-LM flags, and a
JSON configuration file with Megatron-LM names as keys): every group of
every kind equal. The command is the workspace's debug build, found
through `cargo metadata` and built by `cargo build` when missing (without
cargo the test fails in CI and is skipped, with the reason, elsewhere)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO
from rank_layout import Layout

pytestmark = pytest.mark.slow  # builds the command with cargo when it is missing

CASES = [
    {"tensor_model_parallel_size": 2, "context_parallel_size": 2, "expert_model_parallel_size": 4,
     "pipeline_model_parallel_size": 2, "world_size": 64},
    {"tensor_model_parallel_size": 4, "expert_model_parallel_size": 2, "expert_tensor_parallel_size": 2,
     "pipeline_model_parallel_size": 2, "use_tp_pp_dp_mapping": True, "world_size": 32},
    {"tensor_model_parallel_size": 2, "context_parallel_size": 4, "hierarchical_context_parallel_sizes": [2, 2],
     "num_distributed_optimizer_instances": 2, "world_size": 32},
    {"tensor_model_parallel_size": 4, "context_parallel_size": 2, "encoder_tensor_model_parallel_size": 2,
     "encoder_pipeline_model_parallel_size": 1, "data_parallel_size": 2},
]


@functools.cache
def command() -> str:
    """The workspace's debug build of the command, wherever cargo puts it
    (``cargo metadata``'s target directory, so CARGO_TARGET_DIR and a
    shared target folder are honoured), built here when it is missing;
    or ``RANK_LAYOUT_COMMAND``, a build made before (.ci/run's, so that
    the tests do not wait for its other cargo commands)."""
    given = os.environ.get("RANK_LAYOUT_COMMAND")
    if given:
        assert Path(given).is_file(), f"RANK_LAYOUT_COMMAND={given} is not a file"
        return given
    if shutil.which("cargo") is None:
        if os.environ.get("CI"):
            raise AssertionError("cargo is not on PATH: the rank-layout command cannot be built")
        pytest.skip("cargo is not on PATH: the rank-layout command cannot be built")
    meta = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        cwd=REPO, capture_output=True, text=True, check=True,
    )
    path = Path(json.loads(meta.stdout)["target_directory"]) / "debug" / "rank-layout"
    # cargo rebuilds only what changed: the command is the workspace's own.
    subprocess.run(["cargo", "build", "-q", "-p", "rank-layout-cli", "--bin", "rank-layout"], cwd=REPO, check=True)
    assert path.is_file(), f"cargo build made no {path}"
    return str(path)


def flags(args: dict) -> list[str]:
    out = []
    for name, value in args.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            out.append(flag)
        elif isinstance(value, list):
            out += [flag, *map(str, value)]
        else:
            out += [flag, str(value)]
    return out


def cli_groups(*argv: str) -> dict:
    done = subprocess.run([command(), "groups", "--format", "json", *argv], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["groups"]


@pytest.mark.parametrize("args", CASES, ids=range(len(CASES)))
def test_python_and_the_command_line_agree(args: dict, tmp_path) -> None:
    layout = Layout.from_megatron_args(args)
    want = {kind: layout.groups(kind) for kind in layout.kinds}
    assert cli_groups("--megatron-args", " ".join(["pretrain_gpt.py", "--lr", "1e-4", *flags(args)])) == want
    assert cli_groups(*flags(args)) == want
    config = tmp_path / "megatron.json"
    config.write_text(json.dumps(args))
    assert cli_groups("--config", str(config)) == want
