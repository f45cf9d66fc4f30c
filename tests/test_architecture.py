"""The package's shape: no import circles, no domain switches outside the domain packages, no basename doing two
things, one parser of model specs, and docs/architecture.md naming modules that exist."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from colbench.domains import domain_names

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "colbench"


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules ``name`` imports, at any depth (imports inside functions tie modules together too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + ".") and target != "colbench":
                out.add(target)
    return out


def cycles(graph: dict[str, set[str]]) -> Iterator[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(v: str) -> Iterator[list[str]]:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                yield from visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                yield sorted(component)

    for v in graph:
        if v not in index:
            yield from visit(v)


def test_no_import_circles() -> None:
    found = modules()
    graph = {name: imports(name, path, set(found)) for name, path in found.items()}
    assert sum(len(deps) for deps in graph.values()) > 100  # the graph is really there
    assert list(cycles(graph)) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    assert list(cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})) == [["a", "b", "c"]]


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
    """Two modules share a name only as the same role in parallel domain packages (each domain's ``env``)."""
    seen: dict[str, list[str]] = {}
    for name in modules():
        seen.setdefault(name.rpartition(".")[2], []).append(name)
    shared = {base: sorted(names) for base, names in seen.items() if len(names) > 1}
    assert shared == {"env": ["colbench.domains.backend.env", "colbench.domains.frontend.env"]}


def test_model_specs_are_parsed_in_one_place() -> None:
    pattern = re.compile(r"""startswith\(\s*["'](openai|local|llamacpp|scripted)\b""")
    assert pattern.search('if spec.startswith("openai:") or spec == "local":')  # what a second parser looks like
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
        "import sys, colbench.domains.backend.unit_tests, colbench.domains.frontend.similarity; "
        "print(sorted(m for m in ('openai', 'pydantic', 'tenacity', 'rich') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
