"""One task environment: task code runs with the same interpreter and libraries on every runtime, never the host's.

Answers that reach for a library (names numpy 2.0 removed, packages a host may have, standard modules some builds
lack) get the same verdict and the same values on bwrap and on Docker; both runtimes report one manifest, which the
probe run inside each sandbox sees exactly; nothing of the host's /usr, home, Python or site-packages is visible;
a machine without the task environment stops scoring with one line naming the set-up step.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from paths import REPO

from colbench.domains.backend.scorer import BackendScorer
from colbench.domains.backend.values import decode
from colbench.errors import SandboxError
from colbench.sandbox.bwrap import BwrapSandbox
from colbench.sandbox.contract import Limits, Sandbox
from colbench.sandbox.taskenv import LOCATION_ENV, MANIFEST_IN_ROOT, TaskEnvironment, installed, probe_source
from colbench.tasks.sources import load
from colbench.types.task import Task

# Each probe names what it reaches for; f() returns what it found, or the exception's type.
PROBES = {
    # names numpy 2.0 removed (agents trained on older code write them)
    "numpy.product": "import numpy as np\ndef f(xs):\n    return float(np.product(xs))",
    "numpy.NaN": "import numpy as np\ndef f(xs):\n    return bool(np.isnan(np.NaN))",
    "numpy.float_": "import numpy as np\ndef f(xs):\n    return float(np.float_(sum(xs)) / len(xs))",
    "numpy.alltrue": "import numpy as np\ndef f(xs):\n    return bool(np.alltrue(np.array(xs) > 0))",
    "numpy.asfarray": "import numpy as np\ndef f(xs):\n    return np.asfarray(xs).mean().item()",
    # packages a host may have installed
    **{
        name: f"import {name}\ndef f(xs):\n    return sum(xs) / len(xs)"
        for name in ("scipy", "pandas", "requests", "yaml", "torch", "pytest", "colbench", "openai", "pip")
    },
    # standard modules some builds lack or removed
    **{
        name: f"import {name}\ndef f(xs):\n    return sum(xs) / len(xs)"
        for name in ("distutils", "tkinter", "lzma", "sqlite3", "ssl", "readline", "curses", "ensurepip", "zoneinfo")
    },
    "zoneinfo data": (
        "import zoneinfo, datetime\n"
        "def f(xs):\n    return datetime.datetime(2024, 7, 1, tzinfo=zoneinfo.ZoneInfo('Europe/Paris')).utcoffset()"
    ),
    "versions": (
        "import sys, numpy, bs4\n"
        "def f(xs):\n    return (sys.version, numpy.__version__, bs4.__version__, sys.flags.no_site, sorted(sys.path))"
    ),
    # plain controls
    "mean": "def f(xs):\n    return sum(xs) / len(xs)",
    "statistics": "import statistics\ndef f(xs):\n    return statistics.fmean(xs)",
}
TESTS = ["f([1, 2, 3])", "f([2.5, 3.5])"]


def _seen(sandbox: Sandbox) -> dict[str, list[object]]:
    """Every probe's outcomes: the decoded value, or the outcome and the exception's type."""
    found = {}
    for name, code in PROBES.items():
        outcomes = sandbox.run_tests(code, TESTS, limits=Limits(timeout_s=20.0))
        found[name] = [
            decode(o.value) if o.outcome == "value" else (o.outcome, o.error.split(":")[0]) for o in outcomes
        ]
    return found


@pytest.mark.docker
def test_library_probing_answers_get_identical_verdicts_and_values_on_both_runtimes(
    bwrap_sandbox: Sandbox, docker_sandbox: Sandbox
) -> None:
    on_bwrap, on_docker = _seen(bwrap_sandbox), _seen(docker_sandbox)
    assert on_bwrap == on_docker
    # The probes found what the manifest says, and that decides verdicts: a removed name or an absent package fails.
    assert on_bwrap["numpy.product"] == [6.0, 8.75]  # numpy 1.24 still has it
    assert on_bwrap["scipy"][0] == ("raised", "builtins.ModuleNotFoundError")
    assert on_bwrap["colbench"][0] == ("raised", "builtins.ModuleNotFoundError")
    assert on_bwrap["mean"] == [2.0, 3.0]
    version, numpy, bs4, _, _ = on_bwrap["versions"][0]  # type: ignore[misc]
    environment = bwrap_sandbox.environment
    assert version == environment.manifest["python"]
    assert {"numpy": numpy, "beautifulsoup4": bs4}.items() <= environment.libraries.items()
    # The scorer's verdicts (against a reference that is the plain mean) agree answer by answer.
    task = Task(
        task_id="mean",
        domain="backend",
        problem_description="The mean of a list. The signature of the function is: def f(xs)",
        ground_truth="def f(xs):\n    return sum(xs) / len(xs)",
        hidden_information="def f(xs):\n    return sum(xs) / len(xs)",
        test_cases=tuple((f"test{i}", t) for i, t in enumerate(TESTS)),
    )
    verdicts = []
    for sandbox in (bwrap_sandbox, docker_sandbox):
        scorer = BackendScorer(sandbox, limits=Limits(timeout_s=20.0))
        scores = scorer.score_many([(task, f"I WANT TO ANSWER:\n{code}") for code in PROBES.values()])
        verdicts.append(
            {
                name: (s.tests_passed, s.taskenv, s.error, [t.detail for t in s.tests])
                for name, s in zip(PROBES, scores, strict=True)
            }
        )
    assert verdicts[0] == verdicts[1]


@pytest.mark.docker
def test_both_runtimes_report_one_task_environment_and_run_in_it(
    bwrap_sandbox: Sandbox, docker_sandbox: Sandbox
) -> None:
    assert bwrap_sandbox.environment.digest == docker_sandbox.environment.digest
    for sandbox in (bwrap_sandbox, docker_sandbox):
        seen = sandbox.run_program(probe_source())
        assert seen.ok, seen.stderr
        assert json.loads(seen.stdout) == dict(sandbox.environment.manifest)


def test_nothing_of_the_host_is_visible_from_inside_bwrap(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The harness runs from a virtualenv with a package of its own, a ``.pth`` hook and an installed colbench whose
    task data holds a reference: an answer sees none of it, nor the host's Python, home, /usr or the project."""
    pytest.importorskip("numpy")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "zz_colbench_probe.pth").write_text("import os; os.environ['COLBENCH_PTH_RAN'] = '1'\n")
    Path(purelib, "colbench_venv_only.py").write_text("VALUE = 42\n")
    secret = Path(purelib, "colbench_secret_tasks", "reference.py")
    secret.parent.mkdir()
    secret.write_text("def f(x):\n    return x * 1234567\n")
    # Marks in the host's home, /usr and /etc (the task environment has folders of those names: its own, not these).
    marks = [Path(where, f".colbench-host-mark-{uuid.uuid4().hex}") for where in (Path.home(), "/usr/local", "/etc")]
    for mark in marks:
        with contextlib.suppress(OSError):  # not root: /usr and /etc are not ours to mark
            mark.write_text("host")
    request.addfinalizer(lambda: [mark.unlink(missing_ok=True) for mark in marks])  # type: ignore[func-returns-value]
    host = sorted({sys.prefix, sys.base_prefix, purelib, str(REPO), *(str(m) for m in marks if m.exists())})
    assert len(host) >= 4
    answer = (
        "import importlib.util, os, sys\n"
        "def f():\n"
        f"    host = {host!r}\n"
        "    visible = [p for p in host if os.path.exists(p)]\n"
        "    found = [m for m in ('colbench_venv_only', 'colbench', 'colbench_secret_tasks')\n"
        "             if importlib.util.find_spec(m) is not None]\n"
        "    return (visible, found, os.environ.get('COLBENCH_PTH_RAN'), sys.prefix, sys.version)\n"
    )
    script = (
        "import json, os\n"
        "from colbench.domains.backend.values import decode\n"
        "from colbench.sandbox.bwrap import BwrapSandbox\n"
        "box = BwrapSandbox(workers=1)\n"
        f"out = box.run_tests({answer!r}, ['f()'])\n"
        "box.close()\n"
        "print(json.dumps([os.environ.get('COLBENCH_PTH_RAN'), out[0].outcome, out[0].error,\n"
        "                  list(decode(out[0].value)) if out[0].outcome == 'value' else None,\n"
        "                  box.environment.manifest['python']]))\n"
    )
    done = subprocess.run([str(python), "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    host_ran, outcome, error, value, python_of_taskenv = json.loads(done.stdout.strip().splitlines()[-1])
    assert host_ran == "1"  # the .pth does run in this interpreter's own start-up: the check means something
    assert (outcome, error) == ("value", "")
    visible, found, pth_ran, prefix, version = value
    assert visible == [] and found == [] and pth_ran is None
    assert prefix == "/usr" and version == python_of_taskenv


def test_without_the_task_environment_scoring_stops_with_one_line_naming_the_set_up_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOCATION_ENV, str(tmp_path / "absent"))
    with pytest.raises(SandboxError, match=r"colbench sandbox build") as raised:
        BwrapSandbox(workers=1)
    assert "\n" not in str(raised.value)
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"task_id": load("backend-sample")[0].task_id, "answer": "def f(): pass"}) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "colbench", "score", "backend", "--tasks", "backend-sample", "--answers", str(answers),
         "--out", str(tmp_path / "out.jsonl"), "--sandbox", "bwrap"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0 and not (tmp_path / "out.jsonl").exists()
    (line,) = [line for line in done.stderr.splitlines() if line.strip()]
    assert "task environment is not built" in line and "colbench sandbox build" in line


@pytest.mark.parametrize(
    ("manifest", "why"),
    [("{not json", "manifest is not JSON"), ('["python"]', "not a task environment manifest"), ("{}", "not a task")],
)
def test_a_damaged_task_environment_stops_scoring_with_one_line_naming_the_set_up_step(
    tmp_path: Path, manifest: str, why: str
) -> None:
    """A manifest that is not one, and an image whose label was damaged: one line each, never a host fallback."""
    (tmp_path / MANIFEST_IN_ROOT).parent.mkdir(parents=True)
    (tmp_path / MANIFEST_IN_ROOT).write_text(manifest)
    with pytest.raises(SandboxError, match=why) as raised:
        installed(tmp_path)
    assert "colbench sandbox build" in str(raised.value) and "\n" not in str(raised.value)
    with pytest.raises(SandboxError, match=r"carries a damaged .* label: run `colbench sandbox build`"):
        TaskEnvironment.from_label("not base64!", "colbench-sandbox:2")


def test_a_machine_without_docker_gets_the_same_task_environment_for_bwrap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The set-up's one build gives a machine without Docker the same root filesystem, unpacked for bwrap (here from
    the tarball the set-up cached; no Docker daemon answers)."""
    from colbench.sandbox import taskenv
    from colbench.sandbox.image import build_image

    here = taskenv.installed()
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setenv(LOCATION_ENV, str(tmp_path / "taskenv"))
    lines: list[str] = []
    made = build_image("offline", echo=lines.append)
    assert made == f"task environment {here.digest} at {tmp_path / 'taskenv'} (bwrap only)"
    assert any("no Docker daemon" in line for line in lines)
    sandbox = BwrapSandbox(workers=1)
    try:
        assert sandbox.environment.digest == here.digest
        seen = sandbox.run_program(probe_source())
        assert json.loads(seen.stdout) == dict(here.manifest)
    finally:
        sandbox.close()
