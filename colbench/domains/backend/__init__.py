"""The backend domain: write a Python function with a simulated human who knows the reference function; the answer
is judged by running the task's call expressions in a sandbox (``scorer.py``), values compared in the host
(``values``). The envs are ``ColBench-Backend-v0``/``-v1``/``-v2`` (``env``): the same episode under three versions
of the judging (docs/scoring.md)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

from colbench._util.progress_bar import progress_bar
from colbench.domains.backend.judging import CURRENT_RULES
from colbench.domains.backend.plus_digest import augmenters, plus_digest
from colbench.env.domain import Domain, Metrics, Score, ScoreOption, Scorer
from colbench.errors import DataError
from colbench.types.dialogue import ANSWER_MARKER
from colbench.types.task import PlusTests, Task

if TYPE_CHECKING:
    from colbench.domains.backend.plus.plus_cache import PlusCache
    from colbench.env.claim_check import ClaimChecker
    from colbench.sandbox import Sandbox
    from colbench.types.leaks import Labelled

SANDBOX_HELP = "auto (Docker when available, else bwrap) | docker | bwrap"


class BackendDomain(Domain):
    name = "backend"
    env_id = "ColBench-Backend-v1"
    default_tasks = "backend-test"
    sample_tasks = "backend-sample"
    metrics = Metrics(reward_label="tests passed %", reward_name="tests passed", has_success=True)
    max_reply_chars = 400  # the original release's cut
    answer_prefill = f"{ANSWER_MARKER}\n```python\n"  # the agent prompt's answer: the marker, then the code
    human_banned = ("def", " def", "```")  # the human must not write code: no function, no code fence
    human_stops = ("```", "\ndef ")
    leak_detector = "code-overlap/1"  # leaks.py: bump when its scores change
    score_help: ClassVar[str] = "score Python answers with the tasks' unit tests"
    score_options = (
        ScoreOption("sandbox", SANDBOX_HELP, "auto"),
        ScoreOption("jobs", "answers scored at once", os.cpu_count() or 1, int),
    )
    scoring_kwargs: ClassVar[Mapping[str, Any]] = {"rules": CURRENT_RULES, "plus_tests": False}

    def __init__(self) -> None:
        self._plus_cache: PlusCache | None = None
        self._plus_lock = threading.Lock()
        self._shared: dict[tuple[str, int, bool], Scorer] = {}
        self._lock = threading.Lock()

    # -- tasks ----------------------------------------------------------------------------------------------
    def claims(self, row: Mapping[str, Any]) -> bool:
        return "test_cases" in row

    def test_cases(self, row: Mapping[str, Any], where: str) -> tuple[tuple[str, str], ...]:
        raw = row.get("test_cases")
        if not isinstance(raw, dict) or not raw:
            got = "missing" if raw is None else type(raw).__name__
            raise DataError(f"{where}: field 'test_cases': expected a non-empty object of call expressions, got {got}")
        return _calls(raw, "test_cases", where)

    def plus_tests(self, row: Mapping[str, Any], where: str) -> PlusTests | None:
        raw = row.get("plus_test_cases")
        if raw is None:
            return None
        if not isinstance(raw, dict):
            raise DataError(f"{where}: field 'plus_test_cases': expected an object of call expressions")
        cases = _calls(raw, "plus_test_cases", where)
        clash = next((name for name in raw if name in row.get("test_cases", {})), None)
        if clash is not None:
            raise DataError(f"{where}: field 'plus_test_cases.{clash}': the name is also one of 'test_cases'")
        augmenter, note = row.get("plus_augmenter"), row.get("plus_note", "")
        if not isinstance(augmenter, str) or not augmenter.strip():
            raise DataError(f"{where}: field 'plus_augmenter': expected the augmenter version that made the plus tests")
        if not isinstance(note, str):
            raise DataError(f"{where}: field 'plus_note': expected a string")
        return PlusTests(cases, augmenter, note)

    # -- scoring --------------------------------------------------------------------------------------------
    def make_scorer(self, options: Mapping[str, Any], *, jobs: int | None = None) -> Scorer:
        # on first use: the registry loads the domain for its task schema alone
        from colbench.domains.backend.scorer import BackendScorer
        from colbench.sandbox import make_sandbox
        from colbench.sandbox.pool import WorkerPool

        rules, plus = _version(options)
        sandbox = make_sandbox(str(options.get("sandbox", "auto")), workers=jobs)
        if isinstance(sandbox, WorkerPool):  # the first answer's reference and answer workers start together, now
            sandbox.warm(count=1, wait=False)
        return BackendScorer(
            sandbox, jobs=jobs, owns_sandbox=True, rules=rules, plus=plus, plus_source=self.plus_source(sandbox)
        )

    def shared_scorer(self, options: Mapping[str, Any]) -> Scorer:
        # on first use: the registry loads the domain for its task schema alone
        from colbench.domains.backend.scorer import BackendScorer
        from colbench.sandbox import resolve_kind, shared_sandbox

        kind, (rules, plus) = resolve_kind(str(options.get("sandbox", "auto"))), _version(options)
        with self._lock:
            if (kind, rules, plus) not in self._shared:
                self._shared[kind, rules, plus] = BackendScorer(
                    shared_sandbox(kind), rules=rules, plus=plus, plus_source=self.plus_source(shared_sandbox(kind))
                )
            return self._shared[kind, rules, plus]

    def plus_source(self, sandbox: Sandbox) -> Callable[[Task], PlusTests]:
        """Where the scorers this domain makes get the plus tests of a task whose row carries none (a hub split):
        computed on first use in ``sandbox`` and kept on disk per task and augmenter version
        (``plus.plus_cache``). The augmenter judges with the current rules on the task's own tests."""
        # on first use: the registry loads the domain for its task schema alone
        from colbench.domains.backend.plus.plus_cache import PlusCache
        from colbench.domains.backend.scorer import BackendScorer

        with self._plus_lock:  # not self._lock: shared_scorer holds it while it asks for a source
            if self._plus_cache is None:
                self._plus_cache = PlusCache()
            cache = self._plus_cache
        return partial(cache.plus_tests, scorer=BackendScorer(sandbox))

    def unjudged(self, task_id: str, error: str) -> Score:
        # on first use: the registry loads the domain for its task schema alone
        from colbench.domains.backend.scorer import BackendScore

        return BackendScore.infra_error(task_id, error)

    def describe_scoring(self, scorer: Scorer, tasks: Sequence[Task]) -> dict[str, Any]:
        """The scorer's description and, for a scorer that judges plus tests, which ones: ``augmenter`` (the
            augmenter versions that made them) and ``plus_digest`` (``plus_digest.plus_digest``). Each task's plus tests
            are resolved here, before the first episode, ``jobs`` at a time with a progress bar (computed on first use
        for a split that carries none): a task that cannot have any is a ConfigError now, not mid-run."""
        # on first use: the registry loads the domain for its task schema alone
        from colbench.domains.backend.scorer import BackendScorer

        described = super().describe_scoring(scorer, tasks)
        if isinstance(scorer, BackendScorer) and scorer.plus:
            missing = sum(task.plus is None for task in tasks)
            with progress_bar("ColBench+ tests, first use", missing) as advance:

                def resolve(task: Task) -> Task:
                    plus = scorer.plus_tests(task)
                    if task.plus is None:
                        advance()
                    return replace(task, plus=plus)

                with ThreadPoolExecutor(max(1, scorer.jobs), thread_name_prefix="colbench-plus") as pool:
                    resolved = list(pool.map(resolve, tasks))
            described.update(augmenter=augmenters(resolved), plus_digest=plus_digest(resolved))
        return described

    def score_summary(self, scores: Sequence[Score], scorer: Scorer) -> str:
        judged = [s for s in scores if s.judged]
        success = sum(bool(s.success) for s in judged)
        passed = sum(s.reward for s in judged)
        return (
            f"scored {len(scores)} answers: success {success}/{len(judged)} "
            f"({100 * success / max(len(judged), 1):.1f}%), tests passed "
            f"{100 * passed / max(len(judged), 1):.1f}%, infrastructure errors {len(scores) - len(judged)}"
        )

    # -- leaks ----------------------------------------------------------------------------------------------
    def leak_score(self, task: Task, reply: str) -> float:
        """Code overlap with the reference function, robust to renaming and layout (``leaks.py``)."""
        # on first use: the registry loads the domain for its task schema alone
        from colbench.domains.backend.leaks import leak_score

        return leak_score(reply, task.hidden_information, task.problem_description)

    def leak_spans(self, task: Task, reply: str) -> list[tuple[int, int]]:
        # on first use: the registry loads the domain for its task schema alone
        from colbench.domains.backend.leaks import leak_spans

        return leak_spans(reply, task.hidden_information, task.problem_description)

    def labelled_for(self, task: Task, other: Task | None, seed: int) -> list[Labelled]:
        # on first use: the registry loads the domain for its task schema alone
        from colbench.domains.backend.leaks import labelled_replies

        calls = [call for _, call in task.test_cases]
        foil = other.hidden_information if other is not None else ""
        return labelled_replies(task.hidden_information, task.problem_description, calls, foil, seed)

    # -- claims ---------------------------------------------------------------------------------------------
    def claim_checker(self, scorer: Scorer | Callable[[], Scorer]) -> ClaimChecker:
        """Claims about what the function returns, settled by running the reference with ``scorer`` (``claims``)."""
        # on first use: the registry loads the domain for its task schema alone
        from colbench.domains.backend.claims import BackendClaimChecker

        return BackendClaimChecker(scorer)

    # -- checks ---------------------------------------------------------------------------------------------
    def check_tasks(self, tasks: Sequence[Task], options: Mapping[str, Any]) -> Iterable[str]:
        """Every reference against its own tests and every test against degenerate answers (``audit``)."""
        # on first use: the registry loads the domain for its task schema alone
        from colbench.domains.backend.degenerate import audit
        from colbench.domains.backend.scorer import BackendScorer

        jobs = int(options.get("jobs") or 1)
        with closing(self.make_scorer(options, jobs=jobs)) as scorer:
            assert isinstance(scorer, BackendScorer)
            yield from audit(scorer, tasks, jobs)

    # -- generation -----------------------------------------------------------------------------------------
    def generate_tasks(self, options: Mapping[str, Any], advance: Callable[[], None]) -> str:
        """Candidates from a model through the sandbox gates (``generate/``), the scorer of the current rules."""
        # on first use: generation loads the mutation, augment and dedup machinery
        from colbench.domains.backend.generate.generation_run import run
        from colbench.domains.backend.scorer import BackendScorer

        jobs = int(options.get("jobs") or 1)
        with closing(self.make_scorer(options, jobs=jobs)) as scorer:
            assert isinstance(scorer, BackendScorer)
            return run({**options, "jobs": jobs}, scorer, advance)


def _calls(raw: dict[Any, Any], field: str, where: str) -> tuple[tuple[str, str], ...]:
    for name, expr in raw.items():
        if not isinstance(expr, str) or not expr.strip():
            raise DataError(f"{where}: field '{field}.{name}': expected a call expression string")
    return tuple((str(k), v) for k, v in raw.items())


def _version(options: Mapping[str, Any]) -> tuple[int, bool]:
    """The judging a scoring configuration asks for: its rules and whether plus tests are judged (default: the
    current rules, no plus tests; an env id's values come from ``colbench.env.versions.scoring_options``)."""
    return int(options.get("rules", CURRENT_RULES)), bool(options.get("plus_tests", False))


DOMAIN = BackendDomain()
