"""House rules that can be checked mechanically."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "promo_assets"
# the Dagster layer (defs/ and definitions.py) and the command line (cli/, which imports dagster lazily
# to run jobs) are the only rooms that may import dagster; every other package is domain code
WIRING = {"defs", "cli"}
DOMAIN = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").exists() and p.name not in WIRING)


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
    return [f for pkg in DOMAIN for f in (ROOT / pkg).rglob("*.py")]


def test_the_package_root_holds_only_the_definitions_and_the_rooms():
    """Every module lives in a room (a package); at the root stays the one entry point of the code
    location, definitions.py."""
    loose = sorted(p.name for p in ROOT.glob("*.py"))
    assert loose == ["__init__.py", "definitions.py"], f"modules loose at the package root: {loose}"
    assert {"config", "core", "store", "cli", "models", "allocation"} <= set(DOMAIN) | WIRING


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


# --------------------------------------------------------------------------------------------
# SQL is never built from strings in Python
#
# SQL text lives in sql/*.sql and is fetched with warehouse.sql(family, name, **placeholders). The
# only text Python may put into a statement is a name quoted by warehouse.quote_ident, another
# sql(...) fragment, a string constant of the code, or a join of those; values are `?` parameters.
# The checker below reads every module of promo_assets and flags:
#   - string building (f-strings, `%`, `+`, `.format`) whose literal text is SQL, or which pastes
#     anything but quote_ident(...) / sql(...) / constants next to a quoted name or fragment;
#   - SQL-taking calls (execute, executemany, sql/query/from_query on a connection or duckdb, the
#     placeholders of warehouse.sql) given anything but a constant, quote_ident(...), sql(...),
#     statements(...), a join of those, or a local name only ever bound to such values.

SQL_WORDS = re.compile(
    r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|FROM|WHERE|JOIN|CASE|WHEN|THEN|CAST|TRY_CAST|VALUES|"
    r"UNION|ATTACH|COPY|PRAGMA|EXCLUDE|struct_pack|read_text|read_csv|read_parquet)\b|:=|\|\|"
)
SAFE_CALLS = {"quote_ident", "sql", "statements"}
SQL_TAKING = {"execute", "executemany", "query", "from_query"}
# warehouse.read_df / read_rows / write_df and the WarehouseResource methods of the same names take
# (family, name, ..., **identifiers) like sql(): their keyword arguments are placeholders, checked
# at every call, except these, which are values, the frame or the connection.
SQL_WRAPPERS = {"read_df", "read_rows", "write_df"}
WRAPPER_VALUE_ARGS = {"con", "params", "frame", "frame_name"}


def _call_name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        f = node.func
        return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return ""


def _is_warehouse_sql(node: ast.Call) -> bool:
    """warehouse.sql(family, name, ...) (a bare `sql(...)` or `warehouse.sql(...)`), not DuckDB's con.sql(text)."""
    f = node.func
    return (isinstance(f, ast.Name) and f.id == "sql") or (
        isinstance(f, ast.Attribute) and f.attr == "sql" and isinstance(f.value, ast.Name) and f.value.id == "warehouse")


class SqlBuildChecker:
    def __init__(self, source: str, filename: str = "<code>"):
        self.tree = ast.parse(source)
        self.filename = filename
        self.offenders: list[str] = []
        self.parents = {c: p for p in ast.walk(self.tree) for c in ast.iter_child_nodes(p)}

    # -- where names come from
    def _scope(self, node):
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return node
        return self.tree

    def _bindings(self, name: str, scope) -> list[tuple[str, ast.AST, int]]:
        """How `name` is bound in `scope`: ("value", expr, -1), ("unpack", expr, index of the
        tuple target) or ("item", iterable, -1) for a loop / comprehension variable."""
        out: list[tuple[str, ast.AST, int]] = []
        for node in ast.walk(scope):
            targets, value = [], None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                targets, value = [node.target], node.value
            elif isinstance(node, (ast.For, ast.comprehension)):
                if any(isinstance(t, ast.Name) and t.id == name for t in ast.walk(node.target)):
                    out.append(("item", node.iter, -1))
                continue
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("append", "extend", "insert") \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == name:
                kind = "item" if node.func.attr == "extend" else "value"
                out.extend((kind, a, -1) for a in node.args[-1:])
                continue
            for target in targets:
                if isinstance(target, ast.Name) and target.id == name:
                    out.append(("value", value, -1))
                elif isinstance(target, ast.Tuple):
                    for i, elt in enumerate(target.elts):
                        if isinstance(elt, ast.Name) and elt.id == name:
                            out.append(("unpack", value, i))
        return out

    def _function(self, name: str):
        return next((n for n in ast.walk(self.tree) if isinstance(n, ast.FunctionDef) and n.name == name), None)

    def _returns_safe(self, call: ast.Call, index: int, depth: int) -> bool:
        """A call of a function of this module whose return values (element `index` of a returned
        tuple when >= 0) are all safe."""
        func = self._function(_call_name(call)) if isinstance(call, ast.Call) else None
        if func is None:
            return False
        values = [r.value for r in ast.walk(func) if isinstance(r, ast.Return) and r.value is not None]
        if index >= 0:
            values = [v.elts[index] if isinstance(v, ast.Tuple) and index < len(v.elts) else None for v in values]
        return bool(values) and all(v is not None and self.safe(v, depth) for v in values)

    def _parameter_safe(self, func, name: str, depth: int) -> bool:
        """Every call of `func` in this module passes a safe value for parameter `name`."""
        args = [a.arg for a in func.args.args]
        calls = [n for n in ast.walk(self.tree) if isinstance(n, ast.Call) and _call_name(n) == func.name]
        if not calls:
            return False
        for call in calls:
            passed = [k.value for k in call.keywords if k.arg == name]
            if not passed and name in args and args.index(name) < len(call.args):
                passed = [call.args[args.index(name)]]
            if not passed:  # the default value
                defaults = dict(zip(args[len(args) - len(func.args.defaults):], func.args.defaults))
                passed = [defaults[name]] if name in defaults else []
            if not passed or not all(self.safe(v, depth) for v in passed):
                return False
        return True

    def safe(self, node, depth: int = 0) -> bool:
        """Whether `node` can only hold code constants, quoted names and sql/ fragments."""
        if depth > 12:
            return False
        d = depth + 1
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.Call):
            name = _call_name(node)
            if name in SAFE_CALLS:
                return True
            if name == "join" and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Constant):
                return all(self.safe_items(a, d) for a in node.args)
            return isinstance(node.func, ast.Name) and self._returns_safe(node, -1, d)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return all(self.safe(e, d) for e in node.elts)
        if isinstance(node, ast.Starred):
            return self.safe_items(node.value, d)
        if isinstance(node, ast.IfExp):
            return self.safe(node.body, d) and self.safe(node.orelse, d)
        if isinstance(node, (ast.JoinedStr, ast.BinOp)):
            texts, values = self._pieces(node)
            return not any(SQL_WORDS.search(x) for x in texts) and all(self.safe(v, d) for v in values)
        if isinstance(node, ast.Name):
            scope = self._scope(node)
            if isinstance(scope, ast.FunctionDef) and node.id in {a.arg for a in scope.args.args + scope.args.kwonlyargs}:
                return self._parameter_safe(scope, node.id, d)
            bound = self._bindings(node.id, scope)
            return bool(bound) and all(
                self.safe_items(v, d) if kind == "item" else
                self._returns_safe(v, i, d) if kind == "unpack" else self.safe(v, d)
                for kind, v, i in bound)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Dict):
            return all(self.safe(v, d) for v in node.value.values)
        return False

    def safe_items(self, node, depth: int) -> bool:
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return self.safe(node.elt, depth)
        if isinstance(node, ast.Call) and _call_name(node) == "map" and len(node.args) == 2:
            return isinstance(node.args[0], ast.Name) and node.args[0].id in SAFE_CALLS
        return self.safe(node, depth)

    def forwarded_placeholders(self, node) -> bool:
        """`**identifiers` passed on inside a wrapper of SQL_WRAPPERS whose own `**identifiers` they
        are: the wrapper's callers are checked instead."""
        if not isinstance(node, ast.Name):
            return False
        scope = node
        while scope in self.parents:
            scope = self.parents[scope]
            if isinstance(scope, ast.FunctionDef):
                return scope.name in SQL_WRAPPERS and scope.args.kwarg is not None and scope.args.kwarg.arg == node.id
        return False

    # -- string building
    def _pieces(self, node) -> tuple[list[str], list[ast.AST]]:
        """(literal texts, interpolated expressions) of an f-string / % / + / .format expression."""
        if isinstance(node, ast.JoinedStr):
            texts = [v.value for v in node.values if isinstance(v, ast.Constant)]
            return texts, [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            lt, lv = self._pieces(node.left)
            rt, rv = self._pieces(node.right)
            return lt + rt, lv + rv
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
                and isinstance(node.left.value, str):
            args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            return [node.left.value], list(args)
        if isinstance(node, ast.Call) and _call_name(node) == "format" and isinstance(node.func.value, ast.Constant):
            return [str(node.func.value.value)], list(node.args) + [k.value for k in node.keywords]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value], []
        return [], [node]

    def string_build_problem(self, node) -> str | None:
        texts, values = self._pieces(node)
        if not texts and isinstance(node, ast.BinOp) and not isinstance(node.op, ast.Mod):
            if not any(_call_name(v) in SAFE_CALLS for v in values):
                return None  # numbers, or strings of other kinds
        sql_text = any(SQL_WORDS.search(t) for t in texts)
        builds_sql = sql_text or any(_call_name(v) in SAFE_CALLS for v in values)
        if not builds_sql:
            return None
        if sql_text:
            return "SQL text built in Python (put it in sql/*.sql)"
        bad = [v for v in values if not self.safe(v)]
        return f"pastes {ast.unparse(bad[0])!r} into SQL (use quote_ident or a ? parameter)" if bad else None

    def run(self) -> list[str]:
        for node in ast.walk(self.tree):
            where = f"{self.filename}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, (ast.JoinedStr, ast.BinOp)) or (
                    isinstance(node, ast.Call) and _call_name(node) == "format"):
                if self.parents.get(node) is not None and isinstance(self.parents[node], (ast.BinOp, ast.JoinedStr)):
                    continue  # judged as part of the enclosing expression
                problem = self.string_build_problem(node) if not isinstance(node, ast.Call) or isinstance(
                    node.func.value, ast.Constant) else None
                if problem:
                    self.offenders.append(f"{where}: {problem}")
            if isinstance(node, ast.Call):
                name = _call_name(node)
                if _is_warehouse_sql(node) or name in SQL_WRAPPERS:
                    for kw in node.keywords:
                        if name in SQL_WRAPPERS and kw.arg in WRAPPER_VALUE_ARGS:
                            continue
                        if kw.arg is None and self.forwarded_placeholders(kw.value):
                            continue
                        if not self.safe(kw.value):
                            self.offenders.append(f"{where}: {name}() placeholder {kw.arg}= is not quote_ident/sql()/a constant")
                elif (name in SQL_TAKING or name == "sql") and node.args and not self.safe(node.args[0]):
                    if name in ("execute", "executemany", "sql", "query", "from_query"):
                        self.offenders.append(f"{where}: {name}() gets SQL that is not a constant or sql(...)")
        return self.offenders


def check_sql_building(source: str, filename: str = "<code>") -> list[str]:
    return SqlBuildChecker(source, filename).run()


BAD_SNIPPETS = {
    "fstring-into-execute": "def f(con, col):\n    con.execute(f\"SELECT {col} FROM t\")\n",
    "fstring-literal-reason": "def f(col):\n    return f\"WHEN x IS NULL THEN '{col}: missing'\"\n",
    "helper-returning-sql": "def num(col):\n    return 'TRY_CAST(src.' + col + ' AS DOUBLE)'\n",
    "percent-format": "def f(con, t):\n    q = 'DELETE FROM %s' % t\n    con.execute(q)\n",
    "dot-format": "def f(con, t):\n    con.execute('SELECT * FROM {}'.format(t))\n",
    "concat-into-execute": "def f(con, t):\n    con.execute('SELECT * FROM ' + t)\n",
    "raw-name-into-placeholder": "def f(con, cols):\n    con.execute(sql('frames', 'events', columns=', '.join(cols)))\n",
    "fstring-placeholder": "def f(con, c):\n    con.execute(sql('ingest', 'x', col=f'src.{c}'))\n",
    "name-beside-quoted-name": "def f(prefix, c):\n    return f'{prefix}{quote_ident(c)}'\n",
    "duckdb-sql-variable": "import duckdb\ndef f(path):\n    q = 'SELECT * FROM ' + repr(path)\n    return duckdb.sql(q)\n",
    "loop-variable-query": "def f(con, qs):\n    for q in qs:\n        con.execute(q)\n",
    "raw-name-into-read-wrapper": "def f(con, c):\n    return read_df(con, 'frames', 'x', col=c)\n",
    "raw-name-into-resource-write": "def f(warehouse, df, t):\n    warehouse.write_df('results', 'x', df, table=t)\n",
    "forwarded-kwargs-outside-a-wrapper": "def g(con, **ids):\n    con.execute(sql('frames', 'x', **ids))\n",
    "old-exploitable-ingestion": (
        "def checks(col):\n    q = f'src.{quote_ident(col)}'\n"
        "    return 'CASE ' + ' '.join([f\"WHEN {q} IS NULL THEN '{col}: missing'\"]) + ' END'\n"),
}
GOOD_SNIPPETS = {
    "constant-statement": "def f(con):\n    con.execute('BEGIN TRANSACTION')\n",
    "named-statement": "def f(con, c, d):\n    con.execute(sql('ingest', 'delete_partition', table='rct_events'), [c, d])\n",
    "quoted-placeholders": ("def f(con, cols):\n    con.execute(sql('frames', 'events', columns=''.join(', ' + quote_ident(c) "
                            "for c in cols)))\n"),
    "fragment-list": ("def f(con, kinds):\n    typed = [sql('ingest', 'typed_required')]\n    for c, k in kinds.items():\n"
                      "        typed.append(sql('ingest', 'typed_numeric', col=quote_ident(c)))\n"
                      "    con.execute(sql('ingest', 'typed_rows', typed=', '.join(typed)))\n"),
    "statements-loop": "def f(con):\n    for s in statements('schema'):\n        con.execute(s)\n",
    "wrapper-forwarding-its-placeholders": (
        "def read_rows(con, family, name, params=(), **identifiers):\n"
        "    return con.execute(sql(family, name, **identifiers), params).fetchall()\n"),
    "quoted-name-into-wrapper": ("def f(warehouse, df, con, t):\n"
                                 "    warehouse.write_df('results', 'x', df, [1], frame_name='eval_df', con=con, "
                                 "table=quote_ident(t))\n"),
    "messages-and-numbers": "def f(path, n, i):\n    return f'{path}: {n} rows', n % 2, i + 1, 'a' + 'b'\n",
}


@pytest.mark.parametrize("name", sorted(BAD_SNIPPETS))
def test_sql_building_checker_catches(name):
    assert check_sql_building(BAD_SNIPPETS[name]), f"the checker misses {name}"


@pytest.mark.parametrize("name", sorted(GOOD_SNIPPETS))
def test_sql_building_checker_allows(name):
    assert check_sql_building(GOOD_SNIPPETS[name]) == []


def test_sql_is_never_built_from_strings():
    """No module of promo_assets builds SQL text from strings: statements come from sql/ by name and
    only quote_ident(...) names, sql(...) fragments and constants fill their placeholders."""
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        offenders += check_sql_building(path.read_text(), str(path.relative_to(ROOT)))
    assert not offenders, "SQL built from strings:\n" + "\n".join(offenders)


TRANSACTION_WORDS = re.compile(r"^\s*(BEGIN|COMMIT|ROLLBACK|START\s+TRANSACTION|ABORT)\b", re.IGNORECASE)


TRANSACTION_METHODS = {"begin", "commit", "rollback"}  # DuckDBPyConnection's own


def hand_written_transactions(source: str) -> list[tuple[int, str]]:
    """(line, what) for each transaction statement as text and each con.begin()/commit()/rollback()."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and TRANSACTION_WORDS.match(node.value):
            found.append((node.lineno, repr(node.value)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in TRANSACTION_METHODS \
                and not node.args and not node.keywords:
            found.append((node.lineno, f".{node.func.attr}()"))
    return found


@pytest.mark.parametrize("snippet", ["con.execute('BEGIN TRANSACTION')", "con.execute('commit')",
                                     "con.execute('  ROLLBACK')", "con.begin()", "con.commit()", "con.rollback()"])
def test_transaction_checker_catches(snippet):
    assert hand_written_transactions(f"def f(con):\n    {snippet}\n")


def test_transactions_only_through_warehouse_transaction():
    """No module but store/warehouse.py (`warehouse.transaction`), no benchmark and no sql/ statement
    opens or ends a transaction by hand (as SQL text or with the connection's begin/commit/rollback)."""
    offenders = []
    code = sorted(ROOT.rglob("*.py")) + sorted((ROOT.parent / "benchmarks").rglob("*.py"))
    for path in code:
        if path == ROOT / "store" / "warehouse.py":
            continue
        offenders += [f"{path.relative_to(ROOT.parent)}:{line}: {what}" for line, what in hand_written_transactions(path.read_text())]
    for path in sorted((ROOT.parent / "sql").glob("*.sql")):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if TRANSACTION_WORDS.match(line):
                offenders.append(f"sql/{path.name}:{i}: {line.strip()}")
    assert not offenders, "hand-written transaction statements (use warehouse.transaction):\n" + "\n".join(offenders)


def test_dataframes_reach_sql_only_through_registered():
    """Replacement scans are off (warehouse.no_replacement_scans), so a DataFrame is read only when
    handed over with `warehouse.registered`; no module keeps the old `# noqa: F841` locals."""
    offenders = [f"{p.relative_to(ROOT)}:{i}" for p in sorted(ROOT.rglob("*.py"))
                 for i, line in enumerate(p.read_text().splitlines(), 1) if "replacement scan" in line and "noqa" in line]
    assert not offenders, "DataFrames read by name from Python locals:\n" + "\n".join(offenders)


# --------------------------------------------------------------------------------------------
# Importing the code location changes no environment variable: resources read their settings when a
# run or tick starts (promo_assets/defs/resources.py), so a module never writes os.environ
# at its top level.

ENVIRON_WRITES = {"setdefault", "update", "pop", "popitem", "clear", "__setitem__", "__delitem__"}


def environ_writes_at_import(source: str) -> list[int]:
    """Lines of the module's top level (outside function bodies) that write os.environ: item
    assignment or deletion, its mutating methods, os.putenv / os.unsetenv."""
    def is_environ(node) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "environ") or (isinstance(node, ast.Name) and node.id == "environ")

    lines = []
    pending = list(ast.parse(source).body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue  # runs when called, not at import (a call at top level is caught by the runtime test)
        if isinstance(node, ast.Subscript) and is_environ(node.value) and isinstance(node.ctx, (ast.Store, ast.Del)):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                (node.func.attr in ENVIRON_WRITES and is_environ(node.func.value)) or node.func.attr in ("putenv", "unsetenv")):
            lines.append(node.lineno)
        pending.extend(ast.iter_child_nodes(node))
    return sorted(lines)


@pytest.mark.parametrize("snippet", [
    "import os\nos.environ.setdefault('PROMO_WAREHOUSE', 'x')\n", "import os\nos.environ['A'] = '1'\n",
    "from os import environ\nenviron.update(A='1')\n", "import os\ndel os.environ['A']\n",
    "import os\nos.putenv('A', '1')\n", "import os\nif True:\n    os.environ.pop('A', None)\n",
    "import os\nclass C:\n    os.environ['A'] = '1'\n",
])
def test_environ_checker_catches(snippet):
    assert environ_writes_at_import(snippet)


def test_environ_checker_allows_reads_and_writes_inside_functions():
    source = "import os\nX = os.environ.get('A')\ndef f():\n    os.environ['DAGSTER_HOME'] = 'x'\n"
    assert environ_writes_at_import(source) == []


def test_no_module_writes_os_environ_at_import():
    offenders = [f"{p.relative_to(ROOT)}:{line}" for p in sorted(ROOT.rglob("*.py")) for line in environ_writes_at_import(p.read_text())]
    assert not offenders, "os.environ written at import (read settings when a run starts instead):\n" + "\n".join(offenders)


def test_importing_the_code_location_leaves_the_environment_as_it_was():
    """What `dagster dev` and `promo` import (promo_assets.definitions, with `defs` and its resources
    built: it is built on first use) sets no variable, PROMO_* ones included, even when none is set."""
    import os
    import subprocess
    import sys

    # scikit-learn sets KMP_DUPLICATE_LIB_OK and KMP_INIT_AT_FORK when it is imported: imported first,
    # so that what is compared is this package's doing, whatever the test process imported before
    probe = ("import os, json, sklearn; before = dict(os.environ); import promo_assets.definitions as d; d.defs; "
             "print(json.dumps(sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k))))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROMO_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT.parent), env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT.parent)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", f"variables changed by the import: {out.stdout}"


# --------------------------------------------------------------------------------------------
# the Dagster definitions stay thin wiring: every Dagster definition function is short

MAX_DEFINITION_LINES = 30
DEFINITION_DECORATORS = {"asset", "multi_asset", "graph_asset", "graph_multi_asset", "observable_source_asset",
                         "asset_check", "multi_asset_check", "sensor", "asset_sensor", "multi_asset_sensor",
                         "run_status_sensor", "run_failure_sensor", "schedule", "op", "job"}


def definition_functions() -> list[tuple[str, str, int]]:
    """(file, function, lines from `def` to its last line) of every function in
    promo_assets/defs/**/*.py decorated with a Dagster definition decorator (`@dg.asset(...)`,
    `@dg.sensor`, ...; nested ones in asset factories included)."""
    out = []
    for path in sorted((ROOT / "defs").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                        and target.value.id in ("dg", "dagster") and target.attr in DEFINITION_DECORATORS):
                    out.append((path.relative_to(ROOT / "defs").as_posix(), node.name, node.end_lineno - node.lineno + 1))
                    break
    return out


def test_dagster_definition_functions_are_thin_wiring():
    found = definition_functions()
    names = {name for _, name, _ in found}
    # the scan sees the module-level assets, the sensor and schedule, and the model factory's assets
    assert {"customer_merchant_graph", "landing_sensor", "daily_campaign_refresh", "propensity", "rct_events",
            "_coefficients", "leaderboard"} <= names, names
    too_long = [f"{file}:{name} ({n} lines)" for file, name, n in found if n > MAX_DEFINITION_LINES]
    assert not too_long, (f"Dagster definition functions over {MAX_DEFINITION_LINES} lines (move the logic into "
                          f"the domain packages or a helper): {', '.join(too_long)}")


def test_every_folder_of_python_modules_is_a_package():
    """A folder of modules without __init__.py imports from a checkout (a namespace package) but
    setup.py's find_packages leaves it out of the wheel: every such folder has one."""
    folders = {p.parent for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts}
    missing = sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").exists())
    assert not missing, f"folders without __init__.py (left out of the wheel): {missing}"


# --------------------------------------------------------------------------------------------
# One name per concept (DESIGN.md): the predicted response and cost per user x level are `response`
# and `cost` (or one `coefficients` pair), the dual multiplier is `lambda_`. No public function or
# method of the package takes them under an older name.

OLD_NAMES = {"values": "response", "costs": "cost", "v": "response", "c": "cost", "lam": "lambda_"}


def signatures_with_old_names(source: str, module: str) -> list[str]:
    """'module.Class.method(old -> new, ...)' for each public function or method of `source` (names
    without a leading underscore, `__init__` and `__call__` included; methods of public classes)
    with a parameter named in OLD_NAMES."""
    found = []

    def walk(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name.startswith("_") and node.name not in ("__init__", "__call__"):
                    continue
                a = node.args
                params = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x is not None]
                old = [f"{p} -> {OLD_NAMES[p]}" for p in params if p in OLD_NAMES]
                if old:
                    found.append(f"{module}.{prefix}{node.name}({', '.join(old)})")
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                walk(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.If, ast.Try)):  # definitions under `if` / `try` at module level
                walk([*node.body, *node.orelse, *getattr(node, "finalbody", [])], prefix)

    walk(ast.parse(source).body, "")
    return found


BAD_SIGNATURES = '''
def solve(values, costs, budget): ...
class Policy:
    def decide(self, v, c, lam=0.0): ...
    def _private(self, values): ...
class _Hidden:
    def decide(self, values): ...
def _helper(costs): ...
if True:
    def late(*, c): ...
'''


def test_old_name_checker_names_each_public_function_with_an_old_parameter():
    assert signatures_with_old_names(BAD_SIGNATURES, "m") == [
        "m.solve(values -> response, costs -> cost)",
        "m.Policy.decide(v -> response, c -> cost, lam -> lambda_)",
        "m.late(c -> cost)",
    ]
    assert signatures_with_old_names("def solve(response, cost, budget, *, lambda_=0.0): ...", "m") == []


def test_public_signatures_use_one_name_per_concept():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        found += signatures_with_old_names(path.read_text(), module)
    assert not found, ("public signatures with an older name for the predicted response / cost or the dual "
                       "multiplier (rename the parameter): " + "; ".join(found))


# --------------------------------------------------------------------------------------------
# defs/ only wires. Every module-level function of promo_assets/defs/ is a Dagster definition (an
# asset, asset check, sensor, schedule, job, op or logger), a factory of definitions (it defines a
# decorated definition inside, or returns asset definitions, automation conditions or resources), or
# one of the wiring helpers named below with the reason it belongs to Dagster and not to a domain
# room. Decision, champion, leaderboard, graph, monitoring and campaign logic lives in the domain
# rooms (allocation/stored_plan.py, decisions/plans.py, decisions/champion_run.py, decisions/daily.py,
# evaluation/inputs.py, evaluation/board.py, graph/inputs.py, ...), and so does what an asset shows:
# the display modules (causal/, decisions/, ingestion/, models/, monitoring/display.py,
# evaluation/board_view.py) return plain values (promo_assets.core.display) that
# defs/common.py's `metadata` and `check_results` turn into Dagster's. The helpers every asset module
# shares are in defs/common.py; the internals of a custom automation condition are its methods. A new
# helper joins this list with its reason, or its logic goes to the domain.

WIRING_HELPERS = {
    # defs/common.py: the one module of shared Dagster helpers
    "common.py:register_partitions": "adds campaigns to the Dagster instance's dynamic partitions",
    "common.py:model_key": "a model chain's Dagster asset key (optional/ prefix for models off by default)",
    "common.py:model_of_key": "the model whose chain a Dagster asset key belongs to",
    "common.py:domain_errors": "a project error becomes a dagster Failure with its message",
    "common.py:metadata": "what an asset shows (plain values from the domain's display modules) as Dagster metadata",
    "common.py:check_results": "domain check results (core.display.CheckResult) as Dagster asset check results",
    "common.py:upstream": "the upstream materialization this one reads, from the Dagster instance",
    "common.py:failed_models": "the model chains a Dagster run's failed step keys belong to",
    "common.py:ended_runs": "Dagster's verdict on runs, for the results bookkeeping",
    "common.py:results_write": "one transaction for an asset's rows, reconciled with Dagster's run statuses",
    "common.py:writing": "the warehouse connection + results_write for the run's campaign partition",
    "common.py:evaluation_inputs": "the evaluation inputs of the outcome_model materialization this run reads",
    # the model chains: keys, kwargs, runs and skips of Dagster assets
    "models/assets.py:chain_kwargs": "the Dagster asset kwargs of a model's chain",
    "models/assets.py:chain_keys": "the Dagster asset keys of a model's chain",
    "models/assets.py:model_run": "the chain's ModelRun from the asset context (run id, asset name)",
    "models/assets.py:record_skip": "a skipped model: its row and an AssetObservation on every asset of its chain",
    "models/assets.py:skip_observation": "the AssetObservation of a skip",
    "models/assets.py:record_left_out": "observations for the chains `promo run` leaves out",
    "models/assets.py:fit_phase": "reads the previous phase's materialization, trains, logs to Dagster",
    "ingestion/assets.py:ingest_days": "ingest_campaign_days for the asset's partition, logged to Dagster",
    # the leaderboard reads Dagster's records of every chain
    "evaluation/leaderboard.py:_latest": "the latest materialization or observation of an asset",
    "evaluation/leaderboard.py:chain_record": "what Dagster recorded of a model's chain (its skip, its latest evaluation)",
    # the landing sensor's Dagster side (the cursor, the warnings and the fingerprints are promo_assets.ingestion's)
    "automation/jobs.py:_not_loaded_yet": "the landing sensor's check against the Dagster instance",
    "automation/jobs.py:_ingest_requests": "the landing sensor's RunRequests",
    "automation/jobs.py:_orphan_partitions": "dynamic partitions whose landing folder is gone",
    # runs whose process is gone (what Dagster's run monitoring cannot see for in-process runs; the
    # process tags themselves are promo_assets.core.processes')
    "recovery.py:describe_run": "a Dagster run in words",
    "recovery.py:recover_dead_runs": "marks dead in-process Dagster runs failed and frees their pool slots",
    "recovery.py:settle_warehouse_pool": "the warehouse pool's limit in the Dagster instance",
}
FACTORY_RETURNS = ("AssetsDefinition", "AutomationCondition", "ConfigurableResource")
WIRING_DECORATORS = DEFINITION_DECORATORS | {"logger", "resource", "graph"}


def _decorated(node) -> bool:
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in WIRING_DECORATORS:
            return True
    return False


def wiring_helpers(source: str) -> list[str]:
    """The module-level functions of `source` that are neither a Dagster definition nor a factory of
    definitions (a decorated definition inside, or a return annotation naming FACTORY_RETURNS)."""
    out = []
    for node in ast.parse(source).body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or _decorated(node):
            continue
        inner = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and _decorated(n)
                    for n in ast.walk(node) if n is not node)
        returns = ast.unparse(node.returns) if node.returns else ""
        if not inner and not any(r in returns for r in FACTORY_RETURNS):
            out.append(node.name)
    return out


def test_the_wiring_helper_scan_tells_definitions_from_helpers():
    source = ('import dagster as dg\n@dg.asset\ndef a(): ...\n@dg.logger(config_schema={})\ndef lg(c): ...\n'
              'def factory(n) -> dg.AssetsDefinition: ...\ndef chain(n):\n    @dg.asset(key=n)\n    def _a(): ...\n    return _a\n'
              'def cond() -> dg.AutomationCondition: ...\ndef decide(users, budget): return users\n'
              'class C:\n    def method(self): ...\n')
    assert wiring_helpers(source) == ["decide"]


def test_defs_holds_definitions_and_named_wiring_helpers_only():
    found = {f"{p.relative_to(ROOT / 'defs').as_posix()}:{name}"
             for p in sorted((ROOT / "defs").rglob("*.py")) for name in wiring_helpers(p.read_text())}
    unnamed = sorted(found - set(WIRING_HELPERS))
    assert not unnamed, ("functions in promo_assets/defs/ that are no Dagster definition and no named wiring helper "
                         "(move their logic into the domain rooms, or name them in WIRING_HELPERS with the reason): "
                         + ", ".join(unnamed))
    gone = sorted(set(WIRING_HELPERS) - found)
    assert not gone, f"WIRING_HELPERS names functions that are gone: {', '.join(gone)}"
    assert all(reason.strip() for reason in WIRING_HELPERS.values())
    # the list only shrinks: a new helper is named here and raises this cap, at review
    assert len(WIRING_HELPERS) <= 28, len(WIRING_HELPERS)


# --------------------------------------------------------------------------------------------
# A simulated campaign is its preset, seed and start date
#
# The simulator seeds each day from its date, and its default start is today minus the days: a test
# or benchmark that leaves the start out simulates a new campaign every day it runs. Every call in
# tests/ and benchmarks/ passes one (promo_assets.simulation.REFERENCE_START unless the test is about
# dates). The checker flags:
#   - SimulationRequest(...) without `start=` (or its sixth positional argument);
#   - a `promo simulate` command line (a list or a call whose arguments hold the string "simulate")
#     without "--start", unless it answers a decision (--respond-to: the day is the decision's).
# A call whose line carries the comment `# today's start is under test` is allowed.

PROJECT = ROOT.parent
TODAY_UNDER_TEST = "# today's start is under test"


def _constants(nodes) -> list:
    return [n.value for n in nodes if isinstance(n, ast.Constant)]


SIMULATE = "simulate"


def _simulate_words(nodes) -> list | None:
    """The string constants of a command line's parts when it is `promo simulate`, else None."""
    words = _constants(nodes)
    for node in nodes:  # ["--start", d] spliced in as *[...] or *(...) still counts
        if isinstance(node, ast.Starred) and isinstance(node.value, (ast.List, ast.Tuple)):
            words += _constants(node.value.elts)
    at = words.index(SIMULATE) if SIMULATE in words else None  # `promo simulate`, `-m promo_assets.cli simulate`
    return words if at is not None and (at < 2 or words[at - 1] in ("promo", "promo_assets.cli")) else None


def undated_simulations(source: str) -> list[int]:
    """Line numbers of the simulator calls in `source` that leave the start date to today."""
    lines = source.splitlines()
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if func == "SimulationRequest":
                dated = len(node.args) >= 6 or any(k.arg == "start" or k.arg is None for k in node.keywords)
                if not dated:
                    bad.append(node.lineno)
                continue
            words = _simulate_words(node.args)
        elif isinstance(node, (ast.List, ast.Tuple)):
            words = _simulate_words(node.elts)
        else:
            continue
        if words is not None and "--start" not in words and "--respond-to" not in words:
            bad.append(node.lineno)
    return sorted({n for n in bad if TODAY_UNDER_TEST not in lines[n - 1]})


@pytest.mark.parametrize("snippet", [
    "simulate('demo', SimulationRequest('c', root, days=2, users=50))",
    "SimulationRequest('bp', root, 2, 400, 5)",
    "main(['simulate', '--preset', 'demo', '--campaign', 'c', '--days', '2'])",
    "promo_here(env, 'simulate', '--campaign', 'c', '--days', '2', '--users', '300')",
    "sim = ['simulate', '--preset', 'demo', '--days', str(days)]",
    "run([sys.executable, '-m', 'promo_assets.cli', 'simulate', '--preset', 'demo', '--days', '14'])",
])
def test_undated_simulation_checker_catches(snippet):
    assert undated_simulations(snippet) == [1]


@pytest.mark.parametrize("snippet", [
    "simulate('demo', SimulationRequest('c', root, days=2, users=50, start=REFERENCE_START))",
    "SimulationRequest('bp', root, 2, 400, 5, REFERENCE_START)",
    "main(['simulate', '--campaign', 'c', '--days', '2', '--start', START])",
    "promo(env, 'simulate', '--campaign', 'c', *['--start', day])",
    "main(['simulate', '--respond-to', str(file), '--day', day, '--campaign', 'demo'])",
    "main(['simulate', '--campaign', 'c', '--days', '2'])  # today's start is under test",
    "run(['promo', 'report', '--campaign', 'simulate'])",
])
def test_undated_simulation_checker_allows(snippet):
    assert undated_simulations(snippet) == []


def test_tests_and_benchmarks_simulate_from_a_fixed_start():
    """Every simulated campaign of the tests and benchmarks is the same on every day they run."""
    files = sorted((PROJECT / "tests").rglob("*.py")) + sorted((PROJECT / "benchmarks").rglob("*.py"))
    assert len(files) > 50
    bad = [f"{f.relative_to(PROJECT)}:{n}" for f in files for n in undated_simulations(f.read_text())]
    assert not bad, ("simulated without a start date (a new campaign every day; pass start=REFERENCE_START "
                     f"or --start, or mark the line {TODAY_UNDER_TEST!r}): {bad}")
