"""``colbench sandbox build | doctor``: build the task environment (the bwrap runtime's root and the Docker sandbox
image, from one tarball), and check Docker, the image, the bwrap runtime and what each runs (docs/sandbox.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from colbench.cli.arguments import Subcommands


def add_parser(commands: Subcommands) -> None:
    sandbox = commands.add_parser("sandbox", help="build and check the task environment (bwrap root, Docker image)")
    sandbox_sub = sandbox.add_subparsers(dest="action", required=True)
    build = sandbox_sub.add_parser("build", help="build the task environment (bwrap's root; with Docker, the image)")
    build.add_argument(
        "--method",
        choices=("auto", "dockerfile", "offline"),
        default="auto",
        help="dockerfile: FROM debian:bookworm-slim (needs a registry); offline: debootstrap from the apt mirror; "
        "auto: $COLBENCH_SANDBOX_BUILD, else offline on Linux with apt, else dockerfile",
    )
    build.add_argument("--force", action="store_true", help="rebuild from scratch, ignoring caches")
    build.add_argument("--image", help=argparse.SUPPRESS)
    build.set_defaults(func=cmd_sandbox_build)
    doc = sandbox_sub.add_parser("doctor", help="check Docker, the image and the bwrap runtime; exit 1 on a failure")
    doc.add_argument("--image", help=argparse.SUPPRESS)
    doc.set_defaults(func=cmd_sandbox_doctor)


def cmd_sandbox_build(args: argparse.Namespace) -> int:
    """Build the image and print its name."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.sandbox.image import IMAGE, build_image

    print(build_image(args.method, image=args.image or IMAGE, force=args.force))
    return 0


def cmd_sandbox_doctor(args: argparse.Namespace) -> int:
    """One line per check (with its fix when it fails); exit 1 when a required check fails, 0 otherwise."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.sandbox.doctor import doctor
    from colbench.sandbox.image import IMAGE

    failed = False
    for check in doctor(args.image or IMAGE):
        status = "OK" if check.ok else ("FAIL" if check.required else "WARN")
        print(f"{status:<4} {check.name}: {check.detail}")
        if not check.ok and check.fix:
            print(f"     fix: {check.fix}")
        failed = failed or (check.required and not check.ok)
    return 1 if failed else 0
