"""How many public signatures of promo_assets still name the predicted response, its cost or the dual multiplier by an older name.

Counts, at each git revision given (default: the working tree only), the public functions and methods
(no leading underscore, or `__init__` / `__call__`; methods of public classes) whose parameters include
`values`, `costs`, `v`, `c` or `lam`, per name, and the same over private functions for reference; plus
the calls anywhere in promo_assets/, tests/, benchmarks/ and scripts/ that pass `values=` or `costs=`
as a keyword. DESIGN.md's rule is one name per concept: `response`, `cost` (one pair: `coefficients`)
and `lambda_`.

Usage: python benchmarks/public_names.py [--rev REV ...]   (REV "work" = the working tree)
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import ROOT, Recorder  # noqa: E402

OLD = ("values", "costs", "v", "c", "lam")
FOLDERS = ("promo_assets", "tests", "benchmarks", "scripts")


def sources(rev: str) -> dict[str, str]:
    """path -> text of every .py file under FOLDERS at `rev` ("work": the working tree)."""
    if rev == "work":
        return {str(p.relative_to(ROOT)): p.read_text() for d in FOLDERS for p in (ROOT / d).rglob("*.py")}
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "--", *FOLDERS], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    return {n: subprocess.run(["git", "show", f"{rev}:{n}"], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout for n in names if n.endswith(".py")}


def count(files: dict[str, str]) -> dict:
    public, private, keywords = Counter(), Counter(), Counter()
    public_functions, examples = 0, []

    def visit(body, prefix: str, visible: bool, path: str):
        nonlocal public_functions
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.", visible and not node.name.startswith("_"), path)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                shown = visible and (not node.name.startswith("_") or node.name in ("__init__", "__call__"))
                a = node.args
                names = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)} & set(OLD)
                (public if shown else private).update(names)
                if shown and names:
                    public_functions += 1
                    examples.append(f"{path}:{prefix}{node.name}")

    for path, text in files.items():
        tree = ast.parse(text)
        if path.startswith("promo_assets/"):
            visit(tree.body, "", True, path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                keywords.update(k.arg for k in node.keywords if k.arg in ("values", "costs"))
    return {"public_functions_with_old_names": public_functions,
            "public_parameters": {n: public.get(n, 0) for n in OLD},
            "private_parameters": {n: private.get(n, 0) for n in OLD},
            "keyword_uses": {f"{n}=": keywords.get(n, 0) for n in ("values", "costs")},
            "public_functions": sorted(examples)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", nargs="+", default=["work"], help='git revisions ("work" = the working tree)')
    args = ap.parse_args(argv)
    rec = Recorder("public_names", argv)
    figures = {}
    for rev in args.rev:
        figures[rev] = count(sources(rev))
        f = figures[rev]
        print(f"{rev}: {f['public_functions_with_old_names']} public functions; public {f['public_parameters']}; "
              f"private {f['private_parameters']}; keyword uses {f['keyword_uses']}")
    rec.write(figures, headline={f"{rev}: public functions with values/costs/v/c/lam": f["public_functions_with_old_names"]
                                 for rev, f in figures.items()})
    return figures


if __name__ == "__main__":
    main()
