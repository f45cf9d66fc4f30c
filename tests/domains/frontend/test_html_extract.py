"""The frontend answer rule: which page an agent's message delivers."""

from __future__ import annotations

import pytest

from colbench.domains.frontend.extract import extract_html

PAGE = '<html>\n<body class="bg-gray-100"><h1>Hi</h1></body>\n</html>'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (PAGE, PAGE),
        (f"Here is my page:\n\n{PAGE}\n\nTell me what to change.", PAGE),
        (f"Thoughts first.\nOUTPUT:\n{PAGE}", PAGE),
        (f"```html\n{PAGE}\n```\nDoes this look right?", PAGE),
        (f"```\n{PAGE}\n```", PAGE),
        (f"<!DOCTYPE html>\n{PAGE}", f"<!DOCTYPE html>\n{PAGE}"),
        (f"<!doctype html>{PAGE} trailing prose", f"<!doctype html>{PAGE}"),
        ('<HTML lang="en"><BODY>x</BODY></HTML>', '<HTML lang="en"><BODY>x</BODY></HTML>'),
    ],
)
def test_complete_documents(text: str, expected: str) -> None:
    assert extract_html(text) == expected


def test_the_first_complete_document_wins() -> None:
    second = "<html><body>second</body></html>"
    assert extract_html(f"{PAGE}\nor maybe\n{second}") == PAGE
    # A complete page in a fence beats a page cut short earlier in the prose.
    assert extract_html(f"<html><body>cut\n```html\n{second}\n```") == second


def test_a_page_cut_by_a_token_limit_is_kept_to_the_end() -> None:
    assert extract_html("Sure:\n<html><body><h1>Half a pa") == "<html><body><h1>Half a pa"
    assert extract_html("```html\n<html><body>cut\n```\nmore words") == "<html><body>cut"


def test_body_and_tagged_fragments() -> None:
    assert extract_html("<body class='p-4'><p>x</p></body> done") == "<body class='p-4'><p>x</p></body>"
    assert extract_html("```html\n<div class='p-4'>card</div>\n```") == "<div class='p-4'>card</div>"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "What colour should the header be?",
        "```python\ndef f():\n    return '<div>'\n```",
        "```\n<div>untagged fence, no document</div>\n```",
    ],
)
def test_no_page(text: str) -> None:
    assert extract_html(text) is None


def test_words_mentioning_tags_without_a_document_still_open_one() -> None:
    # Documented rule 2: an opened document with no end runs to the end of the text. Prose that merely mentions
    # "<html>" is therefore taken as a (poor) page; that is the agent's risk, and it renders as text.
    assert extract_html("I would use an <html> tag later") == "<html> tag later"
