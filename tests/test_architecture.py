"""House rules that can be checked mechanically."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "promo_assets"
DOMAIN = ["simulation", "ingestion", "causal", "models", "allocation", "evaluation", "graph"]
DOMAIN_FILES = ["campaign.py", "settings.py", "artifacts.py", "warehouse.py", "cli.py"]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def domain_files() -> list[Path]:
    files = [f for pkg in DOMAIN for f in (ROOT / pkg).rglob("*.py")]
    return files + [ROOT / f for f in DOMAIN_FILES[:-1]]


@pytest.mark.parametrize("path", domain_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_domain_code_does_not_import_dagster(path):
    bad = {m for m in imported_modules(path) if m == "dagster" or m.startswith(("dagster.", "dagster_"))}
    assert not bad, f"{path} imports {bad}: domain code must stay free of dagster"


def test_domain_packages_import_without_dagster(monkeypatch):
    """Importing every domain package with dagster made unimportable still works."""
    import importlib
    import sys

    saved = {k: v for k, v in sys.modules.items() if k.startswith("promo_assets")}
    for k in saved:
        del sys.modules[k]
    monkeypatch.setitem(sys.modules, "dagster", None)
    monkeypatch.setitem(sys.modules, "dagster_duckdb", None)
    try:
        for pkg in DOMAIN:
            importlib.import_module(f"promo_assets.{pkg}")
    finally:
        for k in [k for k in sys.modules if k.startswith("promo_assets")]:
            del sys.modules[k]
        sys.modules.update(saved)


def test_sql_is_not_formatted_with_values():
    """Statements come from sql/ by name; Python code does not build SQL from values with f-strings
    around execute() (identifiers go through quote_ident)."""
    offenders = []
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("execute", "sql") and node.args:
                if isinstance(node.args[0], ast.JoinedStr):
                    offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders, f"f-string SQL passed to execute(): {offenders}"
