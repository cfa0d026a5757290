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
    MAX_TUPLE_RETURN elements (`function` is the function it returns from); `qualname` is that
    function's name with its classes and functions around it (`Model.__init__`); `size` counts either."""

    path: str
    line: int
    function: str
    qualname: str
    size: int

    @property
    def where(self) -> str:
        """`path:qualname`, what stays the same when lines move."""
        return f"{self.path}:{self.qualname}"


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The parameters a caller passes: positional-only, positional and keyword-only, without `self` /
    `cls` (`*args` and `**kwargs` are not counted)."""
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    n = len(positional) + len(a.kwonlyargs)
    if positional and positional[0].arg in ("self", "cls"):
        n -= 1
    return n


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _nodes(tree: ast.AST, function: str = "<module>", scope: str = ""):
    """(node, innermost function around it, that function's qualified name) for every node of `tree`;
    a function node is paired with itself."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, _SCOPES):
            qual = f"{scope}.{child.name}" if scope else child.name
            fn = (child.name, qual) if not isinstance(child, ast.ClassDef) else (function, scope)
            yield child, *fn
            yield from _nodes(child, fn[0], qual)
        else:
            yield child, function, scope or function
            yield from _nodes(child, function, scope)


def wide_functions(path: str, tree: ast.Module) -> list[Offender]:
    """Every function (nested ones and methods included) with more than MAX_PARAMETERS parameters."""
    return [Offender(path, node.lineno, fn, qual, parameters(node)) for node, fn, qual in _nodes(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and parameters(node) > MAX_PARAMETERS]


def long_tuple_returns(path: str, tree: ast.Module) -> list[Offender]:
    """Every `return` of a literal tuple of more than MAX_TUPLE_RETURN elements."""
    return [Offender(path, node.lineno, fn, qual, len(node.value.elts)) for node, fn, qual in _nodes(tree)
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple)
            and len(node.value.elts) > MAX_TUPLE_RETURN]
