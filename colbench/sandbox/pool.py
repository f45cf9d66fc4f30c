"""Warm runner workers and the pool that schedules jobs on them, whatever the runtime underneath.

A worker is one sandbox (a bubblewrap process tree, a container) running ``runner.py``, spoken to in JSON lines.
Runtimes only say how to start a worker and how to move bytes; the job protocol, deadlines, the two trust pools
and the recovery when a job kills its worker live here, once, so every runtime behaves the same.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import logging
import os
import queue
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from colbench.errors import SandboxError
from colbench.sandbox.contract import POOLS, Batch, Budget, ExecResult, Limits, TestOutcome
from colbench.sandbox.taskenv import TaskEnvironment

log = logging.getLogger(__name__)

HANDSHAKE_S = 60.0
# The runner reports each test within its time limit plus cleanup; a silent worker (stopped, wedged) is dead.
REPORT_GRACE_S = 5.0
MAX_LINE = 4 * 1024 * 1024


def default_workers() -> int:
    """The workers (jobs at once) a pool has unless told: one more than the CPUs, so they stay busy while jobs are
    handed between the harness, a runner and its test process (docs/sandbox.md has the measurement)."""
    return (os.cpu_count() or 1) + 1


# Each pool numbers its slots from 0, so its uids are offset by a block no other pool on this machine holds.
UID_BLOCK = 2_000  # uids per block: two a slot
UID_BLOCKS = 50  # blocks per runtime, within the 100,000 uids below its fat parents' (runner.py's PARENT_UID_OFFSET)
UID_LOCKS = os.path.join(tempfile.gettempdir(), "colbench-uid-blocks")


def claim_uid_block(runtime: str) -> tuple[int, int]:
    """The offset of a block of uids no other pool on this machine uses while this one lives, and the locked file
    descriptor that holds it (closed, or its process gone, the block is free again). RLIMIT_NPROC counts a uid's
    processes across the whole machine and each runner kills leftover tests by uid: two pools sharing uids (two
    processes scoring at once, two pytest workers, a second pool in one process) would share one process limit, and
    a test's fork could fail because of another pool's answer, a verdict that depends on what else runs."""
    if not os.path.isdir(UID_LOCKS):
        with contextlib.suppress(FileExistsError):
            os.mkdir(UID_LOCKS)
            os.chmod(UID_LOCKS, 0o1777)  # any user's pools claim blocks here (chmod: the umask is process-wide)
    for block in range(UID_BLOCKS):
        try:
            fd = _lock_file(os.path.join(UID_LOCKS, f"{runtime}-{block}"))
        except OSError as exc:
            raise SandboxError(f"cannot claim sandbox uids in {UID_LOCKS}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return block * UID_BLOCK, fd
    raise SandboxError(f"all {UID_BLOCKS} blocks of {runtime} sandbox uids are held by other pools on this machine")


def _lock_file(path: str) -> int:
    """``path`` opened read-only, made if missing, never through a link: a lock needs no more, and another user's
    file stays as it is."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    with contextlib.suppress(FileNotFoundError):
        return os.open(path, flags)
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:  # another pool made it first
        return os.open(path, flags)
    os.fchmod(fd, 0o644)  # readable by every user's pools, whatever this process's umask
    return fd


class WorkerDied(Exception):
    """The worker stopped answering after its handshake: caused by the job it was running."""


class Worker(ABC):
    """The JSON-lines side of one warm sandbox; subclasses move the bytes."""

    pool: str = ""
    slot: int = -1

    def __init__(self) -> None:
        self._buf = b""

    # -- transport ---------------------------------------------------------------------------------------------
    @abstractmethod
    def _send(self, data: bytes) -> None:
        """Write to the runner's stdin (raise OSError when it is gone)."""

    @abstractmethod
    def _recv(self, timeout: float) -> bytes | None:
        """Some stdout bytes; ``b""`` at end of stream; None when nothing came within ``timeout``."""

    @abstractmethod
    def alive(self) -> bool: ...

    @abstractmethod
    def kill(self) -> None: ...

    def stop(self) -> None:
        """End an idle worker politely (its runner exits at end of input); by default the same as ``kill``."""
        self.kill()

    @abstractmethod
    def stderr_tail(self) -> str: ...

    # -- protocol ----------------------------------------------------------------------------------------------
    def handshake(self) -> None:
        """Wait for the runner's ready line; a worker that never gets there is an infrastructure error."""
        try:
            hello = self._read_line(time.monotonic() + HANDSHAKE_S)
        except WorkerDied:
            hello = None
        if hello != {"ready": True}:
            detail = self.stderr_tail() or f"no handshake (got {hello!r})"
            self.kill()
            raise SandboxError(f"sandbox worker failed to start: {detail}")

    def _read_line(self, deadline: float) -> Any:
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerDied("worker did not answer in time")
            try:
                chunk = self._recv(left)
            except (OSError, ValueError) as exc:  # the transport was closed under us (the worker was killed)
                raise WorkerDied(f"worker connection lost: {exc}") from exc
            if chunk is None:
                continue
            if not chunk:
                raise WorkerDied("worker exited")
            self._buf += chunk
            if len(self._buf) > MAX_LINE:
                raise WorkerDied("worker sent an oversized line")
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError as exc:
            raise WorkerDied("worker sent malformed output") from exc

    def run(self, job: dict[str, Any], results: dict[int, TestOutcome], deadline: float) -> None:
        """Send one job; fill ``results`` as outcomes arrive so a death mid-job keeps what finished.

        Outcomes come one per message, or several in a message's ``results`` (a ``batch`` job); a ``repeat`` job
        reports ``len(tests) * repeat`` of them.
        """
        try:
            self._send((json.dumps(job) + "\n").encode("utf-8"))
        except (OSError, ValueError) as exc:
            raise WorkerDied("worker stdin closed") from exc
        expected = len(job["tests"]) * job.get("repeat", 1)
        while True:
            msg = self._read_line(min(deadline, time.monotonic() + job["timeout"] + REPORT_GRACE_S))
            if not isinstance(msg, dict) or msg.get("id") != job["id"]:
                raise WorkerDied(f"worker answered out of protocol: {str(msg)[:200]}")
            batch = msg.get("results")
            if batch is None:
                items = [] if msg.get("done") else [msg]
            elif isinstance(batch, list):
                items = batch
            else:
                raise WorkerDied("worker sent malformed results")
            for item in items:
                i = item.get("i") if isinstance(item, dict) else None
                if not isinstance(i, int) or not 0 <= i < expected:
                    raise WorkerDied("worker reported an unknown test index")
                results[i] = outcome_of(item)
            if msg.get("done"):
                if len(results) < expected:
                    raise WorkerDied("worker finished a job without reporting every test")
                return


def outcome_of(item: dict[str, Any]) -> TestOutcome:
    """One test's outcome from the runner. A value arrives as the test process's own JSON text (``value_json``),
    which the runner passes on undecoded: it is the test's claim, decoded here, and text that is no JSON value is
    an invalid result, as the runner reports any other malformed line."""
    outcome, value, error = item.get("outcome", "crashed"), None, str(item.get("error", ""))[:500]
    if outcome == "value":
        try:
            value = json.loads(item["value_json"])
        except (KeyError, TypeError, ValueError, RecursionError):
            outcome, error = "crashed", "test process sent an invalid result"
    return TestOutcome(outcome=outcome, value=value, error=error, seconds=float(item.get("seconds", 0.0)))


class WorkerPool(ABC):
    """At most ``workers`` jobs at once on warm workers; each pool (and one-shot programs) has its own slots."""

    name = ""
    environment: TaskEnvironment  # set by each runtime from its own root filesystem (taskenv.py)

    def __init__(self, *, workers: int, limits: Limits) -> None:
        self.limits = limits
        self.workers = max(1, workers)
        self._idle: dict[str, queue.LifoQueue[Worker]] = {p: queue.LifoQueue() for p in POOLS}
        # Slots are numbered across pools so each maps to uids of its own; idle workers of both pools stay warm.
        self._slots: dict[str, queue.Queue[int]] = {}
        for index, name in enumerate((*POOLS, "program")):
            self._slots[name] = queue.Queue()
            for slot in range(index * self.workers, (index + 1) * self.workers):
                self._slots[name].put(slot)
        self._running = threading.BoundedSemaphore(self.workers)
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._all: set[Worker] = set()
        self._starting: dict[str, list[threading.Thread]] = {p: [] for p in POOLS}  # warm(wait=False)'s starts
        self._closed = False
        self._uid_offset, self._uid_lock = 0, -1

    def _claim_uids(self, runtime: str) -> None:
        """Give this pool's slots uids of their own on this machine (a runtime that hands out uids calls it)."""
        if 2 * (len(POOLS) + 1) * self.workers > UID_BLOCK:  # two uids a slot, a pool's slots and the programs'
            raise SandboxError(f"{self.workers} workers are more than one block of sandbox uids holds")
        self._uid_offset, self._uid_lock = claim_uid_block(runtime)

    # -- what a runtime provides -------------------------------------------------------------------------------
    @abstractmethod
    def _start_worker(self, slot: int) -> Worker:
        """A started, handshaken worker for ``slot`` (raise SandboxError when the runtime cannot)."""

    @abstractmethod
    def _run_program(self, source: str, stdin: bytes, limits: Limits, slot: int) -> ExecResult: ...

    def _max_processes(self, limits: Limits) -> int:
        """The RLIMIT_NPROC a test gets (a runtime sharing its uid with other processes adds their count)."""
        return limits.max_processes

    def _program_input(self, source: str, stdin: bytes, limits: Limits) -> bytes:
        """What a one-shot program's runner reads: its header line, then the program's own stdin."""
        header = {
            "source": source,
            "timeout": limits.timeout_s,
            "memory_mb": limits.memory_mb,
            "max_processes": self._max_processes(limits),
        }
        return (json.dumps(header) + "\n").encode("utf-8") + stdin

    # -- scheduling --------------------------------------------------------------------------------------------
    def _spawn(self, pool: str, slot: int) -> Worker:
        worker = self._start_worker(slot)
        worker.pool, worker.slot = pool, slot
        with self._lock:
            self._all.add(worker)
        return worker

    def _discard(self, worker: Worker) -> None:
        worker.kill()
        with self._lock:
            self._all.discard(worker)
        self._slots[worker.pool].put(worker.slot)

    def _spawn_retrying(self, pool: str, slot: int) -> Worker:
        """A new worker; one that dies before its handshake (killed from outside, the OOM killer) is started again
        once, so a replaced worker costs no job; a runtime that cannot start workers fails on the second try."""
        try:
            return self._spawn(pool, slot)
        except SandboxError as exc:
            log.warning("sandbox worker failed to start, starting another: %s", exc)
            return self._spawn(pool, slot)

    def _acquire(self, pool: str) -> Worker:
        """An idle worker of ``pool``, else a new one (the caller holds a ``_running`` permit, so a slot is free)."""
        if self._closed:
            raise SandboxError("sandbox is closed")
        while True:
            try:
                worker = self._idle[pool].get_nowait()
            except queue.Empty:
                if self._await_starts(pool):
                    continue  # a worker that warm() was starting is ready (or failed, its slot free again)
                slot = self._slots[pool].get()
                try:
                    return self._spawn_retrying(pool, slot)
                except BaseException:
                    self._slots[pool].put(slot)
                    raise
            if worker.alive():
                return worker
            self._discard(worker)

    def _job(
        self,
        code: str,
        tests: Sequence[Any],
        limits: Limits,
        seed: int,
        repeat: int = 1,
        shared_process: bool = False,
        calls: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        job = {
            "id": next(self._ids),
            "code": code,
            "tests": list(tests),
            "timeout": limits.timeout_s,
            "memory_mb": limits.memory_mb,
            "max_processes": self._max_processes(limits),
            "seed": seed,
            "max_bytes": limits.max_output_bytes,
            "batch": True,  # outcomes come back together, not one message each
        }
        if calls is not None:
            job["calls"] = calls
        if repeat > 1:
            job["repeat"] = repeat
            if shared_process:
                job["shared_process"] = True
        return job

    def _run_on_worker(self, job: dict[str, Any], results: dict[int, TestOutcome], pool: str) -> bool:
        """Run ``job`` on a worker of ``pool``; False when the worker died (it is discarded)."""
        with self._running:
            worker = self._acquire(pool)
            tests = len(job["tests"]) * job.get("repeat", 1)
            deadline = time.monotonic() + tests * (job["timeout"] + 2.0) + 10.0
            try:
                worker.run(job, results, deadline)
            except WorkerDied as exc:
                log.info("sandbox worker died during job %s: %s", job["id"], exc)
                self._discard(worker)
                return False
            except BaseException:
                self._discard(worker)
                raise
            self._idle[pool].put(worker)
            return True

    def warm(self, pools: Sequence[str] = POOLS, *, count: int | None = None, wait: bool = True) -> None:
        """Start ``count`` more workers of each of ``pools`` (None: every one they may use) now, in parallel, so
        that no job waits for a start-up later. ``wait=False`` returns at once: a command that scores one answer
        then starts its reference and answer workers together, beside its own set-up, instead of one after the
        other when each is first needed (a job that needs a worker still being started waits for that start; a
        start that fails is retried by the job, which then reports the error)."""
        if self._closed:
            raise SandboxError("sandbox is closed")
        slots: list[tuple[str, int]] = []
        for pool in pools:
            while count is None or sum(p == pool for p, _ in slots) < count:
                try:
                    slots.append((pool, self._slots[pool].get_nowait()))
                except queue.Empty:
                    break
        errors: list[BaseException] = []

        def start(pool: str, slot: int) -> None:
            try:
                worker = self._spawn(pool, slot)
            except BaseException as exc:
                self._slots[pool].put(slot)
                errors.append(exc)
                return
            if self._closed:  # closed while it started: close() may have listed the workers before this one
                self._discard(worker)
            else:
                self._idle[pool].put(worker)

        threads = [threading.Thread(target=start, args=item, daemon=True) for item in slots]
        if not wait:
            with self._lock:  # each start listed as it begins: a job that finds no idle worker waits for them
                for (pool, _), thread in zip(slots, threads, strict=True):
                    thread.start()
                    self._starting[pool].append(thread)
            return
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    def _await_starts(self, pool: str) -> bool:
        """Wait for the starts ``warm(wait=False)`` has in flight for ``pool``; False when there were none."""
        with self._lock:
            threads, self._starting[pool] = self._starting[pool], []
        for thread in threads:
            thread.join()
        return bool(threads)

    # -- the Sandbox protocol ----------------------------------------------------------------------------------
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
    ) -> list[TestOutcome]:
        if repeat < 1:
            raise ValueError(f"repeat must be at least 1, not {repeat}")
        return self._run(code, tests, limits or self.limits, seed, pool, repeat, shared_process)

    def run_calls(
        self,
        batches: Sequence[Batch],
        *,
        budget: Budget,
        seed: int = 0,
        pool: str = "answer",
        cover: bool = False,
        scale: tuple[int, int, int] | None = None,
    ) -> list[TestOutcome]:
        calls = {
            "max_ops": budget.max_ops,
            "max_depth": budget.max_depth,
            "max_items": budget.max_items,
            "cover": cover,
            "scale": list(scale) if scale is not None else None,
        }
        tests = [[[source, list(made)] for source, made in batch] for batch in batches]
        return self._run("", tests, Limits(timeout_s=budget.backstop_s), seed, pool, calls=calls)

    def _run(
        self,
        code: str,
        tests: Sequence[Any],
        limits: Limits,
        seed: int,
        pool: str,
        repeat: int = 1,
        shared_process: bool = False,
        calls: dict[str, Any] | None = None,
    ) -> list[TestOutcome]:
        if pool not in POOLS:
            raise ValueError(f"unknown pool {pool!r}; expected one of {POOLS}")
        results: dict[int, TestOutcome] = {}
        total = len(tests) * repeat
        job = self._job(code, tests, limits, seed, repeat, shared_process, calls)
        if total and not self._run_on_worker(job, results, pool):
            # The worker died: re-run each unreported test alone, so only the test that kills its worker fails.
            for i in range(total):
                if i in results:
                    continue
                single: dict[int, TestOutcome] = {}
                alone = self._job(code, [tests[i % len(tests)]], limits, seed, calls=calls)
                if self._run_on_worker(alone, single, pool) and 0 in single:
                    results[i] = single[0]
                else:
                    results[i] = TestOutcome("crashed", error="the test killed its sandbox worker")
        return [results[i] for i in range(total)]

    def run_program(self, source: str, *, stdin: bytes = b"", limits: Limits | None = None) -> ExecResult:
        limits = limits or self.limits
        slot = self._slots["program"].get()
        try:
            return self._run_program(source, stdin, limits, slot)
        finally:
            self._slots["program"].put(slot)

    def close(self) -> None:
        self._closed = True
        for pool in POOLS:  # a worker still starting stops itself once started (warm's start): none outlives this
            self._await_starts(pool)
        with self._lock:
            workers = list(self._all)
            self._all.clear()
        for worker in workers:
            worker.stop()
        if self._uid_lock >= 0:
            os.close(self._uid_lock)
            self._uid_lock = -1

    def __deepcopy__(self, memo: dict[int, Any]) -> WorkerPool:
        # A sandbox is a shared service (Gymnasium deep-copies make() kwargs): copies share the same pool.
        return self

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
