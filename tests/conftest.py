"""Shared fixtures: the real ColBench sample (when ../shared is present) and one pooled local sandbox."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hub_cache
import pytest
from openai_stub import StubOpenAIServer
from paths import BUNDLED_SAMPLE, SHARED_DATA

from colbench.domains.backend.scorer import BackendScorer
from colbench.sandbox import taskenv
from colbench.sandbox.bwrap import BwrapSandbox
from colbench.sandbox.contract import Limits, Sandbox
from colbench.tasks import Task, load_jsonl


def pytest_configure(config: pytest.Config) -> None:
    """The task environment is installed data, not a cache: tests that give colbench a home of their own
    (``COLBENCH_HOME``) still score in the one the set-up built."""
    os.environ.setdefault(taskenv.LOCATION_ENV, str(taskenv.root()))


@pytest.fixture(scope="session")
def shared_backend_sample() -> list[Task]:
    path = SHARED_DATA / "backend_test_sample.jsonl"
    if not path.exists():
        pytest.skip(f"the ColBench sample is not present at {path} (../shared is only on development machines)")
    return load_jsonl(path)


@pytest.fixture(scope="session")
def bundled_tasks() -> list[Task]:
    return load_jsonl(BUNDLED_SAMPLE)


@pytest.fixture(scope="session")
def bwrap_sandbox() -> Iterator[BwrapSandbox]:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (the README's set-up command installs it)")
    sandbox = BwrapSandbox(workers=2, limits=Limits(timeout_s=3.0))
    yield sandbox
    sandbox.close()


@pytest.fixture(scope="session")
def docker_sandbox() -> Iterator[Sandbox]:
    """The Docker runtime; skipped (saying why) where no daemon answers or the image is not built."""
    from colbench.errors import ConfigError, SandboxError
    from colbench.sandbox.docker import DockerSandbox

    try:
        sandbox = DockerSandbox(workers=2, limits=Limits(timeout_s=3.0))
    except (SandboxError, ConfigError) as exc:
        pytest.skip(f"Docker runtime unavailable: {exc}")
    yield sandbox
    sandbox.close()


@pytest.fixture(params=[pytest.param("bwrap"), pytest.param("docker", marks=pytest.mark.docker)])
def any_sandbox(request: pytest.FixtureRequest) -> Sandbox:
    """Every runtime in turn: the conformance and attack suites run against each."""
    return request.getfixturevalue(f"{request.param}_sandbox")  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def scorer(bwrap_sandbox: BwrapSandbox) -> BackendScorer:
    return BackendScorer(bwrap_sandbox, limits=Limits(timeout_s=3.0))


@pytest.fixture(scope="session")
def exported_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded SmolLM2-135M-Instruct as a transformers directory, made once per session the way a user makes
    it: ``colbench model export-hf`` in a subprocess."""
    import subprocess
    import sys

    from local_model import INSTALLED

    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    if not INSTALLED:
        pytest.skip("the embedded model is not installed (the README's set-up command installs it)")
    out = tmp_path_factory.mktemp("export") / "smollm2"
    done = subprocess.run(
        [sys.executable, "-m", "colbench", "model", "export-hf", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out)
    return out


@pytest.fixture
def make_stub() -> Iterator[Callable[..., StubOpenAIServer]]:
    """Start local OpenAI-compatible stub servers (tests/openai_stub.py) with the given responder and options;
    every one started is stopped after the test."""
    started: list[StubOpenAIServer] = []

    def make(*args: Any, **kwargs: Any) -> StubOpenAIServer:
        server = StubOpenAIServer(*args, **kwargs).__enter__()
        started.append(server)
        return server

    yield make
    for server in reversed(started):
        server.__exit__(None, None, None)


@pytest.fixture
def stub(make_stub: Callable[..., StubOpenAIServer]) -> StubOpenAIServer:
    """One stub server with its default replies."""
    return make_stub()


@pytest.fixture
def offline_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The Hugging Face hub out of reach for the test (tests/hub_cache.py); colbench's home, returned."""
    return hub_cache.go_offline(tmp_path, monkeypatch)


@pytest.fixture
def hf_cache(tmp_path: Path) -> Path:
    """A Hugging Face cache folder of the test's own."""
    return hub_cache.empty_cache(tmp_path)
