"""Narrow signatures in the domain packages whose signatures were narrowed (issue: "Signatures are too
wide"): no function or method with more than 8 parameters (`self` / `cls` not counted) and no
`return` of a tuple longer than 3 (a small named dataclass instead). Counted from the source as
benchmarks/structure.py counts them (nothing is imported or run)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import structure  # noqa: E402

PACKAGES = ("promo_assets/models/", "promo_assets/graph/", "promo_assets/simulation/", "promo_assets/causal/")
# function -> why it keeps more than 8 parameters
WIDE_ALLOWED = {
    "promo_assets/simulation/__init__.py:simulate": "the public simulator: preset, campaign, landing_dir, days, users, "
    "seed, start (positional in ~80 calls), overwrite, log and the planted change's four keywords",
}


def _in_scope(entry: str) -> bool:
    return entry.startswith(PACKAGES)


def test_no_function_takes_more_than_8_parameters():
    figures = structure.measure(structure.sources(None))
    wide = [w for w in figures["functions_over_8_parameters"] if _in_scope(w)]
    named = {f"{w.split(':')[0]}:{w.split(':')[2].split('(')[0]}": w for w in wide}
    unexplained = sorted(w for key, w in named.items() if key not in WIDE_ALLOWED)
    assert not unexplained, f"functions with more than 8 parameters (group what travels together): {unexplained}"
    assert len(named) == len(wide), "two functions of one name in a module: name them apart"


def test_no_tuple_return_longer_than_3():
    figures = structure.measure(structure.sources(None))
    long = [t for t in figures["tuple_returns_over_3"] if _in_scope(t)]
    assert not long, f"tuple returns longer than 3 (return a small named dataclass): {long}"


def test_the_counter_sees_wide_signatures_and_long_tuples():
    import ast

    source = ("def f(a, b, c, d, e, f, g, h, i): return (1, 2, 3, 4)\n"
              "class C:\n    def m(self, a, b, c, d, e, f, g, h): return a, b\n")
    fns = {n.name: structure.parameters(n) for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)}
    assert fns == {"f": 9, "m": 8}
    figures = structure.measure({"promo_assets/models/x.py": source})
    assert figures["functions_over_8_parameters"] == ["promo_assets/models/x.py:1:f(9)"]
    assert figures["tuple_returns_over_3"] == ["promo_assets/models/x.py:1(4)"]
