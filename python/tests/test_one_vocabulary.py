"""The same Megatron-LM arguments mean the same layout from Python and
from the command line (`--megatron-args`, the Megatron-LM flags, and a
JSON configuration file with Megatron-LM names as keys): every group of
every kind equal. The command is the workspace's debug build, which `cargo
test` (run before these tests in CI) builds; without it the test is
reported as skipped outside CI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from conftest import REPO
from rank_layout import Layout

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


def command() -> str:
    for build in ("debug", "release"):
        path = REPO / "target" / build / "rank-layout"
        if path.is_file():
            return str(path)
    found = shutil.which("rank-layout")
    if found:
        return found
    if os.environ.get("CI"):
        raise AssertionError("the rank-layout command is not built (cargo build)")
    pytest.skip("the rank-layout command is not built (cargo build)")


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
