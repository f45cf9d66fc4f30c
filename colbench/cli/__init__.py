"""The ``colbench`` command line (the contract in DESIGN.md section 5: other tools script against it).

``main.py`` builds the parser and maps errors to exit codes; each ``<command>_command.py`` holds one command's
options beside its handler; ``arguments.py`` and ``jsonl_io.py`` what several commands share. A handler imports
what it runs inside its function, so ``colbench --help`` (and every command) loads only the command line itself and
the library it calls. Nothing in the library imports this package: it is the top layer.
"""
