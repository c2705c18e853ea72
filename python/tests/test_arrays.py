"""groups_array: the groups as one NumPy array, equal to groups()."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rank_layout import Layout, LayoutError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_groups_array import NumpyMesh  # noqa: E402


def test_groups_array_equals_groups(layout_config: dict[str, Any]) -> None:
    layout = Layout(**layout_config)
    for kind in layout.kinds:
        groups = layout.groups(kind)
        if len({len(g) for g in groups}) > 1:
            with pytest.raises(LayoutError, match="an array needs one"):
                layout.groups_array(kind)
            continue
        array = layout.groups_array(kind)
        assert array.dtype == np.uint32
        assert array.shape == (len(groups), len(groups[0]))
        assert array.flags.c_contiguous and array.flags.writeable
        assert array.tolist() == groups, kind


def test_arrays_are_independent() -> None:
    layout = Layout(tp=2, world_size=8)
    a = layout.groups_array("tp")
    a[0, 0] = 99
    assert layout.groups_array("tp")[0, 0] == 0


def test_kinds_outside_the_listing() -> None:
    """Any set of the layout's axes is a kind, listed or not."""
    layout = Layout(tp=2, cp=2, pp=2, world_size=16)
    assert layout.groups_array("cp-pp").tolist() == layout.groups("pp-cp")
    assert layout.groups_array("tp-cp-dp-pp").tolist() == [list(range(16))]


@pytest.mark.parametrize(
    "sizes",
    [dict(tp=8, cp=2, ep=8, dp=64, pp=4), dict(tp=2, cp=1, ep=4, dp=8, pp=3), dict(tp=1, cp=4, ep=2, dp=2, pp=1)],
)
def test_against_numpy_transpose(sizes: dict[str, int]) -> None:
    """The benchmark's NumPy (DeviceMesh-style) construction gives the same arrays."""
    layout, mesh = Layout(**sizes, expert_layout="nested"), NumpyMesh(**sizes)
    for kind in layout.kinds:
        assert np.array_equal(layout.groups_array(kind), mesh.groups(kind)), kind


def test_large_layout_every_kind() -> None:
    layout = Layout(tp=8, cp=2, ep=8, pp=16, dp=512)
    assert layout.world_size == 131072
    for kind in layout.kinds:
        a = layout.groups_array(kind)
        if kind in ("embd", "pos-embd"):  # the first (and last) stage of each of the 8192 pipelines
            assert a.shape == (8192, 2 if kind == "embd" else 1)
        else:  # a partition of the ranks
            assert np.array_equal(np.sort(a, axis=None), np.arange(131072, dtype=np.uint32)), kind
