"""The local runtime: bubblewrap namespaces + rlimits + unprivileged uids, with warm workers.

Isolation per worker: new PID, network (loopback only, nothing else reachable), IPC and UTS namespaces; a root
filesystem made of read-only binds of ``/usr`` and the Python installation only (no ``/etc``, ``/home``, ``/root``
or the project); a private size-capped ``/tmp``; an empty environment. When the harness runs as root, each worker
slot has two uids of its own (``UID_BASE + 2 * slot`` for the runner, the next one for its tests), so
``RLIMIT_NPROC`` bounds that worker alone and a test can neither signal nor inspect its runner; as an ordinary user
the sandbox runs in a user namespace with one uid, and the process limit is shared with the user's other processes
(weaker, and said so in a warning).

Warm workers: the in-sandbox runner forks a fresh child per test, so a worker serves many jobs without any job
seeing another's processes, files or memory (see ``runner.py``). A worker that dies, hangs or misbehaves is
discarded; the tests it had not reported are re-run one job each, so an answer that kills its worker only fails its
own test. Workers belong to one pool for life: reference runs and answer runs never share a process, so an answer
cannot find a reference's code or outputs in memory it inherited from its worker.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from colbench.errors import SandboxError
from colbench.sandbox.base import POOLS, ExecResult, Limits, TestOutcome

log = logging.getLogger(__name__)

RUNNER = Path(__file__).with_name("runner.py")
RUNNER_IN_SANDBOX = "/opt/colbench/runner.py"
UID_BASE = 1_500_000_000
HANDSHAKE_S = 60.0
# The runner reports each test within its time limit plus cleanup; a silent worker (stopped, wedged) is dead.
REPORT_GRACE_S = 5.0
MAX_LINE = 4 * 1024 * 1024
ENV = {
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


class _WorkerDied(Exception):
    """The worker stopped answering after its handshake: caused by the job it was running."""


def _python_roots() -> list[str]:
    """Directories the sandboxed interpreter needs, minus those already under /usr."""
    paths = {sys.base_prefix, sys.prefix, sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    roots: list[str] = []
    for p in sorted(os.path.realpath(x) for x in paths):
        if p.startswith("/usr/") or any(p == r or p.startswith(r + "/") for r in roots):
            continue
        roots.append(p)
    return roots


def bwrap_argv(*, as_root: bool, limits: Limits) -> list[str]:
    """The bubblewrap command line that builds one sandbox; the runner command follows it."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxError("bubblewrap (bwrap) not found: install it (Debian/Ubuntu: apt-get install bubblewrap)")
    argv = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not as_root:
        argv += ["--unshare-user", "--uid", "65534", "--gid", "65534"]
    argv += ["--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    made: set[str] = set()
    for root in [*_python_roots(), os.path.dirname(RUNNER_IN_SANDBOX)]:
        parts = Path(root).parts
        for i in range(2, len(parts)):
            parent = str(Path(*parts[:i]))
            if parent not in made:
                made.add(parent)
                argv += ["--perms", "0755", "--dir", parent]
    for root in _python_roots():
        argv += ["--ro-bind", root, root]
    argv += ["--ro-bind", str(RUNNER), RUNNER_IN_SANDBOX]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--perms", "1777", "--size", str(limits.tmpfs_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    argv += ["--clearenv"]
    for key, value in ENV.items():
        argv += ["--setenv", key, value]
    # -s -P rather than -I: isolated mode would also ignore PYTHONHASHSEED, and every worker must hash strings
    # alike (set order is part of many return values). The environment is ours alone (--clearenv).
    argv += ["--chdir", "/tmp", "--", sys.executable, "-s", "-P", RUNNER_IN_SANDBOX]
    return argv


def _own_process_count() -> int:
    uid = os.getuid()
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


class _Worker:
    """One warm sandbox: a bubblewrap'd runner process speaking JSON lines over pipes."""

    def __init__(self, argv: list[str]) -> None:
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the worker; closed in kill())
        try:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, close_fds=True
            )
        except OSError as exc:
            self._stderr.close()
            raise SandboxError(f"cannot start sandbox worker {argv[0]}: {exc}") from exc
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self._out = self.proc.stdout.fileno()
        self._buf = b""
        try:
            hello = self._read_line(time.monotonic() + HANDSHAKE_S)
        except _WorkerDied:
            hello = None
        if hello != {"ready": True}:
            detail = self.stderr_tail() or f"no handshake (got {hello!r})"
            self.kill()
            raise SandboxError(f"sandbox worker failed to start: {detail}")

    def stderr_tail(self) -> str:
        try:
            self._stderr.seek(0)
            return self._stderr.read()[-2000:].decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""

    def _read_line(self, deadline: float) -> Any:
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _WorkerDied("worker did not answer in time")
            ready, _, _ = select.select([self._out], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._out, 1 << 16)
            if not chunk:
                raise _WorkerDied("worker exited")
            self._buf += chunk
            if len(self._buf) > MAX_LINE:
                raise _WorkerDied("worker sent an oversized line")
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError as exc:
            raise _WorkerDied("worker sent malformed output") from exc

    def run(self, job: dict[str, Any], results: dict[int, TestOutcome], deadline: float) -> None:
        """Send one job; fill ``results`` as outcomes arrive so a death mid-job keeps what finished."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode("utf-8"))
            self.proc.stdin.flush()
        except OSError as exc:
            raise _WorkerDied("worker stdin closed") from exc
        while True:
            msg = self._read_line(min(deadline, time.monotonic() + job["timeout"] + REPORT_GRACE_S))
            if not isinstance(msg, dict) or msg.get("id") != job["id"]:
                raise _WorkerDied(f"worker answered out of protocol: {str(msg)[:200]}")
            if msg.get("done"):
                if len(results) < len(job["tests"]):
                    raise _WorkerDied("worker finished a job without reporting every test")
                return
            i = msg.get("i")
            if not isinstance(i, int) or not 0 <= i < len(job["tests"]):
                raise _WorkerDied("worker reported an unknown test index")
            results[i] = TestOutcome(
                outcome=msg.get("outcome", "crashed"),
                value=msg.get("value"),
                error=str(msg.get("error", ""))[:500],
                seconds=float(msg.get("seconds", 0.0)),
            )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.warning("sandbox worker %d did not exit after SIGKILL", self.proc.pid)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._stderr.close()


class LocalSandbox:
    """Bubblewrap runtime with a pool of warm workers (at most ``workers`` run at once)."""

    name = "local"

    def __init__(self, *, workers: int | None = None, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.as_root = os.geteuid() == 0
        if not self.as_root:
            log.warning(
                "local sandbox running without root: tests share your uid, so process limits count your own "
                "processes and a test can signal its runner (which costs only that test); run as root for full "
                "isolation"
            )
        self._argv = bwrap_argv(as_root=self.as_root, limits=self.limits)
        self._idle: dict[str, queue.LifoQueue[_Worker]] = {p: queue.LifoQueue() for p in POOLS}
        # Each pool (and one-shot programs) has its own slots, hence its own uids; a semaphore keeps the number of
        # jobs running at once to ``workers``, while idle workers of both pools stay warm.
        self._slots: dict[str, queue.Queue[int]] = {}
        for index, name in enumerate((*POOLS, "program")):
            self._slots[name] = queue.Queue()
            for slot in range(index * self.workers, (index + 1) * self.workers):
                self._slots[name].put(slot)
        self._running = threading.BoundedSemaphore(self.workers)
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._all: set[_Worker] = set()
        self._closed = False

    # -- workers -----------------------------------------------------------------------------------------------
    def _argv_for(self, uid: int | None, extra: Sequence[str] = ()) -> list[str]:
        argv = [*self._argv, *extra]
        if uid is not None:
            argv += ["--drop-to", str(uid)]
        return argv

    def _uid(self, slot: int) -> int | None:
        """The runner's uid for ``slot`` (its tests run as the next uid); None outside root mode."""
        return UID_BASE + 2 * slot if self.as_root else None

    def _spawn(self, pool: str, slot: int) -> _Worker:
        uid = self._uid(slot)
        extra = ["--sandboxed"]
        if uid is not None:
            # Runner and tests get different uids, so a test cannot signal or inspect its runner.
            extra += ["--child-uid", str(uid + 1)]
        worker = _Worker(self._argv_for(uid, extra))
        worker.pool, worker.slot = pool, slot  # type: ignore[attr-defined]
        with self._lock:
            self._all.add(worker)
        return worker

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            self._all.discard(worker)
        self._slots[worker.pool].put(worker.slot)  # type: ignore[attr-defined]

    def _acquire(self, pool: str) -> _Worker:
        """An idle worker of ``pool``, else a new one (the caller holds a ``_running`` permit, so a slot is free)."""
        if self._closed:
            raise SandboxError("sandbox is closed")
        while True:
            try:
                worker = self._idle[pool].get_nowait()
            except queue.Empty:
                slot = self._slots[pool].get()
                try:
                    return self._spawn(pool, slot)
                except BaseException:
                    self._slots[pool].put(slot)
                    raise
            if worker.alive():
                return worker
            self._discard(worker)

    def _job(self, code: str, tests: Sequence[str], limits: Limits, seed: int) -> dict[str, Any]:
        max_procs = limits.max_processes
        if not self.as_root:
            max_procs += _own_process_count()
        return {
            "id": next(self._ids),
            "code": code,
            "tests": list(tests),
            "timeout": limits.timeout_s,
            "memory_mb": limits.memory_mb,
            "max_processes": max_procs,
            "seed": seed,
            "max_bytes": limits.max_output_bytes,
        }

    def _run_on_worker(self, job: dict[str, Any], results: dict[int, TestOutcome], pool: str) -> bool:
        """Run ``job`` on a worker of ``pool``; False when the worker died (it is discarded)."""
        with self._running:
            return self._run_with_permit(job, results, pool)

    def _run_with_permit(self, job: dict[str, Any], results: dict[int, TestOutcome], pool: str) -> bool:
        worker = self._acquire(pool)
        deadline = time.monotonic() + len(job["tests"]) * (job["timeout"] + 2.0) + 10.0
        try:
            worker.run(job, results, deadline)
        except _WorkerDied as exc:
            log.info("sandbox worker died during job %s: %s", job["id"], exc)
            self._discard(worker)
            return False
        except BaseException:
            self._discard(worker)
            raise
        self._idle[pool].put(worker)
        return True

    # -- the Sandbox protocol ------------------------------------------------------------------------------------
    def run_tests(
        self, code: str, tests: Sequence[str], *, limits: Limits | None = None, seed: int = 0, pool: str = "answer"
    ) -> list[TestOutcome]:
        if pool not in POOLS:
            raise ValueError(f"unknown pool {pool!r}; expected one of {POOLS}")
        limits = limits or self.limits
        results: dict[int, TestOutcome] = {}
        if not self._run_on_worker(self._job(code, tests, limits, seed), results, pool):
            # The worker died: re-run each unreported test alone, so only the test that kills its worker fails.
            for i in range(len(tests)):
                if i in results:
                    continue
                single: dict[int, TestOutcome] = {}
                if self._run_on_worker(self._job(code, [tests[i]], limits, seed), single, pool) and 0 in single:
                    results[i] = single[0]
                else:
                    results[i] = TestOutcome("crashed", error="the test killed its sandbox worker")
        return [results[i] for i in range(len(tests))]

    def run_program(self, source: str, *, stdin: bytes = b"", limits: Limits | None = None) -> ExecResult:
        limits = limits or self.limits
        slot = self._slots["program"].get()
        try:
            return self._run_program(source, stdin, limits, self._uid(slot))
        finally:
            self._slots["program"].put(slot)

    def _run_program(self, source: str, stdin: bytes, limits: Limits, uid: int | None) -> ExecResult:
        max_procs = limits.max_processes + (0 if self.as_root else _own_process_count())
        header = {
            "source": source,
            "timeout": limits.timeout_s,
            "memory_mb": limits.memory_mb,
            "max_processes": max_procs,
        }
        payload = (json.dumps(header) + "\n").encode("utf-8") + stdin
        started = time.monotonic()
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            try:
                proc = subprocess.Popen(
                    self._argv_for(uid, ["--program"]), stdin=subprocess.PIPE, stdout=out, stderr=err
                )
            except OSError as exc:
                raise SandboxError(f"cannot start sandbox: {exc}") from exc
            timed_out = False
            try:
                proc.communicate(payload, timeout=limits.timeout_s + 0.5)
            except subprocess.TimeoutExpired:
                timed_out = True
                proc.kill()
                proc.wait()
            except BrokenPipeError:
                proc.wait()
            duration = time.monotonic() - started
            # The CPU rlimit (a backstop one second past the wall limit) kills with SIGXCPU or SIGKILL.
            if proc.returncode in (128 + signal.SIGKILL, 128 + signal.SIGXCPU) and duration >= limits.timeout_s:
                timed_out = True
            stdout, cut_out = _read_capped(out, limits.max_output_bytes)
            stderr, cut_err = _read_capped(err, limits.max_output_bytes)
        if proc.returncode == 1 and stderr.startswith(b"bwrap:"):
            raise SandboxError(f"sandbox failed to start: {stderr.decode('utf-8', 'replace').strip()}")
        return ExecResult(
            exit_code=None if timed_out else proc.returncode,
            stdout=stdout,
            stderr=stderr,
            timed_out=timed_out,
            truncated=cut_out or cut_err,
            duration_s=duration,
        )

    def close(self) -> None:
        self._closed = True
        with self._lock:
            workers = list(self._all)
            self._all.clear()
        for worker in workers:
            worker.kill()

    def __deepcopy__(self, memo: dict[int, Any]) -> LocalSandbox:
        # A sandbox is a shared service (Gymnasium deep-copies make() kwargs): copies share the same pool.
        return self

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_capped(handle: IO[bytes], cap: int) -> tuple[bytes, bool]:
    handle.seek(0)
    data = handle.read(cap + 1)
    return data[:cap], len(data) > cap
