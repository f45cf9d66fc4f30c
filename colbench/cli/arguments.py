"""Option groups that several commands share, and reading them back into what the library takes.

``eval``, ``probe simulator``, ``specs export`` and ``serve`` all reach model endpoints, and ``eval`` and ``score``
both scale out on Ray: each group is declared once here so that the same flag means the same thing (and reads the
same in ``--help``) on every command that has it.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING, Any, TypeAlias

from colbench._util.hosts import needs_token
from colbench.errors import ConfigError

if TYPE_CHECKING:  # argparse's class of the object add_subparsers returns is private; only the checker needs it
    Subcommands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

SANDBOX_HELP = "auto (Docker when available, else bwrap) | docker | bwrap"


def add_endpoint_arguments(parser: argparse.ArgumentParser, role: str) -> None:
    """``--<role>-base-url``, ``--<role>-api-key-env``, ... : one model endpoint's fields (``endpoint_options``)."""
    group = parser.add_argument_group(f"{role} endpoint (openai:/llamacpp specs)")
    group.add_argument(
        f"--{role}-base-url", metavar="URL", help=f"else $COLBENCH_{role.upper()}_BASE_URL, $OPENAI_BASE_URL"
    )
    group.add_argument(
        f"--{role}-api-key-env",
        metavar="NAME",
        help="the NAME of an environment variable holding the key (never the key itself)",
    )
    group.add_argument(f"--{role}-temperature", type=float, metavar="T", help="default 0")
    group.add_argument(f"--{role}-max-tokens", type=int, metavar="N")
    group.add_argument(f"--{role}-extra-body", metavar="JSON", help="extra fields of every request (a JSON object)")
    group.add_argument(f"--{role}-timeout", type=float, metavar="S", help="seconds per request")
    group.add_argument(f"--{role}-max-retries", type=int, metavar="N", help="retries on 429/5xx/timeouts (default 6)")
    group.add_argument(f"--{role}-rpm", type=float, metavar="R", help="requests per minute (token bucket)")
    group.add_argument(f"--{role}-max-concurrency", type=int, metavar="N", help="requests in flight at most")


def endpoint_options(args: argparse.Namespace, role: str) -> dict[str, Any]:
    """Endpoint fields given on the command line for ``role``; the API key is read from the named variable."""
    options: dict[str, Any] = {}
    key_env = getattr(args, f"{role}_api_key_env")
    if key_env:
        key = os.environ.get(key_env)
        if not key:
            raise ConfigError(f"--{role}-api-key-env: the environment variable {key_env} is not set or empty")
        options["api_key"] = key
    for flag, name in (
        ("base_url", "base_url"),
        ("temperature", "temperature"),
        ("max_tokens", "max_tokens"),
        ("timeout", "timeout_s"),
        ("max_retries", "max_retries"),
    ):
        value = getattr(args, f"{role}_{flag}")
        if value is not None:
            options[name] = value
    extra = getattr(args, f"{role}_extra_body")
    if extra is not None:
        try:
            options["extra_body"] = json.loads(extra)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--{role}-extra-body: not valid JSON ({exc.msg}, column {exc.colno})") from None
        if not isinstance(options["extra_body"], dict):
            raise ConfigError(f"--{role}-extra-body must be a JSON object, got {extra!r}")
    return options


def add_ray_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``--ray [ADDRESS]`` and ``--ray-workers N``: run ``what`` on a Ray cluster instead of this process."""
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help=f"run the {what} on a Ray cluster (no ADDRESS: RAY_ADDRESS or this machine's; docs/scale.md)",
    )
    parser.add_argument(
        "--ray-workers", type=int, metavar="N", help="actors on the cluster (default: one per colbench_sandbox unit)"
    )


def server_token(args: argparse.Namespace) -> str | None:
    """The token of a server command (``--token-env NAME``: read from that variable), checked by one rule for
    ``colbench serve`` and ``colbench view``: a named variable must be set, and an address reachable from other
    machines (``--host``) needs a token."""
    token = os.environ.get(args.token_env) if args.token_env else None
    if args.token_env and not token:
        raise ConfigError(f"--token-env: the environment variable {args.token_env} is not set or empty")
    if token is None and needs_token(args.host):
        raise ConfigError(f"--host {args.host} is reachable from other machines: set a token with --token-env NAME")
    return token
