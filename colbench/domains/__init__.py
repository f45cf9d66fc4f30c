"""The domains ColBench ships: ``backend`` (Python functions judged by unit tests) and ``frontend`` (web pages
judged by their looks). Each is one package with the same files (``env``, ``scorer``, ``leaks``, ...); the
contract they implement is :class:`colbench.env.domain.Domain`, the registry that finds them
:mod:`colbench.tasks.domain_registry`."""
