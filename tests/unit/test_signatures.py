"""No function of promo_assets takes more than 8 parameters and no `return` gives a tuple of more than
3 elements: what travels together is one object (a dataclass, a named tuple), see docs/design.md
"Narrow signatures". Counted with `devtools.signatures`, the counter benchmarks/structure.py reports
with, over the whole package, nested functions and methods included.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

from devtools.signatures import MAX_PARAMETERS, MAX_TUPLE_RETURN, Offender, long_tuple_returns, wide_functions

ROOT = Path(__file__).resolve().parents[2]

# Offenders allowed, as `path:qualified name`: none is left (the last, the public simulator, takes a
# SimulationRequest and a Change). These lists must only shrink: an entry that no longer offends fails
# the test until it is removed, and nothing may be added to them.
ALLOWED_WIDE_FUNCTIONS: frozenset[str] = frozenset()
ALLOWED_LONG_TUPLE_RETURNS: frozenset[str] = frozenset()


@functools.cache
def _offenders() -> tuple[list[Offender], list[Offender]]:
    wide, long = [], []
    for path in sorted((ROOT / "promo_assets").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(), filename=rel)
        wide += wide_functions(rel, tree)
        long += long_tuple_returns(rel, tree)
    return wide, long


def _described(offenders: list[Offender]) -> list[str]:
    return sorted(f"{o.path}:{o.line} {o.qualname} ({o.size})" for o in offenders)


def test_no_function_takes_more_than_eight_parameters():
    wide, _ = _offenders()
    new = [o for o in wide if o.where not in ALLOWED_WIDE_FUNCTIONS]
    assert not new, ("functions with more than 8 parameters (group what travels together into a dataclass): "
                     f"{_described(new)}")


def test_no_return_gives_a_tuple_of_more_than_three():
    _, long = _offenders()
    new = [o for o in long if o.where not in ALLOWED_LONG_TUPLE_RETURNS]
    assert not new, ("returns of a tuple longer than 3 (return a dataclass or a named tuple): "
                     f"{_described(new)}")


def test_the_allowlists_only_shrink():
    wide, long = _offenders()
    stale = (ALLOWED_WIDE_FUNCTIONS - {o.where for o in wide}) | (ALLOWED_LONG_TUPLE_RETURNS - {o.where for o in long})
    assert not stale, f"no longer offending, remove from the allowlist: {sorted(stale)}"


SAMPLE = '''
class Model:
    def __init__(self, a, b, c, d, e, f, g, h, i): ...
    def fits(self, a, b, c, d, e, f, g, *, h): ...
    @classmethod
    def build(cls, a, b, c, d, e, f, g, h, /): ...
    def predict(self):
        def inner(a, b, c, d, e, f, g, h, i):
            return 1, 2, 3, 4
        return 1, 2, 3
def fine(a, b, c, d, e, f, g, h, *args, **kwargs):
    return (1, 2, 3, 4),
def wide(a, b, c, d, e, f, g, h, i=0):
    return [1, 2, 3, 4, 5]
'''


def test_the_counter_counts_what_the_rule_says():
    tree = ast.parse(SAMPLE)
    wide = {o.qualname: o.size for o in wide_functions("m.py", tree)}
    assert wide == {"Model.__init__": 9, "Model.predict.inner": 9, "wide": 9}
    long = [(o.qualname, o.size) for o in long_tuple_returns("m.py", tree)]
    assert long == [("Model.predict.inner", 4)]
    assert (MAX_PARAMETERS, MAX_TUPLE_RETURN) == (8, 3)


def test_the_benchmark_counts_with_the_same_counter():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import structure
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    figures = structure.measure({"promo_assets/m.py": SAMPLE})
    assert figures["functions_over_8_parameters"] == ["promo_assets/m.py:3:__init__(9)", "promo_assets/m.py:8:inner(9)",
                                                      "promo_assets/m.py:13:wide(9)"]
    assert figures["tuple_returns_over_3"] == ["promo_assets/m.py:9(4)"]
