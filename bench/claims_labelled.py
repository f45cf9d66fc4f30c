"""A labelled set for the backend claims checker: human replies with true claims, false claims and none.

``labelled_claims(tasks, scorer)`` runs each task's reference on its own literal test calls
(``BackendScorer.reference_values``, in the sandbox) and writes replies about those calls the way people write in a
chat, each labelled from the reference's value:

- ``true``: the value the reference gives, written as people write it (exactly, with thousands separators, a float
  rounded to two decimals, a list for a tuple), in many phrasings (``CLAIMS``: sentences, code spans, arrows, a
  doctest, "I'd expect", the value before the call, prose for a function of one parameter; a question and its
  answer, a yes or no to a question that states a value, given as the row's ``question``);
- ``false``: a near miss of that value (``PERTURBATIONS``: one more or less, a float off by a few percent, one list
  element or dict value changed, a string changed, a bool flipped, ``None`` for a value or a value for ``None``,
  the value of another of the task's calls), in the same phrasings;
- ``none``: chatty replies with no checkable claim (``NO_CLAIMS``): numbers that are not results, the function's
  name without a call, calls without a value, properties of a result ("the first item of f(x) is 3"), negations,
  hedges, code words, questions back, a "no idea" to a question that states a value.

The phrasings are written from how people talk about examples, not from the finder's patterns. Each row is
``{task_id, reply, question?, label, kind, how?, form?}``: ``kind`` the phrasing, ``how`` the perturbation of a false
value, ``form`` how a true value was written. Deterministic for a seed.

The phrasings came in rounds. The first was written before the finder was run on anything; each later round (the
``CLAIMS +=`` blocks and the commented batches of ``_no_claims``) was written after the previous round had been run
and the finder improved on it, without looking at the finder, and run once as it was before the finder was
improved on it: what a held-out set phrased in new ways is likely to see. On the 300-task test sample those first
runs gave (recall on false claims; share of claim-free replies flagged untrue):

- round 2 (long chat, dashes, tables, possessives, "is what", chatty Q&A): recall 0.33;
- round 3 (code blocks, formal sentences, "end up with", Q&A, prose): recall 0.69; "f(1) and f(2) return 3 and 4
  respectively" flagged 12% of true pairs;
- round 4 (claim-free: numbered lists, "Right, so...", "Why does f(x) return 3"): 0.21 flagged;
- round 5 ("if the input is f(x), ...", labelled lines, prose): recall 0.60; 0.33 flagged (denials before the call:
  "I doubt f(x) returns 3", "don't hardcode f(x) = 3");
- round 6 (chatty, cross-sentence, "as the argument"): recall 0.81; 0.27 flagged (retractions: "... no wait",
  "but that was a bug");
- round 7 (LLM-style examples, "f(x)? That's 3", "pass in"): recall 0.77; 0.00 flagged;
- round 8 (markdown emphasis, "gonna be", "result: 3", "you're right"): recall 0.58; 0.00 flagged;
- round 9 ("--", "==>", verbs of no list, "I'd go with 3", "X in, Y out"): recall 0.50; 0.08 flagged ("3 is the
  number of items, not the result");
- round 10 ("evaluates to ... on my machine", "It does.", "Input X -> output Y", short answers): recall 0.81; 0.00
  flagged.

After each round the finder was made broader or more careful in a general way (see the git log), and every
round's phrasings stay in the set, so the figures the bench prints for the whole set are in-sample: the rounds'
first figures above are the better guess for replies phrased in ways nobody wrote here.
"""

from __future__ import annotations

import ast
import json
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from colbench.domains.backend.values import values_equal

if TYPE_CHECKING:
    from colbench.domains.backend.scorer import BackendScorer
    from colbench.types.task import Task

MAX_TEXT = 160
"""The longest value (as written) put in a reply: people quote short results."""


@dataclass(frozen=True)
class Labelled:
    task_id: str
    reply: str
    label: str  # "true" | "false" | "none"
    kind: str
    question: str | None = None
    how: str = ""
    form: str = ""

    def row(self) -> dict[str, Any]:
        out: dict[str, Any] = {"task_id": self.task_id, "reply": self.reply}
        if self.question is not None:
            out["question"] = self.question
        out.update(label=self.label, kind=self.kind)
        if self.how:
            out["how"] = self.how
        if self.form:
            out["form"] = self.form
        return out


@dataclass(frozen=True)
class Example:
    """One literal test call of a task and the reference's value there."""

    call: str
    name: str
    args: tuple[str, ...]  # the positional arguments' source text (single-parameter prose uses the one)
    keywords: bool
    value: Any


# -- which calls ------------------------------------------------------------------------------------------------
def _entry(task: Task) -> tuple[set[str], int | None]:
    """The reference's top-level function names, and the number of positional parameters of the tests' function
    when it takes exactly one argument (else None)."""
    try:
        tree = ast.parse(task.ground_truth)
    except (SyntaxError, ValueError):
        return set(), None
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    single = None
    for _, expr in task.test_cases:
        try:
            node = ast.parse(expr, mode="eval").body
        except SyntaxError:
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in defs:
            args = defs[node.func.id].args
            positional = [*args.posonlyargs, *args.args]
            required = len(positional) - len(args.defaults)
            if len(positional) == 1 or (required == 1 and not args.vararg):
                single = 1
            break
    return set(defs), single


def _literal_call(expr: str, names: set[str]) -> tuple[str, tuple[str, ...], bool] | None:
    try:
        node = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.func.id not in names:
        return None
    parts = [*node.args, *(k.value for k in node.keywords)]
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        return None
    try:
        for part in parts:
            ast.literal_eval(part)
    except (ValueError, SyntaxError, TypeError):
        return None
    source = expr.strip()
    args = tuple(ast.get_source_segment(source, a) or "" for a in node.args)
    return node.func.id, args, bool(node.keywords)


# -- writing values as people do ----------------------------------------------------------------------------------
def _plain(value: Any, depth: int = 0) -> bool:
    """A value a literal writes back exactly (no NaN, no objects)."""
    if depth > 6:
        return False
    if isinstance(value, float):
        return math.isfinite(value)
    if value is None or isinstance(value, bool | int | str):
        return True
    if isinstance(value, list | tuple | frozenset):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(_plain(k, depth + 1) and _plain(v, depth + 1) for k, v in value.items())
    return False


def _exact(value: Any) -> str:
    if isinstance(value, frozenset):
        return "{" + ", ".join(_exact(v) for v in sorted(value, key=repr)) + "}" if value else "set()"
    if isinstance(value, list):
        return "[" + ", ".join(_exact(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_exact(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_exact(k)}: {_exact(v)}" for k, v in value.items()) + "}"
    return repr(value)


def written(value: Any, rng: random.Random, lenient: bool) -> tuple[str, str] | None:
    """``value`` as a person writes it in a chat, and how (``exact``, ``thousands``, ``rounded``, ``list-for-tuple``,
    ``double-quotes``, ``lowercase-bool``); None when it is no short literal. ``lenient`` allows the forms the checker
    must accept as equal (only for true claims)."""
    if not _plain(value):
        return None
    form = "exact"
    if isinstance(value, bool):
        text = str(value).lower() if lenient and rng.random() < 0.3 else str(value)
        form = "lowercase-bool" if text != str(value) else form
    elif isinstance(value, int) and lenient and abs(value) >= 1000 and rng.random() < 0.6:
        text, form = f"{value:,}", "thousands"
    elif (
        isinstance(value, float)
        and lenient
        and 0.01 <= abs(value) < 1e12
        and len(repr(value).split(".")[-1]) > 2
        and "e" not in repr(value)
        and rng.random() < 0.6
    ):
        text, form = f"{value:.2f}", "rounded"
    elif isinstance(value, str) and rng.random() < 0.4 and '"' not in value and "\\" not in value:
        text, form = json.dumps(value, ensure_ascii=False), "double-quotes"
    elif isinstance(value, tuple) and lenient and value and rng.random() < 0.5:
        text, form = _exact(list(value)), "list-for-tuple"
    elif lenient and isinstance(value, list | dict) and _json_like(value) and rng.random() < 0.3:
        text, form = json.dumps(value, ensure_ascii=False), "json"
    elif lenient and _WORDS.get(_exact(value)) and rng.random() < 0.5:
        text, form = rng.choice(_WORDS[_exact(value)]), "words"
    elif (
        isinstance(value, float)
        and lenient
        and 0 < value <= 1
        and round(value * 100, 2) == value * 100
        and rng.random() < 0.4
    ):
        text, form = f"{value * 100:g}%", "percent"
    else:
        text = _exact(value)
    if len(text) > MAX_TEXT or "\n" in text:
        return None
    return text, form


_WORDS = {
    "[]": ["an empty list", "empty list"],
    "''": ["an empty string", "the empty string"],
    "{}": ["an empty dict", "an empty dictionary"],
    "None": ["nothing", "None"],
    "True": ["true"],
    "False": ["false"],
    "0": ["zero"],
}


def _json_like(value: Any) -> bool:
    """A value JSON writes back as itself (lists, string keys; no tuples, sets or non-finite floats)."""
    if isinstance(value, list):
        return all(_json_like(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_like(v) for k, v in value.items())
    return value is None or isinstance(value, bool | int | str) or (isinstance(value, float) and math.isfinite(value))


def same(actual: Any, stated: Any) -> bool:
    """Whether a stated value is the actual one as the checker's contract reads values (the scorer's equality; a
    float as written, to its decimals; a list for a tuple or set)."""
    if values_equal(actual, stated):
        return True
    if isinstance(stated, float) and isinstance(actual, int | float) and not isinstance(actual, bool):
        text = repr(stated)
        decimals = len(text.split(".")[1]) if "." in text and "e" not in text else None
        return decimals is not None and abs(actual - stated) <= 0.5 * 10.0**-decimals * (1 + 1e-9)
    if isinstance(actual, tuple | frozenset) and isinstance(stated, list | tuple):
        items = list(actual) if isinstance(actual, tuple) else sorted(actual, key=repr)
        return len(items) == len(stated) and all(same(a, s) for a, s in zip(items, stated, strict=True))
    if isinstance(actual, list | tuple) and isinstance(stated, list | tuple):
        return len(actual) == len(stated) and all(same(a, s) for a, s in zip(actual, stated, strict=True))
    return False


# -- near misses ------------------------------------------------------------------------------------------------
def _changed_str(value: str, rng: random.Random) -> str:
    if not value:
        return "none"
    choice = rng.randrange(4)
    if choice == 0 and len(value) > 1:
        return value[:-1]
    if choice == 1:
        i = rng.randrange(len(value))
        ch = value[i]
        new = "x" if ch != "x" else "y"
        if ch.isdigit():
            new = str((int(ch) + 1) % 10)
        return value[:i] + new + value[i + 1 :]
    if choice == 2 and any(c.isalpha() for c in value):
        swapped = value.swapcase() if rng.random() < 0.5 else value.upper()
        if swapped != value:
            return swapped
    return value + rng.choice(["s", " ", "!", " only"])


def _near_miss(value: Any, rng: random.Random, depth: int = 0) -> tuple[Any, str] | None:
    """A value close to ``value`` that is not equal to it, and how it was made."""
    if depth > 4:
        return None
    if isinstance(value, bool):
        return (not value), "bool flipped"
    if isinstance(value, int):
        step = rng.choice([1, -1, 1, 2, 10]) if value else rng.choice([1, -1])
        return value + step, "int off by one" if abs(step) == 1 else "int off by a few"
    if isinstance(value, float):
        delta = max(abs(value) * rng.uniform(0.03, 0.2), rng.choice([0.1, 0.5, 1.0]))
        return round(value + rng.choice([-1, 1]) * delta, 2), "float off a little"
    if isinstance(value, str):
        return _changed_str(value, rng), "string changed"
    if value is None:
        return rng.choice([0, False, [], "None"]), "a value for None"
    if isinstance(value, list | tuple):
        if not value:
            return type(value)([1]), "element added"
        if rng.random() < 0.25 and len(value) > 1:
            return value[:-1], "element dropped"
        i = rng.randrange(len(value))
        inner = _near_miss(value[i], rng, depth + 1)
        if inner is None:
            return None
        items = list(value)
        items[i] = inner[0]
        return type(value)(items), "element changed"
    if isinstance(value, dict):
        if not value:
            return {"a": 1}, "entry added"
        key = rng.choice(list(value))
        inner = _near_miss(value[key], rng, depth + 1)
        if inner is None:
            return None
        return {**value, key: inner[0]}, "dict value changed"
    if isinstance(value, frozenset):
        return (value | {"extra"}), "set element added"
    return None


def false_value(example: Example, others: Sequence[Example], rng: random.Random) -> tuple[str, str] | None:
    """A false stated value for ``example`` as written, and how it was made (None when none is found)."""
    for _ in range(4):
        if others and rng.random() < 0.2:
            other = rng.choice(others)
            candidate, how = other.value, "another call's value"
        else:
            made = _near_miss(example.value, rng)
            if made is None:
                continue
            candidate, how = made
        if same(example.value, candidate) or not _plain(candidate):
            continue
        if (
            isinstance(candidate, float)
            and isinstance(example.value, int | float)
            and abs(candidate - example.value) <= 0.02
        ):
            continue
        text = _exact(candidate)
        if len(text) <= MAX_TEXT and "\n" not in text:
            return text, how
    return None


# -- phrasings ------------------------------------------------------------------------------------------------------
# Each claim phrasing: (name, needs, make) where make(rng, example, value_text) gives (reply, question or None).
# needs: "" any call; "single" a one-parameter function called with one positional argument; "empty" that argument
# empty.
Make = Callable[[random.Random, Example, str], tuple[str, str | None]]


def _pick(rng: random.Random, *options: str) -> str:
    return rng.choice(options)


CLAIMS: list[tuple[str, str, Make]] = [
    (
        "sentence",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"Yeah, so {e.call} should return {v}.",
                f"OK so for my example, {e.call} returns {v}.",
                f"Right, {e.call} gives {v} in my spreadsheet.",
                f"{e.call} is {v}, that's the one I checked by hand.",
                f"I worked it out on paper: {e.call} comes out as {v}.",
            ),
            None,
        ),
    ),
    (
        "ran-it",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"When I ran {e.call} on my laptop I got {v}.",
                f"If you call {e.call} you should get {v} back.",
                f"Calling {e.call} gives me {v}, which is what I want.",
                f"I tried {e.call} with my old script and it printed {v}.",
                f"If I run {e.call}, I get {v}.",
            ),
            None,
        ),
    ),
    (
        "arrow",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"Examples:\n- {e.call} -> {v}",
                f"{e.call} → {v}",
                f"For instance {e.call} => {v}, does that help?",
                f"* {e.call}  ->  {v}\n* (more later)",
            ),
            None,
        ),
    ),
    (
        "equals",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"e.g. {e.call} == {v}",
                f"Basically {e.call} = {v}.",
                f"Something like `assert {e.call} == {v}` should pass.",
                f"My test is: assert {e.call} == {v}",
                f"{e.call} equals {v} there.",
            ),
            None,
        ),
    ),
    (
        "code-span",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"`{e.call}` should give `{v}`.",
                f"Try `{e.call}`, it should return `{v}`.",
                f"`{e.call}` -> `{v}`",
                f"The expected output of `{e.call}` is `{v}`.",
            ),
            None,
        ),
    ),
    (
        "expect",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"I'd expect {e.call} to be {v}.",
                f"I would expect {e.call} to return {v}.",
                f"I expect {e.call} to give {v}, that's how my team does it.",
                f"We'd want {e.call} to come out as {v}.",
            ),
            None,
        ),
    ),
    (
        "result-of",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"The output of {e.call} should be {v}.",
                f"The result of {e.call} is {v}.",
                f"So the return value of {e.call} would be {v}.",
                f"The answer for {e.call} should be {v}.",
            ),
            None,
        ),
    ),
    (
        "doctest",
        "",
        lambda r, e, v: (
            _pick(r, f">>> {e.call}\n{v}", f"Here's what I'd like:\n\n>>> {e.call}\n{v}\n"),
            None,
        ),
    ),
    (
        "colon",
        "",
        lambda r, e, v: (
            _pick(r, f"Example - {e.call}: {v}", f"{e.call}: {v}", f"Test case {e.call}: expected {v}"),
            None,
        ),
    ),
    (
        "value-first",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"You should get {v} from {e.call}.",
                f"It should return {v} for {e.call}.",
                f"I got {v} when I called {e.call}.",
                f"Expected {v} for {e.call}.",
            ),
            None,
        ),
    ),
    (
        "qa-sentence",
        "",
        lambda r, e, v: (
            _pick(
                r, f"It should be {v}.", f"That one gives {v}.", f"I'd say {v}.", f"You'd get {v}.", f"It returns {v}."
            ),
            _pick(
                r,
                f"What should {e.call} return?",
                f"What would you expect from {e.call}?",
                f"Could you tell me what {e.call} gives?",
                f"What's the expected output for {e.call}?",
            ),
        ),
    ),
    (
        "qa-bare",
        "",
        lambda r, e, v: (
            _pick(r, f"{v}", f"{v}.", f"{v}!", f"Hmm, {v}.", f"Oh, that's {v}.", f"{v}, I'm pretty sure."),
            _pick(r, f"What should {e.call} return?", f"And {e.call}?", f"What's {e.call} supposed to give?"),
        ),
    ),
    (
        "prose",
        "single",
        lambda r, e, v: (
            _pick(
                r,
                f"For {e.args[0]} it should return {v}.",
                f"Given {e.args[0]}, you'd get {v}.",
                f"If the input is {e.args[0]}, the output should be {v}.",
                f"With {e.args[0]} it gives {v}.",
                f"Passing {e.args[0]} should give {v}.",
            ),
            None,
        ),
    ),
    (
        "prose-empty",
        "empty",
        lambda r, e, v: (
            _pick(
                r,
                f"An empty list should give {v}.",
                f"For an empty list it returns {v}.",
                f"If the list is empty, it should return {v}.",
            ),
            None,
        ),
    ),
]

# A second batch, written after the first had been run and the finder improved on it, without looking at the finder:
# a check that what it learned carries over to phrasings it was not shown.
CLAIMS += [
    (
        "chat-long",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"Sure! So basically if I do {e.call} I'm expecting {v} as the result. Does that make sense?",
                f"Hi again. My expected output for {e.call} is {v}; the others I'd have to dig up.",
                f"Thanks for asking. Quick example: calling {e.call} should produce {v}. Let me know if you need more.",
                f"OK here's one I'm sure about - {e.call} should spit out {v}.",
            ),
            None,
        ),
    ),
    (
        "dash",
        "",
        lambda r, e, v: (
            _pick(r, f"{e.call} — should be {v}.", f"{e.call} – {v}", f"So, {e.call}... that one is {v}."),
            None,
        ),
    ),
    (
        "table",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"| input | output |\n|---|---|\n| `{e.call}` | `{v}` |",
                f"call | expected\n{e.call} | {v}",
            ),
            None,
        ),
    ),
    (
        "possessive",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"{e.call}'s result is {v}.",
                f"The correct answer to {e.call} is {v}.",
                f"Running {e.call} in my terminal prints {v}.",
                f"I believe {e.call} evaluates to {v}.",
            ),
            None,
        ),
    ),
    (
        "value-is-what",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"{v} is what {e.call} should return.",
                f"It gives back {v} when you call {e.call}.",
                f"The function should output {v} if you pass it the args of {e.call}.",
            ),
            None,
        ),
    ),
    (
        "qa-chatty",
        "",
        lambda r, e, v: (
            _pick(r, f"that'd be {v}", f"I get {v}.", f"Expected value is {v}.", f"Should come out to {v} :)"),
            _pick(
                r,
                f"Quick question, what's {e.call}?",
                f"What do you get for {e.call}?",
                f"{e.call} — what's the expected value?",
            ),
        ),
    ),
    (
        "prose-say",
        "single",
        lambda r, e, v: (
            _pick(
                r,
                f"Say the input is {e.args[0]}; then it should output {v}.",
                f"Take {e.args[0]} for example: the function returns {v}.",
                f"Feed it {e.args[0]} and you get {v}.",
            ),
            None,
        ),
    ),
]

# A third batch, written after the second had been run and the finder improved on it, again without looking at it.
CLAIMS += [
    (
        "code-block",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"Here is a test case you can use:\n```python\nassert {e.call} == {v}\n```",
                f"```\nprint({e.call})  # {v}\n```",
                f"```python\n>>> {e.call}\n{v}\n```",
                f"{e.call}\n=> {v}",
            ),
            None,
        ),
    ),
    (
        "formal",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"The function call {e.call} is expected to return {v}.",
                f"In my head {e.call} works out to {v}.",
                f"Yes — {e.call} should definitely give {v}.",
                f"{e.call} ought to be {v}",
                f"Output of {e.call}: {v}",
                f"{e.call} returns {v} (I double-checked).",
            ),
            None,
        ),
    ),
    (
        "end-up",
        "",
        lambda r, e, v: (
            _pick(r, f"You'd end up with {v} from {e.call}.", f"{v} comes back from {e.call}, I believe."),
            None,
        ),
    ),
    (
        "qa-more",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"Sure, it's {v}.",
                f"{v} comes out.",
                f"→ {v}",
                f"You get {v}.",
                f"The answer there is {v}, for sure.",
            ),
            _pick(r, f"Can you give me the output for {e.call}?", f"If I run {e.call}, what comes out?", f"{e.call}?"),
        ),
    ),
    (
        "prose-more",
        "single",
        lambda r, e, v: (
            _pick(
                r,
                f"When the input is {e.args[0]}, I'd like to see {v}.",
                f"An input of {e.args[0]} should produce {v}.",
                f"{e.args[0]} as input should give {v}.",
            ),
            None,
        ),
    ),
]

# A fifth batch, written after the fourth had been run and the finder improved on it, again without looking at it.
CLAIMS += [
    (
        "example-sentence",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"For example, if the input is {e.call}, the function should return {v}.",
                f"e.g. {e.call} would yield {v}",
                f"So in that case the result of {e.call} comes to {v}.",
                f"I'd want {e.call} to give back {v}.",
                f"my notes say {e.call} = {v}",
                f"Output for {e.call} is {v}.",
                f"{e.call} gives me back {v}",
                f"Results: {e.call} -> {v}, nice and simple.",
            ),
            None,
        ),
    ),
    (
        "labelled-lines",
        "",
        lambda r, e, v: (
            _pick(
                r, f"Test: {e.call}\nExpected: {v}", f"Input: {e.call}\nOutput: {v}", f"{e.call} => should return {v}"
            ),
            None,
        ),
    ),
    (
        "qa-formal",
        "",
        lambda r, e, v: (
            _pick(r, f"The expected result is {v}.", f"{v}, definitely.", f"Definitely {v}.", f"It's {v} – I checked."),
            _pick(r, f"What is the expected result of {e.call}?", f"Which value should {e.call} produce?"),
        ),
    ),
    (
        "prose-someone",
        "single",
        lambda r, e, v: (
            _pick(
                r,
                f"If someone passes {e.args[0]}, the answer is {v}.",
                f"{e.args[0]} should map to {v}.",
                f"It should return {v} given {e.args[0]}.",
            ),
            None,
        ),
    ),
]

# A sixth batch, written after the fifth had been run and the finder improved on it, again without looking at it.
CLAIMS += [
    (
        "chat-more",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"It's {e.call} → {v}, like I said earlier.",
                f"The way I see it, {e.call} has to return {v}.",
                f"{e.call} is supposed to give {v}.",
                f"Let's say we call {e.call}. The result should be {v}.",
                f"So for {e.call} I want to see {v}.",
                f"Take {e.call}, which returns {v}.",
                f"The return value of {e.call} must be {v}.",
                f"{e.call} yields {v} in my tests.",
            ),
            None,
        ),
    ),
    (
        "qa-case",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"You'll see {v}.",
                f"{v} (that's what my spreadsheet says)",
                f"The function returns {v} in that case.",
                f"In that case it's {v}.",
            ),
            _pick(r, f"What's the output when I call {e.call}?", f"What happens with {e.call}?"),
        ),
    ),
    (
        "prose-arg",
        "single",
        lambda r, e, v: (
            _pick(
                r,
                f"Given the input {e.args[0]} the function gives {v}.",
                f"If I give it {e.args[0]} I'd expect {v}.",
                f"With {e.args[0]} as the argument, it returns {v}.",
            ),
            None,
        ),
    ),
]

# A seventh batch, written after the sixth had been run and the finder improved on it, again without looking at it.
CLAIMS += [
    (
        "llm-human",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"Sure! Here is one example: {e.call} should give {v}, and that's the main case.",
                f"For instance, calling {e.call} returns {v} since that's how my rules work.",
                f"{e.call} = {v} (that's from my notes)",
                f"The expected output for {e.call} would be {v}",
                f"If we run {e.call}, we'd expect it to be {v}.",
                f"Regarding {e.call}: {v}.",
                f"{e.call}? That's {v}.",
            ),
            None,
        ),
    ),
    (
        "qa-llm",
        "",
        lambda r, e, v: (
            _pick(
                r, f"It'd return {v}, since that's the rule.", f"{v} — that's what I'd expect.", f"Should be {v}, yeah."
            ),
            _pick(r, f"What should {e.call} return?", f"Any idea what {e.call} gives?"),
        ),
    ),
    (
        "prose-pass-in",
        "single",
        lambda r, e, v: (
            _pick(
                r,
                f"Say I pass in {e.args[0]} - I should get back {v}.",
                f"Pass {e.args[0]} and it should spit out {v}.",
            ),
            None,
        ),
    ),
]

# An eighth batch, written after the seventh had been run and the finder improved on it, again without looking at it.
CLAIMS += [
    (
        "casual",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"**{e.call}** → **{v}**",
                f"{e.call}  returns  {v}",
                f"{e.call} should return: {v}",
                f"the answer to {e.call} is obviously {v}",
                f"{e.call} is gonna be {v}",
                f"{e.call} should come back as {v}",
                f"expected: {e.call} == {v}",
                f"{e.call} — result: {v}",
                f"i think {e.call} gives {v}",
            ),
            None,
        ),
    ),
    (
        "qa-casual",
        "",
        lambda r, e, v: (
            _pick(r, f"It will output {v}.", f"Output: {v}", f"{v}. Anything else?", f"I'm fairly confident it's {v}."),
            _pick(r, f"What will {e.call} output?", f"And {e.call} gives...?"),
        ),
    ),
    (
        "prose-using",
        "single",
        lambda r, e, v: (
            _pick(r, f"Using {e.args[0]}, the output is {v}.", f"On input {e.args[0]} it outputs {v}."),
            None,
        ),
    ),
]

# A ninth batch, written after the eighth had been run and the finder improved on it, again without looking at it.
CLAIMS += [
    (
        "usage",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"Example usage:\n```\n>>> {e.call}\n{v}\n```",
                f"`{e.call}` evaluates to `{v}`",
                f"Pretty sure {e.call} spits back {v}.",
                f"When called as {e.call}, it should return {v}.",
                f"{e.call} -- {v}",
                f"For {e.call} the output would be {v}.",
                f"Calling {e.call} should result in {v}.",
                f"{e.call} ==> {v}",
                f"{e.call} : {v}",
                f"In short: {e.call} returns {v}.",
                f"The result I expect from {e.call} is {v}.",
            ),
            None,
        ),
    ),
    (
        "qa-evaluate",
        "",
        lambda r, e, v: (
            _pick(r, f"Evaluates to {v}.", f"{v} is the answer.", f"I'd go with {v}."),
            f"What does {e.call} evaluate to?",
        ),
    ),
    (
        "prose-in-out",
        "single",
        lambda r, e, v: (
            _pick(
                r,
                f"{e.args[0]} in, {v} out.",
                f"Feeding {e.args[0]} should produce {v}.",
                f"An argument of {e.args[0]} results in {v}.",
            ),
            None,
        ),
    ),
]

# A tenth batch, written after the ninth had been run and the finder improved on it, again without looking at it.
CLAIMS += [
    (
        "data-point",
        "",
        lambda r, e, v: (
            _pick(
                r,
                f"Just to give you a concrete case, {e.call} evaluates to {v} on my machine.",
                f"{e.call} == {v}  # this should pass",
                f"Ideally {e.call} would output {v}",
                f"If it helps: {e.call} should equal {v}.",
                f"Here's a data point — {e.call} gave {v} last time I checked.",
                f"{e.call}  =>  {v}  (correct)",
                f"In my spreadsheet, the cell for {e.call} shows {v}.",
                f"I computed {e.call} by hand and got {v}.",
                f"{e.call} → should be {v}",
                f"Test case: {e.call} expected output {v}",
            ),
            None,
        ),
    ),
    (
        "qa-short",
        "",
        lambda r, e, v: (
            _pick(r, f"{v}, as far as I know.", f"That would be {v}.", f"The answer: {v}", f"Easy — {v}."),
            f"What is {e.call}?",
        ),
    ),
    (
        "prose-like",
        "single",
        lambda r, e, v: (
            _pick(r, f"For an input like {e.args[0]}, expect {v}.", f"Input {e.args[0]} -> output {v}"),
            None,
        ),
    ),
]

YES_QUESTIONS = (
    "So {call} returns {v}, right?",
    "Does {call} give {v}?",
    "Should {call} return {v}?",
    "Just to check: {call} == {v}?",
    "Would {call} be {v}?",
    "Am I right that {call} is {v}?",
    "Is {call} supposed to be {v}?",
    "Can you confirm that {call} returns {v}?",
    "Should {call} return {v} or something else?",
    "{call} returns {v}, is that correct?",
    "Just checking - {call} is {v}?",
    "Correct me if I'm wrong, but {call} returns {v}?",
    "{call} gives {v}. Right?",
    "Does {call} produce {v}?",
)
YES = (
    "Yes.",
    "Yep, that's it.",
    "Correct.",
    "Yes, exactly.",
    "That's right!",
    "Yeah.",
    "Yes, that's right.",
    "Yes it is.",
    "Confirmed.",
    "Exactly that.",
)
NO = (
    "No.",
    "Nope.",
    "No, that's not it.",
    "Not quite.",
    "No, that's wrong.",
    "No, it isn't.",
    "Nope, that's not right.",
    "You're wrong, it doesn't.",
)


def _no_claims(rng: random.Random, e: Example, other_value: str) -> list[tuple[str, str, str | None]]:
    """Claim-free replies about ``e``'s task (kind, reply, question): none of them states what a call returns
    (``other_value`` is a wrong value for ``e``'s call: a reply read as stating it would be flagged)."""
    name, call = e.name, e.call
    true_value = _exact(e.value)
    n = rng.randint(2, 40)
    return [
        ("chat-numbers", f"Thanks! I run this about {n} times a day, so it doesn't need to be very fast.", None),
        ("chat-numbers", f"I have {n} customers right now, maybe 100 next year.", None),
        ("chat-numbers", "Version 2.1.3 of my script did it in 2 steps, back in 2019.", None),
        ("chat-numbers", f"Round to 2 decimals please. And I'd say {n}% of the inputs are empty.", None),
        ("chat-numbers", "The list usually has 5 to 10 items, never more than 50.", None),
        ("name-no-call", f"Please keep the name {name}, my other scripts call it.", None),
        ("name-no-call", f"Can you make {name} return a dictionary instead of a list?", None),
        ("name-no-call", f"{name} should be simple, maybe 10 lines at most.", None),
        ("call-no-value", f"I'm not sure what {call} should give, honestly. What do you think?", None),
        ("call-no-value", f"I tried {call} in my old code and it crashed with an error.", None),
        ("call-no-value", f"What would your version return for {call}?", None),
        ("property-of", f"The first item of {call} should be {other_value}.", None),
        ("property-of", f"The length of {call} is {n}, if I remember right.", None),
        ("property-of", f"`len({call})` should be {n}.", None),
        ("negation", f"{call} should not return {other_value}.", None),
        ("negation", f"{call} shouldn't be {other_value}, that was the old bug.", None),
        ("hedge", f"{call} returns maybe {n} or {n + 1}, I can't remember.", None),
        ("hedge", f"{call} gives something between {n} and {n + 10}.", None),
        ("code-words", "Use a for loop and `return result` at the end; no numpy please.", None),
        ("code-words", f"def {name}(...) is fine as the signature. Keep `result = []` at the top.", None),
        ("question-back", f"Before I answer: does {name} need to handle negative numbers like -5?", None),
        ("question-back", f"Why would {call} matter? I only use it with {n} items.", None),
        ("question-back", f"Hmm, does {call} return {other_value}? I never tried that one.", None),
        ("question-back", f"So {call} gives {other_value}, right? Or did I get that wrong?", None),
        ("conditional", f"If {call} returns {other_value}, then something is off in the formula.", None),
        ("conditional", f"Whether {call} is {other_value} or not doesn't matter much to me.", None),
        ("hedge", f"Maybe {call} returns {other_value}, but I'm really not sure.", None),
        (
            "qa-no-answer",
            _pick(
                rng,
                "I don't know exactly, maybe check the description?",
                "Good question, I'm not sure.",
                "Can you run it and tell me?",
            ),
            f"What should {call} return?",
        ),
        ("qa-no-answer", f"{n} things matter to me: speed and clarity.", f"What should {call} return?"),
        (
            "yes-no-unsure",
            _pick(
                rng,
                "No idea, honestly.",
                "No clue, sorry.",
                "Not sure, I'd have to check.",
                "Right now I can't check, sorry.",
            ),
            f"Does {call} give {_pick(rng, other_value, true_value)}?",
        ),
        (
            "yes-no-unsure",
            _pick(
                rng,
                "Sure, let me look it up later.",
                "Correct me if I'm wrong, but that's your job.",
                "No worries, take your time.",
            ),
            f"Should {call} return {_pick(rng, other_value, true_value)}?",
        ),
        (
            "qa-no-answer",
            _pick(
                rng,
                "It should be fast, that's all I care about.",
                "It should be 2 decimal places, rounded.",
                "Not sure, maybe 3?",
            ),
            f"What would {call} give?",
        ),
        # a fourth batch, written after the third had been run, without looking at the finder
        ("call-no-value", f"When I ran {call} on my laptop it took {n} seconds.", None),
        ("call-no-value", f"I ran {call} and got an error, so something is off.", None),
        ("call-no-value", f"Could you run {call} and tell me what it gives? I expect the tests to pass.", None),
        ("call-no-value", f"The docstring of {call} should be {n} lines at most.", None),
        ("call-no-value", f"Calling {call} {n} times in a row is fine.", None),
        ("call-no-value", f"Step 1: {call}. Step 2: check the output by hand.", None),
        ("call-no-value", f"Example {n}: {call}", None),
        ("call-no-value", f"You should get familiar with {call} first, it's my main use case.", None),
        ("call-no-value", f"It returns the right thing for {call}, I'm happy with that.", None),
        ("question-back", f"Why does {call} return {other_value} and not something else?", None),
        ("question-back", f"Shouldn't {call} return {other_value} instead?", None),
        ("question-back", f"What if {call} returns {other_value}? Is that a problem?", None),
        ("property-of", f"The type of {call} should be a dict, and the keys of {call} are strings.", None),
        ("property-of", f"Twice {call} is {other_value}, if that helps.", None),
        ("code-words", f"result = {call}\nprint(result)", None),
        (
            "code-words",
            f"assert {call} is not None\nassert isinstance({call}, (int, float, str, list, dict, bool, tuple))",
            None,
        ),
        ("qa-no-answer", "1) it should handle empty input\n2) it should be fast", f"What should {call} return?"),
        ("qa-no-answer", "1. Handle empty input.\n2. Keep it short.", f"What should {call} return?"),
        ("qa-no-answer", "It gives 2 values back: a name and a score.", f"What does {call} give?"),
        (
            "qa-no-answer",
            f"Whatever the formula gives, I trust you. I'd guess around {n} but don't quote me.",
            f"What should {call} return?",
        ),
        ("yes-no-unsure", "I'm not 100% sure, but yes.", f"Does {call} return {_pick(rng, other_value, true_value)}?"),
        ("yes-no-unsure", "Right, so what I really need is a clean function.", f"So {call} gives {other_value}?"),
        (
            "yes-no-unsure",
            "Yes and no, it depends on the flag.",
            f"Does {call} return {_pick(rng, other_value, true_value)}?",
        ),
        # a fifth batch, written after the fourth had been run, without looking at the finder
        ("chat-numbers", f"I think the function should return a list of {n} items sorted by name.", None),
        ("call-no-value", f"Make sure {call} returns quickly, under {n} ms.", None),
        ("hedge", f"{call} — no idea what it gives.", None),
        ("hedge", f"Not sure about {call}. Could be {other_value}, could be something else.", None),
        ("call-no-value", f"{call} should return the same thing as the other example.", None),
        ("negation", f"Please don't hardcode {call} = {other_value}, compute it.", None),
        ("negation", f"{call} returning {other_value} would be a bug.", None),
        ("negation", f"It would be wrong for {call} to give {other_value}.", None),
        ("negation", f"I doubt {call} returns {other_value}.", None),
        ("conditional", f"If {call} gave {other_value} I'd be surprised.", None),
        (
            "qa-no-answer",
            _pick(rng, "See the description, it's all there.", "Same as before."),
            f"What should {call} return?",
        ),
        (
            "yes-no-unsure",
            _pick(rng, "Not necessarily.", "Good question! Let me think about it.", "Sure, why not."),
            f"Does {call} return {_pick(rng, other_value, true_value)}?",
        ),
        # a sixth batch, written after the fifth had been run, without looking at the finder
        ("call-no-value", f"I'd expect {call} to be fast, and to return a list.", None),
        ("call-no-value", f"It's {n} o'clock here, {call} can wait.", None),
        ("conditional", f"Try {call} — if it returns {other_value}, something's broken.", None),
        ("call-no-value", f"Look at {call}: {n} of the inputs are negative.", None),
        ("hedge", f"{call} should return {other_value}... no wait, I'm not sure.", None),
        ("negation", f"In the old version {call} returned {other_value}, but that was a bug.", None),
        ("negation", f"I'm not saying {call} returns {other_value}.", None),
        ("hedge", f"Someone told me {call} returns {other_value}, but I doubt it.", None),
        (
            "qa-no-answer",
            f"Honestly, whatever makes sense. {n} things are important: speed and clarity.",
            f"What should {call} return?",
        ),
        ("qa-no-answer", "Hmm, hard to say. Could you show me your code first?", f"What should {call} return?"),
        (
            "yes-no-unsure",
            _pick(rng, "Hmm, I think not.", "I'm not sure, to be honest."),
            f"Does {call} return {true_value}?",
        ),
        # a seventh batch, written after the sixth had been run, without looking at the finder
        ("negation", f"{call} should definitely not be {other_value}.", None),
        ("call-no-value", f"Watch out: {call} might blow up.", None),
        ("question-back", f"What would {call} give in your code? Mine gives something weird.", None),
        ("hedge", f"Off the top of my head I can't say what {call} returns.", None),
        ("call-no-value", f"The tests call {call} and a couple of others.", None),
        ("conditional", f"My boss asked whether {call} equals {other_value}.", None),
        ("hedge", f"Don't worry about {call} being {n} or {n + 1}, either is fine.", None),
        (
            "qa-no-answer",
            _pick(rng, "Not a clue! 😅", "Beats me.", "Who knows.", "Ask my accountant, he's got the numbers."),
            f"What does {call} return?",
        ),
        (
            "yes-no-unsure",
            _pick(rng, "Couldn't tell you.", "Possibly."),
            f"Is {call} {_pick(rng, other_value, true_value)}?",
        ),
        # an eighth batch, written after the seventh had been run, without looking at the finder
        ("name-no-call", f"**{name}** should return a list of strings.", None),
        ("call-no-value", f"{call} is gonna be slow with {n} items.", None),
        ("call-no-value", f"Result: I'm happy with {call} as is.", None),
        ("call-no-value", f"i think {call} is broken, it gave an error", None),
        ("hedge", f"the answer to {call} obviously depends on the rate", None),
        (
            "qa-no-answer",
            _pick(rng, "You tell me! 🙂", "Something reasonable.", "Output: whatever the formula says."),
            f"What will {call} output?",
        ),
        (
            "yes-no-unsure",
            "You're asking the wrong person.",
            f"Correct me if I'm wrong, but {call} returns {_pick(rng, other_value, true_value)}?",
        ),
        # a ninth batch, written after the eighth had been run, without looking at the finder
        ("code-words", f"Example usage:\n```\nresult = {call}\nprint(result)\n```", None),
        ("call-no-value", f"`{call}` evaluates quickly.", None),
        ("call-no-value", f"When called as {call}, it should not crash.", None),
        ("call-no-value", f"{call} -- let me think about that one.", None),
        ("hedge", f"For {call} the output would be hard to predict.", None),
        ("call-no-value", f"Calling {call} should result in no errors.", None),
        ("call-no-value", f"{call} ==> see the docs", None),
        ("call-no-value", f"The result I expect from {call} is a string.", None),
        ("call-no-value", f"{call} has {n} arguments. Run it {n} times and average.", None),
        ("qa-no-answer", "I'd go with whatever you think is best.", f"What does {call} evaluate to?"),
        ("qa-no-answer", f"{n} is the number of items, not the result.", f"What does {call} evaluate to?"),
        ("yes-no-unsure", "Mhm, let me think.", f"{call} gives {_pick(rng, other_value, true_value)}. Right?"),
        # a tenth batch, written after the ninth had been run, without looking at the finder
        ("call-no-value", f"Just to give you context, {call} is one of {n} cases I care about.", None),
        ("call-no-value", f"Ideally {call} would be fast enough for {n} calls per second.", None),
        ("call-no-value", f"I computed {call} by hand but lost the paper.", None),
        ("call-no-value", f"{call} → should be handled gracefully", None),
        ("call-no-value", f"Test case: {call}, expected output unknown.", None),
        (
            "qa-no-answer",
            _pick(rng, "It is a call I use in my tests.", "That would be telling 😉", "The answer: I don't know."),
            f"What is {call}?",
        ),
        ("yes-no-unsure", "It does not matter much.", f"Does {call} produce {_pick(rng, other_value, true_value)}?"),
    ]


# -- the set ------------------------------------------------------------------------------------------------------
def examples(task: Task, scorer: BackendScorer) -> list[Example]:
    """The task's literal test calls with the reference's (short, statable) values there: one sandbox request."""
    names, _ = _entry(task)
    parsed = [(expr.strip(), _literal_call(expr, names)) for _, expr in task.test_cases]
    calls = list(dict.fromkeys(expr for expr, info in parsed if info is not None))
    if not calls:
        return []
    info = {expr: found for expr, found in parsed if found is not None}
    out = []
    for call, expected in zip(calls, scorer.reference_values(task, calls), strict=True):
        if not expected.judgeable or not _plain(expected.value) or len(_exact(expected.value)) > MAX_TEXT:
            continue
        name, args, keywords = info[call]
        out.append(Example(call, name, args, keywords, expected.value))
    return out


def labelled_claims(tasks: Sequence[Task], scorer: BackendScorer, seed: int = 0) -> list[tuple[Task, Labelled]]:
    """The labelled set of ``tasks`` (module docstring), in task order."""
    out: list[tuple[Task, Labelled]] = []
    for index, task in enumerate(tasks):
        rng = random.Random(f"{seed}:{index}:{task.task_id}")
        found = examples(task, scorer)
        if not found:
            continue
        _, single = _entry(task)
        out.extend((task, item) for item in _task_rows(task, found, single, rng))
    return out


def _task_rows(task: Task, found: list[Example], single: int | None, rng: random.Random) -> list[Labelled]:
    rows: list[Labelled] = []
    ones = [e for e in found if single == 1 and len(e.args) == 1 and not e.keywords]
    empties = [e for e in ones if e.args[0].strip() in ("[]", "()", "''", '""')]
    for kind, needs, make in CLAIMS:
        pool = {"": found, "single": ones, "empty": [e for e in empties if e.args[0].strip() == "[]"]}[needs]
        if not pool:
            continue
        example = rng.choice(pool)
        text = written(example.value, rng, lenient=True)
        if text is not None:
            reply, question = make(rng, example, text[0])
            rows.append(Labelled(task.task_id, reply, "true", kind, question, form=text[1]))
        example = rng.choice(pool)
        wrong = false_value(example, [e for e in found if e is not example], rng)
        if wrong is not None:
            reply, question = make(rng, example, wrong[0])
            rows.append(Labelled(task.task_id, reply, "false", kind, question, how=wrong[1]))
    rows.extend(_yes_no(task, found, rng))
    rows.extend(_multi(task, found, rng))
    example = rng.choice(found)
    wrong = false_value(example, [e for e in found if e is not example], rng)
    other = wrong[0] if wrong else "42"
    for kind, reply, question in _no_claims(rng, example, other):
        rows.append(Labelled(task.task_id, reply, "none", kind, question))
    # the task's own description, as a human might paste it back: long prose about the function, no claim
    rows.append(Labelled(task.task_id, task.problem_description, "none", "description"))
    return rows


def _yes_no(task: Task, found: list[Example], rng: random.Random) -> list[Labelled]:
    """Yes or no to a question that states a value: yes to the true value and no to a wrong one are true; yes to a
    wrong value and no to the true one are false."""
    rows = []
    for label, agree in (("true", True), ("true", False), ("false", True), ("false", False)):
        example = rng.choice(found)
        right = written(example.value, rng, lenient=False)
        wrong = false_value(example, [e for e in found if e is not example], rng)
        if right is None or wrong is None:
            continue
        # a true "yes" confirms the right value; a true "no" denies a wrong one; the false ones the other way
        stated = right[0] if (label == "true") == agree else wrong[0]
        question = rng.choice(YES_QUESTIONS).format(call=example.call, v=stated)
        reply = rng.choice(YES if agree else NO)
        how = "" if label == "true" else ("a wrong value confirmed" if agree else "the right value denied")
        rows.append(Labelled(task.task_id, reply, label, "yes" if agree else "no", question, how=how))
    return rows


def _multi(task: Task, found: list[Example], rng: random.Random) -> list[Labelled]:
    """Two claims in one reply: both true, or one of them false."""
    if len(found) < 2:
        return []
    rows = []
    for label in ("true", "false"):
        a, b = rng.sample(found, 2)
        first, second = written(a.value, rng, lenient=True), written(b.value, rng, lenient=True)
        if first is None or second is None:
            continue
        second_text = second[0]
        how = ""
        if label == "false":
            wrong = false_value(b, [a], rng)
            if wrong is None:
                continue
            second_text, how = wrong
        reply = _pick(
            rng,
            f"{a.call} gives {first[0]}, and {b.call} gives {second_text}.",
            f"Two examples: {a.call} -> {first[0]}; {b.call} -> {second_text}.",
            f"I checked two: {a.call} returns {first[0]} and {b.call} returns {second_text}.",
            f"{a.call} and {b.call} should return {first[0]} and {second_text} respectively.",
        )
        rows.append(Labelled(task.task_id, reply, label, "two-claims", None, how=how))
    return rows
