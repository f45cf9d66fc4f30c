"""Headless Chromium for the browser tests: a ``Renderer`` or a ``FrontendScorer``, or the test skipped, saying why,
where Chromium (or Playwright) cannot start."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from colbench.errors import ConfigError

if TYPE_CHECKING:
    from colbench.domains.frontend.scorer import FrontendScorer
    from colbench.render import RenderConfig, Renderer


def renderer_or_skip(config: RenderConfig | None = None, **options: Any) -> Renderer:
    """``Renderer(config, **options)`` (``cache_size``, ...), or a skip."""
    from colbench.render import Renderer

    try:
        return Renderer(config, **options)
    except ConfigError as exc:
        pytest.skip(f"headless Chromium unavailable: {exc}")


def frontend_scorer_or_skip(**options: Any) -> FrontendScorer:
    """``FrontendScorer(**options)`` (its own renderer, the shared one's settings), or a skip."""
    from colbench.domains.frontend.scorer import FrontendScorer

    try:
        return FrontendScorer(**options)
    except ConfigError as exc:
        pytest.skip(f"headless Chromium unavailable: {exc}")
