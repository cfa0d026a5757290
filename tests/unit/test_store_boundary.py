"""Every warehouse statement runs in promo_assets/store/ (docs/design.md): the Dagster definitions,
the command line and the domain rooms reach the warehouse only through its named functions; no
module of theirs composes or executes a statement itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "promo_assets"
DEFS = ROOT / "defs"
DEFINITION_MODULES = sorted(DEFS.rglob("*.py"))
EXECUTING = {"execute", "executemany", "sql", "query", "from_query"}


def direct_warehouse_calls(path: Path) -> list[str]:
    """'line: call' of every `sql(...)` (warehouse.sql), `<x>.execute(...)` / `.executemany` /
    `.sql` / `.query` call and every import of warehouse.sql in `path`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id == "sql":
                out.append(f"{node.lineno}: sql(...)")
            elif isinstance(f, ast.Attribute) and f.attr in EXECUTING:
                out.append(f"{node.lineno}: .{f.attr}(...)")
        elif isinstance(node, ast.ImportFrom) and node.module == "promo_assets.store.warehouse":
            names = {a.name for a in node.names} & {"sql", "registered", "statements"}
            if names:
                out.append(f"{node.lineno}: import of {', '.join(sorted(names))}")
    return out


def test_the_scan_sees_every_definitions_module():
    names = {p.relative_to(DEFS).as_posix() for p in DEFINITION_MODULES}
    assert {"common.py", "ingestion/assets.py", "models/assets.py", "decisions/assets.py"} <= names, names


@pytest.mark.parametrize("path", DEFINITION_MODULES, ids=lambda p: p.relative_to(DEFS).as_posix())
def test_definitions_modules_never_execute_sql_themselves(path):
    calls = direct_warehouse_calls(path)
    assert not calls, (f"{path.relative_to(DEFS).as_posix()} composes or executes warehouse statements itself: "
                       f"call a named function of promo_assets.store instead: {calls}")


def test_the_cli_never_executes_sql_itself():
    """`promo` reads the warehouse through named functions too (promo_assets.store.runs for the report)."""
    calls = [c for path in sorted((ROOT / "cli").glob("*.py")) for c in direct_warehouse_calls(path)]
    assert not calls, f"cli/ composes or executes warehouse statements itself: {calls}"


def test_the_checker_sees_direct_calls(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from promo_assets.store.warehouse import registered, sql\n"
                   "def f(con):\n    con.execute(sql('frames', 'frame_version'), ['c']).fetchone()\n"
                   "    con.executemany('INSERT', [])\n")
    assert len(direct_warehouse_calls(bad)) == 4


@pytest.mark.parametrize("path", sorted((ROOT / "store").glob("*.py")), ids=lambda p: p.name)
def test_the_store_is_domain_code(path):
    tree = ast.parse(path.read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | {
        n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {m for m in imported if m.split(".")[0] in ("dagster", "dagster_duckdb")}, path


# Every warehouse statement runs in promo_assets/store/, the domain rooms' included.
DOMAIN_MODULES = sorted(p for p in ROOT.rglob("*.py")
                        if p.relative_to(ROOT).parts[0] not in {"store", "defs"}
                        and p.relative_to(ROOT).parts[0].removesuffix(".py") != "definitions")


@pytest.mark.parametrize("path", DOMAIN_MODULES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_domain_modules_run_no_warehouse_statement_themselves(path):
    calls = [c for c in direct_warehouse_calls(path) if "sql(" in c or "import of" in c]
    assert not calls, (f"{path.relative_to(ROOT).as_posix()} runs named warehouse statements itself: move them into "
                       f"a function of promo_assets.store: {calls}")


def test_the_domain_scan_covers_the_rooms():
    rooms = {p.relative_to(ROOT).parts[0] for p in DOMAIN_MODULES}
    assert {"ingestion", "graph", "report", "serve", "decisions", "allocation", "models", "evaluation", "monitoring",
            "config", "core", "simulation"} <= rooms
