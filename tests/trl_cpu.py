"""TRL on the CPU, as the integration tests train: a ``GRPOConfig`` for a short seeded run."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def cpu_grpo_config(output_dir: Path, **settings: Any) -> Any:
    """TRL's ``GRPOConfig`` for a test run on the CPU: 2 steps of groups of 2, lr 1e-6, a log line per step, no
    checkpoints or reports, seeded, float32; ``settings`` add others or change these."""
    from trl import GRPOConfig

    defaults: dict[str, Any] = {
        "max_steps": 2,
        "num_generations": 2,
        "learning_rate": 1e-6,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "use_cpu": True,
        "bf16": False,  # TRL defaults to bf16, whose CPU matmuls are very slow without AVX512-BF16
        "seed": 0,
    }
    return GRPOConfig(output_dir=str(output_dir), **{**defaults, **settings})
