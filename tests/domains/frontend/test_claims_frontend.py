"""The frontend claims checker (colbench/domains/frontend/claims.py): text the human quotes as shown on the page it
wants, checked against the reference page's visible text (read from the markup, nothing rendered)."""

from __future__ import annotations

import time

import pytest

from colbench.domains.frontend import DOMAIN
from colbench.domains.frontend.claims import FrontendClaimChecker, visible_text
from colbench.env.claim_check import check, check_rows
from colbench.types.claims import untrue
from colbench.types.task import Task

PAGE = """<html><head><title>Sunny tab title</title><style>.x { color: red }</style></head>
<body class="bg-white">
  <h1 class="text-3xl font-bold">Welcome to   Sunny Bakery</h1>
  <p>Fresh bread <b>every</b> morning</p>
  <a href="/order" class="px-4 py-2">Order now &amp; save</a>
  <img src="logo.png" alt="Sunny logo">
  <p class="hidden">Secret sale</p>
  <div style="display: none">Staff only</div>
  <script>var x = "Hidden script";</script>
</body></html>"""
BAKERY = Task(
    task_id="bakery", domain="frontend", problem_description="A bakery page", ground_truth=PAGE, hidden_information=PAGE
)


@pytest.fixture(scope="module")
def checker() -> FrontendClaimChecker:
    made = DOMAIN.claim_checker(None)  # type: ignore[arg-type]  # the markup is read: no scorer is used
    assert isinstance(made, FrontendClaimChecker)
    return made


def verdicts(checker: FrontendClaimChecker, reply: str) -> list[tuple[str, str]]:
    return [(c.stated, c.verdict) for c in check(checker, BAKERY, reply)]


def test_the_visible_text_is_what_a_browser_shows() -> None:
    shown = visible_text(PAGE)
    assert "welcome to sunny bakery" in shown and "fresh bread every morning" in shown
    assert "order now & save" in shown and "sunny logo" in shown
    for hidden in ("secret sale", "staff only", "hidden script", "sunny tab title", "color: red"):
        assert hidden not in shown


@pytest.mark.parametrize(
    "reply",
    [
        'The heading should say "Welcome to Sunny Bakery".',
        "The heading should say “welcome to sunny bakery!”",
        "Under it: 'Fresh bread every morning'.",
        'The button reads "Order now & save".',
    ],
)
def test_quoted_visible_text_of_the_reference_is_true(checker: FrontendClaimChecker, reply: str) -> None:
    (claim,) = check(checker, BAKERY, reply)
    assert claim.verdict == "true" and claim.call == "page" and claim.actual == "shown"


@pytest.mark.parametrize(
    ("reply", "quote"),
    [
        ('The heading should say "Welcome to Rainy Bakery".', "Welcome to Rainy Bakery"),
        ('There should be a banner "Secret sale" at the top.', "Secret sale"),  # hidden on the reference
        ("The footer says 'Open every day'.", "Open every day"),
    ],
)
def test_quoted_text_the_reference_does_not_show_is_false(
    checker: FrontendClaimChecker, reply: str, quote: str
) -> None:
    (claim,) = check(checker, BAKERY, reply)
    assert (claim.stated, claim.verdict, claim.actual) == (quote, "false", "not shown")
    assert untrue(check(checker, BAKERY, reply))


@pytest.mark.parametrize(
    "reply",
    [
        'Your page says "Welcome to Rainy Bakery", which is wrong.',
        'Instead of "Buy bread" the button should read something else.',
        'Remove "Lorem ipsum" from the footer.',
        'Currently it shows "Hello world".',
    ],
)
def test_a_quote_about_the_agents_page_is_unchecked(checker: FrontendClaimChecker, reply: str) -> None:
    claims = check(checker, BAKERY, reply)
    assert [c.verdict for c in claims] == ["unchecked"] and not untrue(claims)


@pytest.mark.parametrize(
    "reply",
    [
        'Use the class "text-3xl" for the title.',
        'Give the title the classes "text-3xl font-bold underline-offset-2".',
        'Give it the class "hero big".',
        'Make the background "#ffcc00".',
        'Wrap it in a "<section>" tag.',
        'Use an id of "main".',
        "Make the heading bigger and the background light blue.",
    ],
)
def test_markup_and_layout_are_no_claims(checker: FrontendClaimChecker, reply: str) -> None:
    assert check(checker, BAKERY, reply) == ()


def test_several_quotes_in_one_reply_and_many_rows(checker: FrontendClaimChecker) -> None:
    reply = 'Heading: "Welcome to Sunny Bakery", then "Fresh bread every morning", then "Free coffee".'
    assert verdicts(checker, reply) == [
        ("Welcome to Sunny Bakery", "true"),
        ("Fresh bread every morning", "true"),
        ("Free coffee", "false"),
    ]
    rows = [(BAKERY, reply, None), (BAKERY, "Looks good!", None), (BAKERY, 'It says "Order now & save".', None)]
    assert [untrue(c) for c in check_rows(checker, rows)] == [True, False, False]


def test_a_hostile_reply_returns_quickly(checker: FrontendClaimChecker) -> None:
    for reply in ('"' * 5_000_000, '"a b" ' * 200_000, "“" * 100_000 + "x", "<" * 1_000_000):
        started = time.perf_counter()
        claims = check(checker, BAKERY, reply)
        assert len(claims) <= 16 and time.perf_counter() - started < 2.0
