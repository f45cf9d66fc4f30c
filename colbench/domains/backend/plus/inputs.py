"""New test inputs for a backend task, in the shapes its own tests use.

A task's tests call its code with literal arguments (``f(3, [1, 2], {"a": 1.5})``, ``Account(5).deposit(10)``).
:func:`templates` reads each test's calls of the task's code (its *probes*, ``judging.plan``) into a
:class:`Template`: the call with its literal arguments as *slots*. Templates with the same skeleton (the call with
each slot replaced by the shape of its value) form a :class:`Family`, whose slots know every value the tests put
there. New inputs only ever fill a family's slots, with values of the shapes seen there:

* :func:`mutated_calls` (the augmenter): a seen value changed by a type-aware edit (a number moved a little,
  scaled, or set to a boundary value taken from the reference's own constants; a string swapped for another seen
  string or a string the reference compares with; a list with an element dropped, repeated, reordered or changed,
  or cut to its first few; a dict or tuple with one value changed; nested values edited at one leaf), every number
  in the *magnitude* the tests use in its place (:func:`in_magnitude`) unless it is a boundary value of a constant
  the reference compares with, and never so large that an answer recursing once per unit goes deeper than the
  tests' own inputs could take it (:func:`depth_safe`);
* :func:`random_calls` (the audit's independent generator): every slot drawn afresh from its shape, uniformly, with
  a seed and strategy of its own.

Both keep the domain the tests imply: a number that is never negative (or zero) in the tests stays so unless the
reference itself compares with a negative number (or zero), and a string, list or dict that is never empty stays
non-empty unless the reference checks for emptiness. Where the hidden information does not say what happens
outside that domain, a correct answer may do anything there, so a test must not ask.
"""

from __future__ import annotations

import ast
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

from colbench.domains.backend.judging import CURRENT_RULES, plan

MAX_ABS = 10**6
"""No new number is larger in size than this (or than the task's own values and constants, if larger)."""
DEPTH = 950
"""Frames a correct answer may recurse to on a plus test's input (Python's default limit is 1000, and the
harness that calls it holds a few)."""
FRAMES = 3
"""Frames per unit of an int input that a recursive answer may use (``f(n - 1)`` is one; a helper between two
calls two): :func:`depth_safe`."""


@dataclass(frozen=True)
class Template:
    """A call of the task's code from one test: ``source``, and the ``(start, end)`` offsets and values of its
    literal arguments (``slots``)."""

    source: str
    spans: tuple[tuple[int, int], ...]
    values: tuple[Any, ...]

    def skeleton(self) -> str:
        """The call with each slot replaced by the shape of its value: calls of one family share it."""
        return self.fill({i: _Shape(shape(v)) for i, v in enumerate(self.values)})

    def fill(self, replacements: dict[int, Any]) -> str:
        """The call with slot ``i`` holding ``replacements[i]`` (as its ``repr``) where given."""
        text = self.source
        for i in sorted(replacements, key=lambda k: self.spans[k][0], reverse=True):
            start, end = self.spans[i]
            text = text[:start] + _literal(replacements[i]) + text[end:]
        return text


class _Shape(str):
    def __repr__(self) -> str:
        return f"<{self}>"


def _literal(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    return repr(value)


def shape(value: Any) -> str:
    """The type structure of a literal: element shapes of a list or set as a set, a tuple's positionally, a dict's
    keys and values as sets; numbers keep int and float apart."""
    if isinstance(value, bool) or value is None:
        return type(value).__name__
    if isinstance(value, int | float | str | bytes | complex):
        return type(value).__name__
    if isinstance(value, list | set | frozenset):
        return f"{type(value).__name__}[{'|'.join(sorted({shape(v) for v in value}))}]"
    if isinstance(value, tuple):
        return f"tuple({','.join(shape(v) for v in value)})"
    if isinstance(value, dict):
        keys = "|".join(sorted({shape(k) for k in value}))
        values = "|".join(sorted({shape(v) for v in value.values()}))
        return f"dict[{keys}:{values}]"
    return type(value).__name__


@dataclass
class Domain:
    """What the tests and the reference say about the inputs: may numbers be negative or zero, may strings and
    containers be empty, how large may numbers be, which strings and numbers does the reference compare with."""

    negative: bool = False
    zero: bool = False
    empty: bool = False
    largest: float = 100.0
    numbers: list[float] = field(default_factory=list)
    boundaries: list[float] = field(default_factory=list)
    strings: list[str] = field(default_factory=list)

    def allows(self, value: Any) -> bool:
        """Whether every leaf of ``value`` is inside the domain."""
        for leaf in _leaves(value):
            if isinstance(leaf, bool):
                continue
            if isinstance(leaf, int | float):
                if not math.isfinite(leaf) or abs(leaf) > max(MAX_ABS, self.largest):
                    return False
                if (leaf < 0 and not self.negative) or (leaf == 0 and not self.zero):
                    return False
            elif isinstance(leaf, str | list | dict | set) and not leaf and not self.empty:
                return False
        return True


def _leaves(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, list | tuple | set | frozenset):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)


@dataclass
class Family:
    """Templates of one skeleton; ``seen[i]``: every value the tests put in slot ``i``."""

    skeleton: str
    templates: list[Template]
    seen: list[list[Any]]
    _sizes: dict[tuple[Any, ...], float] | None = field(default=None, repr=False, compare=False)

    def sizes(self) -> dict[tuple[Any, ...], float]:
        """The largest size of a number the tests put in each *place*: a slot, and within it a list's elements, a
        tuple's position, a dict's key (``(0, "*")``: the elements of slot 0's list)."""
        if self._sizes is None:
            found: dict[tuple[Any, ...], float] = {}
            for i, seen in enumerate(self.seen):
                for value in seen:
                    for place, leaf in _places(value, (i,)):
                        found[place] = max(found.get(place, 0.0), abs(leaf))
            self._sizes = found
        return self._sizes

    def short(self, i: int, value: Any) -> str:
        """``value`` is a list (or set) for slot ``i`` shorter than every one the tests put there, of one or two
        items (or none, where the domain allows it): the size ``Z<slot>:<size>`` of the family, where a list's
        first or last items are handled apart (an edge a test of three or more items never reaches); "" if not."""
        if not isinstance(value, list | set | frozenset) or len(value) > 2:
            return ""
        lengths = [len(v) for v in self.seen[i] if isinstance(v, list | set | frozenset)]
        return f"Z{self.skeleton}#{i}:{len(value)}" if lengths and len(value) < min(lengths) else ""

    def beyond(self, i: int, value: Any) -> list[tuple[int | float, float]]:
        """The numbers of ``value`` (for slot ``i``) outside the tests' magnitude in their place
        (:func:`in_magnitude`), each with the size of the tests' largest there; a place no test put a number in has
        no bound here."""
        sizes = self.sizes()
        return [
            (leaf, sizes[place])
            for place, leaf in _places(value, (i,))
            if place in sizes and not in_magnitude(leaf, sizes[place])
        ]


def in_magnitude(value: int | float, size: float) -> bool:
    """Whether a new number stays in the magnitude of the tests' numbers in its place, the largest of which has size
    ``size``: up to twice that (an int at least two more, a float at least one more), and an int no deeper than
    :func:`depth_safe`."""
    if isinstance(value, int):
        return abs(value) <= max(2 * size, size + 2) and depth_safe(value, size)
    return abs(value) <= max(2 * size, size + 1)


def depth_safe(value: int | float, size: float) -> bool:
    """Whether an int beyond the tests' largest in its place (size ``size``) takes an answer that recurses up to
    ``FRAMES`` frames per unit no deeper than ``DEPTH`` where the tests' own inputs do not take it past that: with
    ``k`` the most frames per unit the tests' largest allows (at most ``FRAMES``), ``k * value`` stays within
    ``DEPTH`` (so up to 316 beside tests of 10, 475 beside tests of 400, 950 beside tests of 500, anything beside
    tests past 950); two more than the tests' largest is always safe."""
    if not isinstance(value, int) or abs(value) <= size + 2:
        return True
    frames = min(FRAMES, int(DEPTH // max(size, 1)))
    return frames == 0 or abs(value) * frames <= DEPTH


def _places(value: Any, place: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], int | float]]:
    """Every number of ``value`` with its place (see ``Family.sizes``)."""
    if _is_number(value):
        if math.isfinite(value):
            yield place, value
    elif isinstance(value, list | set | frozenset):
        for v in value:
            yield from _places(v, (*place, "*"))
    elif isinstance(value, tuple):
        for k, v in enumerate(value):
            yield from _places(v, (*place, k))
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _places(v, (*place, ("key", repr(k))))


def _slot_nodes(node: ast.AST) -> Iterator[ast.expr]:
    """The maximal literal sub-expressions of a call's arguments (the callee itself is never a slot)."""
    if isinstance(node, ast.Call):
        yield from _slot_nodes(node.func) if not isinstance(node.func, ast.Name | ast.Attribute) else ()
        if isinstance(node.func, ast.Attribute):
            yield from _slot_nodes(node.func.value)
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            yield from _literal_or_inner(arg)
        return
    for child in ast.iter_child_nodes(node):
        yield from _slot_nodes(child)


def _literal_or_inner(node: ast.expr) -> Iterator[ast.expr]:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        yield from _slot_nodes(node)
        return
    yield node


def template(call: str) -> Template | None:
    """The template of one call expression (None when it does not parse or has no literal argument)."""
    try:
        node = ast.parse(call.strip(), mode="eval").body
    except SyntaxError:
        return None
    source = call.strip()
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    spans, values = [], []
    for slot in _slot_nodes(node):
        if slot.end_lineno is None or slot.end_col_offset is None:
            continue
        start = starts[slot.lineno - 1] + _chars(source, slot.lineno, slot.col_offset, starts)
        end = starts[slot.end_lineno - 1] + _chars(source, slot.end_lineno, slot.end_col_offset, starts)
        spans.append((start, end))
        values.append(ast.literal_eval(slot))
    if not spans:
        return None
    return Template(source, tuple(spans), tuple(values))


def _chars(source: str, lineno: int, byte_offset: int, starts: list[int]) -> int:
    """A character offset in line ``lineno`` from the parser's UTF-8 byte offset."""
    line = source[starts[lineno - 1] : starts[lineno]] if lineno < len(starts) else source[starts[lineno - 1] :]
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))


def templates(tests: Sequence[tuple[str, str]], reference: str) -> list[Family]:
    """The task's call templates, by family, in test order (a test's probes, each a template)."""
    families: dict[str, Family] = {}
    for name, expression in tests:
        for probe in plan(name, expression, reference, CURRENT_RULES).probes:
            found = template(probe)
            if found is None:
                continue
            key = found.skeleton()
            family = families.setdefault(key, Family(key, [], [[] for _ in found.values]))
            if found.source in {t.source for t in family.templates}:
                continue
            family.templates.append(found)
            for i, value in enumerate(found.values):
                family.seen[i].append(value)
    return list(families.values())


def domain_of(families: Sequence[Family], reference: str) -> Domain:
    """The input domain the tests and the reference imply (see the module docstring)."""
    leaves = [leaf for family in families for seen in family.seen for v in seen for leaf in _leaves(v)]
    numbers = [v for v in leaves if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)]
    found = Domain(
        negative=any(v < 0 for v in numbers),
        zero=any(v == 0 for v in numbers),
        empty=any(isinstance(v, str | list | dict | set) and not v for v in leaves),
        largest=max([abs(v) for v in numbers] + [100.0]) * 4,
    )
    try:
        tree = ast.parse(reference)
    except SyntaxError:
        return found
    compared: set[int] = set()
    skip = {id(n) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for n in ast.walk(n)}
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skip.add(id(body[0].value))  # a docstring
        text = node.value if isinstance(node, ast.Constant) and id(node) not in skip else None
        if isinstance(text, str) and 0 < len(text) <= 40:  # any string the code holds may be one it looks for
            found.strings.append(text)
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                number = _number(side)
                if number is not None:
                    found.boundaries.append(number)
                    compared.add(id(side))
                    found.negative |= number < 0
                    found.zero |= number == 0
                if isinstance(side, ast.Constant) and isinstance(side.value, str) and side.value:
                    found.strings.append(side.value)
                if _is_empty_literal(side) or _is_len_call(side):
                    found.empty = True
            for side in node.comparators:
                if isinstance(side, ast.List | ast.Tuple | ast.Set):
                    found.strings += [
                        e.value for e in side.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                    ]
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and isinstance(node.operand, ast.Name):
            found.empty = True
        elif isinstance(node, ast.Dict):
            found.strings += [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        number = _number(node) if isinstance(node, ast.Constant | ast.UnaryOp) else None
        if number is not None and id(node) not in compared:
            found.numbers.append(number)
    found.largest = max([found.largest] + [abs(v) * 2 for v in found.boundaries + found.numbers])
    found.boundaries = sorted(set(found.boundaries))
    found.numbers = sorted(set(found.numbers) - set(found.boundaries))
    found.strings = sorted(set(found.strings))
    return found


def _number(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return -inner if inner is not None else None
    return None


def _is_empty_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and node.value == "":
        return True
    return isinstance(node, ast.List | ast.Dict | ast.Tuple | ast.Set) and not getattr(
        node, "elts", getattr(node, "keys", None)
    )


def _is_len_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len"


# -- the augmenter's inputs: seen values, edited ------------------------------------------------------------
def _near(value: float) -> list[float]:
    """Boundary values around a constant of the reference: itself and its neighbours in the constant's kind."""
    if isinstance(value, int):
        return [value - 1, value, value + 1]
    step = 10 ** math.floor(math.log10(abs(value))) / 10 if value else 0.01
    return [round(value - step, 10), value, round(value + step, 10)]


def _edit_number(value: int | float, rng: random.Random, domain: Domain) -> int | float:
    kind = type(value)
    choices: list[float] = [value + 1, value - 1, value * 2, value / 2, value + rng.randint(-10, 10), 0, -value]
    pool = domain.boundaries + domain.numbers
    if pool and rng.random() < 0.6:
        choices = _near(rng.choice(pool))
    new = rng.choice(choices)
    if kind is int:
        return math.floor(new) if math.isfinite(new) else value
    return round(float(new), 6)


def _edit_string(value: str, rng: random.Random, domain: Domain, seen: Sequence[Any]) -> str:
    pool = [s for s in domain.strings if s != value] + [s for s in seen if isinstance(s, str) and s != value]
    if pool and rng.random() < 0.8:
        return str(rng.choice(pool))
    if value and rng.random() < 0.5:
        k = rng.randrange(len(value))
        return value[:k] + value[k + 1 :]
    return value + rng.choice("abcxyz019")


def edit_value(value: Any, rng: random.Random, domain: Domain, seen: Sequence[Any], depth: int = 0) -> Any:
    """One type-aware edit of ``value`` (possibly at a nested leaf); the result keeps its shape."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return _edit_number(value, rng, domain)
    if isinstance(value, str):
        return _edit_string(value, rng, domain, seen)
    if isinstance(value, list) and value:
        items = list(value)
        op = rng.randrange(6) if depth < 3 else 0
        k = rng.randrange(len(items))
        if op == 0 or op == 4:
            items[k] = edit_value(items[k], rng, domain, items, depth + 1)
        elif op == 1:
            del items[k]
        elif op == 2:
            items.insert(k, edit_value(items[k], rng, domain, items, depth + 1))
        elif op == 5 and len(items) > 1:  # its first few only: a short list reaches the code's edge cases
            items = items[: rng.randint(1, len(items) - 1)]
        else:
            rng.shuffle(items)
        return items
    if isinstance(value, tuple) and value:
        k = rng.randrange(len(value))
        return (*value[:k], edit_value(value[k], rng, domain, [value[k]], depth + 1), *value[k + 1 :])
    if isinstance(value, dict) and value:
        key = rng.choice(list(value))
        return {**value, key: edit_value(value[key], rng, domain, list(value.values()), depth + 1)}
    return value


def magnitude(family: Family, values: dict[int, Any], domain: Domain) -> bool | None:
    """Whether new values for ``family``'s slots (slot: value) go beyond the tests' magnitude (True) or not (False),
    or None where they may not: a number beyond :func:`in_magnitude` is allowed only where it is one of the
    boundary values of a constant the reference compares with (``_near``), and :func:`depth_safe`. (Two
    arguments the reference compares with each other are made equal the other way round: the smaller one's value
    in the larger one's place.)"""
    far = [(leaf, size) for i, v in values.items() for leaf, size in family.beyond(i, v)]
    if not far:
        return False
    compared = {float(n) for b in domain.boundaries for n in _near(b)}
    return True if all(float(leaf) in compared and depth_safe(leaf, size) for leaf, size in far) else None


class Candidate(NamedTuple):
    """A new call, the seen call it was made from (``source``) and whether it puts a number beyond the tests'
    magnitude (``beyond``): a boundary value of a constant the reference compares with, which that comparison may
    need; the augmenter keeps such a call only where a comparison stands otherwise than on that test (``augment``)."""

    call: str
    source: str
    beyond: bool = False
    short: frozenset[str] = frozenset()
    """The sizes of a list shorter than the tests' it has (``Family.short``): wanted once each."""


def mutated_calls(families: Sequence[Family], domain: Domain, rng: random.Random, count: int) -> list[Candidate]:
    """Up to ``count`` new calls, each with the seen call it was made from: a seen call with one or two of its
    slots edited, first with every boundary value (numbers around each constant the reference compares with, each
    string it compares with, one number slot set to another's value, so two arguments compared with each other can
    be equal), then random edits (one slot or two, one edit or, now and then, two or three in a row); in the
    domain, no duplicates. Every number stays in the magnitude the tests use
    in its place (:func:`in_magnitude`) except a boundary value of a constant the reference compares with, which
    may go beyond it but never further than :func:`depth_safe` allows (such a call is marked ``beyond``): a constant
    the reference only computes with (``i * 7919``) never takes an input past the tests' magnitude."""
    made: dict[str, Candidate] = {}
    known = {t.source for f in families for t in f.templates}
    pool = [(f, t) for f in families for t in f.templates]
    if not pool:
        return []

    def add(family: Family, tmpl: Template, edited: dict[int, Any]) -> None:
        call = tmpl.fill(edited)
        if call in known or call in made or not all(domain.allows(v) for v in edited.values()):
            return
        far = magnitude(family, edited, domain)
        if far is not None:
            short = frozenset(family.short(i, v) for i, v in edited.items()) - {""}
            made[call] = Candidate(call, tmpl.source, far, short)

    for family, tmpl in pool:  # boundaries first, one slot at a time
        numbers = [i for i, v in enumerate(tmpl.values) if _is_number(v)]
        for i, value in enumerate(tmpl.values):
            if _is_number(value):
                for b in domain.boundaries:
                    for near in _near(b):
                        if isinstance(value, float) or float(near).is_integer():
                            add(family, tmpl, {i: type(value)(near)})
                for j in numbers:
                    other = tmpl.values[j]
                    if j != i and type(other) is type(value) and other != value:
                        add(family, tmpl, {i: other})
            elif isinstance(value, str):
                for text in domain.strings:
                    add(family, tmpl, {i: text})
            elif isinstance(value, list) and value and all(isinstance(e, str) for e in value):
                for text in domain.strings:  # one of the strings the code holds, alone and among the others
                    add(family, tmpl, {i: [text]})
                    add(family, tmpl, {i: [*value[:-1], text]})
    boundary = list(made.items())
    rng.shuffle(boundary)
    made = dict(boundary[: count * 4 // 5])
    tries = 0
    while len(made) < count and tries < count * 20:
        tries += 1
        family, tmpl = rng.choice(pool)
        slots = list(range(len(tmpl.values)))
        edited = {}
        for i in rng.sample(slots, 1 if len(slots) == 1 or rng.random() < 0.7 else 2):
            value = tmpl.values[i]
            for _ in range(1 if rng.random() < 0.8 else rng.randint(2, 3)):  # now and then, edits of an edit
                value = edit_value(value, rng, domain, family.seen[i])
            edited[i] = value
        add(family, tmpl, edited)
    return list(made.values())


def edited_calls(
    families: Sequence[Family], domain: Domain, rng: random.Random, base: Sequence[Candidate], count: int
) -> list[Candidate]:
    """Up to ``count`` new calls made from ``base`` (calls :func:`mutated_calls` made) as those are made from the
    tests' calls: one slot or two of a base call edited, once or twice each (a second generation, for faults that
    only a combination of edits reaches: two arguments at once, several items of a list); each keeps its base
    call's ``source``, stays in the domain and magnitude, and is new."""
    by_skeleton = {f.skeleton: f for f in families}
    taken = {c.call for c in base} | {t.source for f in families for t in f.templates}
    made: dict[str, Candidate] = {}
    tries = 0
    while base and len(made) < count and tries < count * 20:
        tries += 1
        start = rng.choice(base)
        tmpl = template(start.call)
        family = by_skeleton.get(tmpl.skeleton()) if tmpl is not None else None
        if tmpl is None or family is None:
            continue
        slots = list(range(len(tmpl.values)))
        edited = {}
        for i in rng.sample(slots, 1 if len(slots) == 1 or rng.random() < 0.5 else 2):
            value = tmpl.values[i]
            for _ in range(rng.randint(1, 2)):
                value = edit_value(value, rng, domain, family.seen[i])
            edited[i] = value
        call = tmpl.fill(edited)
        if call in taken or call in made or not all(domain.allows(v) for v in edited.values()):
            continue
        far = magnitude(family, {**dict(enumerate(tmpl.values)), **edited}, domain)
        if far is not None:
            short = frozenset(family.short(i, v) for i, v in edited.items()) - {""}
            made[call] = Candidate(call, start.source, far, short)
    return list(made.values())


# -- the audit's inputs: every slot drawn afresh ------------------------------------------------------------
def fresh_value(
    like: Any, rng: random.Random, domain: Domain, seen: Sequence[Any], memo: dict[Any, Any] | None = None
) -> Any:
    """A value of ``like``'s shape drawn uniformly from the domain (the audit's generator). ``memo``: what was
    worked out from the ``seen`` lists so far, for a caller drawing many values from the same ones (the draws are
    the same with or without it)."""
    memo = {} if memo is None else memo
    if isinstance(like, bool):
        return rng.random() < 0.5
    if isinstance(like, int | float):
        known = _derived(memo, "numbers", seen, lambda: [v for v in seen if _is_number(v)])
        # the largest size, least and most of the numbers seen (or of ``like`` alone where none is)
        size, least, most = (
            _derived(memo, "span", seen, lambda: (max(abs(v) for v in known), min(known), max(known)))
            if known
            else (abs(like), like, like)
        )
        top = max(10.0, min(domain.largest, size * 3))
        low = -top if domain.negative else (0 if domain.zero else 1)
        key = ("held", low, top, isinstance(like, float))
        if key not in memo:
            held = [c for c in domain.boundaries + domain.numbers if low <= c <= top]
            memo[key] = [c for c in held if isinstance(like, float) or float(c).is_integer()]
        held = memo[key]
        if held and rng.random() < 0.25:  # a value the code holds: a key, a threshold, a rate
            return type(like)(rng.choice(held))
        if rng.random() < 0.5:  # half the draws in the range the tests use, where thresholds tend to be
            low, top = max(low, least - 2), most + 2
        number = rng.uniform(low, top)
        return round(number) or (1 if not domain.zero else 0) if isinstance(like, int) else round(number, 2)
    if isinstance(like, str):
        strings = _derived(memo, "strings", seen, lambda: [s for s in seen if isinstance(s, str)] + domain.strings)
        if strings and rng.random() < 0.6:
            return str(rng.choice(strings))
        size = rng.randint(0 if domain.empty else 1, 8)
        return "".join(rng.choice("abcdefghij klmnop0123") for _ in range(size)) or "a"
    if isinstance(like, list | set | frozenset):
        elements = _derived(
            memo, "elements", seen, lambda: [e for s in seen if isinstance(s, list | set | frozenset) for e in s]
        ) or list(like)
        if not elements:
            return type(like)()
        longest = _derived(
            memo, "longest", seen, lambda: max(len(s) for s in seen if isinstance(s, list | set | frozenset))
        )
        size = rng.randint(0 if domain.empty else 1, longest + 2)
        items = [fresh_value(rng.choice(elements), rng, domain, elements, memo) for _ in range(size)]
        return items if isinstance(like, list) else type(like)(items)
    if isinstance(like, tuple):
        return tuple(
            fresh_value(
                v,
                rng,
                domain,
                _derived(memo, ("tuple", k), seen, partial(_tuple_slot, seen, k)),
                memo,
            )
            for k, v in enumerate(like)
        )
    if isinstance(like, dict) and like:
        return {
            k: fresh_value(
                v,
                rng,
                domain,
                _derived(memo, ("dict", k), seen, partial(_dict_slot, seen, k)),
                memo,
            )
            for k, v in like.items()
        }
    return like


def _tuple_slot(seen: Sequence[Any], k: int) -> list[Any]:
    return [s[k] for s in seen if isinstance(s, tuple) and len(s) > k]


def _dict_slot(seen: Sequence[Any], k: Any) -> list[Any]:
    return [s[k] for s in seen if isinstance(s, dict) and k in s]


def _derived(memo: dict[Any, Any], what: Any, seen: Sequence[Any], make: Callable[[], Any]) -> Any:
    """``make()``, worked out once per ``seen`` list in ``memo`` (which holds the list, so its id stays its own)."""
    key = (what, id(seen))
    found = memo.get(key)
    if found is None or found[0] is not seen:
        found = memo[key] = (seen, make())
    return found[1]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def random_calls(families: Sequence[Family], domain: Domain, rng: random.Random, count: int) -> list[str]:
    """Up to ``count`` calls with every slot drawn afresh (see :func:`fresh_value`), in the domain."""
    made: dict[str, None] = {}
    pool = [(f, t) for f in families for t in f.templates]
    memo: dict[Any, Any] = {}
    tries = 0
    while pool and len(made) < count and tries < count * 10:
        tries += 1
        family, tmpl = rng.choice(pool)
        values = {i: fresh_value(v, rng, domain, family.seen[i], memo) for i, v in enumerate(tmpl.values)}
        if all(domain.allows(v) for v in values.values()):
            made.setdefault(tmpl.fill(values), None)
    return list(made)
