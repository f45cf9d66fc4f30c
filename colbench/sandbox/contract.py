"""The sandbox contract shared by every runtime (bubblewrap and Docker).

Two operations, because scoring and conformance need different shapes:

* ``run_program`` runs one untrusted Python program with limits and returns an ``ExecResult`` (exit status,
  capped output, timeout/OOM flags): the generic primitive the conformance suite attacks.
* ``run_tests`` runs an untrusted module and then each call expression in a fresh process with its own time limit,
  returning one ``TestOutcome`` per expression. Outcomes carry *claims* (type-tagged JSON) that the host decodes
  and compares; nothing a test does inside the sandbox can decide that it passed. ``repeat=N`` runs the whole list
  N times, each run in processes of its own after a full clean-up (as N calls would, in one round trip), and
  returns the N runs' outcomes one after the other.
* ``run_calls`` runs batches of calls of sources of one trust (a task's reference and its mutants), each batch in
  one test process, each call in a fresh module held to a ``Budget`` that does not depend on the machine: the
  mutation audit, the augmenter and the generation gates judge thousands of calls, where a process per call would
  cost a fork each. One ``TestOutcome`` per batch, its value each source's outcomes, packed (``runner.py``'s
  batched calls; ``colbench/domains/backend/plus/calls.py`` reads them). An answer is never sent so: answers keep
  a process each (``run_tests``) and never share one with a reference.

A runtime raises ``SandboxError`` (an ``InfraError``) when it cannot run the job at all; everything the untrusted
code does to itself (crash, hang, kill its worker) becomes an outcome, never an exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from colbench._util.datafiles import data_path
from colbench.sandbox.taskenv import TaskEnvironment

# The whole environment untrusted code sees, in every runtime: no host variables (API keys!) ever reach it. The
# hash seed is fixed so every worker iterates sets of strings alike; one BLAS thread keeps forks safe.
SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "TZ": "UTC",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}

RUNNER_IN_SANDBOX = "/opt/colbench/runner.py"
# How every runtime starts the runner: no site start-up (no .pth file runs; the runner adds the package directories
# itself), no user site, no script directory on the path.
RUNNER_FLAGS = ("-S", "-s", "-P")


def runner_path() -> Path:
    """The in-sandbox runner (``sandbox/runner.py``), mounted read-only at ``RUNNER_IN_SANDBOX`` by every runtime,
    so it always matches this colbench."""
    return data_path("sandbox", "runner.py")


# Sandbox uids start here (runtimes take ranges above it): far from any real user's uid, so RLIMIT_NPROC counts
# only sandbox processes.
SANDBOX_UID_BASE = 1_500_000_000

# Trust domains: a worker process serves one pool for life (answers never run where references ran).
POOLS = ("answer", "reference")

Outcome = Literal["value", "raised", "timeout", "crashed", "too_large", "unserializable"]


@dataclass(frozen=True)
class Limits:
    """Per-test (or per-program) resource limits. Defaults suit ColBench functions with room to spare."""

    timeout_s: float = 5.0
    memory_mb: int = 1024
    max_processes: int = 32
    max_output_bytes: int = 1_000_000
    tmpfs_mb: int = 64


@dataclass(frozen=True)
class Budget:
    """Per-call limits of ``run_calls`` that do not depend on the machine (Python line events, call depth, the
    value's size), and the wall-clock backstop of a whole batch, set far above what they allow, so that a slow
    machine drops nothing a fast one keeps."""

    max_ops: int = 100_000
    max_depth: int = 200
    max_items: int = 10_000
    backstop_s: float = 60.0


Batch = Sequence[tuple[str, Sequence[str]]]
"""One ``run_calls`` batch: ``(source, calls)`` pairs run one after another in one test process."""


@dataclass(frozen=True)
class ExecResult:
    """What one sandboxed program did. ``exit_code`` is None after a timeout and 128+N for death by signal N
    (the shell's convention: the program runs under the sandbox's own init process)."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    truncated: bool
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class TestOutcome:
    """One call expression's result: ``value`` holds the type-tagged return value when ``outcome == "value"``."""

    outcome: Outcome
    value: Any = None
    error: str = ""
    seconds: float = 0.0


@runtime_checkable
class Sandbox(Protocol):
    name: str
    environment: TaskEnvironment  # what task code runs with here; its digest goes with every score

    def run_program(self, source: str, *, stdin: bytes = b"", limits: Limits | None = None) -> ExecResult: ...

    def run_tests(
        self,
        code: str,
        tests: Sequence[str],
        *,
        limits: Limits | None = None,
        seed: int = 0,
        pool: str = "answer",
        repeat: int = 1,
        shared_process: bool = False,
    ) -> list[TestOutcome]: ...

    def run_calls(
        self,
        batches: Sequence[Batch],
        *,
        budget: Budget,
        seed: int = 0,
        pool: str = "answer",
        cover: bool = False,
        scale: tuple[int, int, int] | None = None,
    ) -> list[TestOutcome]: ...

    def close(self) -> None: ...
