"""Where things are, for tests in any folder of tests/: the repository, the tests' own data, and ../shared (the
development machines' copy of the real ColBench sample; tests that need it skip, saying why, when it is absent)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
BUNDLED_SAMPLE = REPO / "tasks" / "samples" / "backend-sample.jsonl"
SHARED = REPO.parent / "shared"
SHARED_DATA = SHARED / "data" / "colbench"
