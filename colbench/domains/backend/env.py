"""``ColBench-Backend-v0``/``-v1``/``-v2``: write a Python function with a simulated human, scored by sandboxed unit
tests (the ids differ in the judging: ``rules``, ``plus_tests``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

from colbench.domains.backend import DOMAIN as BACKEND
from colbench.domains.backend.judging import CURRENT_RULES, RULES
from colbench.domains.backend.scorer import BackendScore, BackendScorer
from colbench.env.arg_checks import check_bool, check_choice, check_has
from colbench.env.core import ColbenchEnv, EnvOptions, Episode
from colbench.env.vector import ColbenchVectorEnv
from colbench.humans.simulator import Simulator
from colbench.sandbox import KINDS, Sandbox
from colbench.types.dialogue import Turn
from colbench.types.task import Task


class BackendEnv(ColbenchEnv):
    """``step(text)`` ends the episode when ``text`` contains ``I WANT TO ANSWER:`` or when it is the
    ``max_turns``-th agent turn (then the whole text is the answer); the answer is scored and the reward is the
    fraction of judgeable tests passed. Otherwise the simulated human answers and that answer is the next
    observation. Infrastructure failures (sandbox, LLM endpoint) raise ``InfraError``: they are never a reward.

    ``tasks``: a split name, a JSONL file or a list of tasks (default: the paper's test split, ``backend-test``).
    ``simulator`` is a spec (``openai:MODEL``, ``llamacpp``, ``scripted``) completed by ``simulator_options``
    (``base_url``, ``api_key``, ``cache_dir``, ...), or any ``Simulator``. ``sandbox``: ``auto``, ``docker``,
    ``bwrap`` or a ``Sandbox``; ``scorer``: a ``BackendScorer`` to use instead (default: the process's shared one
    for the sandbox runtime, so every env shares warm workers and one reference cache). ``rules``: how tests are
    judged (``colbench.domains.backend.judging``; set by the env id: v0 keeps colbench 0.1's rules, v1 and v2
    the current ones). ``plus_tests``: also judge the task's ColBench+ tests (v2; a combination of the two that no
    env id stands for is a ConfigError). ``leak_policy``: ``off``, ``flag`` (default), ``redact`` or
    ``resample:N``, applied to each human reply before the agent sees it (``colbench.types.leaks``).
    ``truth_policy``: ``off``, ``flag`` (default) or ``resample[:N]``: each human reply's claims about what the
    function returns are checked by running the reference (``colbench.types.claims``); ``human_grounding``:
    ``off`` (default) or ``exec`` (the human is told the reference's results on up to 3 literal calls of the
    agent's turn). Neither changes the scoring. ``max_turns``, ``expose_hidden`` and ``render_mode``, like those
    three and ``simulator_options``, are the keywords every env takes (``colbench.env.core.EnvOptions``).
    """

    domain_name = "backend"

    def __init__(
        self,
        tasks: str | Sequence[Task] | None = None,
        simulator: str | Simulator = "scripted",
        sandbox: str | Sandbox = "auto",
        *,
        scorer: BackendScorer | None = None,
        rules: int = CURRENT_RULES,
        plus_tests: bool = False,
        **options: Unpack[EnvOptions],
    ) -> None:
        where = type(self).__name__
        if isinstance(sandbox, str):
            check_choice(where, "sandbox", sandbox, KINDS, other="a Sandbox object")
        else:
            check_has(
                where,
                "sandbox",
                sandbox,
                ("run_program", "run_tests", "close"),
                f"one of {', '.join(KINDS)} or a Sandbox object",
            )
        self._sandbox = sandbox
        self.rules = check_choice(where, "rules", rules, RULES)
        self.plus_tests = check_bool(where, "plus_tests", plus_tests)
        _ = self.env_id  # a combination no env id stands for fails here, before any model is made
        super().__init__(tasks, simulator, scorer=scorer, **options)

    def scoring_options(self) -> dict[str, Any]:
        return {"rules": self.rules, "plus_tests": self.plus_tests}

    def _default_scorer(self) -> BackendScorer:
        sandbox = self._sandbox
        if isinstance(sandbox, str):
            scorer = self.domain.shared_scorer({"sandbox": sandbox, **self.scoring_options()})
        else:
            source = BACKEND.plus_source(sandbox)
            scorer = BackendScorer(sandbox, rules=self.rules, plus=self.plus_tests, plus_source=source)
        assert isinstance(scorer, BackendScorer)
        return scorer

    def _finish(self, episode: Episode, turn: Turn) -> tuple[float, dict[str, Any]]:
        score = self.scorer.score(episode.task, turn.text)
        assert isinstance(score, BackendScore)
        return float(score.pass_rate), {
            "score": score.details(),
            "success": score.success,
            "pass_rate": score.pass_rate,
            "tests_passed": score.tests_passed,
            "tests_total": score.tests_total,
            "taskenv": score.taskenv,  # the task environment the answer ran in: scores of two are not one benchmark
        }


class BackendVectorEnv(ColbenchVectorEnv):
    """N ``BackendEnv`` episodes stepped together (``gym.make_vec``; :mod:`colbench.env.vector`)."""

    env_class = BackendEnv
