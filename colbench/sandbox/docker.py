"""The Docker runtime: each warm worker is a container running the runner, driven through the Docker SDK.

Per container: no network, read-only root, a small private ``/tmp`` (noexec), memory with no swap, a pids cgroup
limit, one CPU, all capabilities dropped but the four the runner needs to hand its tests a uid of their own and
clean up after them (SETUID, SETGID, KILL, FOWNER, DAC_OVERRIDE; the tests themselves keep none), no new
privileges, an init process, no logs. The runner is bind-mounted read-only from this colbench installation, so it
always matches the host's protocol. Containers carry labels naming their owner process; those of owners that no
longer run are removed when a new ``DockerSandbox`` starts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import struct
import time
from typing import Any

from colbench.errors import SandboxError
from colbench.sandbox import contract, taskenv
from colbench.sandbox.contract import ExecResult, Limits
from colbench.sandbox.image import IMAGE, docker_client, honours_contract, image_labels
from colbench.sandbox.pool import Worker, WorkerPool, default_workers
from colbench.sandbox.taskenv import TaskEnvironment

log = logging.getLogger(__name__)

# Apart from the bwrap runtime's uids, so both runtimes can run at once without sharing an RLIMIT_NPROC count.
UID_BASE = contract.SANDBOX_UID_BASE + 200_000
LABEL_WORKER = "org.colbench.worker"
LABEL_OWNER = "org.colbench.owner"
RUNNER_CAPS = ["SETUID", "SETGID", "KILL", "FOWNER", "DAC_OVERRIDE"]
OVERHEAD_MB = 256  # the runner with numpy preloaded, on top of what a test may use


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Attached:
    """A container's attach stream: stdin written raw, stdout/stderr read as Docker's multiplexed frames."""

    def __init__(self, client: Any, container_id: str) -> None:
        raw = client.api.attach_socket(container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        self._response = raw
        self.sock: socket.socket = getattr(raw, "_sock", raw)
        self._pending = b""
        self.stderr = bytearray()
        self.eof = False

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close_stdin(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def recv(self, timeout: float, stderr_cap: int = 1 << 20) -> tuple[bytes, bytes] | None:
        """(stdout, stderr) bytes of the complete frames that arrived, or None; at the end ``eof`` is set and
        ``(b"", b"")`` returned."""
        ready, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
        if not ready:
            return None
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            self.eof = True
            return b"", b""
        self._pending += chunk
        out, err = bytearray(), bytearray()
        while len(self._pending) >= 8:
            stream, size = self._pending[0], struct.unpack(">I", self._pending[4:8])[0]
            if len(self._pending) < 8 + size:
                break
            payload, self._pending = self._pending[8 : 8 + size], self._pending[8 + size :]
            if stream == 2:
                if len(self.stderr) < stderr_cap:
                    self.stderr += payload[: stderr_cap - len(self.stderr)]
                err += payload
            else:
                out += payload
        return (bytes(out), bytes(err)) if out or err else None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class _ContainerWorker(Worker):
    """A warm container running the runner; bytes move over the attach stream."""

    def __init__(self, client: Any, container: Any) -> None:
        super().__init__()
        self.container = container
        self._eof = False
        try:
            self._io = _Attached(client, container.id)
            container.start()
        except Exception as exc:
            self._remove()
            raise SandboxError(f"cannot start sandbox container: {exc}") from exc
        self.handshake()

    def _send(self, data: bytes) -> None:
        self._io.send(data)

    def _recv(self, timeout: float) -> bytes | None:
        got = self._io.recv(timeout)
        if got is None:
            return None
        if self._io.eof:
            self._eof = True
            return b""
        return got[0] or None

    def alive(self) -> bool:
        """Whether the container still answers: its stream is polled, so one that died while idle (killed, removed,
        its connection dropped) is found before a job is sent to it and blamed for its death."""
        if not self._eof:
            try:
                got = self._recv(0)
            except (OSError, ValueError):
                self._eof = True
            else:
                self._buf += got or b""
        return not self._eof

    def stderr_tail(self) -> str:
        return bytes(self._io.stderr[-2000:]).decode("utf-8", "replace").strip()

    def _remove(self) -> None:
        with contextlib.suppress(Exception):
            self.container.remove(force=True)

    def kill(self) -> None:
        self._eof = True
        with contextlib.suppress(Exception):
            self._io.close()
        self._remove()


class DockerSandbox(WorkerPool):
    """Docker runtime with a pool of warm containers (at most ``workers`` jobs run at once; default: one more than
    the CPUs)."""

    name = "docker"

    def __init__(self, *, workers: int | None = None, limits: Limits | None = None, image: str = IMAGE) -> None:
        super().__init__(workers=workers or default_workers(), limits=limits or Limits())
        self.image = image
        self.client = docker_client(timeout=120.0)
        labels = image_labels(self.client, image)
        if labels is None or not honours_contract(labels):
            raise SandboxError(f"the sandbox image {image} is missing: run `colbench sandbox build`")
        self.environment = TaskEnvironment.from_label(labels.get(taskenv.LABEL, ""), image)
        self._claim_uids(self.name)
        self.remove_leftovers()

    def remove_leftovers(self) -> int:
        """Remove worker containers whose owning process on this host is gone; returns how many."""
        removed = 0
        host = socket.gethostname()
        try:
            # ignore_removed: another pool's container may go between the listing and its inspection
            containers = self.client.containers.list(all=True, filters={"label": LABEL_WORKER}, ignore_removed=True)
        except Exception as exc:
            raise SandboxError(f"cannot list Docker containers: {exc}") from exc
        for container in containers:
            owner_host, _, pid = str(container.labels.get(LABEL_OWNER, "")).rpartition(":")
            if owner_host == host and pid.isdigit() and _pid_alive(int(pid)):
                continue
            with contextlib.suppress(Exception):
                container.remove(force=True)
                removed += 1
        return removed

    def _create(self, command: list[str], limits: Limits, *, keep: bool = False) -> Any:
        try:
            return self.client.containers.create(
                self.image,
                command=command,
                stdin_open=True,
                tty=False,
                network_mode="none",
                read_only=True,
                tmpfs={"/tmp": f"size={limits.tmpfs_mb * 1024 * 1024},mode=1777,noexec,nosuid,nodev"},
                shm_size=1024 * 1024,
                mem_limit=(limits.memory_mb + OVERHEAD_MB) * 1024 * 1024,
                memswap_limit=(limits.memory_mb + OVERHEAD_MB) * 1024 * 1024,
                pids_limit=limits.max_processes + 16,
                nano_cpus=1_000_000_000,
                user="0",
                cap_drop=["ALL"],
                cap_add=RUNNER_CAPS,
                security_opt=["no-new-privileges"],
                init=True,
                log_config={"Type": "none", "Config": {}},
                labels={LABEL_WORKER: "1", LABEL_OWNER: _owner()},
                volumes={str(contract.runner_path()): {"bind": contract.RUNNER_IN_SANDBOX, "mode": "ro"}},
                environment=contract.SANDBOX_ENV,
                working_dir="/tmp",
                auto_remove=not keep,
            )
        except Exception as exc:
            raise SandboxError(f"cannot create a sandbox container from {self.image}: {exc}") from exc

    def _uid(self, slot: int) -> int:
        return UID_BASE + self._uid_offset + 2 * slot

    def _start_worker(self, slot: int) -> Worker:
        uid = self._uid(slot)
        command = ["python3", *contract.RUNNER_FLAGS, contract.RUNNER_IN_SANDBOX, "--sandboxed", "--drop-to", str(uid)]
        command += ["--child-uid", str(uid + 1)]
        return _ContainerWorker(self.client, self._create(command, self.limits))

    def _run_program(self, source: str, stdin: bytes, limits: Limits, slot: int) -> ExecResult:
        command = ["python3", *contract.RUNNER_FLAGS, contract.RUNNER_IN_SANDBOX, "--program"]
        command += ["--drop-to", str(self._uid(slot))]
        container = self._create(command, limits, keep=True)
        started = time.monotonic()
        try:
            io = _Attached(self.client, container.id)
            container.start()
            io.send(self._program_input(source, stdin, limits))
            io.close_stdin()
            stdout, stderr, timed_out = bytearray(), bytearray(), False
            cap = limits.max_output_bytes
            deadline = started + limits.timeout_s + 0.5
            while True:
                got = io.recv(deadline - time.monotonic())
                if got is None:
                    if time.monotonic() >= deadline:
                        timed_out = True
                        break
                    continue
                if io.eof:
                    break
                out, err = got
                stdout += out[: cap + 1 - len(stdout)] if len(stdout) <= cap else b""
                stderr += err[: cap + 1 - len(stderr)] if len(stderr) <= cap else b""
            io.close()
            if timed_out:
                with contextlib.suppress(Exception):
                    container.kill()
            status = container.wait(timeout=30).get("StatusCode")
        except SandboxError:
            raise
        except Exception as exc:
            raise SandboxError(f"sandbox container failed: {exc}") from exc
        finally:
            with contextlib.suppress(Exception):
                container.remove(force=True)
        duration = time.monotonic() - started
        return ExecResult(
            exit_code=None if timed_out else status,
            stdout=bytes(stdout[:cap]),
            stderr=bytes(stderr[:cap]),
            timed_out=timed_out,
            truncated=len(stdout) > cap or len(stderr) > cap,
            duration_s=duration,
        )
