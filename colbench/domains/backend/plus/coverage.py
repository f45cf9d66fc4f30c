"""What a call of the reference exercises: the lines it runs and how each comparison's operands stand.

Killing the mutants the augmenter fits on is not enough where they are few or the task's own tests already kill
them: a fault at a comparison nobody fitted on (``x > 8`` written ``x >= 8``) is found only by a call that puts the
operands on the boundary. So the augmenter also wants, for each comparison of the reference, calls where its
operands are below, equal and above each other, and calls that run every line, wherever the reference can be made
to. :func:`instrument` rewrites each single comparison ``a < b`` (``<``, ``<=``, ``>``, ``>=``, ``==``, ``!=``,
``in``, ``not in``) as ``__colbench_cmp__(ID, a, b, "lt")``: the same operands, evaluated once and in the same
order, the same result. The sandbox runner's batched calls record how the operands stood: below, equal or
above, for numbers and strings; for a membership test in a built-in collection, whether the item was in it and
which (``in:'USA'``), so that every element of a collection the code looks things up in, and every keyword it
searches a text for, is wanted once.
"""

from __future__ import annotations

import ast

_OPERATORS = {
    ast.Lt: "lt",
    ast.LtE: "le",
    ast.Gt: "gt",
    ast.GtE: "ge",
    ast.Eq: "eq",
    ast.NotEq: "ne",
    ast.In: "in",
    ast.NotIn: "notin",
}


class _Instrument(ast.NodeTransformer):
    def __init__(self) -> None:
        self.count = 0

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        self.generic_visit(node)
        if len(node.ops) != 1 or type(node.ops[0]) not in _OPERATORS:
            return node
        self.count += 1
        operator = ast.Constant(_OPERATORS[type(node.ops[0])])
        arguments = [ast.Constant(self.count), node.left, node.comparators[0], operator]
        call = ast.Call(ast.Name("__colbench_cmp__", ast.Load()), arguments, [])
        return ast.copy_location(call, node)


def instrument(source: str) -> str:
    """``source`` with its comparisons reporting to the batch runner (unchanged when it does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    tree = _Instrument().visit(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree)
