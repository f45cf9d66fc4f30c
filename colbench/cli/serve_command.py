"""``colbench serve``: an env as an OpenEnv environment server, so RL trainers on other machines can play it over
WebSockets (docs/integrations.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from colbench.cli.arguments import add_endpoint_arguments, endpoint_options, server_token
from colbench.env.versions import newest_env
from colbench.errors import ConfigError
from colbench.types.leaks import POLICY_HELP

if TYPE_CHECKING:
    from colbench.cli.arguments import Subcommands


def add_parser(commands: Subcommands) -> None:
    serve = commands.add_parser("serve", help="run an env as an OpenEnv environment server (docs/integrations.md)")
    newest = newest_env("backend")
    serve.add_argument("--env", default=newest, metavar="ID", help=f"default: the newest backend id, {newest}")
    serve.add_argument("--tasks", metavar="FILE_OR_SPLIT", help="default: the env's test split")
    serve.add_argument("--simulator", default="scripted", metavar="SPEC", help="openai:MODEL | llamacpp | scripted")
    serve.add_argument("--max-turns", type=int, metavar="N")
    serve.add_argument("--leak-policy", default="flag", metavar="POLICY", help=POLICY_HELP)
    serve.add_argument("--env-options", metavar="JSON", help='more env options, e.g. \'{"sandbox": "docker"}\'')
    serve.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1; any other address needs --token-env")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--token-env", metavar="NAME", help="the NAME of an environment variable holding the token")
    serve.add_argument("--max-sessions", type=int, default=64, metavar="N", help="sessions at once (default 64)")
    serve.add_argument(
        "--session-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="idle seconds before a session ends (0: never)",
    )
    serve.add_argument("--max-body-bytes", type=int, default=1 << 20, metavar="B", help="per request or message")
    serve.add_argument("--expose-hidden", action="store_true", help="send the hidden reference to clients (critics)")
    add_endpoint_arguments(serve, "simulator")
    serve.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve until interrupted; a server reachable from other machines must have a token (``--token-env``)."""
    from colbench.integrations.openenv import make_app  # the openenv extra, for this command alone

    token = server_token(args)
    env_kwargs: dict[str, Any] = {"simulator": args.simulator, "leak_policy": args.leak_policy}
    if args.tasks:
        env_kwargs["tasks"] = args.tasks
    if args.max_turns is not None:
        env_kwargs["max_turns"] = args.max_turns
    if args.env_options:
        try:
            extra = json.loads(args.env_options)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--env-options: not valid JSON ({exc.msg}, column {exc.colno})") from None
        if not isinstance(extra, dict):
            raise ConfigError(f"--env-options must be a JSON object, got {args.env_options!r}")
        env_kwargs.update(extra)
    options = endpoint_options(args, "simulator")
    if options:
        env_kwargs["simulator_options"] = options
    app = make_app(
        args.env,
        env_kwargs,
        token=token,
        max_sessions=args.max_sessions,
        session_timeout=args.session_timeout or None,
        max_body_bytes=args.max_body_bytes,
        expose_hidden=args.expose_hidden,
    )
    import uvicorn  # the openenv extra's web server

    print(f"colbench serve: {args.env} at http://{args.host}:{args.port} (OpenEnv protocol, /ws)", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, ws_max_size=args.max_body_bytes, log_level="warning")
    return 0
