"""The type stubs of the compiled module (``_native.pyi``) against the
runtime: every function and method the stubs declare has the runtime's
parameters (PyO3's ``text_signature``, read by ``inspect.signature``), by
name, kind and default, and every public runtime function and method has a
stub. The defaults the runtime states are checked against what it does."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest

import rank_layout
from rank_layout import Layout, _native

STUBS = Path(rank_layout.__file__).parent / "_native.pyi"

#: A parameter without a default.
NO_DEFAULT = "<no default>"

Param = tuple[str, Any, bool]  # name, default, keyword-only


def stub_params(fn: ast.FunctionDef, drop_first: bool) -> list[Param]:
    args = fn.args
    positional = args.posonlyargs + args.args
    defaults = [NO_DEFAULT] * (len(positional) - len(args.defaults))
    defaults += [ast.literal_eval(d) for d in args.defaults]
    params = [(a.arg, d, False) for a, d in zip(positional, defaults)]
    params += [
        (a.arg, NO_DEFAULT if d is None else ast.literal_eval(d), True)
        for a, d in zip(args.kwonlyargs, args.kw_defaults)
    ]
    return params[1:] if drop_first else params


def runtime_params(obj: Any) -> list[Param]:
    params = []
    for p in inspect.signature(obj).parameters.values():
        if p.name in ("self", "cls") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        default = NO_DEFAULT if p.default is p.empty else p.default
        params.append((p.name, default, p.kind is p.KEYWORD_ONLY))
    return params


def decorators(fn: ast.FunctionDef) -> set[str]:
    return {d.id for d in fn.decorator_list if isinstance(d, ast.Name)}


def stubbed() -> list[tuple[str, ast.FunctionDef, Any, bool]]:
    """(name, stub, runtime object, whether the stub's first parameter is
    self or cls) of every public function and method in the stubs."""
    tree = ast.parse(STUBS.read_text())
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            out.append((node.name, node, getattr(_native, node.name, None), False))
        if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
            continue
        cls = getattr(_native, node.name, None)
        for fn in node.body:
            if not isinstance(fn, ast.FunctionDef) or "property" in decorators(fn):
                continue
            name = f"{node.name}.{fn.name}"
            static = "staticmethod" in decorators(fn)
            if fn.name in ("__init__", "__new__"):
                out.append((name, fn, cls, True))
            elif not fn.name.startswith("_"):
                out.append((name, fn, getattr(cls, fn.name, None), not static))
    return out


STUBBED = stubbed()


@pytest.mark.parametrize(("name", "stub", "runtime", "method"), STUBBED, ids=[s[0] for s in STUBBED])
def test_stub_signature_is_the_runtimes(name: str, stub: ast.FunctionDef, runtime: Any, method: bool) -> None:
    assert runtime is not None, f"{name} is in the stubs but not in rank_layout._native"
    want = runtime_params(runtime)
    got = stub_params(stub, method)
    assert got == want, f"{name}: stub {got} != runtime {want}"


def test_every_public_runtime_callable_has_a_stub() -> None:
    names = {name for name, *_ in STUBBED}
    missing = []
    for name, obj in vars(_native).items():
        if name.startswith("_") or not callable(obj) or isinstance(obj, type) and issubclass(obj, Exception):
            continue
        if not isinstance(obj, type):
            if name not in names:
                missing.append(name)
            continue
        if f"{name}.__init__" not in names and f"{name}.__new__" not in names:
            missing.append(f"{name}.__init__")
        for method, value in vars(obj).items():
            if method.startswith("_") or isinstance(value, property) or not callable(getattr(obj, method)):
                continue
            if type(value).__name__ == "getset_descriptor":
                continue
            if f"{name}.{method}" not in names:
                missing.append(f"{name}.{method}")
    assert not missing, f"no stub for {missing}"


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
