"""The bwrap runtime: bubblewrap namespaces + rlimits + unprivileged uids, with warm workers.

Isolation per worker: new PID, network (loopback only, nothing else reachable), IPC and UTS namespaces; a root
filesystem made of read-only binds of the task environment's (``taskenv.py``: the same Debian root, interpreter and
libraries as the Docker image; nothing of the host's ``/usr``, home, Python or project); a private size-capped
``/tmp``; an empty environment. When the harness runs as root, each worker
slot has two uids of its own (``UID_BASE + 2 * slot`` for the runner, the next one for its tests, offset by a block
no other pool on the machine holds: ``pool.claim_uid_block``), so
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
import logging
import os
import queue
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any, TypeVar

from colbench.errors import SandboxError
from colbench.sandbox import contract, taskenv
from colbench.sandbox.contract import ExecResult, Limits
from colbench.sandbox.pool import Worker, WorkerPool, default_workers

log = logging.getLogger(__name__)

UID_BASE = contract.SANDBOX_UID_BASE
_T = TypeVar("_T")


def _root_binds(rootfs: Path) -> list[str]:
    """The task environment's top-level entries, bound read-only (its symbolic links made again), so the sandbox
    sees the same tree as a container of the image; ``/proc``, ``/dev``, ``/tmp``, ``/sys`` and ``/opt`` are the
    runtime's own."""
    argv: list[str] = []
    for entry in sorted(os.scandir(rootfs), key=lambda e: e.name):
        if entry.name in taskenv.MOUNTED_BY_RUNTIME:
            continue
        if entry.is_symlink():
            argv += ["--symlink", os.readlink(entry.path), f"/{entry.name}"]
        elif entry.is_dir():
            argv += ["--ro-bind", entry.path, f"/{entry.name}"]
    return argv


def bwrap_argv(*, as_root: bool, limits: Limits, rootfs: Path) -> list[str]:
    """The bubblewrap command line that builds one sandbox over the task environment at ``rootfs``; the runner
    command follows it."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxError("bubblewrap (bwrap) not found: install it (Debian/Ubuntu: apt-get install bubblewrap)")
    argv = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not as_root:
        argv += ["--unshare-user", "--uid", "65534", "--gid", "65534"]
    argv += ["--die-with-parent", "--new-session", *_root_binds(rootfs)]
    argv += ["--proc", "/proc", "--dev", "/dev", "--dir", "/sys"]
    argv += ["--perms", "1777", "--size", str(limits.tmpfs_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    runner_dir = os.path.dirname(contract.RUNNER_IN_SANDBOX)
    argv += ["--perms", "0755", "--dir", "/opt", "--perms", "0755", "--dir", runner_dir]
    argv += ["--ro-bind", str(contract.runner_path()), contract.RUNNER_IN_SANDBOX]
    argv += ["--clearenv"]
    for key, value in contract.SANDBOX_ENV.items():
        argv += ["--setenv", key, value]
    # -s -P rather than -I: isolated mode would also ignore PYTHONHASHSEED, and every worker must hash strings
    # alike (set order is part of many return values). The environment is ours alone (--clearenv). -S: no .pth
    # file runs in the runner; it puts the interpreter's package directories on its path itself (runner.py).
    return [*argv, "--chdir", "/tmp", "--", "/usr/bin/python3", *contract.RUNNER_FLAGS, contract.RUNNER_IN_SANDBOX]


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


class _Spawner:
    """Starts worker processes from one thread that lives as long as this process.

    ``--die-with-parent`` is ``PR_SET_PDEATHSIG``, which fires when the *thread* that started bubblewrap ends, not
    its process: a worker started from a scoring thread (a ``ThreadPoolExecutor``'s, as in ``score_many``) would be
    killed when that thread ends, and the next job would wait for a new one. Started from this daemon thread, a
    worker still dies with the harness, and only then.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def _serve(self) -> None:
        while True:
            call, done = self._requests.get()
            if done.set_running_or_notify_cancel():
                try:
                    done.set_result(call())
                except BaseException as exc:
                    done.set_exception(exc)

    def run(self, call: Callable[[], _T]) -> _T:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="colbench-bwrap-spawner", daemon=True)
                self._thread.start()
        done: Future[_T] = Future()
        self._requests.put((call, done))
        return done.result()


_spawner = _Spawner()


class _ProcessWorker(Worker):
    """A bubblewrap'd runner process, spoken to over pipes."""

    def __init__(self, argv: list[str]) -> None:
        super().__init__()
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the worker; closed in kill())
        try:
            self.proc = _spawner.run(
                lambda: subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, close_fds=True
                )
            )
        except OSError as exc:
            self._stderr.close()
            raise SandboxError(f"cannot start sandbox worker {argv[0]}: {exc}") from exc
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self._in, self._out = self.proc.stdin, self.proc.stdout.fileno()
        self.handshake()

    def _send(self, data: bytes) -> None:
        self._in.write(data)
        self._in.flush()

    def _recv(self, timeout: float) -> bytes | None:
        ready, _, _ = select.select([self._out], [], [], timeout)
        return os.read(self._out, 1 << 16) if ready else None

    def stderr_tail(self) -> str:
        try:
            self._stderr.seek(0)
            return self._stderr.read()[-2000:].decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        # Closing stdin ends the runner's loop; every process then exits and is reaped in order. SIGKILL on the
        # outer bubblewrap instead orphans its in-namespace init, which only the host's PID 1 can reap.
        with contextlib.suppress(OSError):
            self._in.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self.kill()

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


class BwrapSandbox(WorkerPool):
    """Bubblewrap runtime with a pool of warm workers (at most ``workers`` jobs run at once; default: one more than
    the CPUs)."""

    name = "bwrap"

    def __init__(self, *, workers: int | None = None, limits: Limits | None = None) -> None:
        super().__init__(workers=workers or default_workers(), limits=limits or Limits())
        self.as_root = os.geteuid() == 0
        if not self.as_root:
            log.warning(
                "bwrap sandbox running without root: tests share your uid, so process limits count your own "
                "processes and a test can signal its runner (which costs only that test); run as root for full "
                "isolation"
            )
        self.environment = taskenv.installed()
        if self.as_root:
            self._claim_uids(self.name)
        self._argv = bwrap_argv(as_root=self.as_root, limits=self.limits, rootfs=taskenv.root())

    def _uid(self, slot: int) -> int | None:
        """The runner's uid for ``slot`` (its tests run as the next uid); None outside root mode."""
        return UID_BASE + self._uid_offset + 2 * slot if self.as_root else None

    def _argv_for(self, uid: int | None, extra: Sequence[str] = ()) -> list[str]:
        argv = [*self._argv, *extra]
        if uid is not None:
            argv += ["--drop-to", str(uid)]
        return argv

    def _max_processes(self, limits: Limits) -> int:
        # Outside root mode RLIMIT_NPROC counts every process of the user, not just the test's.
        return limits.max_processes + (0 if self.as_root else _own_process_count())

    def _start_worker(self, slot: int) -> Worker:
        uid = self._uid(slot)
        extra = ["--sandboxed"]
        if uid is not None:
            # Runner and tests get different uids, so a test cannot signal or inspect its runner.
            extra += ["--child-uid", str(uid + 1)]
        return _ProcessWorker(self._argv_for(uid, extra))

    def _run_program(self, source: str, stdin: bytes, limits: Limits, slot: int) -> ExecResult:
        uid = self._uid(slot)
        payload = self._program_input(source, stdin, limits)
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


def _read_capped(handle: IO[bytes], cap: int) -> tuple[bytes, bool]:
    handle.seek(0)
    data = handle.read(cap + 1)
    return data[:cap], len(data) > cap
