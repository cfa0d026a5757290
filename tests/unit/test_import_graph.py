"""The import graph of promo_assets has no cycle: each module's imports at module level (what runs
when it is imported; imports inside functions are deferred on purpose) point one way. The campaign
config in particular never imports the models (the registry validates the config's models block
where the pipeline loads it)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "promo_assets"


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


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


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
