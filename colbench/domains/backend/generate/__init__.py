"""Generating backend tasks (``colbench tasks generate``): candidates from a model, kept only through sandbox gates
(docs/generate.md)."""
