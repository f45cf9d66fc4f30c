"""Near-duplicate detection of backend tasks by their reference code, for ``colbench tasks generate``: a generated
task whose reference is a disguised copy of a test task (or of another generated task) would leak the test split
into training data, and task ids are local to each file, so only the code can tell.

A reference is fingerprinted once (``code_fingerprint``) into two token sequences:

- the **normalized AST**: node types in pre-order with a close mark after each block; every name the code binds
  or reads (functions, parameters, variables, imports) becomes ``_`` (builtins keep their names: ``len`` and
  ``sorted`` say what the code does), attribute names are kept (``.append``, ``.items``: the API used), numbers
  and strings are bucketed by type (``<int>``, ``<str>``), docstrings and bare string statements are dropped,
  ``for`` and ``while`` are one ``Loop``, runs of adjacent simple statements (assignments, imports, calls) are
  read in a fixed order, and an ``if``/``else`` is read with a leading ``not`` dropped and its two branches in a
  fixed order (``if c: A else: B`` is ``if not c: B else: A``). One placeholder for every name, not names
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
and sequences to ``MAX_TOKENS``, so an enormous reference costs a bounded time.

``NearDuplicateIndex`` finds the nearest task exactly, with no approximation: an inverted index from shingle to
tasks counts the shared shingles of every task that shares any, which gives each one's Jaccard index directly.
``DUPLICATE_THRESHOLD`` was calibrated on the 300-task ColBench test sample (``bench/near_duplicates.py``;
docs/generate.md, "Deduplication").
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import tokenize
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from colbench.types.task import Task

SHINGLE = 5
AST_WEIGHT = 0.5
DUPLICATE_THRESHOLD = 0.55  # calibrated: docs/generate.md, "Deduplication"
MAX_SOURCE_CHARS = 200_000
MAX_TOKENS = 20_000

_BUILTINS = frozenset(name for name in dir(builtins) if not name.startswith("_"))
_SKIPPED_TOKENS = frozenset(
    {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
)
_BRACKETS = frozenset({"(", ")"})
_STATEMENT_ENDS = frozenset({tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER})
_SKIPPED_NODES = (ast.expr_context, ast.Load, ast.Store, ast.Del)
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
    task_id: str
    similarity: Similarity


def code_fingerprint(source: str) -> CodeFingerprint:
    """Parse once: the normalized AST's and the lexical tokens' shingles of ``source``."""
    source = source[:MAX_SOURCE_CHARS]
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

    Exact: the inverted index counts, for every indexed reference sharing at least one shingle with the query, how
    many it shares, which with the set sizes is the Jaccard index of each channel; no reference sharing nothing can
    be nearer than one that does. A query costs the total length of the posting lists of its shingles."""

    def __init__(self, tasks: Sequence[Task] = ()) -> None:
        self._ids: list[str] = []
        self._sizes: list[tuple[int, int, bool]] = []
        self._ast: dict[str, list[int]] = {}
        self._tokens: dict[str, list[int]] = {}
        for task in tasks:
            self.add(task.task_id, code_fingerprint(task.ground_truth))

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, task_id: str, fingerprint: CodeFingerprint) -> None:
        row = len(self._ids)
        self._ids.append(task_id)
        self._sizes.append((len(fingerprint.ast), len(fingerprint.tokens), fingerprint.parsed))
        for shingle in fingerprint.ast:
            self._ast.setdefault(shingle, []).append(row)
        for shingle in fingerprint.tokens:
            self._tokens.setdefault(shingle, []).append(row)

    def nearest(self, fingerprint: CodeFingerprint) -> Nearest | None:
        """The indexed reference with the highest ``score`` (the first indexed among equals), or None when no
        indexed reference shares a single shingle with ``fingerprint``."""
        ranked = self._ranked(fingerprint)
        return ranked[0] if ranked else None

    def above(self, fingerprint: CodeFingerprint, threshold: float = DUPLICATE_THRESHOLD) -> list[Nearest]:
        """Every indexed reference scoring ``threshold`` or more, nearest first."""
        return [n for n in self._ranked(fingerprint) if n.similarity.score >= threshold]

    def _ranked(self, fingerprint: CodeFingerprint) -> list[Nearest]:
        shared_tokens = _counts(self._tokens, fingerprint.tokens)
        shared_ast = _counts(self._ast, fingerprint.ast) if fingerprint.parsed else Counter()
        found = []
        for row in shared_tokens.keys() | shared_ast.keys():
            ast_size, token_size, parsed = self._sizes[row]
            tokens = _jaccard(shared_tokens[row], len(fingerprint.tokens), token_size)
            if parsed and fingerprint.parsed:
                syntax = _jaccard(shared_ast[row], len(fingerprint.ast), ast_size)
                sim = Similarity(syntax, tokens, _combined(syntax, tokens))
            else:
                sim = Similarity(0.0, tokens, tokens)
            found.append((-sim.score, row, sim))
        found.sort(key=lambda item: (item[0], item[1]))
        return [Nearest(self._ids[row], sim) for _, row, sim in found if sim.score > 0]


def _counts(postings: dict[str, list[int]], shingles: Iterable[str]) -> Counter[int]:
    counts: Counter[int] = Counter()
    for shingle in shingles:
        rows = postings.get(shingle)
        if rows:
            counts.update(rows)
    return counts


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
    out: list[str] = []
    body = tree.body if isinstance(tree, ast.Module) else []
    for token in _block(body):  # the root itself says nothing
        out.append(token)
        if len(out) >= MAX_TOKENS:
            break
    return out


def _walk(node: ast.AST) -> Iterator[str]:
    if isinstance(node, _SKIPPED_NODES):
        return
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
        return  # docstrings and string statements are comments
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


def _negation_stripped(test: ast.expr) -> ast.expr:
    return test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else test


def _block(body: list[ast.stmt]) -> list[str]:
    """A block's statements, each run of adjacent simple statements (assignments, imports, calls) in a fixed
    order: swapping two independent assignments is the commonest disguise of all, and their order rarely says
    what a function does."""
    out: list[str] = []
    run: list[list[str]] = []
    for statement in body:
        tokens = list(_walk(statement))
        if isinstance(statement, _SIMPLE):
            run.append(tokens)
            continue
        out.extend(t for simple in sorted(run) for t in simple)
        run = []
        out.extend(tokens)
    out.extend(t for simple in sorted(run) for t in simple)
    return out


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
