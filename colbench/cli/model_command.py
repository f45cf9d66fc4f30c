"""``colbench model export-hf``: the embedded GGUF model as a transformers directory, so that the model the
embedded simulator and agent run on can also be trained (examples/sweet_rl); ``colbench model export-gguf``: a
fine-tuned directory back as a GGUF, so that the embedded server runs it (``--simulator llamacpp:FILE.gguf``,
examples/simulator_sft)."""

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
    export_gguf = model_sub.add_parser(
        "export-gguf",
        help="write a fine-tuned transformers directory as a GGUF the embedded server runs (prints its path)",
    )
    export_gguf.add_argument("model_dir", metavar="DIR", help="a fine-tune of an export-hf conversion")
    export_gguf.add_argument(
        "--base", metavar="FILE", help="the GGUF DIR was exported from (metadata, tokenizer; default: the embedded one)"
    )
    export_gguf.add_argument("--out", metavar="FILE", help="default: DIR.gguf, beside DIR")
    export_gguf.add_argument(
        "--dtype", choices=("f32", "f16"), default="f32", help="the matrices' type (default f32: exact)"
    )
    export_gguf.set_defaults(func=cmd_model_export_gguf)


def cmd_model_export_hf(args: argparse.Namespace) -> int:
    """Convert (once: an existing conversion is reused unless ``--force``) and print the directory's path."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.llm.export import export_hf

    print(export_hf(args.gguf, args.out, force=args.force))
    return 0


def cmd_model_export_gguf(args: argparse.Namespace) -> int:
    """Write the GGUF and print its path (serve it with ``--simulator llamacpp:PATH`` or ``--agent llamacpp:PATH``)."""
    # run-time import: `colbench --help` loads no command's library
    from colbench.llm.export import export_gguf

    print(export_gguf(args.model_dir, args.base, args.out, dtype=args.dtype))
    return 0
