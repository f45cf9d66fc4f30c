"""``python -m colbench.llm.llamacpp serve ...``: the embedded model's server child (:mod:`.server`)."""

from __future__ import annotations

import sys

from colbench.llm.llamacpp.server import main

if __name__ == "__main__":
    sys.exit(main())
