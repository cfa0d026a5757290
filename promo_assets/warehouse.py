"""The DuckDB warehouse: connections, the schema, and the SQL files of `sql/` loaded by name.

SQL lives in `sql/<family>.sql` as blocks headed `-- name: <statement>`. Values are always passed as
parameters (`?`); the only text substituted into a statement is a list of identifiers quoted with
`quote_ident` (feature columns differ from campaign to campaign).
"""

from __future__ import annotations

import functools
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import duckdb

from promo_assets import settings

SQL_DIR = Path(os.environ.get("PROMO_SQL_DIR") or Path(__file__).resolve().parents[1] / "sql")
_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


@functools.cache
def _family(family: str) -> dict[str, str]:
    path = SQL_DIR / f"{family}.sql"
    if not path.exists():
        raise FileNotFoundError(f"SQL file {path} not found (PROMO_SQL_DIR={SQL_DIR})")
    text = path.read_text()
    marks = list(_NAME.finditer(text))
    out: dict[str, str] = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        # comment lines are for the reader: dropped, so that a placeholder named in a comment is not
        # filled there and a comment can never swallow what follows a fragment pasted into a statement
        lines = [line for line in text[m.end():end].splitlines() if not line.lstrip().startswith("--")]
        out[m.group(1)] = "\n".join(lines).strip()
    return out


def sql(family: str, name: str, **identifiers: str) -> str:
    """The statement `name` of `sql/<family>.sql`, with `{placeholders}` filled by identifiers."""
    try:
        statement = _family(family)[name]
    except KeyError:
        raise KeyError(f"no statement '-- name: {name}' in sql/{family}.sql") from None
    return statement.format(**identifiers) if identifiers else statement


def statements(family: str) -> list[str]:
    return list(_family(family).values())


def quote_ident(name: str) -> str:
    """The one audited way a name (a column of a landing file, a table) becomes SQL text: a DuckDB
    quoted identifier, inner double quotes doubled. Quotes, `--`, `;` and newlines in the name stay
    part of the name. Values never go through here: they are `?` parameters."""
    return '"' + str(name).replace('"', '""') + '"'


@functools.cache
def schema_columns() -> frozenset[str]:
    """Every column name of every table of sql/schema.sql (read by creating the schema in an
    in-memory database, so the list follows the DDL)."""
    con = duckdb.connect(":memory:")
    try:
        ensure_schema(con)
        return frozenset(r[0] for r in con.execute(sql("meta", "all_columns")).fetchall())
    finally:
        con.close()


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    for statement in statements("schema"):
        con.execute(statement)


@contextmanager
def connect(path: Path | str | None = None, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the warehouse (creating it and its schema when writing) and close it afterwards."""
    path = Path(path) if path is not None else settings.warehouse_path()
    if read_only and not path.exists():
        raise FileNotFoundError(f"warehouse {path} does not exist yet: run `promo run` (or materialize rct_events) first")
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(path), read_only=read_only)
    try:
        if not read_only:
            ensure_schema(con)
        yield con
    finally:
        con.close()


def table_columns(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, str]:
    rows = con.execute(sql("meta", "table_columns"), [table]).fetchall()
    return {name: dtype for name, dtype in rows}
