"""colbench: ColBench as Gymnasium environments with sandboxed, unhackable scoring.

Importing the package registers the environments, so ``gym.make("ColBench-Backend-v1")`` works after
``import colbench`` and ``gym.make("colbench:ColBench-Backend-v1")`` works without it. The names below are the
public API (docs/api.md); each is imported on first use, so ``import colbench`` (and any submodule) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from colbench._util.lazy import lazy_exports
from colbench.env.registration import register_envs

if TYPE_CHECKING:
    from colbench.domains.backend.env import BackendEnv, BackendVectorEnv
    from colbench.domains.frontend.env import FrontendEnv, FrontendVectorEnv
    from colbench.env.core import ColbenchEnv, Transcript
    from colbench.env.dataset import prompt_dataset, prompt_rows
    from colbench.env.domain import Domain, get_domain
    from colbench.env.human import HumanEnv, HumanVectorEnv
    from colbench.env.registration import env_ids
    from colbench.env.tokens import TokenizedEpisode, TurnSpan, tokenize_chat, tokenize_transcript
    from colbench.env.vector import ColbenchVectorEnv
    from colbench.errors import ColbenchError, ConfigError, DataError, InfraError, LLMError, SandboxError
    from colbench.runs.rescore import RescoreResult, rescore, rescore_answers
    from colbench.tasks import get_task, iter_tasks, known_splits, load, register_domain
    from colbench.types.task import Task

from colbench._util.version import __version__ as __version__

_HOME = {
    # envs (gym.make("ColBench-Backend-v1") is the usual way in; the classes are for subclassing and typing)
    "ColbenchEnv": "colbench.env.core",
    "Transcript": "colbench.env.core",
    "BackendEnv": "colbench.domains.backend.env",
    "BackendVectorEnv": "colbench.domains.backend.env",
    "FrontendEnv": "colbench.domains.frontend.env",
    "FrontendVectorEnv": "colbench.domains.frontend.env",
    "HumanEnv": "colbench.env.human",
    "HumanVectorEnv": "colbench.env.human",
    "ColbenchVectorEnv": "colbench.env.vector",
    "env_ids": "colbench.env.registration",
    # domains
    "Domain": "colbench.env.domain",
    "get_domain": "colbench.env.domain",
    "register_domain": "colbench.tasks",
    # tasks and trainer data
    "Task": "colbench.types.task",
    "load": "colbench.tasks",
    "get_task": "colbench.tasks",
    "iter_tasks": "colbench.tasks",
    "known_splits": "colbench.tasks",
    "prompt_dataset": "colbench.env.dataset",
    "prompt_rows": "colbench.env.dataset",
    # scores under another env id: a run directory's answers, or answers in memory
    "rescore": "colbench.runs.rescore",
    "rescore_answers": "colbench.runs.rescore",
    "RescoreResult": "colbench.runs.rescore",
    # token export with the learner's mask
    "tokenize_chat": "colbench.env.tokens",
    "tokenize_transcript": "colbench.env.tokens",
    "TokenizedEpisode": "colbench.env.tokens",
    "TurnSpan": "colbench.env.tokens",
    # errors
    "ColbenchError": "colbench.errors",
    "ConfigError": "colbench.errors",
    "DataError": "colbench.errors",
    "InfraError": "colbench.errors",
    "LLMError": "colbench.errors",
    "SandboxError": "colbench.errors",
}

__all__ = [
    "BackendEnv",
    "BackendVectorEnv",
    "ColbenchEnv",
    "ColbenchError",
    "ColbenchVectorEnv",
    "ConfigError",
    "DataError",
    "Domain",
    "FrontendEnv",
    "FrontendVectorEnv",
    "HumanEnv",
    "HumanVectorEnv",
    "InfraError",
    "LLMError",
    "RescoreResult",
    "SandboxError",
    "Task",
    "TokenizedEpisode",
    "Transcript",
    "TurnSpan",
    "env_ids",
    "get_domain",
    "get_task",
    "iter_tasks",
    "known_splits",
    "load",
    "prompt_dataset",
    "prompt_rows",
    "register_domain",
    "rescore",
    "rescore_answers",
    "tokenize_chat",
    "tokenize_transcript",
]


__getattr__, __dir__ = lazy_exports("colbench", _HOME, globals())


register_envs()
