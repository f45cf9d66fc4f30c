"""The frontend domain: design a Tailwind web page with a simulated human who sees it next to the page they want
(``page_human``); the answer is the last page the agent wrote (``extract``), rendered offline (``colbench.render``)
and judged by the cosine similarity of the two screenshots' embeddings (``similarity``, ``embed``). The env is
``ColBench-Frontend-v0`` (``env``)."""

from __future__ import annotations

import atexit
import math
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from colbench.env.domain import Domain, Metrics, Score, ScoreOption, Scorer
from colbench.types.dialogue import ANSWER_MARKER
from colbench.types.task import Task

if TYPE_CHECKING:
    from colbench.env.claim_check import ClaimChecker
    from colbench.humans.simulator import Simulator
    from colbench.llm.client import LLMClient
    from colbench.render import Renderer
    from colbench.types.leaks import Labelled

EMBEDDER_HELP = "clip (default) | clip-center-crop | clip:WEIGHTS | test (offline tests)"
SUCCESS_THRESHOLD = 0.8
"""A page this similar counts as a success for the flip rate only (HAL's threshold on CLIP cosine)."""
VISUAL_SUCCESS_THRESHOLD = 0.9
"""ColBench-Frontend-v1's success: reward >= this (docs/frontend.md: pages with 15% of their words replaced, colours
changed or blocks removed score 0.96 on average, 40% about 0.90, an unrelated page 0.42)."""
VISUAL_ENV_ID = "ColBench-Frontend-v1"


class FrontendDomain(Domain):
    name = "frontend"
    env_id = "ColBench-Frontend-v0"
    default_tasks = "frontend-test"
    sample_tasks = "frontend-sample"
    renders_pages = True
    metrics = Metrics(
        reward_label="similarity x100",
        reward_name="similarity",
        has_success=False,
        success_threshold=SUCCESS_THRESHOLD,
        win_rate=True,
        reward_range=(-1.0, 1.0),
    )
    scoring_kwargs: ClassVar[Mapping[str, Any]] = {"reward": "clip"}
    """``reward``: ``clip`` (ColBench-Frontend-v0: CLIP cosine) or ``visual`` (ColBench-Frontend-v1: Design2Code's
    five metrics, ``visual_metrics``)."""
    visual_metrics = Metrics(
        reward_label="visual reward x100",
        reward_name="visual reward",
        has_success=True,
        success_threshold=VISUAL_SUCCESS_THRESHOLD,
        win_rate=False,  # the leaderboard ranks by success; the report shows the win rate beside the reward's parts
        reward_range=(0.0, 1.0),
        subscores=("block_match", "text", "position", "color", "clip"),
    )
    simulator_options = frozenset({"image_mode"})
    max_reply_chars = 1000  # the original release's cap for the page-seeing human
    # The agent prompt's answer: the marker, then one bare <html> ... </html> document (no fence), as the reference
    # pages are written; the prefill alone is already a page to extract_html (an unclosed document).
    answer_prefill = f"{ANSWER_MARKER}\n<html>\n"
    # The human must not write HTML (its prompt says so; the embedded one is shown both pages' HTML): no fence, and
    # no tag, whose every opening is one of these tokens ("<div" is "<" "div") in SmolLM2's vocabulary; the stop at
    # any "<" cuts a tag that another vocabulary spells with a token of its own.
    human_banned = ("```", "<", " <", "</")
    human_stops = ("```", "<")
    leak_detector = "markup-overlap/1"  # leaks.py: bump when its scores change
    score_help: ClassVar[str] = "score HTML answers by the similarity of their screenshots"
    score_options = (
        ScoreOption("embedder", EMBEDDER_HELP, "clip"),
        ScoreOption("jobs", "pages rendered at once", 4, int),
    )

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._renderer: Renderer | None = None
        self._scorers: dict[str, Scorer] = {}

    # -- tasks ----------------------------------------------------------------------------------------------
    def claims(self, row: Mapping[str, Any]) -> bool:
        return "test_cases" not in row

    # -- the simulated human --------------------------------------------------------------------------------
    def chat_simulator(
        self, client: LLMClient, prompt: Callable[[Task], str], *, text_only: bool, spec_view: bool, **options: Any
    ) -> Simulator:
        """The human sees the pages (``page_human``): the page it wants, or in the spec view its notes in place of
        it, and the agent's page; a model that reads no images is shown the pages' HTML."""
        # on first use: the registry loads the domain for its task schema alone
        from colbench.domains.frontend.page_human import PageSimulator

        if text_only:
            options.setdefault("image_mode", "html")
        return PageSimulator(client, prompt, max_chars=self.max_reply_chars, reference_as_text=spec_view, **options)

    # -- leaks ----------------------------------------------------------------------------------------------
    def leak_score(self, task: Task, reply: str) -> float:
        """Markup overlap with the reference page (tags, attributes, classes, styles), never its visible words
        (``leaks.py``)."""
        # on first use: the registry loads the domain for its task schema alone
        from colbench.domains.frontend.leaks import leak_score

        return leak_score(reply, task.hidden_information, task.problem_description)

    def leak_spans(self, task: Task, reply: str) -> list[tuple[int, int]]:
        # on first use: the registry loads the domain for its task schema alone
        from colbench.domains.frontend.leaks import leak_spans

        return leak_spans(reply, task.hidden_information, task.problem_description)

    def labelled_for(self, task: Task, other: Task | None, seed: int) -> list[Labelled]:
        # on first use: the registry loads the domain for its task schema alone
        from colbench.domains.frontend.leaks import labelled_replies

        foil = other.hidden_information if other is not None else ""
        return labelled_replies(task.hidden_information, task.problem_description, foil, seed)

    # -- claims ---------------------------------------------------------------------------------------------
    def claim_checker(self, scorer: Scorer | Callable[[], Scorer]) -> ClaimChecker:
        """Quoted visible text, checked against the reference page's (``claims``; the markup is read, nothing is
        rendered, so any scorer will do)."""
        # on first use: the registry loads the domain for its task schema alone
        from colbench.domains.frontend.claims import FrontendClaimChecker

        return FrontendClaimChecker()

    # -- scoring --------------------------------------------------------------------------------------------
    def metrics_for(self, env_id: str | None) -> Metrics:
        return self.visual_metrics if env_id == VISUAL_ENV_ID else self.metrics

    def shared_renderer(self) -> Renderer:
        """One browser per process for every frontend env and scorer (Chromium is heavy; renders are isolated
        per page)."""
        # on first use: the registry loads the domain for its task schema alone
        from colbench.render import Renderer

        with self._lock:
            if self._renderer is None:
                self._renderer = Renderer()
                atexit.register(self._renderer.close)
            return self._renderer

    def make_scorer(self, options: Mapping[str, Any], *, jobs: int | None = None) -> Scorer:
        # on first use: the registry loads the domain for its task schema alone
        from colbench.domains.frontend.scorer import FrontendScorer

        return FrontendScorer(
            embedder=str(options.get("embedder", "clip")), reward=_reward(options), concurrency=jobs or 4
        )

    def shared_scorer(self, options: Mapping[str, Any]) -> Scorer:
        # on first use: the registry loads the domain for its task schema alone
        from colbench.domains.frontend.scorer import FrontendScorer

        spec = str(options.get("embedder", "clip"))
        reward = _reward(options)
        key = f"{spec}/{reward}"
        renderer = self.shared_renderer()
        with self._lock:
            if key not in self._scorers:
                scorer = FrontendScorer(renderer, spec, reward=reward)
                atexit.register(scorer.close)
                self._scorers[key] = scorer
            return self._scorers[key]

    def unjudged(self, task_id: str, error: str) -> Score:
        # on first use: the registry loads the domain for its task schema alone
        from colbench.domains.frontend.scorer import FrontendScore

        return FrontendScore(math.nan, "infra_error", error)

    def score_summary(self, scores: Sequence[Score], scorer: Scorer) -> str:
        statuses = Counter(score.status for score in scores)
        judged = [s for s in scores if s.judged]
        counts = ", ".join(f"{name} {n}" for name, n in sorted(statuses.items()))
        described = scorer.describe()
        metrics = self.metrics_for(described.get("env_id"))
        mean = sum(s.reward for s in judged) / max(len(judged), 1)
        line = (
            f"scored {len(scores)} answers with {described.get('embedder', '?')}: mean {metrics.reward_name} {mean:.4f}"
        )
        if metrics.has_success:
            line += f", success {sum(bool(s.success) for s in judged)}/{len(judged)}"
        return f"{line} over {len(judged)} judged ({counts})"

    def check_tasks(self, tasks: Sequence[Task], options: Mapping[str, Any]) -> Iterable[str]:
        """Render every reference page: a task whose page does not render cannot be judged."""
        # on first use: the registry loads the domain for its task schema alone
        from colbench.render import Renderer

        failed = 0
        with Renderer() as renderer:
            for task in tasks:
                result = renderer.render(task.ground_truth)
                if result.status != "ok":
                    failed += 1
                    yield f"{task.task_id}\treference page {result.status}\t{result.error or 'no details'}"
        yield f"checked {len(tasks)} frontend tasks: {len(tasks) - failed} reference pages render, {failed} do not"


def _reward(options: Mapping[str, Any]) -> Any:
    """The ``reward`` scoring option, checked by the scorer (``clip`` or ``visual``)."""
    return options.get("reward", FrontendDomain.scoring_kwargs["reward"])


DOMAIN = FrontendDomain()
