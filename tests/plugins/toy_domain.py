"""A third domain, as an outside package would add one: guess a word with a human who knows it.

Everything a domain owns is here (schema, prompts, scorer, how results read) and nothing in colbench changes: the
test registers it with ``register_domain`` and ``gym.register``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from colbench.env.core import ColbenchEnv, Episode
from colbench.env.domain import Domain, Metrics, Score, ScoreOption, Scorer
from colbench.errors import DataError
from colbench.tasks import Task
from colbench.types.dialogue import Turn, after_marker


@dataclass(frozen=True)
class WordScore:
    """The Score protocol as plain fields: the scorer fills them in."""

    word: str
    reward: float
    success: bool | None
    judged: bool = True
    status: str = "ok"

    def result_row(self, task_id: str) -> dict[str, Any]:
        return {"task_id": task_id, "word": self.word, "right": self.success, "status": self.status}

    def details(self) -> dict[str, Any]:
        return {"word": self.word, "right": self.success}


class WordScorer:
    def __init__(self, fold_case: bool = True) -> None:
        self.fold_case = fold_case

    def score(self, task: Task, answer: str) -> WordScore:
        word, wanted = after_marker(answer).strip(), task.ground_truth.strip()
        if self.fold_case:
            word, wanted = word.lower(), wanted.lower()
        right = word == wanted
        return WordScore(word, float(right), right)

    def score_many(self, pairs: Sequence[tuple[Task, str]]) -> list[WordScore]:
        return [self.score(task, answer) for task, answer in pairs]

    def describe(self) -> dict[str, Any]:
        return {"scorer": "exact word"} if self.fold_case else {"scorer": "exact word, case-sensitive"}

    def close(self) -> None:
        pass


class ToyDomain(Domain):
    name = "toy"
    env_id = "Toy-v0"
    default_tasks = "toy-words"
    sample_tasks = "toy-words"
    metrics = Metrics(reward_label="right %", reward_name="right", has_success=True)
    score_help: ClassVar[str] = "score guessed words"
    score_options = (ScoreOption("case", "fold (Banana is banana) | exact", "fold", choices=("fold", "exact")),)

    def __init__(self) -> None:
        self.scorer = WordScorer()

    def claims(self, row: Mapping[str, Any]) -> bool:
        return False  # toy rows say so: {"domain": "toy", ...}

    def test_cases(self, row: Mapping[str, Any], where: str) -> tuple[tuple[str, str], ...]:
        if " " in str(row["ground_truth"]).strip():
            raise DataError(f"{where}: field 'ground_truth': a toy task's answer is one word")
        return ()

    def prompt_template(self, name: str) -> str:  # kept in code here; a real package could ship files
        return {
            "agent": "Guess the word in at most $max_turns turns. Hint: $problem_description",
            "simulator": "You think of the word $hidden_information; say it only when asked what it is.",
        }[name]

    def make_scorer(self, options: Mapping[str, Any], *, jobs: int | None = None) -> Scorer:
        return WordScorer(fold_case=options.get("case", "fold") == "fold")

    def shared_scorer(self, options: Mapping[str, Any]) -> Scorer:
        return self.scorer

    def unjudged(self, task_id: str, error: str) -> Score:
        return WordScore("", math.nan, None, judged=False, status="infra_error")

    def score_summary(self, scores: Sequence[Score], scorer: Scorer) -> str:
        return f"{sum(bool(s.success) for s in scores)}/{len(scores)} words right"


class ToyEnv(ColbenchEnv):
    domain_name = "toy"

    def _finish(self, episode: Episode, turn: Turn) -> tuple[float, dict[str, Any]]:
        score = self.scorer.score(episode.task, turn.text)
        return score.reward, {"score": score.details(), "success": score.success}


DOMAIN = ToyDomain()
