"""The sandbox image: its contract, both builds' files, ``colbench sandbox doctor``.

Tests marked ``docker`` need a Docker daemon and skip (saying why) without one. They expect the image to be built
already (``.ci/run`` runs ``colbench sandbox build`` before pytest); when the daemon answers but has no image, the
session fixture builds it once (``build_image("auto")``, the offline build on Linux with apt).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from paths import REPO

from colbench.cli.main import main as cli_main
from colbench.errors import ConfigError
from colbench.sandbox import image as sandbox_image
from colbench.sandbox import taskenv
from colbench.sandbox.doctor import doctor
from colbench.sandbox.image import IMAGE, LABEL_CONTRACT, LABEL_SANDBOX, PROBE_UID, build_image, run_argv
from colbench.sandbox.pool import outcome_of
from colbench.sandbox.taskenv import TaskEnvironment

SCRIPT = REPO / "sandbox" / "build-offline.sh"


# -- fixtures ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def docker_client() -> Any:
    try:
        import docker  # noqa: F401  (the optional extra)
    except ImportError:
        pytest.skip("the Docker SDK is not installed (pip install 'colbench[docker]')")
    if shutil.which("docker") is None:
        pytest.skip("the docker command is not installed")
    try:
        return sandbox_image.docker_client(timeout=5.0)
    except Exception as exc:
        pytest.skip(f"no Docker daemon answers: {exc}")


@pytest.fixture(scope="session")
def sandbox(docker_client: Any) -> str:
    """The sandbox image's name, built once per session if the daemon lacks it."""
    if not sandbox_image.image_present(docker_client):
        build_image("auto", echo=lambda line: None)
    assert sandbox_image.image_present(docker_client)
    return IMAGE


def run_in_image(image: str, code: str, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = ["docker", "run", "--rm", "--network", "none", *extra, image, "python3", "-s", "-P", "-c", code]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


# -- package data, no Docker needed ------------------------------------------------------------------------------
def test_image_files_are_the_sandbox_data_folder() -> None:
    names = {p.name for p in sandbox_image.image_files().iterdir()}
    assert {"Dockerfile", "build-offline.sh", "taskenv_probe.py"} <= names
    dockerfile = sandbox_image.image_files().joinpath("Dockerfile").read_text()
    # Debian's own packages, as the offline build installs, and the same manifest written in
    assert "debian:bookworm-slim" in dockerfile and "python3 python3-numpy python3-bs4" in dockerfile
    assert "taskenv_probe.py > /usr/share/colbench/taskenv.json" in dockerfile


def test_build_method_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sandbox_image.resolve_method("dockerfile") == "dockerfile"
    assert sandbox_image.resolve_method("offline") == "offline"
    monkeypatch.setenv("COLBENCH_SANDBOX_BUILD", "dockerfile")
    assert sandbox_image.resolve_method("auto") == "dockerfile"
    monkeypatch.setenv("COLBENCH_SANDBOX_BUILD", "offline")
    assert sandbox_image.resolve_method("auto") == "offline"
    monkeypatch.setenv("COLBENCH_SANDBOX_BUILD", "podman")
    with pytest.raises(ConfigError, match="COLBENCH_SANDBOX_BUILD"):
        sandbox_image.resolve_method("auto")
    with pytest.raises(ConfigError, match="unknown build method"):
        sandbox_image.resolve_method("nix")


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("awk") is None, reason="needs bash and awk")
def test_offline_build_reads_the_mirrors_from_apt_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(
        "# deb http://commented.example/debian bookworm main\n"
        "deb-src http://source.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://list.example/debian bookworm main contrib\n"
    )
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n"
        "# a comment inside a stanza must not end it\n"
        "URIs: http://disabled.example/debian\n"
        "Suites: bookworm-updates\n"
        "Components: main\n"
        "Enabled: no\n"
        "\n"
        "Types: deb deb-src\n"
        "URIs: http://deb822.example/debian\n"
        "Suites: bookworm bookworm-updates\n"
        "Components: main\n"
        "\n"
        "Types: deb\n"
        "URIs: http://security.example/debian-security http://other.example/\n"
        "Suites: bookworm-security\n"
        "Components: main\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLBENCH_")}
    env["COLBENCH_APT_ETC"] = str(tmp_path)

    def mirrors(**extra: str) -> dict[str, str]:
        done = subprocess.run(
            ["bash", str(SCRIPT), "--print-mirrors"],
            capture_output=True,
            text=True,
            env={**env, **extra},
            timeout=30,
            check=True,
        )
        return dict(line.split(" ", 1) for line in done.stdout.splitlines())

    assert mirrors() == {
        "main": "http://list.example/debian",
        "updates": "http://deb822.example/debian",
        "security": "http://security.example/debian-security",
    }
    assert mirrors(COLBENCH_DEBIAN_MIRROR="http://override.example/debian/") == {
        "main": "http://override.example/debian",
        "updates": "http://override.example/debian",
        "security": "http://security.example/debian-security",
    }
    assert mirrors(COLBENCH_DEBIAN_SECURITY_MIRROR="")["security"] == "none"
    (tmp_path / "sources.list").unlink()
    (tmp_path / "sources.list.d" / "debian.sources").unlink()
    assert mirrors()["main"] == "http://deb.debian.org/debian"


def test_doctor_without_a_daemon(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("docker", reason="the Docker SDK is not installed (pip install 'colbench[docker]')")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    checks = {c.name: c for c in doctor()}
    assert not checks["docker daemon"].ok and "not reachable" in checks["docker daemon"].detail
    assert "systemctl start docker" in checks["docker daemon"].fix
    assert not checks["sandbox image"].ok and checks["sandbox image"].detail.startswith("not checked")
    assert cli_main(["sandbox", "doctor"]) == 1
    out = capsys.readouterr().out
    assert "FAIL docker daemon: " in out and "     fix: start the daemon" in out


# -- the image ---------------------------------------------------------------------------------------------------
@pytest.mark.docker
def test_image_present_with_contract_labels(docker_client: Any, sandbox: str) -> None:
    labels = sandbox_image.image_labels(docker_client, sandbox)
    assert labels is not None
    assert labels[LABEL_SANDBOX] == "1" and labels[LABEL_CONTRACT] == "2"
    assert labels.get("org.colbench.build") in ("offline", "dockerfile")
    # its manifest is the one unpacked for the bwrap runtime: one tarball, one task environment
    environment = TaskEnvironment.from_label(labels["org.colbench.taskenv"], sandbox)
    assert environment.digest == taskenv.installed().digest
    assert not sandbox_image.image_present(docker_client, "colbench-sandbox:no-such-tag")


@pytest.mark.docker
def test_python_311_with_numpy_bs4_sqlite(sandbox: str) -> None:
    code = (
        "import json, os, sys, sqlite3, numpy, bs4\n"
        "print(json.dumps({'v': list(sys.version_info[:2]), 'exe': os.path.realpath('/usr/bin/python3'),"
        " 'sum': int(numpy.arange(4).sum()), 'soup': bs4.BeautifulSoup('<p>hi</p>', 'html.parser').p.text,"
        " 'sql': sqlite3.connect(':memory:').execute('select 41 + 1').fetchone()[0],"
        " 'opt': os.listdir('/opt/colbench'), 'uid': os.getuid(), 'hashseed': os.environ.get('PYTHONHASHSEED')}))"
    )
    done = run_in_image(sandbox, code, "--read-only", "--user", "1500000000:1500000000")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["v"] == [3, 11]
    assert "python3.11" in found["exe"]
    assert (found["sum"], found["soup"], found["sql"]) == (6, "hi", 42)
    assert found["opt"] == []
    assert found["uid"] == 1500000000  # a uid with no passwd entry works
    assert found["hashseed"] == "0"


@pytest.mark.docker
def test_no_network_with_network_none(sandbox: str) -> None:
    code = (
        "import os, socket\n"
        "print(sorted(os.listdir('/sys/class/net')))\n"
        "for host, port in (('1.1.1.1', 53), ('10.0.0.1', 80)):\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=2)\n"
        "        print('reached', host)\n"
        "    except OSError as exc:\n"
        "        print('blocked', exc.errno)\n"
        "try:\n"
        "    socket.getaddrinfo('deb.debian.org', 80)\n"
        "    print('resolved')\n"
        "except OSError:\n"
        "    print('no dns')\n"
    )
    done = run_in_image(sandbox, code)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "['lo']"
    assert all(line.startswith("blocked") for line in lines[1:3]), lines
    assert lines[3] == "no dns"


@pytest.mark.docker
def test_no_network_tools_needed_or_present(sandbox: str) -> None:
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--entrypoint", "sh", sandbox, "-c",
         "for t in curl wget nc ping ssh; do command -v $t; done; true"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


@pytest.mark.docker
def test_runner_protocol_under_the_docker_hardening(sandbox: str) -> None:
    job = {
        "id": 7,
        "code": "import numpy, os\ndef f(x):\n    return int(numpy.sum(x))",
        "tests": ["f([1,2,3])", "os.getuid()", "open('/opt/colbench/x', 'w')", "__import__('time').sleep(10)"],
        "timeout": 2,
        "memory_mb": 512,
        "max_processes": 32,
        "seed": 0,
        "max_bytes": 1_000_000,
    }
    done = subprocess.run(
        run_argv(sandbox), input=json.dumps(job) + "\n", capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0] == {"ready": True}
    results = {m["i"]: outcome_of(m) for m in lines[1:-1]}
    assert lines[-1] == {"id": 7, "done": True}
    assert results[0].outcome == "value" and results[0].value == {"t": "int", "v": "6"}
    assert results[1].value == {"t": "int", "v": format(PROBE_UID + 1, "x")}  # the tests' own uid
    assert results[2].outcome == "raised" and "Read-only file system" in results[2].error
    assert results[3].outcome == "timeout"


@pytest.mark.docker
def test_doctor_reports_all_ok(sandbox: str, capsys: pytest.CaptureFixture[str]) -> None:
    checks = doctor(sandbox)
    required = [c for c in checks if c.required]
    assert {c.name for c in required} >= {
        "docker daemon",
        "resource limits",
        "sandbox image",
        "image contract",
        "runner in image",
    }
    assert all(c.ok for c in required), [c for c in required if not c.ok]
    assert cli_main(["sandbox", "doctor"]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out and "OK   runner in image: " in out
    digest = taskenv.installed().digest
    assert f"OK   task environment (bwrap): {digest}: Python 3.11" in out
    assert f"OK   task environment (docker): {digest}: Python 3.11" in out


@pytest.mark.docker
def test_build_is_idempotent_and_fast_when_cached(sandbox: str, docker_client: Any) -> None:
    labels = sandbox_image.image_labels(docker_client, sandbox)
    assert labels is not None
    if labels.get("org.colbench.build") != "offline":
        pytest.skip("the image here comes from the Dockerfile build")
    before = docker_client.images.get(sandbox).id
    lines: list[str] = []
    made = build_image("offline", echo=lines.append)
    assert made == f"task environment {taskenv.installed().digest} at {taskenv.root()} and {sandbox}"
    assert sum("up to date" in line for line in lines) == 2, lines  # the bwrap root and the image alike
    assert docker_client.images.get(sandbox).id == before


@pytest.mark.docker
def test_doctor_says_how_to_build_a_missing_image(docker_client: Any) -> None:
    checks = {c.name: c for c in doctor("colbench-sandbox:test-absent")}
    assert not checks["sandbox image"].ok
    assert checks["sandbox image"].fix == "run: colbench sandbox build"
    assert not checks["runner in image"].ok
