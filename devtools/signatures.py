"""The width of promo_assets' signatures, read from the source (nothing is imported): the functions
with more than 8 parameters and the `return` statements of a tuple longer than 3.

One counter for the rule and its measure: `tests/unit/test_signatures.py` fails on any offender not
in its named allowlist, and `benchmarks/structure.py` reports the same lists.
"""

from __future__ import annotations

import ast
from typing import NamedTuple

MAX_PARAMETERS = 8
MAX_TUPLE_RETURN = 3


class Offender(NamedTuple):
    """A function over MAX_PARAMETERS parameters (`function` is its name) or a `return` of a tuple over
    MAX_TUPLE_RETURN elements (`function` is the function it returns from); `size` counts either."""

    path: str
    line: int
    function: str
    size: int

    @property
    def where(self) -> str:
        """`path:function`, what stays the same when lines move."""
        return f"{self.path}:{self.function}"


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The parameters a caller passes: positional-only, positional and keyword-only, without `self` /
    `cls` (`*args` and `**kwargs` are not counted)."""
    a = fn.args
    n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
    if a.args and a.args[0].arg in ("self", "cls"):
        n -= 1
    return n


def _functions(tree: ast.AST, enclosing: str = "<module>"):
    """(node, name of the innermost function around it) for every node of `tree`."""
    for child in ast.iter_child_nodes(tree):
        yield child, enclosing
        inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else enclosing
        yield from _functions(child, inner)


def wide_functions(path: str, tree: ast.Module) -> list[Offender]:
    """Every function (nested ones and methods included) with more than MAX_PARAMETERS parameters."""
    return [Offender(path, node.lineno, node.name, parameters(node)) for node, _ in _functions(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and parameters(node) > MAX_PARAMETERS]


def long_tuple_returns(path: str, tree: ast.Module) -> list[Offender]:
    """Every `return` of a literal tuple of more than MAX_TUPLE_RETURN elements."""
    return [Offender(path, node.lineno, fn, len(node.value.elts)) for node, fn in _functions(tree)
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple)
            and len(node.value.elts) > MAX_TUPLE_RETURN]
