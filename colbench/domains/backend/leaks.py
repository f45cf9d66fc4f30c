"""Does a simulated human's reply give away the reference function? A score in [0, 1] from code overlap.

The human sees the reference code and is asked to answer in plain words. A reply *leaks* when it carries the code
itself: all of it, a line of it, or a fragment inside prose or backticks, in any layout and with any names. Stating
facts in words (numbers, names, thresholds, string values, the behaviour) is the human's job, not a leak.

How: the reply, the reference and the task's description become streams of normalized tokens: identifiers ->
``ID`` (keywords, builtins and attribute names kept: they are the code's shape, renaming cannot hide them),
numbers -> ``NUM``, strings -> ``STR``, operators and brackets kept; whitespace, comments, backticks and Markdown
fences dropped. The reference is read twice, as written and as ``ast.unparse`` writes it (a reply reformatted by a
tool matches the second). Each reference token gets a weight: 0 where the description already shows it (the
signature, quoted examples: public), 1/2 for a bare ``ID``/``NUM``/``STR`` or punctuation prose has too, 1 for code
(keywords, operators, brackets, builtins, attributes). The runs of tokens the reply shares with the reference are
found (``difflib``) and the score is the larger of

- the heaviest run, ``(weight - 3) / 6`` clipped to [0, 1]: a quoted line of a few operators and calls reaches 0.5,
  a pasted block reaches 1; and
- the share of the reference's code tokens (weight 1) that runs of at least 4 tokens cover: all of it, in pieces.

``THRESHOLD`` (0.5) makes the ``leak`` flag; docs/leaks.md gives its precision and recall on the labelled set that
``labelled_replies`` builds from real tasks.
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import random
import re
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache

from colbench.types.leaks import Labelled, merged, weighted_runs

THRESHOLD = 0.5

_BUILTINS = frozenset(name for name in dir(builtins) if not name.startswith("_"))
_KEYWORDS = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist)
_PLAIN = frozenset({"ID", ",", ".", ":", ";", "?", "!"})
_WORDS = frozenset(
    {
        *("and", "as", "for", "from", "if", "in", "is", "not", "or", "with", "else", "while", "try", "return"),
        *("pass", "break", "continue", "yield", "import", "class", "global", "True", "False", "None"),
        *("sum", "max", "min", "round", "sorted", "any", "all", "set", "type", "range", "map", "filter", "zip"),
        *("print", "open", "input", "format", "list", "dict", "str", "int", "float", "len", "abs", "next", "iter"),
        *("hash", "id", "object", "property", "super", "vars", "bool"),
    }
)
"""Tokens prose has too (names, literals, punctuation, keywords and builtins that are English words): half weight."""

_TOKEN = re.compile(
    r"""(?P<str>(?<!\w)[rbfuRBFU]{0,2}(?:'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
      | (?P<num>\b\d+(?:\.\d*)?(?:[eE][+-]?\d+)?j?\b|\.\d+)
      | (?P<name>[A-Za-z_]\w*)
      | (?P<op>\*\*=?|//=?|->|:=|<<=?|>>=?|[-+*/%&|^@<>!=]=|[-+*/%&|^~<>@=()\[\]{},.:;])
    """,
    re.VERBOSE,
)
_FENCE = re.compile(r"```[\w+-]*")
_COMMENT = re.compile(r"(?m)(?:^|(?<=\s))#[^\n]*")


@dataclass(frozen=True)
class Reference:
    """A reference's tokens and their weights (0 public, 1/2 prose-like, 1 code)."""

    tokens: tuple[str, ...]
    weights: tuple[float, ...]
    #: Every run of ``RUN`` tokens: a reply that shares none of them has no matching block that scores (a block of
    #: fewer tokens weighs at most 3 and covers nothing), so its score is 0 without the matcher, exactly.
    runs: frozenset[tuple[str, ...]]

    @property
    def private_weight(self) -> float:
        return sum(self.weights)


def _normalize(kind: str, text: str, after_dot: bool) -> str:
    if kind == "name":
        if after_dot or text in _KEYWORDS or text in _BUILTINS:
            return text
        return "ID"
    if kind in ("num", "str"):
        return _literal(text)
    return text


def _literal(text: str) -> str:
    """A number or string by its value (``0.50`` is ``0.5``, quotes do not matter); an f-string by its text."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return "STR " + text
    if isinstance(value, bool | int | float):
        return f"NUM {float(value)!r}" if not isinstance(value, bool) else f"NUM {value!r}"
    return f"{'STR' if isinstance(value, str | bytes) else 'NUM'} {value!r}"


def tokens_of(text: str) -> list[str]:
    """Normalized tokens of any text: code, prose, or code inside prose (backticks, fences, comments dropped)."""
    out: list[str] = []
    for match in _TOKEN.finditer(_scrubbed(text)):
        out.append(_normalize(match.lastgroup or "op", match.group(), bool(out) and out[-1] == "."))
    return out


def _blanked(match: re.Match[str]) -> str:
    return " " * len(match.group())


def _scrubbed(text: str) -> str:
    """The text with fences, backticks and comments blanked out, each character kept in its place (so that a token
    found in it is where it stands in the reply: ``leak_spans``)."""
    return _COMMENT.sub(_blanked, _FENCE.sub(_blanked, text).replace("`", " "))


def code_tokens(code: str) -> list[str]:
    """Normalized tokens of Python code (the tokenizer's reading where the code parses; else ``tokens_of``)."""
    out: list[str] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.NAME:
                out.append(_normalize("name", token.string, bool(out) and out[-1] == "."))
            elif token.type in (tokenize.NUMBER, tokenize.STRING):
                out.append(_literal(token.string))
            elif token.type == tokenize.OP:
                out.append(token.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return tokens_of(code)
    return out


def canonical(code: str) -> str:
    """The code as ``ast.unparse`` writes it (one layout, no redundant brackets, no comments); itself if it does
    not parse."""
    try:
        return ast.unparse(ast.parse(code))
    except (SyntaxError, ValueError, RecursionError):
        return code


@lru_cache(maxsize=4096)
def references_of(code: str, description: str) -> tuple[Reference, ...]:
    """The reference as written and as ``canonical`` writes it."""
    return tuple(_reference(form, description) for form in dict.fromkeys([code, canonical(code)]))


def _reference(code: str, description: str) -> Reference:
    tokens = code_tokens(code)
    public = [False] * len(tokens)
    matcher = SequenceMatcher(None, tokens, tokens_of(description), autojunk=False)
    for block in matcher.get_matching_blocks():
        if block.size >= 5:
            public[block.a : block.a + block.size] = [True] * block.size
    weights = tuple(0.0 if public[i] else 0.5 if _prose_like(t) else 1.0 for i, t in enumerate(tokens))
    return Reference(tuple(tokens), weights, _runs(tokens))


RUN = 4
"""The shortest matching block that can score: a block's weight is at most its length, and ``(weight - 3) / 6``
and the coverage count nothing below 4 tokens."""


def _runs(tokens: Sequence[str]) -> frozenset[tuple[str, ...]]:
    return frozenset(tuple(tokens[i : i + RUN]) for i in range(len(tokens) - RUN + 1))


def _prose_like(token: str) -> bool:
    return token in _PLAIN or token in _WORDS or token.startswith(("NUM ", "STR "))


def leak_score(reply: str, code: str, description: str = "") -> float:
    """How much of the reference ``code`` the ``reply`` carries (see the module docstring)."""
    if not reply.strip():
        return 0.0
    said = tokens_of(reply)
    return max((_overlap(said, reference) for reference in references_of(code, description)), default=0.0)


def _overlap(said: list[str], reference: Reference) -> float:
    return _scored(said, reference)[0]


def _scored(said: list[str], reference: Reference) -> tuple[float, list[tuple[int, int]]]:
    """The score and the runs of ``said`` (token ranges) it comes from: the heaviest run where it scores, and every
    run the coverage counts."""
    if not reference.private_weight:
        return 0.0, []
    if reference.runs.isdisjoint(_runs(said)):
        return 0.0, []
    heaviest, covered, counted = weighted_runs(said, reference.tokens, reference.weights, RUN)
    run = min(1.0, max(0.0, (heaviest - 3) / 6))
    return round(max(run, covered / reference.private_weight), 4), counted


def leak_spans(reply: str, code: str, description: str = "") -> list[tuple[int, int]]:
    """The character ranges ``[start, end)`` of ``reply`` that its ``leak_score`` comes from, sorted and merged:
    the runs of code it shares with the reference (as written or as ``canonical`` writes it); none when it scores
    0. What the viewer highlights."""
    if not reply.strip():
        return []
    found = list(_TOKEN.finditer(_scrubbed(reply)))
    said = tokens_of(reply)
    runs = [run for reference in references_of(code, description) for run in _scored(said, reference)[1]]
    return merged((found[a].start(), found[b - 1].end()) for a, b in runs)


# -- a labelled set built from a task: replies that leak its code and replies that do not --------------------------


LEAK_KINDS = ("verbatim", "truncated", "renamed", "reformatted", "partial", "inline")
HONEST_KINDS = (
    "facts",
    "words",
    "symbols",
    "examples",
    "usage",
    "signature",
    "description",
    "preference",
    "other code",
    "own code",
)


class _Rename(ast.NodeTransformer):
    """Every parameter and local name gets a new one (the function's own name stays: the description has it)."""

    def __init__(self, keep: set[str], rng: random.Random) -> None:
        self.keep = keep
        self.rng = rng
        self.names: dict[str, str] = {}

    def new(self, name: str) -> str:
        if name in self.keep or name in _BUILTINS or name in _KEYWORDS:
            return name
        if name not in self.names:
            self.names[name] = f"{self.rng.choice(_NEW_NAMES)}{len(self.names)}"
        return self.names[name]

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self.new(node.arg)
        return node

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.new(node.id)
        return node


_NEW_NAMES = ("x", "val", "item", "tmp", "data", "n", "res", "acc")


def _renamed_in_place(code: str, rename: _Rename) -> str:
    """The code with its own layout, only the names swapped (``rename`` has seen the tree)."""
    out = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            out.append(token._replace(string=rename.names.get(token.string, token.string)))
        return tokenize.untokenize(out)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return code


_SAID = {
    "=": "is",
    "+": "plus",
    "-": "minus",
    "*": "times",
    "/": "divided by",
    "//": "divided by",
    "**": "to the power",
    "%": "modulo",
    ">": "more than",
    "<": "less than",
    ">=": "at least",
    "<=": "at most",
    "==": "equals",
    "!=": "is not",
    "+=": "goes up by",
    "-=": "goes down by",
    "(": "",
    ")": "",
    "[": "of",
    "]": "",
    "{": "",
    "}": "",
    ":": ",",
    ".": "'s",
    "return": "the answer is",
    "def": "",
    "lambda": "",
}


def _in_words(statement: str) -> str:
    """A statement said as a person would: names as words, operators as words, numbers and strings as they are."""
    words = []
    for token in tokenize.generate_tokens(io.StringIO(statement).readline):
        if token.type == tokenize.NAME:
            words.append(_SAID.get(token.string, token.string.replace("_", " ")))
        elif token.type in (tokenize.NUMBER, tokenize.STRING):
            words.append(token.string)
        elif token.type == tokenize.OP:
            words.append(_SAID.get(token.string, token.string))
    return re.sub(r"\s+", " ", " ".join(w for w in words if w)).strip()


OWN_CODE = (
    "    result = []\n    for i in range(len({a})):\n        result.append({a}[i])\n    return result",
    "    if not {a}:\n        return None\n    total = 0\n    for item in {a}:\n        total += item\n"
    "    return total",
    "    result = {{}}\n    for key, value in {a}.items():\n        result[key] = value\n    return result",
    "    if {a} > {b}:\n        return {a}\n    else:\n        return {b}",
    "    return sorted({a}, key=lambda x: x[1], reverse=True)",
    "    count = 0\n    for x in {a}:\n        if x in {b}:\n            count += 1\n"
    "    return count / len({a}) if {a} else 0",
)
"""Bodies a human (or a model playing one) might write for any function from its signature alone: code, but not
the reference's. Filled with the task's own signature and parameter names."""


def _own_code(tree: ast.Module, code: str, rng: random.Random) -> list[str]:
    """Two of ``OWN_CODE`` under the reference's signature, leaving out any whose statements the reference holds."""
    function = next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None)
    if function is None or not function.args.args:
        return []
    names = [a.arg for a in function.args.args]
    signature = f"def {function.name}({ast.unparse(function.args)}):"
    reference = " ".join(code_tokens(code))
    out = []
    for body in rng.sample(OWN_CODE, len(OWN_CODE)):
        filled = body.format(a=names[0], b=names[-1])
        lines = [" ".join(code_tokens(line.strip())) for line in filled.splitlines()]
        if sum(line in reference for line in lines) * 2 < len(lines):  # the reference is not this skeleton
            out.append(f"{signature}\n{filled}")
        if len(out) == 2:
            break
    return out


def _uncommented(code: str) -> str:
    kept = [t for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type != tokenize.COMMENT]
    return tokenize.untokenize(kept)


def _statements(code: str) -> list[str]:
    """Each one-line statement inside the reference's functions (what a human could quote)."""
    out = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for statement in ast.walk(node):
                if isinstance(statement, ast.stmt) and statement is not node:
                    segment = ast.get_source_segment(code, statement)
                    if segment and "\n" not in segment.strip():
                        out.append(segment.strip())
    return out


def _facts(tree: ast.AST) -> tuple[list[str], list[str], list[str]]:
    """The reference's parameter names, numbers and strings: what an honest human states in words."""
    params = sorted({a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in n.args} - {"self"})
    constants = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)]
    numbers = sorted({repr(v) for v in constants if type(v) in (int, float)})
    strings = sorted({v for v in constants if isinstance(v, str) and v and len(v) < 40 and "\n" not in v})
    return params, numbers, strings


FACTS = (
    "If {p} is below {n}, I'd like it to return {s}.",
    "The threshold is {n}; anything above that counts as {s}.",
    "Yes, {p} is always a list of numbers, and {n} is the cut-off I use.",
    "Return {s} when there is nothing to process, and round the result to {n} places.",
    "Use {n} as the default for {p}; the labels are {s} and {s2}.",
    "It should give back a number: {p} times {n}, but only for positive values.",
    "Empty input should just give {s}. Values of {p} over {n} are capped.",
    "I care about {p} and {p2}; multiply them and add {n} at the end.",
    "Nothing fancy: add up {p}, divide by how many there are, and report {s} if it is under {n}.",
    "Sort by {p} from highest to lowest, then keep the first {n}.",
    "The weight for {p} is {n} and for {p2} it is {n2}. I don't know about anything else.",
    "Each item of {p} is a dictionary with the key {s}; skip the ones without it.",
)
SYMBOLS = (
    "`{p}` is never `None`, and it should return `{s}` when `{p}` is empty.",
    "Yes, `{p} > {n}` means it is too high.",
    "The result is a dict with keys `{s}` and `{s2}`.",
    "Round it with `round(result, 2)` please.",
    "It should be `{p} * {n}` for the base part; I don't know the rest.",
    "Treat `{p}` as a list like `[{n}, {n2}]`.",
    "Return a tuple `(True, {p})` when it works.",
    "If `{p2} == {s}` then skip it.",
)
PREFERENCES = (
    "Yes, please.",
    "I don't know.",
    "I'd prefer a list rather than a tuple.",
    "Keep it simple, no need for extra checks.",
    "That sounds right to me.",
    "No, negative numbers never happen.",
    "Either is fine.",
    "Please use the names I gave in the description.",
)
LEADS = ("Sure, here it is:", "Fine, the code is:", "Just write this:", "Something like", "It's exactly", "")


def labelled_replies(
    code: str, description: str, calls: Sequence[str] = (), other_code: str = "", seed: int = 0
) -> list[Labelled]:
    """Replies made from one task: leaks of every kind in ``LEAK_KINDS`` and honest answers of every kind in
    ``HONEST_KINDS`` (a kind the task cannot give, say no quotable line, is left out). ``other_code`` is another
    task's reference: code, but not this code."""
    rng = random.Random(seed)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    out: list[Labelled] = []

    def add(kind: str, reply: str) -> None:
        out.append(Labelled(reply.strip(), kind in LEAK_KINDS, kind))

    top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    rename = _Rename(top, rng)
    renamed = ast.unparse(rename.visit(ast.parse(code)))
    body = code.strip()
    add("verbatim", f"{rng.choice(LEADS)}\n```python\n{body}\n```")
    add("verbatim", body)
    reference = references_of(code, description)[0]
    quotable = [s for s in _statements(code) if _code_weight(s, reference) >= QUOTABLE]
    shown = f"{rng.choice(LEADS)} ```python\n{body}"[:400]
    if any(line in shown for line in quotable):  # cut at 400 characters, as the env does, with code still in it
        add("truncated", shown)
    add("renamed", f"{rng.choice(LEADS)} {renamed}")
    add("renamed", _renamed_in_place(body, rename))
    add("reformatted", canonical(body).replace("    ", "  "))
    add("reformatted", " ".join(line.strip() for line in _uncommented(body).splitlines() if line.strip()))
    for line in rng.sample(quotable, min(2, len(quotable))):
        add("partial", line)
        add("inline", f"The important part is `{line}`, the rest is plumbing.")
        add("inline", f"I think it does {_renamed_in_place(line, rename).strip()} and then returns it.")
    params, numbers, strings = _facts(tree)
    fill = {
        "p": rng.choice(params or ["the input"]),
        "p2": rng.choice(params or ["the other input"]),
        "n": rng.choice(numbers or ["10"]),
        "n2": rng.choice(numbers or ["3"]),
        "s": repr(rng.choice(strings)) if strings else "None",
        "s2": repr(rng.choice(strings)) if strings else "'other'",
    }
    for template in rng.sample(FACTS, 4):
        add("facts", template.format(**fill))
    for template in rng.sample(SYMBOLS, 2):
        add("symbols", template.format(**fill))
    for line in rng.sample(quotable, min(2, len(quotable))):
        add("words", f"It works like this: {_in_words(line)}.")
    for call in rng.sample(list(calls), min(2, len(calls))):
        add("examples", f"For example I would call {call} and expect a sensible answer.")
        add("usage", f"I'd use it like `result = {call}` and then `print(result)`.")
    if other_code.strip():
        add("other code", f"{rng.choice(LEADS)}\n```python\n{other_code.strip()}\n```")
    for own in _own_code(tree, code, rng):
        add("own code", f"{rng.choice(LEADS)}\n```python\n{own}\n```")
    signature = description.rpartition("The signature of the function is:")[2].strip()
    if signature:
        add("signature", f"The signature should be `{signature}`, and it returns {fill['s']} for bad input.")
    add("description", description)
    add("preference", rng.choice(PREFERENCES))
    return out


QUOTABLE = 6
"""A statement whose private tokens weigh this much is a line worth quoting: quoting it is a leak."""


def _code_weight(statement: str, reference: Reference) -> float:
    """The weight of the reference's tokens one statement holds (in its longest shared run)."""
    tokens = code_tokens(statement)
    matcher = SequenceMatcher(None, tokens, list(reference.tokens), autojunk=False)
    best = matcher.find_longest_match(0, len(tokens), 0, len(reference.tokens))
    return sum(reference.weights[best.b : best.b + best.size])
