"""The import graph of promo_assets has no cycle: each module's imports, at module level and inside
functions alike, point one way, and so do the rooms (the packages under promo_assets). An import is
made inside a function only to defer a heavy library (DEFERRED) that the importing module does not
load already; anything else is imported at the top of the module, where the graph shows it. The
campaign config in particular never imports the models (the registry validates the config's models
block where the pipeline loads it)."""

from __future__ import annotations

import ast
from pathlib import Path

from devtools.graphs import cycles

PACKAGE = Path(__file__).resolve().parents[2] / "promo_assets"
# the libraries a module may defer by importing a promo_assets module inside a function: each costs
# start-up time that `promo --help`, `promo serve` or a Dagster code location should not pay before
# it needs them (pandas, numpy, pydantic and yaml included: `promo --help` takes 0.16 s without them
# and 0.31 s when cli/main.py imports the campaign config at the top)
DEFERRED = {"torch", "torch_geometric", "lightgbm", "sklearn", "dagster", "dagster_duckdb", "dask", "distributed", "plotly",
            "matplotlib", "starlette", "uvicorn", "pandas", "numpy", "scipy", "duckdb", "pyarrow", "pydantic", "yaml"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(tree: ast.Module, name: str, is_package: bool, known: set[str], top_level_only: bool) -> set[str]:
    """The promo_assets modules `tree` imports (module level only when `top_level_only`; `if
    TYPE_CHECKING:` blocks never run)."""
    nodes = []

    def walk(body):
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                nodes.append(node)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            elif isinstance(node, (ast.If, ast.Try, ast.With)) or (not top_level_only and hasattr(node, "body")):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    for child in getattr(node, field, []) or []:
                        walk([child] if not isinstance(child, ast.ExceptHandler) else child.body)

    walk(tree.body)
    out = set()
    package = name if is_package else name.rpartition(".")[0]
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join(anchor + ([base] if base else []))
        for a in node.names:
            sub = f"{base}.{a.name}"
            out.add(sub if sub in known else base)
    return {m for m in out if m in known and m != name}


def graph(top_level_only: bool = True) -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imported(ast.parse(path.read_text()), name, path.name == "__init__.py", known, top_level_only)
            for name, path in mods.items()}


def test_the_walk_sees_the_imports():
    edges = graph()
    assert len(edges) > 50
    assert "promo_assets.models.protocol" in edges["promo_assets.models.registry"]
    assert "promo_assets.config.campaign" in edges["promo_assets.models.protocol"]


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_module_level_imports_have_no_cycle():
    found = cycles(graph())
    assert not found, "import cycles among module-level imports: " + "; ".join(" <-> ".join(c) for c in found)


def test_campaign_config_never_imports_the_models():
    """Not even inside a function: the config is validated without the models (see the registry)."""
    edges = graph(top_level_only=False)
    assert not [m for m in edges["promo_assets.config.campaign"] if m.startswith("promo_assets.models")]


def test_no_cycle_with_the_imports_inside_functions():
    """An import inside a function runs later, but it still ties the two modules: a cycle hidden in
    one is a cycle."""
    found = cycles(graph(top_level_only=False))
    assert not found, "import cycles (imports inside functions included): " + "; ".join(" <-> ".join(c) for c in found)


def room(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_the_rooms_point_one_way():
    """promo_assets.<room> imports another room's modules only if that room never imports back."""
    edges: dict[str, set[str]] = {}
    for name, targets in graph(top_level_only=False).items():
        edges.setdefault(room(name), set()).update(room(t) for t in targets if room(t) != room(name))
    found = cycles(edges)
    assert not found, "rooms that import each other: " + "; ".join(" <-> ".join(c) for c in found)


def third_party(tree: ast.Module) -> set[str]:
    """The top-level names of the libraries a module imports at module level."""
    out = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.split(".")[0])
    return out & DEFERRED


def loads() -> dict[str, set[str]]:
    """{module: the DEFERRED libraries importing it loads} (its module-level imports, followed through
    promo_assets modules and their parent packages)."""
    mods = modules()
    top = graph()
    for name in mods:
        parts = name.split(".")
        top[name] |= {".".join(parts[:i]) for i in range(2, len(parts))} - {name}
    own = {name: third_party(ast.parse(path.read_text())) for name, path in mods.items()}
    out = {}
    for name in mods:
        seen, stack, libs = {name}, [name], set()
        while stack:
            m = stack.pop()
            libs |= own[m]
            for t in top[m] - seen:
                seen.add(t)
                stack.append(t)
        out[name] = libs
    return out


def local_imports() -> list[tuple[str, set[str]]]:
    """(module, the promo_assets modules it imports) for every import statement inside a function."""
    mods = modules()
    known = set(mods)
    out = []

    def visit(node, name: str, is_package: bool, in_function: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)) and in_function:
                one = ast.Module(body=[child], type_ignores=[])
                targets = imported(one, name, is_package, known, top_level_only=True)
                if targets:
                    out.append((name, targets))
            else:
                visit(child, name, is_package, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    for name, path in mods.items():
        visit(ast.parse(path.read_text()), name, path.name == "__init__.py", False)
    return out


def test_imports_inside_functions_defer_a_heavy_library():
    loaded = loads()
    pointless = sorted({f"{name} -> {t}" for name, targets in local_imports() for t in targets
                        if not loaded[t] - loaded[name]})
    assert not pointless, ("imports inside functions that defer none of DEFERRED the module does not load already "
                           "(import them at the top of the module): " + "; ".join(pointless))


def test_the_deferral_rule_knows_what_a_module_loads():
    imports = local_imports()
    assert len(imports) > 20  # the walk sees the imports inside functions
    loaded = loads()
    assert "torch" in loaded["promo_assets.models.dipn"] and "torch" not in loaded["promo_assets.config.campaign"]
    assert not loaded["promo_assets.config.campaign"] - loaded["promo_assets.models.dipn"]
