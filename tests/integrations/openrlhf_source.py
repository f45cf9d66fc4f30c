"""OpenRLHF's own code from modules that cannot be imported here.

``openrlhf.cli.train_ppo_ray`` and ``openrlhf.trainer.ppo_utils.samples_generator`` import vLLM and DeepSpeed at the
top (GPU machines only), although the parts the tests need use neither: the launch's argument parsing and checks (the
statements under ``if __name__ == "__main__":``, which build the parser there), and turning an agent's response into
an ``Experience``. These helpers compile exactly those statements from the installed OpenRLHF's source files, with the
file's standard-library imports, so that OpenRLHF's own code judges (a traceback points into its file).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import openrlhf

SOURCE = Path(openrlhf.__file__).parent


def _tree(relative: str) -> tuple[Path, ast.Module]:
    path = SOURCE / relative
    return path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _stdlib_imports(tree: ast.Module) -> list[ast.stmt]:
    """The file's top-level imports of standard-library modules (what its statements may use besides ``names``)."""

    def roots(node: ast.stmt) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name.split(".")[0] for alias in node.names]
        return [(node.module or "").split(".")[0]] if isinstance(node, ast.ImportFrom) else []

    return [node for node in tree.body if (found := roots(node)) and all(r in sys.stdlib_module_names for r in found)]


def _run(path: Path, tree: ast.Module, body: list[ast.stmt], names: dict[str, Any]) -> dict[str, Any]:
    module = ast.Module(body=[*_stdlib_imports(tree), *body], type_ignores=[])
    namespace: dict[str, Any] = {"__name__": "openrlhf_source", **names}
    exec(compile(module, str(path), "exec"), namespace)  # OpenRLHF's own statements, from its file
    return namespace


def train_ppo_ray_args(argv: list[str]) -> tuple[SimpleNamespace, argparse.ArgumentParser]:
    """What ``python -m openrlhf.cli.train_ppo_ray ARGV`` would start training with, and its parser: its ``__main__``
    block (parser, ``parse_args``, ``hierarchize``, its checks) run with ``sys.argv`` set, up to its ``train(args)``
    call, which hands the args back instead of starting Ray. A flag its parser does not know exits with argparse's
    status 2 (``SystemExit``), a failed check raises its ``AssertionError``."""
    path, tree = _tree("cli/train_ppo_ray.py")
    main = [n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "__name__ == '__main__'"]
    if len(main) != 1:
        raise AssertionError(f"{path}: expected one `if __name__ == '__main__':` block, found {len(main)}")
    calls = [n for n in ast.walk(main[0]) if isinstance(n, ast.Call) and ast.unparse(n.func) == "train"]
    if len(calls) != 1:  # the hand-back below stands in for exactly one call
        raise AssertionError(f"{path}: expected one train(args) call in its __main__ block, found {len(calls)}")
    started: list[SimpleNamespace] = []
    saved = sys.argv
    sys.argv = ["train_ppo_ray.py", *argv]
    try:
        namespace = _run(path, tree, main[0].body, {"train": started.append})
    finally:
        sys.argv = saved
    return started[0], namespace["parser"]


def method(relative: str, cls: str, name: str, **names: Any) -> Any:
    """The method ``cls.name`` of OpenRLHF's file ``relative`` as a plain function (``self`` its first argument),
    compiled alone with ``names`` (what it uses from the file's other imports)."""
    path, tree = _tree(relative)
    owner = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    node = next(n for n in owner.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name)
    return _run(path, tree, [node], names)[name]


def function(relative: str, name: str, **names: Any) -> Any:
    """The module-level function ``name`` of OpenRLHF's file ``relative``, compiled alone with ``names``."""
    path, tree = _tree(relative)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name)
    return _run(path, tree, [node], names)[name]
