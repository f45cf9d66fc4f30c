"""``python -m colbench.cli``: the command line without its console script (the tests and benchmarks run it so)."""

import sys

from colbench.cli.main import main

sys.exit(main())
