#!/usr/bin/env python3
"""Regenerate arguments_<commit>.json: every argument Megatron-LM's
training parser defines, and what its initialize.py passes to
``initialize_model_parallel``.

Reads a Megatron-LM source tree (a checkout or ``git archive`` of one
commit); no Megatron code lives here. Usage:

    git -C Megatron-LM archive <commit> megatron | tar -x -C DIR
    python megatron_arguments.py --megatron DIR --commit <full sha> \
        --out arguments_<short sha>.json

with Python 3.10+ and torch importable (Transformer Engine and Apex are
not needed: Megatron falls back without them).

``arguments``: the parser ``megatron.training.arguments.parse_args`` builds
(``argparse.ArgumentParser(allow_abbrev=False)`` filled by
``add_megatron_arguments``; argparse's own ``--help`` left out), one entry
per argument in definition order: its option strings, its ``dest``, the
title of its argument group, and what it takes (``switch``: no value;
``value``: one; ``values``: ``nargs`` ``+`` or ``*``) with the name of its
``type`` (``int``, ``str``, ...; ``null`` for none).

``initialize_model_parallel``: read from the source text (``ast``), not
run. ``passed``: each argument of the call in
``megatron/training/initialize.py``, positional ones named by the
parameters of ``initialize_model_parallel`` in
``megatron/core/parallel_state.py``, with the expression passed and the
``args.<name>`` attributes it reads. ``not_passed``: the parameters the
call leaves at their defaults.
"""
import argparse
import ast
import json
import sys
import typing
from pathlib import Path


def parser_arguments(tree: Path) -> list:
    sys.path.insert(0, str(tree))
    # megatron.training imports typing.override (Python 3.12); on older
    # Pythons a no-op decorator stands in for it.
    if not hasattr(typing, "override"):
        typing.override = lambda f: f
    from megatron.training.arguments import add_megatron_arguments

    parser = argparse.ArgumentParser(allow_abbrev=False)
    add_megatron_arguments(parser)
    titles = {}
    for group in parser._action_groups:
        for action in group._group_actions:
            titles[id(action)] = group.title
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if action.nargs == 0:
            takes = "switch"
        elif action.nargs in ("+", "*") or isinstance(action.nargs, int):
            takes = "values"
        else:
            takes = "value"
        kind = getattr(action.type, "__name__", None) if action.type else None
        out.append(
            {
                "flags": list(action.option_strings),
                "dest": action.dest,
                "group": titles.get(id(action)),
                "takes": takes,
                "type": kind,
            }
        )
    return out


def attribute_reads(node: ast.AST) -> list:
    names = []
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.value, ast.Name)
            and sub.value.id == "args"
            and sub.attr not in names
        ):
            names.append(sub.attr)
    return names


def initialize_call(tree: Path) -> dict:
    state = ast.parse((tree / "megatron/core/parallel_state.py").read_text())
    params = next(
        [a.arg for a in node.args.args]
        for node in ast.walk(state)
        if isinstance(node, ast.FunctionDef) and node.name == "initialize_model_parallel"
    )
    init = ast.parse((tree / "megatron/training/initialize.py").read_text())
    calls = [
        node
        for node in ast.walk(init)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "initialize_model_parallel"
    ]
    if len(calls) != 1:
        raise SystemExit(f"expected one initialize_model_parallel call, found {len(calls)}")
    call = calls[0]
    passed = []
    for i, value in enumerate(call.args):
        passed.append((params[i], value))
    for keyword in call.keywords:
        passed.append((keyword.arg, keyword.value))
    names = [name for name, _ in passed]
    return {
        "passed": [
            {"keyword": name, "value": ast.unparse(value), "reads": attribute_reads(value)}
            for name, value in passed
        ],
        "not_passed": [p for p in params if p not in names],
    }


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--megatron", type=Path, required=True, help="Megatron-LM source tree")
    cli.add_argument("--commit", required=True, help="the tree's commit (recorded)")
    cli.add_argument("--out", type=Path, required=True)
    opts = cli.parse_args()
    tree = opts.megatron.resolve()
    data = {
        "megatron_lm": opts.commit,
        "generated_by": "tests/data/megatron/megatron_arguments.py",
        "initialize_model_parallel": initialize_call(tree),
        "arguments": parser_arguments(tree),
    }
    # One argument, or one passed keyword, per line.
    lines = ["{"]
    lines.append(f' "megatron_lm": {json.dumps(data["megatron_lm"])},')
    lines.append(f' "generated_by": {json.dumps(data["generated_by"])},')
    call = data["initialize_model_parallel"]
    lines.append(' "initialize_model_parallel": {')
    lines.append('  "passed": [')
    rows = [json.dumps(p) for p in call["passed"]]
    lines.append(",\n".join("   " + r for r in rows))
    lines.append("  ],")
    lines.append(f'  "not_passed": {json.dumps(call["not_passed"])}')
    lines.append(" },")
    lines.append(' "arguments": [')
    rows = [json.dumps(a) for a in data["arguments"]]
    lines.append(",\n".join("  " + r for r in rows))
    lines.append(" ]")
    lines.append("}")
    text = "\n".join(lines) + "\n"
    assert json.loads(text) == data
    opts.out.write_text(text)


if __name__ == "__main__":
    main()
