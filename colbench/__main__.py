"""``python -m colbench``: the command line, as the ``colbench`` console script runs it."""

from colbench.cli import main

raise SystemExit(main())
