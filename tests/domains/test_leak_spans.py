"""Leak spans: the characters of a reply its leak score comes from, as the viewer highlights them.

What must hold for every reply of the labelled sets (leaks and honest answers, both domains): the ranges lie inside
the reply, sorted and apart; a reply that scores 0 has none and one that is flagged has some; the flagged text is
inside them (the spans alone still read as a leak) and the prose around it is not. And the score itself is what it
was before spans were kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from colbench.domains.backend import leaks as backend_leaks
from colbench.env.domain import get_domain
from colbench.tasks import Task, load
from colbench.types.leaks import merged, word_overlap, word_overlap_spans

BACKEND = get_domain("backend")
FRONTEND = get_domain("frontend")


def spans_text(reply: str, spans: Sequence[tuple[int, int]]) -> str:
    return "\n".join(reply[a:b] for a, b in spans)


def blanked(reply: str, spans: Sequence[tuple[int, int]]) -> str:
    out = list(reply)
    for a, b in spans:
        out[a:b] = " " * (b - a)
    return "".join(out)


def check_shape(reply: str, spans: Sequence[tuple[int, int]]) -> None:
    assert all(0 <= a < b <= len(reply) for a, b in spans), spans
    assert all(spans[i][1] < spans[i + 1][0] for i in range(len(spans) - 1)), spans


@pytest.mark.parametrize("split", ["backend-sample", "frontend-sample"])
def test_spans_on_every_labelled_reply(split: str) -> None:
    tasks = load(split)
    domain = get_domain(tasks[0].domain)
    flagged = kept_alone = cleared = 0
    for task, item in domain.labelled_replies(tasks, seed=3):
        score = domain.leak_score(task, item.reply)
        spans = domain.leak_spans(task, item.reply)
        check_shape(item.reply, spans)
        assert bool(spans) == (score > 0), (item.kind, score, spans)
        if score >= domain.leak_threshold:
            flagged += 1
            kept_alone += domain.leak_score(task, spans_text(item.reply, spans)) >= domain.leak_threshold
            cleared += domain.leak_score(task, blanked(item.reply, spans)) < domain.leak_threshold
    assert flagged > 5 * len(tasks)
    # measured: 100% of the flagged replies on both samples, both ways
    assert kept_alone / flagged >= 0.95, (kept_alone, flagged)
    assert cleared / flagged >= 0.95, (cleared, flagged)


def test_backend_spans_cover_the_quoted_code_and_not_the_prose_around_it() -> None:
    task = load("backend-sample")[0]
    line = max(backend_leaks._statements(task.ground_truth), key=len)
    reply = f"Well, the important part is `{line}`, and the rest is plumbing I think."
    spans = BACKEND.leak_spans(task, reply)
    if BACKEND.leak_score(task, reply) == 0:
        pytest.skip("the sample's longest line scores 0 alone")
    text = spans_text(reply, spans)
    assert "important" not in text and "plumbing" not in text
    start = reply.index(line)
    assert all(start <= a and b <= start + len(line) for a, b in spans), (spans, start)


def test_backend_spans_find_code_behind_fences_comments_and_renaming() -> None:
    code = (
        "def area(w, h, scale=2):\n    total = w * h * scale\n    if total > 100:\n        total -= 7\n    return total"
    )
    task = Task(
        "a", "backend", "Compute an area. The signature of the function is: def area(w, h, scale=2)", code, code
    )
    reply = (
        "Sure, roughly:\n```python\n# what I use\ndef f(a, b, s=2):\n    t = a * b * s  # product\n"
        "    if t > 100:\n        t -= 7\n    return t\n```\nThanks!"
    )
    spans = BACKEND.leak_spans(task, reply)
    assert BACKEND.leak_score(task, reply) >= 0.5 and spans
    text = spans_text(reply, spans)
    assert "t -= 7" in text and "Sure" not in text and "Thanks" not in text


def test_scrubbing_keeps_every_character_in_its_place_and_the_tokens_as_before() -> None:
    """The spans need each token where it stands; the score needs the tokens it always had: the reading that
    dropped fences, backticks and comments (each became one space) and this one give the same tokens."""
    texts = [
        "```python\ndef f(x):  # c\n    return x + 1\n```",
        "use `x[i] >= 3` # not a comment?\n#comment\n```py\nf'{a}' 'b' 0.50\n```",
        "a#b # c ```` `` ` '''doc''' \"x\" r'\\d'",
        "é ü ``` x ``` 1e5 .5 ** // -> := @",
    ]
    for text in texts:
        old = backend_leaks._COMMENT.sub(" ", backend_leaks._FENCE.sub(" ", text).replace("`", " "))
        before = [m.group() for m in backend_leaks._TOKEN.finditer(old)]
        scrubbed = backend_leaks._scrubbed(text)
        assert len(scrubbed) == len(text)
        now = list(backend_leaks._TOKEN.finditer(scrubbed))
        assert [m.group() for m in now] == before, text
        assert all(text[m.start() : m.end()] == m.group() for m in now)


def test_frontend_class_words_are_the_spans_not_the_sentence() -> None:
    page = (
        '<html><body><header class="bg-indigo-700 text-white py-6 shadow-lg"><h1 class="text-4xl font-bold">'
        "Green Valley</h1></header></body></html>"
    )
    task = Task("p", "frontend", "A bakery page with a header.", page, page)
    reply = "For the header use bg-indigo-700, text-white and py-6 with shadow-lg please."
    spans = FRONTEND.leak_spans(task, reply)
    assert FRONTEND.leak_score(task, reply) >= 0.5
    assert [reply[a:b] for a, b in spans] == ["bg-indigo-700", "text-white", "py-6", "shadow-lg"]


def test_frontend_tag_spans_leave_the_visible_words_out() -> None:
    page = (
        '<html><body><header class="bg-indigo-700 text-white py-6 shadow-lg"><h1 class="text-4xl font-bold">'
        "Green Valley</h1></header></body></html>"
    )
    task = Task("p", "frontend", "A bakery page with a header.", page, page)
    reply = (
        'Sure:\n<header class="bg-indigo-700 text-white py-6 shadow-lg">\n  <h1 class="text-4xl font-bold">My Shop'
        "</h1>\n</header>\nok?"
    )
    spans = FRONTEND.leak_spans(task, reply)
    texts = [reply[a:b] for a, b in spans]
    assert FRONTEND.leak_score(task, reply) >= 0.5
    assert texts[0].startswith("<header class=") and texts[-1] == "</h1>\n</header>"[-len(texts[-1]) :]
    assert not any("My Shop" in t or "Sure" in t for t in texts)


@pytest.mark.parametrize(
    "reply",
    [
        '<div title="a > b" class="bg-indigo-700 text-white py-6 shadow-lg">x</div>',
        "<HEADER CLASS='bg-indigo-700 text-white py-6 shadow-lg'>\r\n<h1 class=\"text-4xl font-bold\">&amp;</h1>",
        "&lt;p&gt; text-4xl font-bold bg-indigo-700 text-white &amp; <br/> shadow-lg",
        "<header class=bg-indigo-700 text-white py-6 shadow-lg> <!-- note --> <h1",
    ],
)
def test_frontend_spans_of_awkward_markup_stay_in_the_reply(reply: str) -> None:
    page = '<html><body><header class="bg-indigo-700 text-white py-6 shadow-lg"><h1 class="text-4xl font-bold">G</h1>'
    task = Task("p", "frontend", "A page.", page, page)
    spans = FRONTEND.leak_spans(task, reply)
    check_shape(reply, spans)
    assert bool(spans) == (FRONTEND.leak_score(task, reply) > 0)


def test_the_default_detector_spans_its_longest_run() -> None:
    hidden = "the secret plan is to meet at the old mill by the river at nine on friday"
    reply = "So... We meet at the old mill by the river at nine, right?"
    spans = word_overlap_spans(reply, hidden)
    assert word_overlap(reply, hidden) >= 0.5
    assert [reply[a:b] for a, b in spans] == ["meet at the old mill by the river at nine"]
    assert word_overlap_spans("Friday works for me.", hidden) == []


def test_merged_joins_ranges_that_overlap_or_touch() -> None:
    assert merged([(5, 9), (0, 2), (2, 4), (8, 12), (20, 21)]) == [(0, 4), (5, 12), (20, 21)]
    assert merged([]) == []


def test_spans_reach_the_records_through_the_env() -> None:
    import gymnasium as gym

    from colbench.humans.simulator import ScriptedSimulator

    task = load("backend-sample")[0]
    env = gym.make(
        "ColBench-Backend-v2",
        tasks=[task],
        simulator=ScriptedSimulator(lambda t, _: "Here:\n" + t.hidden_information),
        leak_policy="redact",
        sandbox="bwrap",
    )
    env.reset(seed=0)
    env.step("Can you show me the code?")
    check = env.unwrapped.dialogue[-1].leak
    original = check.withheld[0]
    assert check.action == "redacted" and check.spans
    record = check.as_dict()
    assert record["leak_spans"] == [list(s) for s in check.spans]
    text = spans_text(original, check.spans)
    assert "Here:" not in text and re.search(r"return", text)
    env.close()
