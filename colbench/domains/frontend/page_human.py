"""The frontend's simulated human: a vision model that compares the agent's page with the page it wants.

Like the original release, the human is stateless across turns: each reply sees the page it has in mind (the
rendered reference), the agent's latest page (or a note that there is none yet) and the agent's latest message
with its HTML cut out, so it can also answer questions. Older turns are not resent: the pages carry the state,
and requests stay small.

``image_mode="image"`` (default) sends both screenshots as PNG data URLs: the paper's setup, for vision models.
``image_mode="html"`` sends the HTML source of both pages instead, for text-only models (such as the embedded local
model); it is a different, easier-to-game human and results made with it are labelled as such.
``reference_as_text=True`` shows the page it has in mind as the text of ``task.ground_truth`` whatever the image
mode: the spec human (:mod:`colbench.humans.spec`) gets its notes there, never the page.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Any, Literal

from colbench.domains.frontend.extract import extract_html
from colbench.errors import ConfigError
from colbench.humans.simulator import ChatSimulator, check_ends_with_agent
from colbench.llm.client import LLMClient
from colbench.types.dialogue import Turn
from colbench.types.task import Task

ImageMode = Literal["image", "html"]
IMAGE_MODES: tuple[ImageMode, ...] = ("image", "html")
MAX_REPLY_CHARS = 1000
NO_PAGE_NOTE = "(The designer has not shown you a page yet.)"
PAGE_CUT = "[page shown above]"


def _png_part(png: bytes) -> dict[str, Any]:
    url = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return {"type": "image_url", "image_url": {"url": url}}


def _message_without_page(text: str) -> str:
    page = extract_html(text)
    if page is not None:
        text = text.replace(page, PAGE_CUT, 1)
    return text.strip() or PAGE_CUT


class PageSimulator(ChatSimulator):
    """A chat model playing the human of a frontend task, via any OpenAI-compatible endpoint."""

    def __init__(
        self,
        client: LLMClient,
        system_prompt: Callable[[Task], str],
        *,
        image_mode: ImageMode = "image",
        max_chars: int = MAX_REPLY_CHARS,
        reference_as_text: bool = False,
    ) -> None:
        if image_mode not in IMAGE_MODES:
            raise ConfigError(f"image_mode must be 'image' or 'html', got {image_mode!r}")
        super().__init__(client, system_prompt, max_chars=max_chars)
        self.image_mode = image_mode
        self.reference_as_text = reference_as_text

    def messages(
        self, task: Task, dialogue: Sequence[Turn], reference_image: bytes | None = None
    ) -> list[dict[str, Any]]:
        check_ends_with_agent(dialogue)
        last = dialogue[-1]
        agent_page = extract_html(last.text)
        parts: list[dict[str, Any]] = [{"type": "text", "text": "FIRST, the page you have in mind:"}]
        if self.reference_as_text or self.image_mode == "html":
            parts.append({"type": "text", "text": task.ground_truth})
        elif reference_image is None:
            raise ConfigError("the page simulator needs the reference page's screenshot (reference_image)")
        else:
            parts.append(_png_part(reference_image))
        parts.append({"type": "text", "text": "SECOND, the designer's current page:"})
        if self.image_mode == "image":
            parts.append(_png_part(last.image) if last.image is not None else {"type": "text", "text": NO_PAGE_NOTE})
        else:
            parts.append({"type": "text", "text": agent_page if agent_page is not None else NO_PAGE_NOTE})
        parts.append({"type": "text", "text": "The designer's message:\n" + _message_without_page(last.text)})
        content: str | list[dict[str, Any]] = parts
        if self.image_mode == "html":  # plain text: text-only servers may not accept content parts
            content = "\n\n".join(part["text"] for part in parts)
        return [{"role": "system", "content": self.system_prompt(task)}, {"role": "user", "content": content}]
