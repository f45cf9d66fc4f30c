"""``colbench view RUN_DIR|RUNS_ROOT...``: look at runs in a browser, live while they are written (docs/view.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from colbench.cli.arguments import server_token

if TYPE_CHECKING:
    from colbench.cli.arguments import Subcommands


def add_parser(commands: Subcommands) -> None:
    view = commands.add_parser("view", help="look at run directories in a browser, live (docs/view.md)")
    view.add_argument(
        "run_dirs",
        nargs="+",
        type=Path,
        metavar="RUN_DIR|RUNS_ROOT",
        help="run directories, or folders of them (every run below is listed, new ones as they appear)",
    )
    view.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1; any other address needs --token-env")
    view.add_argument("--port", type=int, default=8765)
    view.add_argument("--token-env", metavar="NAME", help="the NAME of an environment variable holding the token")
    view.add_argument("--bundle", type=Path, metavar="OUT_DIR", help="write a static site that opens from disk")
    view.add_argument("--cache", type=Path, metavar="DIR", help="where the indexes live (default: colbench's cache)")
    view.set_defaults(func=cmd_view)


def cmd_view(args: argparse.Namespace) -> int:
    token = server_token(args)
    # on first use: the view extra (starlette, jinja2) loads for this command alone
    from colbench.view.site import Site

    site = Site(list(args.run_dirs), args.cache)
    if args.bundle is not None:
        # on first use: the bundle writer, for --bundle alone
        from colbench.view.bundle import write_bundle

        pages = write_bundle(site, args.bundle)
        print(f"colbench view: wrote {pages} pages to {args.bundle} (open {args.bundle / 'index.html'})")
        return 0
    import uvicorn  # the view extra's web server

    # on first use: the app itself, with starlette
    from colbench.view.app import make_app

    url = f"http://{args.host}:{args.port}/"
    print(f"colbench view: {len(site.indexes)} run(s) at {url}", file=sys.stderr)
    # without a token only this machine's names are answered (DNS rebinding); IPv6 loopback is left unchecked
    hosts = None if token or ":" in args.host else sorted({args.host, "127.0.0.1", "localhost"})
    uvicorn.run(make_app(site, token=token, hosts=hosts), host=args.host, port=args.port, log_level="warning")
    return 0
