"""The embedded model's server: llama.cpp's HTTP server (the ``xllamacpp`` wheel) serving one GGUF file on
127.0.0.1, one server per configuration and process (:func:`llamacpp_server`), started on first use and stopped by
:func:`close` or at interpreter exit.

The server runs in a **child process** (``python -m colbench.llm.llamacpp serve``), not in threads of this one:

- ``xllamacpp.Server`` has no stop method; its threads end only when the object is garbage-collected, which
  cannot be forced from a ``close()`` while any reference remains. A process is stopped for certain, and its
  port, memory and threads go with it.
- llama.cpp's native threads (OpenMP, HTTP) make ``fork`` unsafe in their process; harnesses that fork workers
  (multiprocessing, the sandbox pool) keep working when the model lives elsewhere, and a forked child can even
  keep using the same server over HTTP.
- A crash or abort in native code (a bad GGUF, out of memory) kills the child, not the evaluation; the parent
  reports it as an :class:`~colbench.errors.InfraError` carrying the tail of the server's log.

The child learns of its parent's death through its stdin pipe (EOF) and exits, so a killed evaluation leaves
no orphan server. It listens on port 0 (the kernel picks a free port, no race) and reports the address on a
private channel. Server settings: ``COLBENCH_LLAMACPP_CTX`` tokens of context per slot (8192, SmolLM2's training
length: enough for 10-turn dialogues), ``COLBENCH_LLAMACPP_PARALLEL`` slots (4) for concurrent episodes,
``COLBENCH_LLAMACPP_THREADS`` CPU threads (all usable cores but one, see :func:`default_threads`), a fixed sampling
seed (0) so sampling is reproducible (temperature 0 is greedy), a default cap of 1024 generated tokens for a
request that sets no ``max_tokens``, and the chat template stored in the GGUF.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from colbench.errors import ConfigError, InfraError
from colbench.llm.client import Endpoint
from colbench.llm.llamacpp.models import INSTALL_HINT, chat_template_for, resolve_gguf

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 600.0  # a small CPU model is slow: a long answer behind busy slots takes minutes, not seconds
_READY_PREFIX = "colbench-llamacpp-ready "


@dataclass(frozen=True)
class LlamaCppConfig:
    """How to serve one GGUF file. Equal configs share one server per process."""

    gguf: str
    ctx_per_slot: int = 8192
    parallel: int = 4
    threads: int = 0  # 0: default_threads()
    seed: int = 0
    max_tokens: int = 1024  # generated tokens for a request that sets no max_tokens
    startup_timeout_s: float = 300.0
    chat_template: str = ""  # a llama.cpp built-in template name; "": the GGUF's own

    @classmethod
    def from_env(cls, gguf: str | Path | None = None, **settings: Any) -> LlamaCppConfig:
        """Resolve the GGUF (see :func:`resolve_gguf`) and read ``COLBENCH_LLAMACPP_{CTX,PARALLEL,THREADS}``."""
        for name, field_name in (("CTX", "ctx_per_slot"), ("PARALLEL", "parallel"), ("THREADS", "threads")):
            raw = os.environ.get(f"COLBENCH_LLAMACPP_{name}")
            if raw and field_name not in settings:
                try:
                    settings[field_name] = int(raw)
                except ValueError:
                    raise ConfigError(f"COLBENCH_LLAMACPP_{name} must be an integer, not {raw!r}") from None
        path = resolve_gguf(gguf)
        settings.setdefault("chat_template", chat_template_for(path))
        config = cls(gguf=str(path), **settings)
        config.validate()
        return config

    def validate(self) -> None:
        if self.ctx_per_slot < 256 or self.parallel < 1 or self.threads < 0 or self.max_tokens < 1:
            raise ConfigError(
                f"bad embedded model settings: ctx_per_slot={self.ctx_per_slot} (>= 256), parallel={self.parallel}"
                f" (>= 1), threads={self.threads} (>= 0), max_tokens={self.max_tokens} (>= 1)"
            )

    @property
    def model_name(self) -> str:
        """The name the server answers to (the GGUF's file name without ``.gguf``)."""
        name = Path(self.gguf).name
        return name[: -len(".gguf")] if name.lower().endswith(".gguf") else name


def package_root() -> Path:
    """The directory that holds the ``colbench`` package (a checkout's root, or site-packages): put first on the
    server child's ``PYTHONPATH``. Not the package directory itself, whose ``types`` package would shadow the
    standard library's."""
    return Path(__file__).resolve().parents[3]  # colbench/llm/llamacpp/server.py


def require_xllamacpp() -> None:
    if importlib.util.find_spec("xllamacpp") is None:
        raise ConfigError(f"the embedded model needs the xllamacpp package: {INSTALL_HINT}")


class LlamaCppServer:
    """One running server process. ``base_url`` ends in ``/v1``; ``api_key`` is a random per-server token."""

    def __init__(self, config: LlamaCppConfig) -> None:
        self.config = config
        self.model = config.model_name
        self.api_key = secrets.token_urlsafe(24)
        self.base_url = ""
        self.port = 0
        self.startup_s = 0.0
        self._owner = os.getpid()
        self._lock = threading.Lock()
        self._closed = False
        self._logdir = Path(tempfile.mkdtemp(prefix="colbench-llamacpp-"))
        self._logfile = self._logdir / "server.log"
        self._proc: subprocess.Popen[bytes] | None = None
        try:
            self._start()
        except BaseException:
            self._stop(grace_s=0.0)
            raise

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def alive(self) -> bool:
        """Whether the server process is running (from a forked child: whether the pid still exists)."""
        if self._closed or self._proc is None:
            return False
        if os.getpid() != self._owner:
            try:
                os.kill(self._proc.pid, 0)
            except OSError:
                return False
            return True
        return self._proc.poll() is None

    @property
    def identity(self) -> str:
        """What determines this server's replies besides the request: model file, seed and llama.cpp build.

        Used instead of the URL (a new port every run) in response-cache keys and run records. The ``local:`` prefix
        predates the ``llamacpp`` name and is kept: caches and run records of earlier runs stay valid.
        """
        gguf = Path(self.config.gguf)
        try:
            build = importlib.metadata.version("xllamacpp")
        except importlib.metadata.PackageNotFoundError:
            build = "unknown"
        template = f":template={self.config.chat_template}" if self.config.chat_template else ""
        return f"local:{gguf.name}:{gguf.stat().st_size}:seed={self.config.seed}:xllamacpp={build}{template}"

    def endpoint(self, **overrides: Any) -> Endpoint:
        """An :class:`Endpoint` for this server; ``overrides`` set other Endpoint fields (not URL or key)."""
        settings: dict[str, Any] = {"timeout_s": DEFAULT_TIMEOUT_S, "identity": self.identity}
        settings.update(overrides)
        return Endpoint(model=self.model, base_url=self.base_url, api_key=self.api_key, **settings)

    def log_tail(self, lines: int = 3) -> str:
        """The last error lines of the server's log (else its last lines), as one line."""
        return _tail(self._logfile, lines)

    def close(self, grace_s: float = 10.0) -> None:
        """Stop the server and wait for it to exit (idempotent). In a forked child it only forgets the server."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        _forget(self)
        if os.getpid() != self._owner:
            return
        self._stop(grace_s)

    def __enter__(self) -> LlamaCppServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.alive else "stopped"
        return f"LlamaCppServer({self.model!r}, {self.base_url or 'not started'}, pid={self.pid}, {state})"

    # -- internals --

    def _start(self) -> None:
        require_xllamacpp()
        cfg = self.config
        flags = {
            "--gguf": cfg.gguf,
            "--alias": self.model,
            "--ctx-per-slot": cfg.ctx_per_slot,
            "--parallel": cfg.parallel,
            "--threads": cfg.threads or default_threads(),
            "--seed": cfg.seed,
            "--max-tokens": cfg.max_tokens,
            "--chat-template": cfg.chat_template,
        }
        command = [sys.executable, "-m", "colbench.llm.llamacpp", "serve"]
        for flag, value in flags.items():
            if value != "":  # no --chat-template: the GGUF's own
                command += [flag, str(value)]
        env = dict(os.environ)
        env["COLBENCH_LLAMACPP_API_KEY"] = self.api_key  # not on the command line, where ps would show it
        # the child imports this very colbench (a checkout that is not installed too), whatever its working directory
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(package_root()), env.get("PYTHONPATH", "")) if p)
        started = time.monotonic()
        with self._logfile.open("wb") as logfile:
            self._proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=logfile,
                env=env,
                close_fds=True,
                start_new_session=True,  # a Ctrl-C in the terminal reaches us; our atexit then stops it
            )
        ready = self._read_ready(started + cfg.startup_timeout_s)
        self.base_url = f"{ready['address'].rstrip('/')}/v1"
        self.port = int(ready["port"])
        self._wait_healthy(started + cfg.startup_timeout_s)
        self.startup_s = time.monotonic() - started
        log.info("embedded model %s serving at %s (started in %.1f s)", self.model, self.base_url, self.startup_s)

    def _read_ready(self, deadline: float) -> dict[str, Any]:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        buffer = b""
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while b"\n" not in buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._failure(f"not ready after {self.config.startup_timeout_s:.0f} s")
                if selector.select(timeout=min(left, 0.5)):
                    chunk = os.read(proc.stdout.fileno(), 4096)
                    if not chunk:  # the child closed its end: it exited or is exiting
                        proc.wait(timeout=10)
                        raise self._failure(f"exited with code {proc.returncode}")
                    buffer += chunk
                elif proc.poll() is not None:
                    raise self._failure(f"exited with code {proc.returncode}")
        line = buffer.split(b"\n", 1)[0].decode("utf-8", "replace")
        if not line.startswith(_READY_PREFIX):
            raise self._failure(f"sent an unexpected line {line[:200]!r}")
        ready: dict[str, Any] = json.loads(line[len(_READY_PREFIX) :])
        return ready

    def _wait_healthy(self, deadline: float) -> None:
        url = self.base_url.removesuffix("/v1") + "/health"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via an HTTP proxy
        last = "no answer"
        while time.monotonic() < deadline:
            if not self.alive:
                raise self._failure("exited before it answered /health")
            try:
                with opener.open(url, timeout=5.0) as response:
                    if response.status == 200:
                        return
                    last = f"HTTP {response.status}"
            except urllib.error.HTTPError as exc:  # 503 while the model is still loading
                last = f"HTTP {exc.code}"
            except OSError as exc:
                last = str(exc)
            time.sleep(0.1)
        raise self._failure(f"/health did not answer 200 in time ({last})")

    def _failure(self, what: str) -> InfraError:
        tail = self.log_tail()
        return InfraError(
            f"the embedded model server for {self.config.gguf} {what}" + (f": {tail}" if tail else " (no log output)")
        )

    def _stop(self, grace_s: float) -> None:
        proc, self._proc = self._proc, None
        self._closed = True
        if proc is not None:
            # Closing stdin is the polite stop (the child frees the model and exits 0); then SIGTERM, then SIGKILL.
            with contextlib.suppress(OSError):
                if proc.stdin is not None:
                    proc.stdin.close()
            for sig, wait_s in ((None, grace_s), (signal.SIGTERM, 5.0), (signal.SIGKILL, 30.0)):
                if sig is not None and proc.poll() is None:
                    with contextlib.suppress(OSError):
                        proc.send_signal(sig)
                try:
                    proc.wait(timeout=wait_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
            if proc.stdout is not None:
                proc.stdout.close()
        shutil.rmtree(self._logdir, ignore_errors=True)


# -- one server per config and process --------------------------------------------------------------------

_servers: dict[LlamaCppConfig, LlamaCppServer] = {}
_registry_lock = threading.Lock()


def llamacpp_server(gguf: str | Path | None = None, **settings: Any) -> LlamaCppServer:
    """The process's running server for this GGUF and settings, started on first use (or after it died)."""
    config = LlamaCppConfig.from_env(gguf, **settings)
    with _registry_lock:
        server = _servers.get(config)
        if server is not None and server.alive:
            return server
        if server is not None:
            log.warning("the embedded model server %r is gone: starting a new one (log: %s)", server, server.log_tail())
        server = LlamaCppServer(config)
        _servers[config] = server
        return server


def close() -> None:
    """Stop every server this process started (registered with ``atexit``; safe to call again)."""
    with _registry_lock:
        servers = list(_servers.values())
    for server in servers:
        server.close()


def _forget(server: LlamaCppServer) -> None:
    with _registry_lock:
        if _servers.get(server.config) is server:
            del _servers[server.config]


atexit.register(close)


def server_endpoint(gguf: str | None = None, **overrides: Any) -> Endpoint:
    """Start (once per process) the server for ``gguf`` (None: :func:`resolve_gguf`'s default) and return an
    Endpoint pointing at it. The timeout defaults to 600 s instead of 60 s (CPU generation is slow); ``overrides``
    set other Endpoint fields (never the URL or key: they belong to the server)."""
    return llamacpp_server(resolve_gguf(gguf)).endpoint(**overrides)


# -- the child process ------------------------------------------------------------------------------------


def default_threads() -> int:
    """Every core this process may run on but one, at least one.

    llama.cpp's threads meet at a spinning barrier after every operation, so one thread that loses its core to
    another process stalls them all, and an evaluation always has that process beside it (scoring sandboxes, the
    harness itself): a core left free costs some speed on an idle machine and saves most of it on a busy one
    (docs/embedded-model.md has the figures).
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text("utf-8", "replace")
    except OSError:
        return ""
    rows = [" ".join(row.split()) for row in text.splitlines() if row.strip()]
    # llama.cpp's lines look like "0.00.007.038 E srv  load_model: ..."; prefer the errors, drop the timestamp.
    # The first error is usually the cause ("failed to read header"), the last ones what became of it.
    errors = [row.split(" ", 2)[2] for row in rows if row.count(" ") >= 2 and row.split(" ", 2)[1] == "E"]
    if not errors:
        return " | ".join(rows[-lines:])[-600:]
    chosen = list(dict.fromkeys([errors[0], *errors[-(lines - 1) :]] if lines > 1 else errors[-1:]))
    return " | ".join(chosen)[-600:]


def _serve(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m colbench.llm.llamacpp serve")
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--ctx-per-slot", type=int, default=8192)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--chat-template", default="")
    args = parser.parse_args(argv)

    # The protocol channel is the real stdout; anything else written to fd 1 (by C code too) goes to the log.
    channel: IO[str] = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    stop = threading.Event()
    serving = threading.Event()

    def watch_parent() -> None:
        # EOF on stdin: the parent closed it (close()) or died. Before the server is up there is nothing to free.
        # os.read, not sys.stdin: a daemon thread blocked inside a buffered reader aborts interpreter shutdown.
        with contextlib.suppress(OSError):
            while os.read(0, 4096):
                pass
        stop.set()
        if not serving.is_set():
            os._exit(0)

    threading.Thread(target=watch_parent, name="colbench-llamacpp-parent-watch", daemon=True).start()

    xlc: Any = importlib.import_module("xllamacpp")
    params = xlc.CommonParams()
    params.model.path = args.gguf
    params.model_alias = {args.alias}
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx_per_slot * args.parallel  # each slot gets ctx_per_slot tokens
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.sampling.seed = args.seed
    params.n_predict = args.max_tokens
    if args.chat_template:  # a built-in template's name: only the non-Jinja path reads names
        params.use_jinja = False
        params.chat_template = args.chat_template
    params.cache_ram_mib = 1024  # host-memory prompt cache (llama.cpp's default is 8 GiB)
    params.verbosity = 2  # warnings and errors
    key = os.environ.pop("COLBENCH_LLAMACPP_API_KEY", "")
    if key:
        params.api_keys = [key]
    try:
        server = xlc.Server(params)
    except Exception as exc:
        print(f"colbench-llamacpp: E serve: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1
    serving.set()
    address = str(server.listening_address)
    ready = {"address": address, "port": int(address.rsplit(":", 1)[1]), "pid": os.getpid()}
    try:
        channel.write(_READY_PREFIX + json.dumps(ready) + "\n")
        channel.flush()
    except OSError:  # the parent is gone
        return 0
    stop.wait()
    del server  # stops llama.cpp's threads and frees the model
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "serve":
        print("usage: python -m colbench.llm.llamacpp serve --gguf PATH --alias NAME [options]", file=sys.stderr)
        return 2
    return _serve(argv[1:])
