"""``colbench view``: a web viewer of run directories, live (a local Starlette server) or as a static bundle.

- :mod:`colbench.view.index`: the on-disk sqlite index of a run, updated from the bytes appended to its log.
- :mod:`colbench.view.summary`, :mod:`colbench.view.episode`: what the runs index and an episode page show.
- :mod:`colbench.view.site`: the runs viewed, templates and links shared by the server and the bundle.
- :mod:`colbench.view.app`: the server; :mod:`colbench.view.bundle`: the static site.
"""
