"""Backend scoring: run the agent's module and the task's call expressions in a sandbox, compare in the host.

Semantics (docs/scoring.md has the reasons):

* The answer is the text after the first ``I WANT TO ANSWER:`` (or the whole text when the marker is missing, as
  at the turn cap); a fenced code block inside it is unwrapped.
* The answer runs as a real module, fresh for every test, so imports, helpers and recursion work and no test sees
  another's state; ``random`` and ``numpy.random`` are seeded identically for reference and answer.
* Expected values come from running the reference the same way (twice, to catch nondeterminism), cached per task.
  A test written as ``call(...) == literal`` is judged on the call's value (``judged_expression``).
* A test counts only if the reference returns a value, the same one both times. Tests where the reference raises,
  times out or is nondeterministic are *unjudgeable*: reported, excluded from ``tests_total``.
* A test passes when the answer returns a value equal to the expected one (``values.values_equal``).
"""

from __future__ import annotations

import ast
import json
import math
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from cachetools import LRUCache

from colbench.dialogue import after_marker
from colbench.domains.backend.values import EXACT, DecodeError, Tolerance, decode, values_equal
from colbench.errors import InfraError
from colbench.sandbox.contract import Limits, Sandbox, TestOutcome
from colbench.storage import sha256_text, write_atomic
from colbench.tasks.record import Task

SCORER_VERSION = "2"
_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


def extract_code(text: str) -> str:
    """The code an agent's final message delivers (see module docstring)."""
    text = after_marker(text)
    blocks = [b for b in _FENCE.findall(text) if b.strip()]
    if blocks:
        with_def = [b for b in blocks if re.search(r"^\s*(def|class|import|from)\s", b, re.MULTILINE)]
        text = (with_def or blocks)[0]
    return text.strip("\n")


@lru_cache(maxsize=65_536)
def judged_expression(expr: str) -> str:
    """The expression whose value is compared: for a test written as ``call(...) == literal``, the call alone.

    Expected values come from running the reference, so the literal adds nothing, and judging the boolean would be
    wrong both ways: where the reference itself fails the assertion (its literal is off), any wrong answer would
    "match" its ``False``. Some tasks of the real test split are written this way.
    """
    try:
        node = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        return expr
    if (
        isinstance(node, ast.Compare)
        and len(node.ops) == 1
        and isinstance(node.ops[0], ast.Eq)
        and isinstance(node.left, ast.Call)
    ):
        return ast.get_source_segment(expr.strip(), node.left) or expr
    return expr


@dataclass(frozen=True)
class Expected:
    """The reference's behaviour on one test: a value to match, or why the test cannot be judged."""

    judgeable: bool
    value: Any = None
    reason: str = ""


@dataclass(frozen=True)
class TestResult:
    name: str
    expression: str
    passed: bool
    judgeable: bool
    outcome: str
    detail: str = ""


@dataclass(frozen=True)
class BackendScore:
    """The scoring record of one answer (the CLI writes its ``result_row()`` as one JSON line)."""

    task_id: str
    tests_passed: int
    tests_total: int
    tests: tuple[TestResult, ...] = field(default=())
    status: str = "ok"
    error: str = ""

    @property
    def judged(self) -> bool:
        return self.status == "ok"

    @property
    def pass_rate(self) -> float:
        return self.tests_passed / self.tests_total if self.tests_total else 0.0

    @property
    def reward(self) -> float:
        return self.pass_rate if self.judged else math.nan

    @property
    def success(self) -> bool | None:
        """All judgeable tests passed (None when the answer could not be judged)."""
        return self.tests_total > 0 and self.tests_passed == self.tests_total if self.judged else None

    @classmethod
    def infra_error(cls, task_id: str, error: str) -> BackendScore:
        """The record of an answer the harness could not judge: no score at all, never a zero."""
        return cls(task_id=task_id, tests_passed=0, tests_total=0, status="infra_error", error=error)

    def result_row(self, task_id: str | None = None) -> dict[str, Any]:
        """``{"task_id", "tests_passed", "tests_total", "pass_rate", "success", "status", "error"}``."""
        return {
            "task_id": self.task_id if task_id is None else task_id,
            "tests_passed": self.tests_passed,
            "tests_total": self.tests_total,
            "pass_rate": self.pass_rate if self.judged else None,
            "success": self.success,
            "status": self.status,
            "error": self.error,
        }

    def details(self) -> dict[str, Any]:
        return {**self.result_row(), "tests": [asdict(t) for t in self.tests]}


def _short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _expected_from(runs: Sequence[TestOutcome]) -> Expected:
    first = runs[0]
    if first.outcome != "value":
        return Expected(False, reason=f"reference {first.outcome}: {first.error}".strip(": "))
    try:
        values = [decode(r.value) for r in runs if r.outcome == "value"]
    except DecodeError as exc:
        return Expected(False, reason=f"reference value undecodable: {exc}")
    if not values_equal(values[0], values[0]):
        return Expected(False, reason="reference returns an object of a type that cannot be compared")
    if len(values) != len(runs) or not all(values_equal(values[0], v) for v in values[1:]):
        return Expected(False, reason="reference is nondeterministic on this test")
    return Expected(True, value=values[0])


class ReferenceCache:
    """Expected outcomes per task, in memory (least recently used dropped first) and optionally on disk as one
    JSON file per key."""

    def __init__(self, directory: str | Path | None = None, max_items: int = 50_000) -> None:
        self.directory = Path(directory) if directory else None
        self._mem: LRUCache[str, list[list[TestOutcome]]] = LRUCache(maxsize=max_items)
        self._lock = threading.Lock()

    def get(self, key: str) -> list[list[TestOutcome]] | None:
        with self._lock:
            runs = self._mem.get(key)
        if runs is not None or self.directory is None:
            return runs
        path = self.directory / f"{key}.json"
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            runs = [[TestOutcome(**o) for o in run] for run in raw]
        except (OSError, ValueError, TypeError):
            return None
        self._remember(key, runs)
        return runs

    def put(self, key: str, runs: list[list[TestOutcome]]) -> None:
        self._remember(key, runs)
        if self.directory is not None:
            write_atomic(self.directory / f"{key}.json", json.dumps([[asdict(o) for o in run] for run in runs]))

    def _remember(self, key: str, runs: list[list[TestOutcome]]) -> None:
        with self._lock:
            self._mem[key] = runs


class BackendScorer:
    """Scores answers to backend tasks in ``sandbox``. Thread-safe: score many answers from a thread pool.

    ``jobs``: answers :meth:`score_many` scores at once (default: the sandbox's workers). ``owns_sandbox``: close
    the sandbox with the scorer.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        limits: Limits | None = None,
        tolerance: Tolerance = EXACT,
        cache: ReferenceCache | None = None,
        reference_runs: int = 2,
        seed: int = 0,
        jobs: int | None = None,
        owns_sandbox: bool = False,
    ) -> None:
        self.sandbox = sandbox
        self.limits = limits or Limits()
        self.tolerance = tolerance
        self.cache = cache or ReferenceCache()
        self.reference_runs = reference_runs
        self.seed = seed
        self.jobs = jobs or int(getattr(sandbox, "workers", 0) or 1)
        self._owns_sandbox = owns_sandbox

    def describe(self) -> dict[str, Any]:
        """run.json's ``scoring``: the runtime (not compared on resume: both pass one conformance suite) and the
        scorer's version."""
        sandbox = str(getattr(self.sandbox, "name", type(self.sandbox).__name__))
        return {"sandbox": sandbox, "scorer_version": SCORER_VERSION}

    def score_many(self, pairs: Sequence[tuple[Task, str]]) -> list[BackendScore]:
        """Scores in input order, ``jobs`` at a time; an answer the sandbox cannot run is that answer's
        ``infra_error`` record."""

        def one(pair: tuple[Task, str]) -> BackendScore:
            task, answer = pair
            try:
                return self.score(task, answer)
            except InfraError as exc:
                return BackendScore.infra_error(task.task_id, str(exc))

        if len(pairs) <= 1 or self.jobs <= 1:
            return [one(pair) for pair in pairs]
        with ThreadPoolExecutor(min(self.jobs, len(pairs)), thread_name_prefix="colbench-score") as pool:
            return list(pool.map(one, pairs))

    def close(self) -> None:
        if self._owns_sandbox:
            self.sandbox.close()

    def __deepcopy__(self, memo: dict[int, Any]) -> BackendScorer:
        # Shared service (Gymnasium deep-copies make() kwargs): copies share the sandbox and reference cache.
        return self

    def _key(self, task: Task) -> str:
        blob = json.dumps(
            [
                SCORER_VERSION,
                task.ground_truth,
                [e for _, e in task.test_cases],
                self.seed,
                self.reference_runs,
                self.limits.timeout_s,
                self.limits.memory_mb,
            ],
        )
        return sha256_text(blob)

    def expected(self, task: Task) -> list[Expected]:
        """The reference's judged outcome per test (computed in the sandbox once, then cached)."""
        key = self._key(task)
        runs = self.cache.get(key)
        if runs is None:
            tests = [judged_expression(expr) for _, expr in task.test_cases]
            runs = [
                self.sandbox.run_tests(task.ground_truth, tests, limits=self.limits, seed=self.seed, pool="reference")
                for _ in range(self.reference_runs)
            ]
            self.cache.put(key, runs)
        return [_expected_from([run[i] for run in runs]) for i in range(len(task.test_cases))]

    def score(self, task: Task, answer: str) -> BackendScore:
        """Score one final agent message. Raises ``SandboxError`` (infra) if the sandbox cannot run at all."""
        expected = self.expected(task)
        code = extract_code(answer)
        if code.strip():
            outcomes = self.sandbox.run_tests(
                code, [judged_expression(expr) for _, expr in task.test_cases], limits=self.limits, seed=self.seed
            )
        else:
            outcomes = [TestOutcome("raised", error="empty answer")] * len(task.test_cases)
        results = tuple(
            self._judge(name, expr, exp, out)
            for (name, expr), exp, out in zip(task.test_cases, expected, outcomes, strict=True)
        )
        return BackendScore(
            task_id=task.task_id,
            tests_passed=sum(r.passed for r in results),
            tests_total=sum(r.judgeable for r in results),
            tests=results,
        )

    def _judge(self, name: str, expr: str, exp: Expected, out: TestOutcome) -> TestResult:
        if not exp.judgeable:
            return TestResult(name, expr, False, False, out.outcome, f"not counted: {exp.reason}")
        if out.outcome != "value":
            return TestResult(name, expr, False, True, out.outcome, out.error)
        try:
            got = decode(out.value)
        except DecodeError as exc:
            return TestResult(name, expr, False, True, "invalid", str(exc))
        if values_equal(exp.value, got, self.tolerance):
            return TestResult(name, expr, True, True, "value")
        return TestResult(name, expr, False, True, "value", f"expected {_short(exp.value)}, got {_short(got)}")
