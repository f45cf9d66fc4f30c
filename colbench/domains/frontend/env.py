"""``ColBench-Frontend-v0``: design a Tailwind page with a simulated human who sees it, scored by CLIP similarity."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Unpack

from colbench.domains.frontend import DOMAIN as FRONTEND
from colbench.domains.frontend.embed import EMBEDDER_SPECS, Embedder, parse_embedder, resolve_clip_weights
from colbench.domains.frontend.extract import extract_html
from colbench.domains.frontend.scorer import REWARD_MODES, FrontendScorer, RewardMode
from colbench.env.arg_checks import check_choice, check_has, fail
from colbench.env.core import ColbenchEnv, EnvOptions, Episode
from colbench.env.vector import ColbenchVectorEnv
from colbench.errors import ConfigError, InfraError
from colbench.humans.simulator import SimReply, Simulator
from colbench.render import Renderer, RenderResult
from colbench.types.dialogue import Turn
from colbench.types.task import Task


@dataclass
class _PageEpisode(Episode):
    page_html: str | None = None
    page: RenderResult | None = None
    reference: RenderResult | None = None


class FrontendEnv(ColbenchEnv):
    """Each agent turn may hold one HTML page (``colbench.domains.frontend.extract.extract_html`` finds it); the page is
    rendered and the simulated human, who sees it next to the reference page, says what differs. The episode ends
    at ``I WANT TO ANSWER:`` or at the ``max_turns``-th agent turn; the answer is the last page the agent produced
    (in that turn or earlier), and the reward is its similarity to the reference (``colbench.domains.frontend.scorer``:
    no page or a page that fails to render scores the floor, 0). Infrastructure failures (Chromium, the
    embedder, the reference page itself, the LLM endpoint) raise ``InfraError``: they are never a reward.

    ``tasks``: a split name, a JSONL file or a list of tasks (default: ``frontend-test``). ``simulator`` is a spec
    (``openai:MODEL``, a vision model; ``llamacpp`` / ``image_mode="html"`` for text-only models; ``scripted``)
    completed by ``simulator_options``, or any ``Simulator``. ``embedder`` is an embedder spec (``clip``,
    ``clip-center-crop``, ``clip:/path/weights``, ``test``) or an ``Embedder``. ``scorer``: a ``FrontendScorer``
    to use instead (default: the process's shared one for the embedder spec: one browser, one model, one reference
    cache); ``renderer``: a ``Renderer`` of its own (then the env scores with a scorer of its own too).
    ``leak_policy``: ``off``, ``flag`` (default), ``redact`` or ``resample:N``, applied to each human reply before
    the agent sees it (``colbench.types.leaks``). It, ``simulator_options``, ``max_turns``, ``expose_hidden``,
    ``truth_policy``, ``human_grounding`` and ``render_mode`` are the keywords every env takes
    (``colbench.env.core.EnvOptions``).
    """

    domain_name = "frontend"

    def __init__(
        self,
        tasks: str | Sequence[Task] | None = None,
        simulator: str | Simulator = "scripted",
        embedder: str | Embedder = "clip",
        *,
        reward: str = "clip",
        renderer: Renderer | None = None,
        scorer: FrontendScorer | None = None,
        **options: Unpack[EnvOptions],
    ) -> None:
        where = type(self).__name__
        if isinstance(embedder, str):
            try:
                parse_embedder(embedder)
            except ConfigError:
                fail(where, "embedder", embedder, f"one of {', '.join(EMBEDDER_SPECS)} or an Embedder object")
        else:
            check_has(where, "embedder", embedder, ("embed",), f"one of {', '.join(EMBEDDER_SPECS)} or an Embedder")
        self.reward_mode: RewardMode = check_choice(where, "reward", reward, REWARD_MODES)
        if isinstance(embedder, str) and scorer is None:
            _check_weights(where, embedder)
        if renderer is not None and not isinstance(renderer, Renderer):
            fail(where, "renderer", renderer, "None or a Renderer")
        if scorer is not None and not isinstance(scorer, FrontendScorer):
            fail(where, "scorer", scorer, "None or a FrontendScorer")
        super().__init__(tasks, simulator, scorer=scorer, **options)
        self._embedder = embedder
        self._renderer = renderer
        self._owns_scorer = False
        self._pending: tuple[str, RenderResult] | None = None

    def scoring_options(self) -> dict[str, Any]:
        return {"reward": self.reward_mode}

    def _default_scorer(self) -> FrontendScorer:
        embedder = self._embedder
        if isinstance(embedder, str) and self._renderer is None:
            scorer = self.domain.shared_scorer({"embedder": embedder, **self.scoring_options()})
            assert isinstance(scorer, FrontendScorer)
            return scorer
        self._owns_scorer = True
        return FrontendScorer(self._renderer or FRONTEND.shared_renderer(), embedder, reward=self.reward_mode)

    @property
    def _render_options(self) -> dict[str, Any]:
        """Pages are rendered with their blocks when the scorer's reward reads them (the final page is scored from
        the render the human saw)."""
        scorer = self._scorer
        mode = scorer.reward_mode if isinstance(scorer, FrontendScorer) else self.reward_mode
        return {"blocks": True} if mode == "visual" else {}

    @property
    def page_scorer(self) -> FrontendScorer:
        scorer = self.scorer
        assert isinstance(scorer, FrontendScorer), f"a frontend env needs a FrontendScorer, got {type(scorer).__name__}"
        return scorer

    def close(self) -> None:
        if self._owns_scorer and self._scorer is not None:
            self._scorer.close()  # its embedding thread; the renderer is the caller's or the shared one
            self._scorer, self._owns_scorer = None, False
        super().close()

    @property
    def renderer(self) -> Renderer:
        """The renderer of the agent's pages: the scorer's, so pages and references render alike. Before anything
        is scored, the given renderer or the process's shared one (the one the shared scorers render with): the
        dialogue never loads the embedder."""
        if self._renderer is not None:
            return self._renderer
        if self._scorer is not None:
            return self.page_scorer.renderer
        return FRONTEND.shared_renderer()

    @property
    def page_png(self) -> bytes | None:
        """The screenshot of the agent's latest page (None before the first page or when it failed to render)."""
        episode = self._episode
        return episode.page.png if isinstance(episode, _PageEpisode) and episode.page is not None else None

    async def areference_png(self) -> bytes | None:
        """The screenshot of the task's reference page (the report shows it beside the agent's page), rendered now
        if the episode never needed it (an answer on the first turn is scored against a cached embedding)."""
        episode = self._episode
        if not isinstance(episode, _PageEpisode):
            return None
        reference = episode.reference
        if reference is None:
            reference = await asyncio.to_thread(self._reference, episode)
        return reference.png

    # -- the domain's rules ------------------------------------------------------------------------------------
    def _new_episode(self, task: Task) -> Episode:
        self._pending = None
        return _PageEpisode(task=task)

    def _agent_turn(self, episode: Episode, action: str) -> Turn:
        # The page is rendered once, here; it becomes the episode's page only when the step completes.
        html = extract_html(action)
        self._pending = None if html is None else (html, self.renderer.render(html, **self._render_options))
        return Turn("agent", action, image=None if self._pending is None else self._pending[1].png)

    async def _aagent_turn(self, episode: Episode, action: str) -> Turn:
        html = extract_html(action)
        self._pending = None if html is None else (html, await self.renderer.arender(html, **self._render_options))
        return Turn("agent", action, image=None if self._pending is None else self._pending[1].png)

    def _human_reply(self, episode: Episode, turn: Turn) -> SimReply:
        assert isinstance(episode, _PageEpisode)
        reference = self._reference(episode)
        return self.simulator.reply(episode.task, [*episode.dialogue, turn], reference_image=reference.png)

    async def _ahuman_reply(self, episode: Episode, turn: Turn) -> SimReply:
        assert isinstance(episode, _PageEpisode)
        reference = episode.reference
        if reference is None:  # rendered once per episode, off the event loop
            reference = await asyncio.to_thread(self._reference, episode)
        return await self.simulator.areply(episode.task, [*episode.dialogue, turn], reference_image=reference.png)

    def _turn_done(self, episode: Episode, turn: Turn) -> None:
        assert isinstance(episode, _PageEpisode)
        if self._pending is not None:
            episode.page_html, episode.page = self._pending

    def _finish(self, episode: Episode, turn: Turn) -> tuple[float, dict[str, Any]]:
        assert isinstance(episode, _PageEpisode)
        page_html, page = self._pending if self._pending is not None else (episode.page_html, episode.page)
        score = self.page_scorer.score_rendered(episode.task, page)
        if score.status == "infra_error":
            raise InfraError(f"frontend task {episode.task.task_id}: {score.error}")
        episode.page_html, episode.page = page_html, page
        info = {"score": score.details(), "similarity": score.similarity, "answer_html": page_html}
        if score.visual is not None:
            info.update(success=score.success, subscores=dict(score.visual.subscores))
        return score.reward, info

    def _reference(self, episode: _PageEpisode) -> RenderResult:
        if episode.reference is None:
            reference = self.renderer.render(episode.task.ground_truth, cache=True)
            if reference.png is None:
                raise InfraError(
                    f"frontend task {episode.task.task_id}: the reference page did not render "
                    f"({reference.status}: {reference.error or 'no details'})"
                )
            episode.reference = reference
        return episode.reference

    def _info(self) -> dict[str, Any]:
        info = super()._info()
        episode = self._require_episode()
        assert isinstance(episode, _PageEpisode)
        info["has_page"] = episode.page_html is not None
        return info


def _check_weights(where: str, embedder: str) -> None:
    """A CLIP embedder's weights must be there when the env is made (never random weights, never a failure at the
    first score): one line naming the argument; the test embedder needs none and is only used when named."""
    kind, path = parse_embedder(embedder)
    if kind.startswith("clip"):
        try:
            resolve_clip_weights(path)
        except ConfigError as exc:
            raise ConfigError(f"{where}(embedder={embedder!r}): {exc}; embedder='test' scores offline tests") from None


class FrontendVectorEnv(ColbenchVectorEnv):
    """N ``FrontendEnv`` episodes stepped together (``gym.make_vec``; :mod:`colbench.env.vector`); pages render in
    the process's shared browser."""

    env_class = FrontendEnv
