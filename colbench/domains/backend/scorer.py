"""Backend scoring: run the agent's module and the task's call expressions in a sandbox, compare in the host.

Semantics (docs/scoring.md has the reasons):

* The answer is the text after the first ``I WANT TO ANSWER:`` (or the whole text when the marker is missing, as
  at the turn cap); a fenced code block inside it is unwrapped.
* The answer runs as a real module, fresh for every test, so imports, helpers and recursion work and no test sees
  another's state; ``random`` and ``numpy.random`` are seeded identically for reference and answer.
* Expected values come from running the reference the same way (twice, to catch nondeterminism), cached per task.
  What a test judges follows ``judging``: ``print(X)`` and ``X == literal`` are judged as ``X``, a test no answer
  can change is dropped, and one that degenerate answers reproduce is judged on the task's calls in it.
* A test counts only if the reference returns a value, the same one both times. Tests where the reference raises,
  times out or is nondeterministic are *unjudgeable*: reported, excluded from ``tests_total``.
* A test passes when the answer returns a value equal to the expected one (``values.values_equal``).
* ``plus=True`` (``ColBench-Backend-v2``): the judged tests are the task's ``test_cases`` followed by its ColBench+
  tests (``Task.plus``, or ``plus_source(task)`` for a task whose row carries none), each planned by the same rules.
* Every score names the env id whose rules produced it (``colbench.env.versions``).
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from cachetools import LRUCache

from colbench._util.storage import canonical_json, sha256_text, write_atomic
from colbench.domains.backend.judging import CURRENT_RULES, RULES, Plan, Rules, degenerate_answers, plan
from colbench.domains.backend.values import EXACT, DecodeError, Tolerance, decode, short_repr, values_equal
from colbench.env.versions import env_id_for
from colbench.errors import ConfigError, DataError, InfraError
from colbench.sandbox.contract import Limits, Sandbox, TestOutcome
from colbench.types.dialogue import after_marker
from colbench.types.task import PlusTests, Task

SCORER_VERSIONS = {2: "2", 3: "3"}
"""The scorer version of each judging rule set (``judging.RULES``), recorded in run.json."""
_T = TypeVar("_T")
_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


def extract_code(text: str) -> str:
    """The code an agent's final message delivers (see module docstring)."""
    text = after_marker(text)
    blocks = [b for b in _FENCE.findall(text) if b.strip()]
    if blocks:
        with_def = [b for b in blocks if re.search(r"^\s*(def|class|import|from)\s", b, re.MULTILINE)]
        text = (with_def or blocks)[0]
    return text.strip("\n")


@dataclass(frozen=True)
class Expected:
    """The reference's behaviour on one test: a value to match, or why the test cannot be judged."""

    judgeable: bool
    value: Any = None
    reason: str = ""


@dataclass(frozen=True)
class TestResult:
    """One test of one answer. ``judged`` is the expression compared, when the rules judge something other than
    the test as written (docs/scoring.md)."""

    name: str
    expression: str
    passed: bool
    judgeable: bool
    outcome: str
    detail: str = ""
    judged: str = ""


@dataclass(frozen=True)
class BackendScore:
    """The scoring record of one answer (the CLI writes its ``result_row()`` as one JSON line). ``env_id``: the env
    id whose rules scored it (None from a scorer outside colbench's versions, such as a test's stand-in);
    ``taskenv``: the digest of the task environment the code ran in (``colbench.sandbox.taskenv``)."""

    task_id: str
    tests_passed: int
    tests_total: int
    tests: tuple[TestResult, ...] = field(default=())
    status: str = "ok"
    error: str = ""
    env_id: str | None = None
    taskenv: str | None = None

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
    def infra_error(
        cls, task_id: str, error: str, env_id: str | None = None, taskenv: str | None = None
    ) -> BackendScore:
        """The record of an answer the harness could not judge: no score at all, never a zero."""
        return cls(task_id, 0, 0, status="infra_error", error=error, env_id=env_id, taskenv=taskenv)

    def result_row(self, task_id: str | None = None) -> dict[str, Any]:
        """``{"task_id", "tests_passed", "tests_total", "pass_rate", "success", "status", "error", "env_id",
        "taskenv"}``."""
        return {
            "task_id": self.task_id if task_id is None else task_id,
            "tests_passed": self.tests_passed,
            "tests_total": self.tests_total,
            "pass_rate": self.pass_rate if self.judged else None,
            "success": self.success,
            "status": self.status,
            "error": self.error,
            "env_id": self.env_id,
            "taskenv": self.taskenv,
        }

    def details(self) -> dict[str, Any]:
        return {**self.result_row(), "tests": [asdict(t) for t in self.tests]}


def same_outcome(a: TestOutcome, b: TestOutcome) -> bool:
    """Whether two outcomes of one expression agree: equal values, or the same failure kind."""
    if a.outcome != "value" or b.outcome != "value":
        return a.outcome == b.outcome and a.outcome != "value"
    try:
        return values_equal(decode(a.value), decode(b.value))
    except DecodeError:
        return False


def _joined(outcomes: Sequence[TestOutcome]) -> TestOutcome:
    """One outcome standing for several probes: the first failure, or the tuple of their values."""
    if len(outcomes) == 1:
        return outcomes[0]
    failed = next((o for o in outcomes if o.outcome != "value"), None)
    if failed is not None:
        return failed
    seconds = sum(o.seconds for o in outcomes)
    return TestOutcome("value", {"t": "tuple", "v": [o.value for o in outcomes]}, seconds=seconds)


def expected_from(runs: Sequence[TestOutcome]) -> Expected:
    """What one test expects, from the reference's outcomes on it (one per run): its value, or why it cannot be
    judged."""
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


@dataclass(frozen=True)
class Reference:
    """What the scorer learned from the reference once per task: each test's plan (what is judged, after the
    rules of ``judging``) and the reference's outcomes on the judged expressions, one list per reference run."""

    plans: tuple[Plan, ...]
    runs: tuple[tuple[TestOutcome, ...], ...]

    def expected(self) -> list[Expected]:
        """Each test's expected outcome (decoded once per reference, then reused for every answer scored)."""
        found: list[Expected] | None = self.__dict__.get("_expected")
        if found is None:
            found = []
            for i, test in enumerate(self.plans):
                if test.dropped:
                    found.append(Expected(False, reason=test.dropped))
                else:
                    found.append(expected_from([run[i] for run in self.runs]))
            object.__setattr__(self, "_expected", found)  # a cache beside the fields: not compared, not saved
        return list(found)

    def to_json(self) -> str:
        runs = [[asdict(o) for o in run] for run in self.runs]
        return json.dumps({"plans": [asdict(p) for p in self.plans], "runs": runs})

    @classmethod
    def from_json(cls, text: str) -> Reference:
        raw = json.loads(text)
        plans = tuple(Plan(**p) for p in raw["plans"])
        return cls(plans, tuple(tuple(TestOutcome(**o) for o in run) for run in raw["runs"]))


class ReferenceCache:
    """What each task's reference does, in memory (least recently used dropped first) and optionally on disk as
    one JSON file per key."""

    def __init__(self, directory: str | Path | None = None, max_items: int = 50_000) -> None:
        self.directory = Path(directory) if directory else None
        self._mem: LRUCache[str, Reference] = LRUCache(maxsize=max_items)
        self._lock = threading.Lock()

    def get(self, key: str) -> Reference | None:
        with self._lock:
            found = self._mem.get(key)
        if found is not None or self.directory is None:
            return found
        try:
            found = Reference.from_json((self.directory / f"{key}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError, TypeError, KeyError):
            return None
        self._remember(key, found)
        return found

    def put(self, key: str, reference: Reference) -> None:
        self._remember(key, reference)
        if self.directory is not None:
            write_atomic(self.directory / f"{key}.json", reference.to_json())

    def _remember(self, key: str, reference: Reference) -> None:
        with self._lock:
            self._mem[key] = reference


class BackendScorer:
    """Scores answers to backend tasks in ``sandbox``. Thread-safe: score many answers from a thread pool.

    ``jobs``: answers :meth:`score_many` scores at once (default: the sandbox's workers). ``owns_sandbox``: close
    the sandbox with the scorer. ``reference_runs``: how often the reference runs (to catch nondeterminism);
    ``shared_reference_process``: all those runs in one process (the default; a fork less per run) or a process
    each (values that depend on the process id then count as nondeterministic too). ``rules`` and ``plus`` are
    the version's judging (``ColBench-Backend-v0``: rules 2; ``-v1``: rules 3; ``-v2``: rules 3 with the plus
    tests; a combination no env id stands for is a ConfigError). ``plus_source`` gives the plus tests of a task
    whose row carries none (computed once per task content and kept in memory); it is passed in, never imported,
    because the augmenter that makes plus tests scores with this class.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        limits: Limits | None = None,
        tolerance: Tolerance = EXACT,
        cache: ReferenceCache | None = None,
        reference_runs: int = 2,
        shared_reference_process: bool = True,
        seed: int = 0,
        jobs: int | None = None,
        owns_sandbox: bool = False,
        rules: Rules = CURRENT_RULES,
        plus: bool = False,
        plus_source: Callable[[Task], PlusTests] | None = None,
    ) -> None:
        if rules not in RULES:
            raise ConfigError(f"unknown judging rules {rules!r}; expected one of {', '.join(map(str, RULES))}")
        self.rules = rules
        self.plus = plus
        self.plus_source = plus_source
        self.env_id = env_id_for("backend", {"rules": rules, "plus_tests": plus})
        self.sandbox = sandbox
        self.taskenv = sandbox.environment.digest
        self.limits = limits or Limits()
        self.tolerance = tolerance
        self.cache = cache or ReferenceCache()
        self.reference_runs = reference_runs
        self.shared_reference_process = shared_reference_process
        self.seed = seed
        self.jobs = jobs or int(getattr(sandbox, "workers", 0) or 1)
        self._owns_sandbox = owns_sandbox
        self._computing: dict[str, threading.Lock] = {}
        self._computing_lock = threading.Lock()
        self._plus_made: LRUCache[str, PlusTests] = LRUCache(maxsize=50_000)
        self._plus_lock = threading.Lock()
        self._calls_seen: LRUCache[tuple[str, str], Expected] = LRUCache(maxsize=100_000)
        self._calls_lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        """run.json's ``scoring``: the runtime (not compared on resume: both runtimes run one task environment), the
        task environment's digest (compared: runs scored in different ones are never ranked as one), the judging
        rules' version and the env id they are (which plus tests a ``-v2`` run judged depends on its tasks:
        ``BackendDomain.describe_scoring`` adds it)."""
        sandbox = str(getattr(self.sandbox, "name", type(self.sandbox).__name__))
        rules = {"scorer_version": SCORER_VERSIONS[self.rules], "env_id": self.env_id, "taskenv": self.taskenv}
        return {"sandbox": sandbox, **rules}

    def plus_tests(self, task: Task) -> PlusTests:
        """``task``'s ColBench+ tests: its own, else ``plus_source``'s (once per task id and content); a task with
        neither is a ConfigError saying how to get them."""
        if task.plus is not None:
            return task.plus
        if self.plus_source is None:
            where = f" ({task.source})" if task.source else ""
            raise ConfigError(
                f"task {task.task_id}{where} has no plus tests, which {self.env_id} judges: run `colbench tasks "
                "augment` on its task file, or use a split whose plus tests are computed on first use"
            )
        source, key = self.plus_source, sha256_text(canonical_json(task.to_row()))

        def remember(made: PlusTests) -> None:
            with self._plus_lock:
                self._plus_made[key] = made

        def known() -> PlusTests | None:
            with self._plus_lock:
                return self._plus_made.get(key)

        return self._once(f"plus:{key}", known, lambda: source(task), remember)

    def tests(self, task: Task) -> tuple[tuple[str, str], ...]:
        """The (name, call) tests this scorer judges ``task`` on: its ``test_cases``, then its plus tests when
        ``plus`` (a plus test named like one of the task's own is a DataError: results are reported by name)."""
        if not self.plus:
            return task.test_cases
        extra = self.plus_tests(task).cases
        names = {name for name, _ in task.test_cases}
        clash = next((name for name, _ in extra if name in names), None)
        if clash is not None:
            raise DataError(f"task {task.task_id}: plus test {clash!r} has the name of one of its test_cases")
        return task.test_cases + extra

    def score_many(self, pairs: Sequence[tuple[Task, str]]) -> list[BackendScore]:
        """Scores in input order, ``jobs`` at a time; an answer the sandbox cannot run is that answer's
        ``infra_error`` record."""

        def one(pair: tuple[Task, str]) -> BackendScore:
            task, answer = pair
            try:
                return self.score(task, answer)
            except InfraError as exc:
                return BackendScore.infra_error(task.task_id, str(exc), self.env_id, self.taskenv)

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
        parts: list[Any] = [
            SCORER_VERSIONS[self.rules],
            task.ground_truth,
            [e for _, e in task.test_cases],
            self.seed,
            self.reference_runs,
            "one process" if self.shared_reference_process else "a process each",  # how the runs were made
            self.limits.timeout_s,
            self.limits.memory_mb,
            self.taskenv,  # expected values are facts about one task environment
        ]
        if self.plus:  # the plus tests, names and calls (v1's keys stay what they were)
            parts.append(["plus", self.plus_tests(task).cases])
        return sha256_text(json.dumps(parts))

    def reference(self, task: Task) -> Reference:
        """Each test's plan and the reference's outcomes (computed in the sandbox once, then cached)."""
        key = self._key(task)
        return self._once(
            key, lambda: self.cache.get(key), lambda: self._judge_reference(task), lambda r: self.cache.put(key, r)
        )

    def _once(
        self, key: str, known: Callable[[], _T | None], compute: Callable[[], _T], keep: Callable[[_T], None]
    ) -> _T:
        """``known()``, else ``compute()`` kept with ``keep``: N episodes of one task ending together (a vector
        env's group) compute it once, not N times."""
        found = known()
        if found is not None:
            return found
        with self._computing_lock:
            lock = self._computing.setdefault(key, threading.Lock())
        with lock:
            found = known()
            if found is None:
                found = compute()
                keep(found)
        with self._computing_lock:
            self._computing.pop(key, None)
        return found

    def expected(self, task: Task) -> list[Expected]:
        """The reference's judged outcome per test."""
        return self.reference(task).expected()

    def reference_values(self, task: Task, calls: Sequence[str]) -> list[Expected]:
        """What the reference gives on ``calls`` beyond its tests (the claims checker, a grounded human): each run
        as the reference's tests are (``reference_runs`` times, so a nondeterministic call is not judgeable), the
        calls not seen before in one sandbox request, and kept per reference and call."""
        base = sha256_text(json.dumps([task.ground_truth, self.seed, self.reference_runs, self.limits.timeout_s]))
        with self._calls_lock:
            known = {call: self._calls_seen.get((base, call)) for call in calls}
        missing = list(dict.fromkeys(call for call, found in known.items() if found is None))
        if missing:
            runs = self._reference_runs(task.ground_truth, missing)
            made = {call: expected_from([run[i] for run in runs]) for i, call in enumerate(missing)}
            with self._calls_lock:
                for call, expected in made.items():
                    self._calls_seen[base, call] = expected
            known.update(made)
        return [known[call] or Expected(False, reason="not run") for call in calls]

    def run(self, code: str, tests: Sequence[str], pool: str) -> list[TestOutcome]:
        """``tests`` evaluated after ``code`` in the sandbox's ``pool`` (``answer`` or ``reference``)."""
        if not tests:
            return []
        return self.sandbox.run_tests(code, tests, limits=self.limits, seed=self.seed, pool=pool)

    def _reference_runs(self, code: str, tests: list[str]) -> list[list[TestOutcome]]:
        """The reference's outcomes on ``tests``, ``reference_runs`` times over, in one sandbox call.

        By default (``shared_reference_process``) the runs go one after the other in one process, each test in a
        fresh module with the same seeding: time, unseeded generators and state an earlier run left in imported
        modules or in files all show as a difference; the process id does not. Otherwise each run has a process
        of its own (one fork more per run). Either way the answer runs in a worker of its own pool, never in the
        reference's process."""
        n, runs = len(tests), max(1, self.reference_runs)
        if not n:
            return [[] for _ in range(runs)]
        flat = self.sandbox.run_tests(
            code,
            tests,
            limits=self.limits,
            seed=self.seed,
            pool="reference",
            repeat=runs,
            shared_process=self.shared_reference_process,
        )
        return [flat[r * n : (r + 1) * n] for r in range(runs)]

    def _judge_reference(self, task: Task) -> Reference:
        plans = [plan(name, expr, task.ground_truth, self.rules) for name, expr in self.tests(task)]
        wrapped = [i for i, p in enumerate(plans) if p.wrapped] if self.rules >= 3 else []
        probes = [probe for i in wrapped for probe in plans[i].probes]
        tests = [p.judged for p in plans] + probes
        runs = self._reference_runs(task.ground_truth, tests)
        n = len(plans)
        if wrapped:
            switched = self._degenerate_check(task, plans, wrapped, runs)
            probe_at = n
            for i in wrapped:
                count = len(plans[i].probes)
                if i in switched:
                    plans[i] = plans[i].on_probes(switched[i])
                    for run in runs:  # the probes' outcomes stand for the test: one probe, or their tuple
                        run[i] = _joined(run[probe_at : probe_at + count])
                probe_at += count
        return Reference(tuple(plans), tuple(tuple(run[:n]) for run in runs))

    def _degenerate_check(
        self, task: Task, plans: list[Plan], wrapped: list[int], runs: list[list[TestOutcome]]
    ) -> dict[int, str]:
        """Rule 3: the wrapped tests a degenerate answer passes with probe values unlike the reference's, and why."""
        n = len(plans)
        tests = [plans[i].judged for i in wrapped] + [probe for i in wrapped for probe in plans[i].probes]
        reference = runs[0]
        expected_probes: dict[int, list[TestOutcome]] = {}
        at = n
        for i in wrapped:
            expected_probes[i] = reference[at : at + len(plans[i].probes)]
            at += len(plans[i].probes)
        switched: dict[int, str] = {}
        for label, code in degenerate_answers(task.ground_truth).items():
            outcomes = self.run(code, tests, "answer")
            at = len(wrapped)
            for k, i in enumerate(wrapped):
                probes_out = outcomes[at : at + len(plans[i].probes)]
                at += len(plans[i].probes)
                if i in switched:
                    continue
                if same_outcome(reference[i], outcomes[k]) and not all(
                    same_outcome(e, g) for e, g in zip(expected_probes[i], probes_out, strict=True)
                ):
                    switched[i] = f"judged on its call's value: an answer that {label} reproduces the test's value"
        return switched

    def score(self, task: Task, answer: str) -> BackendScore:
        """Score one final agent message. Raises ``SandboxError`` (infra) if the sandbox cannot run at all."""
        reference = self.reference(task)
        expected = reference.expected()
        judged = [p.judged for p in reference.plans]
        code = extract_code(answer)
        if code.strip():
            outcomes = self.run(code, judged, "answer")
        else:
            outcomes = [TestOutcome("raised", error="empty answer")] * len(judged)
        results = tuple(
            self._judge(test, exp, out) for test, exp, out in zip(reference.plans, expected, outcomes, strict=True)
        )
        return BackendScore(
            task_id=task.task_id,
            tests_passed=sum(r.passed for r in results),
            tests_total=sum(r.judgeable for r in results),
            tests=results,
            env_id=self.env_id,
            taskenv=self.taskenv,
        )

    def passes(self, expected: Expected, outcome: TestOutcome) -> bool:
        """Whether an answer's outcome passes a counted test."""
        if not expected.judgeable or outcome.outcome != "value":
            return False
        try:
            return values_equal(expected.value, decode(outcome.value), self.tolerance)
        except DecodeError:
            return False

    def _judge(self, test: Plan, exp: Expected, out: TestOutcome) -> TestResult:
        name, expr, note = test.name, test.expression, f" ({test.note})" if test.note else ""
        if not exp.judgeable:
            return TestResult(name, expr, False, False, out.outcome, f"not counted: {exp.reason}", test.judged)
        if out.outcome != "value":
            return TestResult(name, expr, False, True, out.outcome, out.error + note, test.judged)
        try:
            got = decode(out.value)
        except DecodeError as exc:
            return TestResult(name, expr, False, True, "invalid", str(exc), test.judged)
        if values_equal(exp.value, got, self.tolerance):
            return TestResult(name, expr, True, True, "value", note.strip(" ()"), test.judged)
        detail = f"expected {short_repr(exp.value)}, got {short_repr(got)}{note}"
        return TestResult(name, expr, False, True, "value", detail, test.judged)
