"""The package's shape: layers kept (import-linter), no import circles, no domain switches outside the domain packages, no basename doing two
things, one parser of model specs, and docs/architecture.md naming modules that exist."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from paths import REPO

from colbench.tasks.domain_registry import domain_names

PACKAGE = REPO / "colbench"


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _lint_imports(config: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
            "--config",
            str(config),
            "--no-cache",
        ],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(cwd)},
    )


def test_the_layers_contract_is_kept() -> None:
    """pyproject's import-linter contracts: every import runs downward through the layers, and no two sibling
    packages import each other (imports inside functions count too)."""
    done = _lint_imports(REPO / "pyproject.toml", REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "layers KEPT" in done.stdout and "no import circles KEPT" in done.stdout


def test_the_contract_sees_an_upward_import_and_a_circle(tmp_path: Path) -> None:
    """The same contract types on a small package with one upward import and one circle: both reported."""
    package = tmp_path / "toy"
    for name, text in {
        "__init__.py": "",
        "low.py": "def f():\n    from toy import high  # inside a function: still an arrow\n",
        "high.py": "import toy.low\n",
        "a/__init__.py": "from toy.b import x\n",
        "b/__init__.py": "x = 1\ndef g():\n    import toy.a\n",
    }.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    config = tmp_path / "contracts.toml"
    config.write_text(
        '[tool.importlinter]\nroot_package = "toy"\n'
        '[[tool.importlinter.contracts]]\nname = "layers"\ntype = "layers"\nlayers = ["toy.high", "toy.low"]\n'
        '[[tool.importlinter.contracts]]\nname = "no import circles"\ntype = "acyclic_siblings"\n'
        'ancestors = ["toy"]\n'
    )
    done = _lint_imports(config, tmp_path)
    assert done.returncode != 0
    assert "layers BROKEN" in done.stdout and "no import circles BROKEN" in done.stdout


def test_no_module_is_loose_at_the_package_root() -> None:
    """Every module belongs to a layer package; only the package's face and the error hierarchy stand at the root."""
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "errors.py"] or loose == ["__init__.py", "errors.py"]


def test_no_domain_is_switched_on_outside_its_package() -> None:
    """A comparison with a domain's name (``== "backend"``, ``in ("backend", ...)``) belongs to that domain."""
    names = set(domain_names())
    offenders = []
    for name, path in modules().items():
        if name.startswith("colbench.domains."):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            constants = [n for op in operands for n in ast.walk(op) if isinstance(n, ast.Constant)]
            if any(isinstance(c.value, str) and c.value in names for c in constants):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []


def test_the_domain_switch_detector_sees_one() -> None:
    tree = ast.parse('if run.domain == "frontend":\n    pass\n')
    compare = next(n for n in ast.walk(tree) if isinstance(n, ast.Compare))
    assert isinstance(compare.comparators[0], ast.Constant) and compare.comparators[0].value in domain_names()


def test_one_basename_one_role() -> None:
    """Two modules share a name only as the same role in parallel domain packages (each domain's ``env``,
    ``scorer``, ``leaks``, ``claims``), the env layer's package itself, and ``python -m`` entry points."""
    seen: dict[str, list[str]] = {}
    for name in modules():
        seen.setdefault(name.rpartition(".")[2], []).append(name)
    shared = {base: sorted(names) for base, names in seen.items() if len(names) > 1}
    assert shared == {
        "env": ["colbench.domains.backend.env", "colbench.domains.frontend.env", "colbench.env"],
        "leaks": ["colbench.domains.backend.leaks", "colbench.domains.frontend.leaks", "colbench.types.leaks"],
        "scorer": ["colbench.domains.backend.scorer", "colbench.domains.frontend.scorer"],
        "claims": ["colbench.domains.backend.claims", "colbench.domains.frontend.claims", "colbench.types.claims"],
        "__main__": ["colbench.__main__", "colbench.llm.llamacpp.__main__"],  # python -m entry points, by definition
    }


def test_model_specs_are_parsed_in_one_place() -> None:
    pattern = re.compile(r"""startswith\(\s*["'](openai|local|llamacpp|scripted)\b""")
    assert pattern.search('if spec.startswith("openai:") or spec == "llamacpp":')  # what a second parser looks like
    offenders = [
        f"{path.relative_to(REPO)}"
        for name, path in modules().items()
        if name != "colbench.llm.specs" and pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_every_data_folder_is_beside_the_package() -> None:
    for folder, needed in {
        "envs": ["backend/ColBench-Backend-v0.toml", "backend/prompts/agent.txt", "frontend/prompts/simulator.txt"],
        "tasks": ["manifest.json", "README.md", "samples/backend-sample.jsonl", "samples/frontend-sample.jsonl"],
        "sandbox": ["Dockerfile", "build-offline.sh", "runner.py", "README.md"],
    }.items():
        for item in needed:
            assert (REPO / folder / item).is_file(), f"{folder}/{item}"


@pytest.mark.parametrize("doc", ["docs/architecture.md"])
def test_the_architecture_page_names_what_exists(doc: str) -> None:
    text = (REPO / doc).read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:colbench|envs|tasks|sandbox)/[\w/.\-<>]+)`", text))
    named |= {f"colbench/{m}" for m in re.findall(r"\| `([\w/]+(?:\.py|/))` \|", text)}
    assert len(named) > 20
    for path in named:
        if "<" in path or path.startswith("colbench/_data/"):  # a placeholder, or the wheel's layout
            continue
        assert (REPO / path).exists(), f"{doc} names {path}, which does not exist"
    rooms = {p.name for p in PACKAGE.iterdir() if p.name != "__init__.py" and not p.name.startswith("_")}
    rooms = {r for r in rooms if r.endswith(".py") or (PACKAGE / r / "__init__.py").exists()}
    missing = sorted(r for r in rooms if f"`{r}`" not in text and f"`{r}/`" not in text)
    assert missing == [], f"{doc} does not place {missing}"


def test_scoring_alone_loads_neither_the_llm_layer_nor_validation() -> None:
    """A sandbox farm or an RL scorer imports the scorer, not the openai client or pydantic (30 MB per process)."""
    import subprocess
    import sys

    code = (
        "import sys, colbench.domains.backend.scorer, colbench.domains.frontend.scorer; "
        "print(sorted(m for m in ('openai', 'pydantic', 'tenacity', 'rich') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def _loaded_after(statement: str, modules: tuple[str, ...]) -> list[str]:
    import subprocess
    import sys

    code = f"import sys; {statement}; print(sorted(m for m in {modules!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    return list(ast.literal_eval(done.stdout.strip()))


def test_reading_run_directories_loads_no_llm_client() -> None:
    """The run-directory layer uses the shared records (types/chat.py), not the client: no openai, no HTTP stack."""
    heavy = ("openai", "httpx2", "h11", "tenacity")
    assert _loaded_after("import colbench.runs", heavy) == []
    assert _loaded_after("import colbench.llm.client", heavy) == sorted(heavy)  # the check sees them when loaded


def test_the_public_api_is_lazy_and_whole() -> None:
    import colbench

    assert _loaded_after("import colbench", ("openai", "colbench.env.core", "colbench.domains.backend.env")) == []
    for name in colbench.__all__:
        assert getattr(colbench, name) is not None, name
    assert colbench.ColbenchEnv.__module__ == "colbench.env.core" and issubclass(colbench.ConfigError, ValueError)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = colbench.nope


def test_every_function_level_import_says_why() -> None:
    """An import of colbench inside a function is there to keep start-up or a process light: a comment on it, or
    above its block of imports, says so (moving it to the top is the fix where no reason holds)."""
    unexplained = []
    count = 0
    for path in modules().values():
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for sub in ast.walk(node):
                if not isinstance(sub, ast.Import | ast.ImportFrom):
                    continue
                target = sub.module if isinstance(sub, ast.ImportFrom) else sub.names[0].name
                if not (target or "").startswith("colbench"):
                    continue
                count += 1
                first = sub.lineno - 1
                while first > 0 and lines[first - 1].strip().startswith(("from ", "import ")):
                    first -= 1
                if "#" not in lines[sub.lineno - 1] and not lines[first - 1].strip().startswith("#"):
                    unexplained.append(f"{path.relative_to(REPO)}:{sub.lineno}")
    assert count > 10  # the check sees them
    assert unexplained == []


def test_no_module_imports_the_package_face() -> None:
    """``colbench/__init__.py`` sits above every layer (it names the public API): a module of the package that takes a
    name from it runs an arrow back up. The version, which every layer may name, lives at the bottom
    (``colbench._util.version``). (``import colbench`` for the ids' registration adds no arrow: importing any
    submodule runs the package's ``__init__`` first anyway.)"""
    offenders = []
    for name, path in modules().items():
        if name == "colbench":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "colbench" and node.level == 0:
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []
