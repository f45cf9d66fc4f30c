"""ColBench's verifiers taskset id, ``colbench_verifiers`` (or ``colbench-verifiers``): ``eval colbench_verifiers``,
``--env.taskset.id colbench_verifiers`` in verifiers' CLI and prime-rl.

verifiers' loader imports a taskset id as a top-level module and takes the one ``Taskset`` and one ``Env`` subclass
it exports in ``__all__`` (a dotted id such as ``colbench.integrations.verifiers`` fails its lookup, and verifiers
0.3.1 reads no entry points). The wheel ships this module beside ``colbench`` so that
``pip install 'colbench[verifiers]'`` is all a user needs; the adapter itself is
:mod:`colbench.integrations.verifiers`.
"""

from colbench.integrations.verifiers import ColbenchEnv, ColbenchTaskset

__all__ = ["ColbenchEnv", "ColbenchTaskset"]
