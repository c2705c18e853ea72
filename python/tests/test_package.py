"""The installed package: stable-ABI extension, type information, and torch
kept optional."""

from __future__ import annotations

import importlib
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from conftest import require

import rank_layout
from rank_layout import _native


def test_installed_files() -> None:
    package = Path(rank_layout.__file__).parent
    for name in ("__init__.py", "megatron.py", "torch/__init__.py", "torch/_groups.py", "torch/_new_groups.py",
                 "torch/megatron.py", "torch/device_mesh.py", "torch/modules.py", "torch/torchtitan.py",
                 "torch/relayout.py", "torch/reshard.py", "resiliency.py", "_native.pyi", "py.typed"):
        assert (package / name).is_file(), name
    assert ".abi3." in Path(_native.__file__).name  # one wheel for CPython 3.9+


def test_version() -> None:
    assert rank_layout.__version__ == version("rank-layout") != "0+unknown"


def test_import_does_not_need_torch() -> None:
    code = "import sys, rank_layout; rank_layout.Layout(tp=2).groups_array('tp'); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "False"


def test_stubs_name_every_public_method() -> None:
    stubs = (Path(rank_layout.__file__).parent / "_native.pyi").read_text()
    for name in vars(_native.Layout):
        if not name.startswith("_"):
            assert f"def {name}(" in stubs, name


#: Names a public module would show only by importing them for its annotations.
TYPING_HELPERS = ("Any", "Optional", "NamedTuple", "Callable", "Sequence", "annotations")


@pytest.mark.parametrize("name", ["rank_layout", "rank_layout.megatron", "rank_layout.torch"])
def test_public_modules_show_no_typing_helpers(name: str) -> None:
    if name == "rank_layout.torch":
        require("torch")
    module = importlib.import_module(name)
    shown = [n for n in TYPING_HELPERS if n in dir(module)]
    assert not shown, f"dir({name}) shows {shown}"
    assert set(module.__all__) <= set(dir(module))


def test_torch_package_all() -> None:
    """rank_layout.torch's __all__ names every public function and class it
    offers; the implementation is in its modules, each name defined once."""
    require("torch")
    import rank_layout.torch as rl_torch
    from rank_layout.torch import _groups, _new_groups, modules

    assert sorted(rl_torch.__all__) == sorted(
        ["new_groups", "gather_rank_map", "METHODS", "new_module_groups", "ModuleGroups", "device_mesh",
         "torchtitan_meshes", "apply_relayout", "AppliedRelayout", "apply_reshard"]
    )
    assert rl_torch.apply_relayout is sys.modules["rank_layout.torch.relayout"].apply_relayout
    assert rl_torch.apply_reshard is sys.modules["rank_layout.torch.reshard"].apply_reshard
    assert rl_torch.new_groups is _new_groups.new_groups
    assert rl_torch.GroupSpec is _groups.GroupSpec and rl_torch.build_groups is _groups.build_groups
    assert rl_torch.new_module_groups is modules.new_module_groups
    assert rl_torch.device_mesh is sys.modules["rank_layout.torch.device_mesh"].device_mesh
