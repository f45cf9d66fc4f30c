"""The embedded model's measured speed on this machine: what ``--dry-run`` forecasts its wall time from.

A hosted endpoint's speed is roughly the same everywhere; a CPU model's differs a hundredfold between a laptop and
a server, and a forecast built on an assumed speed was off by 30x (0.1 min forecast for a 3.2 min run). So the
speed is measured: one request with a fixed prompt of about ``PROMPT_TOKENS`` tokens (as long as a dialogue's: on
CPU both speeds fall as the context grows) and exactly ``GEN_TOKENS`` generated tokens (end of text ignored, prompt
cache off), after a one-token warm-up, on the same server settings an evaluation uses; llama.cpp's own timings give
prompt processing and generation separately (they differ by an order of magnitude on CPU, and a dialogue's prompts
are long). The figures are cached per model file and machine (file name and size, CPU model, usable cores,
threads, llama.cpp build) in ``colbench_home()/speed/``, so only the first dry run on a machine pays for the
measurement (about 10 s on 2 shared cores).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from colbench._util.storage import colbench_home, utc_timestamp
from colbench.errors import InfraError
from colbench.llm.llamacpp.models import resolve_gguf
from colbench.llm.llamacpp.server import LlamaCppConfig, LlamaCppServer, default_threads, llamacpp_server

PROMPT_TOKENS = 1000  # a dialogue's prompt: the check run's agent prompts were 1.2k tokens on average
GEN_TOKENS = 32
SPEED_VERSION = 2  # the measurement's method: a new one makes old cached figures stale
_PROMPT = (
    "Here is a list of measurements from a weather station, one per hour, in degrees and millimetres of rain. "
    "Summarize the day in one sentence. "
)


@dataclass(frozen=True)
class Speed:
    """Tokens per second of one request to the embedded model on this machine: ``prompt_tps`` (prompt
    processing) and ``gen_tps`` (generation), measured at ``measured_at`` (UTC) on ``machine`` with ``model``,
    served with ``slots`` parallel slots (each keeps its last prompt)."""

    prompt_tps: float
    gen_tps: float
    measured_at: str
    model: str
    machine: str
    slots: int

    def seconds(self, prompt_tokens: float, completion_tokens: float) -> float:
        """One request's time: its prompt processed, then its completion generated."""
        return prompt_tokens / self.prompt_tps + completion_tokens / self.gen_tps

    def describe(self) -> str:
        return (
            f"{self.model}: {self.prompt_tps:,.0f} prompt tokens/s, {self.gen_tps:,.1f} generated tokens/s, "
            f"measured on this machine at {self.measured_at}"
        )


def machine_key(config: LlamaCppConfig) -> str:
    """What the speed depends on besides the request: the model file, the CPU, the cores and threads, the build."""
    gguf = Path(config.gguf)
    try:
        build = importlib.metadata.version("xllamacpp")
    except importlib.metadata.PackageNotFoundError:
        build = "unknown"
    return (
        f"{gguf.name}:{gguf.stat().st_size}|{_cpu_model()}|cores={_cores()}"
        f"|threads={config.threads or default_threads()}|parallel={config.parallel}|xllamacpp={build}"
        f"|v{SPEED_VERSION}"
    )


def speed_file(config: LlamaCppConfig, cache_dir: Path | None = None) -> Path:
    digest = hashlib.sha256(machine_key(config).encode()).hexdigest()[:16]
    return (cache_dir or colbench_home() / "speed") / f"{Path(config.gguf).stem}-{digest}.json"


def cached_speed(gguf: str | Path | None = None, *, cache_dir: Path | None = None) -> Speed | None:
    """The cached measurement for this model and machine, or None (never measures: a run's start stays fast)."""
    path = speed_file(LlamaCppConfig.from_env(resolve_gguf(gguf)), cache_dir)
    try:
        row = json.loads(path.read_text("utf-8"))
        speed = Speed(**{field: row[field] for field in Speed.__dataclass_fields__})
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent, or written by something else: measured again
    return speed if speed.prompt_tps > 0 and speed.gen_tps > 0 and speed.slots > 0 else None


def measured_speed(gguf: str | Path | None = None, *, cache_dir: Path | None = None, refresh: bool = False) -> Speed:
    """The embedded model's speed on this machine: cached, else measured now (starting its server if this process
    has none) and cached. ``refresh`` measures again. An unusable server is an ``InfraError``."""
    config = LlamaCppConfig.from_env(resolve_gguf(gguf))
    if not refresh:
        found = cached_speed(config.gguf, cache_dir=cache_dir)
        if found is not None:
            return found
    speed = _measure(llamacpp_server(config.gguf), machine_key(config), config.parallel)
    path = speed_file(config, cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(f".{os.getpid()}.part")
    part.write_text(json.dumps({**asdict(speed), "key": machine_key(config)}, indent=1), "utf-8")
    part.replace(path)  # whole or absent: a concurrent dry run reads one or the other
    return speed


def _measure(server: LlamaCppServer, machine: str, slots: int) -> Speed:
    words = (_PROMPT * (PROMPT_TOKENS // 20 + 1)).split()[: PROMPT_TOKENS * 3 // 4]  # ~1.3 tokens per word
    _complete(server, "Say yes.", 1)  # the first request pays for loading pages of the model: not counted
    timings = _complete(server, " ".join(words), GEN_TOKENS)
    try:
        prompt_tps = float(timings["prompt_n"]) / float(timings["prompt_ms"]) * 1000
        gen_tps = float(timings["predicted_n"]) / float(timings["predicted_ms"]) * 1000
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise InfraError(
            f"the embedded model's reply has no usable timings ({exc!r}): cannot measure its speed"
        ) from None
    return Speed(round(prompt_tps, 2), round(gen_tps, 2), utc_timestamp(), server.model, machine, slots)


def _complete(server: LlamaCppServer, prompt: str, tokens: int) -> dict[str, Any]:
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": tokens,
        "temperature": 0,
        "ignore_eos": True,
        "cache_prompt": False,
    }
    request = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {server.api_key}", "Content-Type": "application/json"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1, never via a proxy
    try:
        with opener.open(request, timeout=300) as response:
            reply = json.load(response)
    except (OSError, ValueError) as exc:
        raise InfraError(f"the embedded model did not answer the speed measurement: {exc}") from None
    timings = reply.get("timings") if isinstance(reply, dict) else None
    if not isinstance(timings, dict):
        raise InfraError("the embedded model's reply has no timings: cannot measure its speed")
    return timings


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text("utf-8", "replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
