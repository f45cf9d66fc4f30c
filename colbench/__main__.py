"""``python -m colbench``: the ``colbench`` command line where its console script is not on the PATH."""

import sys

from colbench.cli.main import main

sys.exit(main())
