"""Offline, bounded rendering of frontend pages: HTML string -> PNG screenshot (see ``renderer`` for the policy)."""

from colbench.render.blocks import BLOCK_KINDS, PageBlock
from colbench.render.ink import MAX_BLOCKS
from colbench.render.inpaint import paint_over_text
from colbench.render.placeholder import MAX_SIDE, load_tailwind_css, placeholder_png, placeholder_size
from colbench.render.renderer import PAGE_URL, RenderConfig, Renderer, RenderResult, RenderStatus, find_chromium

__all__ = [
    "BLOCK_KINDS",
    "MAX_BLOCKS",
    "MAX_SIDE",
    "PAGE_URL",
    "PageBlock",
    "RenderConfig",
    "RenderResult",
    "RenderStatus",
    "Renderer",
    "find_chromium",
    "load_tailwind_css",
    "paint_over_text",
    "placeholder_png",
    "placeholder_size",
]
