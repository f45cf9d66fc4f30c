"""Near-duplicate detection of backend tasks by their reference code, for ``colbench tasks generate``: a generated
task whose reference is a disguised copy of a test task (or of another generated task) would leak the test split
into training data, and task ids are local to each file, so only the code can tell.

A reference is fingerprinted once (``code_fingerprint``) into two token sequences:

- the **normalized AST**: node types in pre-order with a close mark after each block; every name the code binds
  or reads (functions, parameters, variables, imports) becomes ``_`` (builtins keep their names: ``len`` and
  ``sorted`` say what the code does), attribute names are kept (``.append``, ``.items``: the API used), numbers
  and strings are bucketed by type (``<int>``, ``<str>``), docstrings and bare string statements are dropped,
  ``for`` and ``while`` are one ``Loop`` (a ``for`` over ``range`` is the ``while`` loop that counts with
  ``+= 1``), runs of adjacent simple statements (assignments, imports, calls) are read in a fixed order, and an
  ``if``/``else`` is read with a leading ``not`` dropped and its two branches in a fixed order (``if c: A else:
  B`` is ``if not c: B else: A``). One placeholder for every name, not names
  numbered by first appearance: numbering makes every later token change when two statements swap places.
- the **lexical tokens** (``tokenize``): keywords, operators, attribute and builtin names and literal values
  (in one spelling: ``'a'`` is ``"a"``), without comments, docstrings, parentheses and layout; every other name
  is ``_`` here too (a renamed copy is a copy, and a source that does not parse is read the same way). Where the
  AST is blind (two tasks of the same shape on different data: an if-chain mapping other strings to other
  strings), the literals tell them apart.

Each sequence becomes a set of k-gram shingles (``SHINGLE`` tokens); a channel's similarity is the Jaccard index of
the two sets (renaming leaves the AST's shingles intact, comments and layout leave both intact, reordering
statements or editing one line changes only the shingles that span it). The combined ``score`` is
``AST_WEIGHT * ast + (1 - AST_WEIGHT) * tokens``. A source that does not parse (or nests too deep) has no AST
channel: its ``score`` is the tokens' similarity alone and ``ast`` is 0. Sources are cut to ``MAX_SOURCE_CHARS``
(before a top-level statement) and sequences to ``MAX_TOKENS``, so an enormous reference costs a bounded time.

``NearDuplicateIndex`` finds the nearest task exactly, with no approximation: an inverted index from shingle to
tasks counts the shared shingles of every indexed task at once, which gives each one's Jaccard index directly.
``DUPLICATE_THRESHOLD`` was calibrated on the 300-task ColBench test sample (``bench/near_duplicates.py``;
docs/generate.md, "Deduplication").
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import re
import tokenize
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from colbench.errors import DataError
from colbench.types.task import Task

SHINGLE = 5
AST_WEIGHT = 0.5
DUPLICATE_THRESHOLD = 0.55  # calibrated: docs/generate.md, "Deduplication"
MAX_SOURCE_CHARS = 100_000  # references are a few thousand characters at most
MAX_TOKENS = 20_000

_BUILTINS = frozenset(name for name in dir(builtins) if not name.startswith("_"))
_SKIPPED_TOKENS = frozenset(
    {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
)
_TOP_LEVEL = re.compile(r"\n(?=[^\s#])")
_BRACKETS = frozenset({"(", ")"})
_STATEMENT_ENDS = frozenset({tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER})
_SKIPPED_NODES = (ast.expr_context,)  # Load, Store, Del: the same code either way
_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Import, ast.ImportFrom, ast.Expr)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


@dataclass(frozen=True)
class CodeFingerprint:
    """A reference's two shingle sets. ``parsed`` is False where the source did not parse: ``ast`` is then empty.
    Shingles are strings, so a fingerprint compares equal across processes (no salted hashes)."""

    ast: frozenset[str]
    tokens: frozenset[str]
    parsed: bool


@dataclass(frozen=True)
class Similarity:
    """How alike two references are, each figure in [0, 1]: ``ast`` (normalized syntax tree; 0 when either side
    did not parse), ``tokens`` (lexical), ``score`` (the two combined: ``AST_WEIGHT * ast + (1 - AST_WEIGHT) *
    tokens``, or ``tokens`` alone without an AST)."""

    ast: float
    tokens: float
    score: float

    @property
    def duplicate(self) -> bool:
        return self.score >= DUPLICATE_THRESHOLD


@dataclass(frozen=True)
class Nearest:
    """The closest indexed reference: a generated task's provenance records it (``to_row``/``from_row``)."""

    task_id: str
    similarity: Similarity

    def to_row(self) -> dict[str, object]:
        sim = self.similarity
        figures = {"score": sim.score, "ast": sim.ast, "tokens": sim.tokens}
        return {"task_id": self.task_id, **{name: round(value, 4) for name, value in figures.items()}}

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> Nearest:
        """The record ``to_row`` wrote; a malformed one is a ``DataError`` naming what is wrong."""
        try:
            task_id = row["task_id"]
            figures = [float(row[name]) for name in ("ast", "tokens", "score")]  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"bad nearest-task record {dict(row)!r}: {exc}") from None
        if not isinstance(task_id, str) or not all(0.0 <= f <= 1.0 for f in figures):
            raise DataError(f"bad nearest-task record {dict(row)!r}: a task id and figures in [0, 1] expected")
        return cls(task_id, Similarity(*figures))


def code_fingerprint(source: str) -> CodeFingerprint:
    """Parse once: the normalized AST's and the lexical tokens' shingles of ``source``."""
    source = source.removeprefix("\ufeff")
    if len(source) > MAX_SOURCE_CHARS:  # cut before a top-level statement: what is left may still parse
        head = source[:MAX_SOURCE_CHARS]
        starts = [m.start() for m in _TOP_LEVEL.finditer(head)]
        source = head[: starts[-1] + 1] if starts else head
    lexical = _shingles(_lexical_tokens(source))
    try:
        syntax = _shingles(_ast_tokens(ast.parse(source)))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return CodeFingerprint(frozenset(), lexical, parsed=False)
    return CodeFingerprint(syntax, lexical, parsed=True)


def similarity(a: CodeFingerprint, b: CodeFingerprint) -> Similarity:
    tokens = _jaccard(len(a.tokens & b.tokens), len(a.tokens), len(b.tokens))
    if not (a.parsed and b.parsed):
        return Similarity(0.0, tokens, tokens)
    syntax = _jaccard(len(a.ast & b.ast), len(a.ast), len(b.ast))
    return Similarity(syntax, tokens, _combined(syntax, tokens))


def _combined(syntax: float, tokens: float) -> float:
    return AST_WEIGHT * syntax + (1 - AST_WEIGHT) * tokens


def _jaccard(shared: int, size_a: int, size_b: int) -> float:
    """Empty sets share nothing: two empty references are not duplicates of each other (nothing to compare)."""
    union = size_a + size_b - shared
    return shared / union if union and shared else 0.0


class NearDuplicateIndex:
    """The references seen so far (a test split, then each kept generated task), queried for the nearest one.

    Exact: an inverted index from shingle to the references holding it counts, in one ``bincount`` over the
    posting lists of the query's shingles, how many shingles the query shares with every reference; with the set
    sizes that is every reference's Jaccard index of each channel at once, with no approximation (no MinHash: at
    a few thousand references the exact count is fast enough, bench/near_duplicates.py)."""

    def __init__(self, tasks: Sequence[Task] = ()) -> None:
        self._ids: list[str] = []
        self._syntax = _Postings()
        self._tokens = _Postings()
        self._parsed: list[bool] = []
        for task in tasks:
            self.add(task.task_id, code_fingerprint(task.ground_truth))

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, task_id: str, fingerprint: CodeFingerprint) -> None:
        row = len(self._ids)
        self._ids.append(task_id)
        self._parsed.append(fingerprint.parsed)
        self._syntax.add(row, fingerprint.ast)
        self._tokens.add(row, fingerprint.tokens)

    def nearest(self, fingerprint: CodeFingerprint) -> Nearest | None:
        """The indexed reference with the highest ``score`` (the first indexed among equals), or None when none
        scores above 0 (the index is empty, or no reference shares a single shingle with ``fingerprint``)."""
        if not self._ids:
            return None
        syntax, tokens, score = self._scores(fingerprint)
        row = int(np.argmax(score))  # the first of the highest
        return self._nearest(row, syntax, tokens, score) if score[row] > 0 else None

    def above(self, fingerprint: CodeFingerprint, threshold: float = DUPLICATE_THRESHOLD) -> list[Nearest]:
        """Every indexed reference scoring ``threshold`` or more (and above 0), nearest first."""
        if not self._ids:
            return []
        syntax, tokens, score = self._scores(fingerprint)
        rows = np.flatnonzero((score >= threshold) & (score > 0))
        rows = rows[np.lexsort((rows, -score[rows]))]
        return [self._nearest(int(row), syntax, tokens, score) for row in rows]

    def _nearest(self, row: int, syntax: _Floats, tokens: _Floats, score: _Floats) -> Nearest:
        return Nearest(self._ids[row], Similarity(float(syntax[row]), float(tokens[row]), float(score[row])))

    def _scores(self, fingerprint: CodeFingerprint) -> tuple[_Floats, _Floats, _Floats]:
        """Each channel's Jaccard index and the combined score against every indexed reference, as arrays."""
        n = len(self._ids)
        tokens = self._tokens.jaccard(fingerprint.tokens, n)
        if not fingerprint.parsed:
            return np.zeros(n), tokens, tokens
        both = np.asarray(self._parsed)
        syntax = np.where(both, self._syntax.jaccard(fingerprint.ast, n), 0.0)
        return syntax, tokens, np.where(both, AST_WEIGHT * syntax + (1 - AST_WEIGHT) * tokens, tokens)


_Floats = npt.NDArray[np.float64]


class _Postings:
    """One channel's inverted index: shingle -> the rows holding it (a list while rows are added, an array once
    queried), and each row's set size."""

    def __init__(self) -> None:
        self._rows: dict[str, list[int]] = {}
        self._arrays: dict[str, npt.NDArray[np.int64]] = {}
        self._sizes: list[int] = []

    def add(self, row: int, shingles: frozenset[str]) -> None:
        self._sizes.append(len(shingles))
        for shingle in shingles:
            self._rows.setdefault(shingle, []).append(row)
            self._arrays.pop(shingle, None)

    def jaccard(self, shingles: frozenset[str], n: int) -> _Floats:
        postings = [self._array(s) for s in shingles if s in self._rows]
        if not postings:
            return np.zeros(n)
        shared = np.bincount(np.concatenate(postings), minlength=n).astype(np.float64)
        union = np.asarray(self._sizes, dtype=np.float64) + len(shingles) - shared
        return np.divide(shared, union, out=np.zeros(n), where=shared > 0)

    def _array(self, shingle: str) -> npt.NDArray[np.int64]:
        array = self._arrays.get(shingle)
        if array is None:
            array = self._arrays[shingle] = np.asarray(self._rows[shingle], dtype=np.int64)
        return array


def _shingles(sequence: Sequence[str]) -> frozenset[str]:
    """The k-grams of ``sequence``; a sequence shorter than k is one shingle (a one-line reference still has a
    fingerprint)."""
    if not sequence:
        return frozenset()
    if len(sequence) <= SHINGLE:
        return frozenset({" ".join(sequence)})
    return frozenset(" ".join(sequence[i : i + SHINGLE]) for i in range(len(sequence) - SHINGLE + 1))


def _lexical_tokens(source: str) -> list[str]:
    """The tokens as written, without comments, layout and string statements (docstrings), names as ``_`` (but
    builtins, keywords and attributes) and literals in one spelling (``'a'`` and ``"a"`` are one token); a source
    that stops tokenizing (unclosed bracket, bad indentation) keeps the tokens read up to there."""
    out: list[str] = []
    statement_start = True
    pending = ""  # a string opening a statement: dropped if the statement ends there
    after_dot = False
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type in _SKIPPED_TOKENS:
                if token.type in _STATEMENT_ENDS:
                    statement_start, pending = True, ""
                continue
            if pending:
                out.append(pending)
                pending = ""
            if token.type == tokenize.STRING and statement_start:
                pending = _literal(token.string)
            elif token.type in (tokenize.STRING, tokenize.NUMBER):
                out.append(_literal(token.string))
            elif token.string in _BRACKETS:
                pass  # redundant parentheses are layout; a call's or a tuple's show in the AST
            elif token.type == tokenize.NAME and not after_dot and _renamable(token.string):
                out.append("_")
            else:
                out.append(token.string)
            after_dot = token.string == "."
            statement_start = False
            if len(out) >= MAX_TOKENS:
                break
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return out


def _renamable(name: str) -> bool:
    return name not in _BUILTINS and not keyword.iskeyword(name) and not keyword.issoftkeyword(name)


def _literal(text: str) -> str:
    try:
        return repr(ast.literal_eval(text))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text  # an f-string, or a literal too large to evaluate: as written


def _ast_tokens(tree: ast.AST) -> list[str]:
    return _block(tree.body if isinstance(tree, ast.Module) else [])[:MAX_TOKENS]  # the root itself says nothing


def _walk(node: ast.AST) -> Iterator[str]:
    if isinstance(node, _SKIPPED_NODES):
        return
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
        return  # docstrings and string statements are comments
    counted = _counting_loop(node)
    if counted is not None:  # for i in range(n) and i = 0; while i < n: ...; i += 1 are one construct
        bound, body = counted
        yield from ("Loop", "Count", *_walk(bound), *_block(body), "}")
        return
    yield _label(node)
    if isinstance(node, ast.If) and node.orelse:
        yield from _walk(_negation_stripped(node.test))
        # if c: A else: B and if not c: B else: A are one construct
        yield from (t for branch in sorted((_block(node.body), _block(node.orelse))) for t in branch)
    else:
        for _, value in ast.iter_fields(node):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                yield from _block(value)
            elif isinstance(value, list):
                yield from (t for item in value if isinstance(item, ast.AST) for t in _walk(item))
            elif isinstance(value, ast.AST):
                yield from _walk(value)
    if isinstance(node, ast.stmt) and any(isinstance(getattr(node, f, None), list) for f in ("body", "orelse")):
        yield "}"


def _counting_loop(node: ast.AST) -> tuple[ast.expr, list[ast.stmt]] | None:
    """A loop over consecutive integers, as its bound and its body (without the counter's step): ``for v in
    range(stop)`` or ``range(start, stop)``, or ``while v < stop:`` whose body ends in ``v += 1``."""
    if isinstance(node, ast.For) and not node.orelse and isinstance(node.iter, ast.Call):
        call = node.iter
        if isinstance(call.func, ast.Name) and call.func.id == "range" and 1 <= len(call.args) <= 2:
            return call.args[-1], node.body
    if isinstance(node, ast.While) and not node.orelse and len(node.body) > 1:
        test, step = node.test, node.body[-1]
        if (
            isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name)
            and [type(op) for op in test.ops] == [ast.Lt]
            and isinstance(step, ast.AugAssign)
            and isinstance(step.op, ast.Add)
            and isinstance(step.target, ast.Name)
            and step.target.id == test.left.id
            and isinstance(step.value, ast.Constant)
            and step.value.value == 1
        ):
            return test.comparators[0], node.body[:-1]
    return None


def _negation_stripped(test: ast.expr) -> ast.expr:
    return test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else test


def _block(body: list[ast.stmt]) -> list[str]:
    """A block's statements, each run of adjacent simple statements (assignments, imports, calls) in a fixed
    order: swapping two independent assignments is the commonest disguise of all, and their order rarely says
    what a function does."""
    out: list[str] = []
    run: list[tuple[ast.stmt, list[str]]] = []
    for statement in body:
        tokens = list(_walk(statement))
        if isinstance(statement, _SIMPLE):
            run.append((statement, tokens))
            continue
        counter = _counter(statement)
        if counter is not None:  # its start belongs to the loop, as range's start does
            run = [(s, t) for s, t in run if not _assigns(s, counter)]
        out.extend(t for simple in sorted(t for _, t in run) for t in simple)
        run = []
        out.extend(tokens)
    out.extend(t for simple in sorted(t for _, t in run) for t in simple)
    return out


def _counter(statement: ast.stmt) -> str | None:
    """The counter of a ``while`` loop that counts (``_counting_loop``), or None."""
    if isinstance(statement, ast.While) and _counting_loop(statement) is not None:
        assert isinstance(statement.test, ast.Compare) and isinstance(statement.test.left, ast.Name)
        return statement.test.left.id
    return None


def _assigns(statement: ast.stmt, name: str) -> bool:
    return (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
        and statement.targets[0].id == name
    )


def _label(node: ast.AST) -> str:
    if isinstance(node, _LOOPS):
        return "Loop"
    if isinstance(node, ast.Name):
        return node.id if node.id in _BUILTINS else "_"
    if isinstance(node, ast.Attribute):
        return "." + node.attr
    if isinstance(node, ast.Constant):
        return f"<{type(node.value).__name__}>"
    return type(node).__name__
