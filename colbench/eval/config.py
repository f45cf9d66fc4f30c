"""What ``colbench eval`` takes: one dataclass, shared by the driver and by the Ray actors that play its episodes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from colbench.eval.progress import ProgressMode
from colbench.llm.limits import EndpointLimits
from colbench.report.costs import Prices
from colbench.types.dialogue import MAX_TURNS


@dataclass
class EvalConfig:
    """Everything ``colbench eval`` takes. ``agent_options`` / ``simulator_options`` are endpoint fields
    (``base_url``, ``api_key``, ``temperature``, ``max_tokens``, ``extra_body``, ``timeout_s``, ``max_retries``, ...;
    a plug-in agent gets its ``agent_options`` as arguments; the frontend human also takes ``image_mode``).
    ``runtime`` notes go to run.json's ``runtime`` section (never compared on resume, never secrets)."""

    env_id: str
    agent: str
    simulator: str
    out: str | Path
    tasks: str | None = None  # a JSONL file or split name; None: the domain's default split
    limit: int | None = None  # the first N tasks, in file order
    trials: int = 1
    concurrency: int = 8
    resume: bool = False
    max_turns: int = MAX_TURNS
    sandbox: str = "auto"  # scoring option of the backend domain
    embedder: str = "clip"  # scoring option of the frontend domain
    leak_policy: str = "flag"  # what the env does with a human reply that leaks (colbench.types.leaks)
    agent_options: dict[str, Any] = field(default_factory=dict)
    simulator_options: dict[str, Any] = field(default_factory=dict)
    agent_limits: EndpointLimits = field(default_factory=EndpointLimits)
    simulator_limits: EndpointLimits = field(default_factory=EndpointLimits)
    max_consecutive_errors: int | None = None  # None: max(20, 2 * concurrency); 0: never stop
    progress: ProgressMode = "auto"
    prices: Prices | None = None  # the progress display's cost (--prices); None: colbench's list prices
    runtime: dict[str, Any] = field(default_factory=dict)
    # Ray (colbench.ray): None runs every episode in this process; "" connects as ``ray.init()`` does (RAY_ADDRESS,
    # or a cluster already running here, else a new one on this machine); otherwise the cluster's address.
    ray: str | None = None
    ray_workers: int | None = None  # episode actors on the cluster; None: one per colbench_sandbox unit, else node

    @property
    def scoring_options(self) -> dict[str, Any]:
        """What the domains' scorers read (each its own: backend ``sandbox``, frontend ``embedder``)."""
        return {"sandbox": self.sandbox, "embedder": self.embedder}
