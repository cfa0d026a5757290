"""The package's structure in numbers, read from the source (nothing is imported or run).

    python benchmarks/structure.py [--rev REV] [--tag TAG]

Counts, for the working tree or for a git revision (`--rev`, read with `git show`):
- the modules loose at the package root (everything at `promo_assets/*.py` but `definitions.py`);
- the helper functions in `promo_assets/defs/`: functions that are not a Dagster definition
  (asset, multi_asset, asset_check, sensor, schedule, job, op, graph) nor nested inside one;
- the import statements of promo_assets modules inside a function, and the import cycles among
  promo_assets modules when those are walked too (and when only module-level imports are);
- the `sql(...)` calls (promo_assets' named-statement lookup) outside the warehouse boundary, the
  `store/` package (at d637776 the warehouse module sat at the root: its calls count as outside);
- the functions with more than 8 parameters, and the `return` statements of a tuple longer than 3.

Writes benchmarks/results/structure[--TAG].json.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import ROOT, Recorder  # noqa: E402

sys.path.insert(0, str(ROOT))
from devtools.graphs import cycles  # noqa: E402
from devtools.signatures import long_tuple_returns, wide_functions  # noqa: E402

DEFINITION_DECORATORS = {"asset", "multi_asset", "asset_check", "multi_asset_check", "sensor", "schedule", "job",
                         "op", "graph", "graph_asset", "graph_multi_asset", "asset_sensor", "multi_asset_sensor",
                         "run_status_sensor", "run_failure_sensor"}


def sources(rev: str | None) -> dict[str, str]:
    """{path relative to the repository: text} of every promo_assets/**/*.py at `rev` (or on disk)."""
    if rev is None:
        return {p.relative_to(ROOT).as_posix(): p.read_text() for p in (ROOT / "promo_assets").rglob("*.py")}
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "promo_assets"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    return {n: subprocess.run(["git", "show", f"{rev}:{n}"], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout for n in names if n.endswith(".py")}


def module_name(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def decorator_names(node) -> set[str]:
    out = set()
    for d in node.decorator_list:
        d = d.func if isinstance(d, ast.Call) else d
        out.add(d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", ""))
    return out


def imports(tree: ast.Module, name: str, is_package: bool, known: set[str]):
    """[(target modules, inside a function)] for every import statement of promo_assets modules in the
    module `name`."""
    out = []
    package = name if is_package else name.rpartition(".")[0]

    def visit(node, in_function: bool):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            found = sorted({t for t in targets if t in known and t != name})
            if found:
                out.append((found, in_function))
            return
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, False)
    return out


def in_boundary(path: str) -> bool:
    """The warehouse boundary docs/design.md states: every statement runs in promo_assets/store/."""
    return path.startswith("promo_assets/store/")


def measure(src: dict[str, str]) -> dict:
    trees = {p: ast.parse(t) for p, t in src.items()}
    names = {p: module_name(p) for p in src}
    known = set(names.values())
    loose = sorted(Path(p).name for p in src if p.count("/") == 1 and not p.endswith(("__init__.py", "definitions.py")))

    helpers = []
    for p, tree in trees.items():
        if not p.startswith("promo_assets/defs/"):
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not (
                    decorator_names(node) & DEFINITION_DECORATORS):
                helpers.append(f"{p}:{node.name}")

    top, full, local = {}, {}, []
    for p, tree in trees.items():
        found = imports(tree, names[p], p.endswith("__init__.py"), known)
        top[names[p]] = {t for ts, f in found if not f for t in ts}
        full[names[p]] = {t for ts, _ in found for t in ts}
        local += [f"{names[p]} -> {', '.join(ts)}" for ts, f in found if f]

    outside, wide, long_tuples = [], [], []
    for p, tree in trees.items():
        outside += [f"{p}:{node.lineno}" for node in ast.walk(tree) if isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name) and node.func.id == "sql" and not in_boundary(p)]
        wide += [f"{o.path}:{o.line}:{o.function}({o.size})" for o in wide_functions(p, tree)]
        long_tuples += [f"{o.path}:{o.line}({o.size})" for o in long_tuple_returns(p, tree)]
    by_package: dict[str, int] = {}
    for s in outside:
        parts = s.split(":")[0].split("/")
        key = parts[1] if len(parts) > 2 else parts[1].removesuffix(".py")
        by_package[key] = by_package.get(key, 0) + 1
    return {
        "loose_modules": loose,
        "n_loose_modules": len(loose),
        "n_defs_helper_functions": len(helpers),
        "defs_helper_functions": helpers,
        "n_function_local_imports": len(local),
        "cycles_module_level": cycles(top),
        "cycles_with_function_imports": cycles(full),
        "n_sql_calls_outside_boundary": len(outside),
        "sql_calls_outside_boundary_by_package": by_package,
        "n_functions_over_8_parameters": len(wide),
        "functions_over_8_parameters": wide,
        "n_tuple_returns_over_3": len(long_tuples),
        "tuple_returns_over_3": long_tuples,
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", help="a git revision to read instead of the working tree")
    ap.add_argument("--tag", help="written to benchmarks/results/structure--TAG.json")
    args = ap.parse_args(argv)
    rec = Recorder("structure")
    figures = measure(sources(args.rev))
    figures["rev"] = args.rev or "working tree"
    headline = {k: v for k, v in figures.items() if k.startswith("n_")}
    headline["n_cycles_with_function_imports"] = len(figures["cycles_with_function_imports"])
    for k, v in headline.items():
        print(f"{k:40s} {v}")
    rec.write(figures, headline=headline, tag=args.tag)


if __name__ == "__main__":
    main()
