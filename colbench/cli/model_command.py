"""``colbench model export-hf``: the embedded GGUF model as a transformers directory, so that the model the
embedded simulator and agent run on can also be trained (examples/sweet_rl)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from colbench.cli.arguments import Subcommands


def add_parser(commands: Subcommands) -> None:
    model = commands.add_parser("model", help="the embedded model outside llama.cpp")
    model_sub = model.add_subparsers(dest="action", required=True)
    export_hf = model_sub.add_parser(
        "export-hf", help="write the embedded GGUF model as a trainable transformers directory (prints its path)"
    )
    export_hf.add_argument("--gguf", metavar="FILE", help="a GGUF chat model (default: the embedded SmolLM2-135M)")
    export_hf.add_argument("--out", metavar="DIR", help="default: $COLBENCH_HOME/models/<file stem>")
    export_hf.add_argument("--force", action="store_true", help="convert again even if DIR holds a conversion")
    export_hf.set_defaults(func=cmd_model_export_hf)


def cmd_model_export_hf(args: argparse.Namespace) -> int:
    """Convert (once: an existing conversion is reused unless ``--force``) and print the directory's path."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.llm.export import export_hf

    print(export_hf(args.gguf, args.out, force=args.force))
    return 0
