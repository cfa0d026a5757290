"""The DuckDB warehouse: connections, the schema, and the SQL files of `sql/` loaded by name.

SQL lives in `sql/<family>.sql` as blocks headed `-- name: <statement>`. Values are always passed as
parameters (`?`); the only text substituted into a statement is a list of identifiers quoted with
`quote_ident` (feature columns differ from campaign to campaign).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.resources
import os
import re
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import duckdb

from promo_assets.config import settings
from promo_assets.core.errors import DomainError

if TYPE_CHECKING:
    import pandas as pd

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


@functools.cache
def _family(family: str) -> dict[str, str]:
    """The statements of sql/<family>.sql, read from the installed package (`promo_assets.sql`: the
    top-level sql/ folder, shipped as package data), the same way in a wheel and an editable install."""
    resource = importlib.resources.files("promo_assets.sql") / f"{family}.sql"
    if not resource.is_file():
        raise FileNotFoundError(f"SQL file {family}.sql is not in the installed package promo_assets.sql "
                                f"({resource}); reinstall promo_assets")
    text = resource.read_text(encoding="utf-8")
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
        _run_schema_statements(con)
        return frozenset(r[0] for r in con.execute(sql("meta", "all_columns")).fetchall())
    finally:
        con.close()


# Columns renamed since earlier versions of the schema: (table, old name, new name, the statement of
# sql/meta.sql that renames it). A warehouse made before a rename keeps its rows under the new name.
COLUMN_RENAMES = (
    ("response_coefficients", "value", "response", "rename_response_coefficients_value"),
    ("merchant_coefficients", "value", "response", "rename_merchant_coefficients_value"),
    ("budget_dual", "value", "response", "rename_budget_dual_value"),
)


def _pending_renames(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The statements of COLUMN_RENAMES this warehouse still needs (a table that does not exist yet,
    or already has the new name, needs none); one catalog query."""
    tables = sorted({table for table, *_ in COLUMN_RENAMES})
    have = set(con.execute(sql("meta", "columns_of_tables"), [tables]).fetchall())
    return [statement for table, old, new, statement in COLUMN_RENAMES
            if (table, old) in have and (table, new) not in have]


def _rename_old_columns(con: duckdb.DuckDBPyConnection) -> None:
    """Bring the columns of a warehouse made by an earlier version to their current names."""
    for statement in _pending_renames(con):
        con.execute(sql("meta", statement))


def _run_schema_statements(con: duckdb.DuckDBPyConnection) -> None:
    _rename_old_columns(con)
    for statement in statements("schema"):
        con.execute(statement)


@functools.cache
def _schema_hash() -> str:
    return hashlib.sha256("\n".join(statements("schema")).encode()).hexdigest()


def schema_is_current(con: duckdb.DuckDBPyConnection) -> bool:
    """True when this warehouse was brought up to exactly this version's sql/schema.sql (its hash in
    `warehouse_schema`): it then has every table and column, and no column left to rename."""
    try:
        recorded = [h for (h,) in con.execute(sql("meta", "schema_hash")).fetchall()]
    except duckdb.CatalogException:  # a new warehouse, or one from before the marker
        return False
    return recorded == [_schema_hash()]


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the tables of sql/schema.sql and add the columns added since, unless this warehouse was
    already brought up to exactly this schema (its hash in `warehouse_schema`, written last: a process
    killed half-way leaves the old hash, and the next connection runs the statements again). Saves
    ~40 ms per write connection, ~50 of them in a demo `promo run` (benchmarks/run_time_ab.py)."""
    no_replacement_scans(con)
    if schema_is_current(con):
        return
    _run_schema_statements(con)
    for name in ("create_schema_marker", "clear_schema_marker"):
        con.execute(sql("meta", name))
    con.execute(sql("meta", "record_schema_hash"), [_schema_hash()])


class WarehouseBusyError(DomainError, RuntimeError):
    """Another process holds the warehouse file's lock for longer than PROMO_WAREHOUSE_BUSY_SECONDS."""


class WarehouseUnusableError(DomainError, RuntimeError):
    """The warehouse file cannot be opened or read: not a DuckDB file, truncated, a failed checksum,
    a directory, a read-only file system. The message names the file and DuckDB's (or the OS's) reason."""


def unusable(path: Path, exc: BaseException) -> WarehouseUnusableError:
    """WarehouseUnusableError naming `path` and the first line of `exc` (DuckDB's or the OS's reason)."""
    reason = (str(exc).splitlines() or [type(exc).__name__])[0]
    if isinstance(exc, OSError) and exc.strerror:
        reason = exc.strerror + (f": {exc.filename}" if exc.filename else "")
    return WarehouseUnusableError(
        f"cannot use the warehouse {path}: {reason.rstrip('.!')}; move it away (or point PROMO_WAREHOUSE "
        "elsewhere) and `promo run` builds a new one from the landing folder")


def check_writable(path: Path | str | None = None) -> None:
    """WarehouseUnusableError when the warehouse file could not be written: a directory, a file or a
    folder on a read-only file system or without write permission. Checked by `promo run` before
    anything runs (so the cause is one line, not a failed step per day); it takes no DuckDB lock."""
    import tempfile

    path = Path(path) if path is not None else settings.warehouse_path()
    try:
        if path.is_dir():
            raise IsADirectoryError(21, "a directory, not a DuckDB file")
        if path.exists():
            os.close(os.open(path, os.O_RDWR))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=path.parent, prefix=".promo-write-probe-"):
                pass
    except OSError as exc:
        raise unusable(path, exc) from None


def _open(path: Path, read_only: bool, deadline: float | None = None) -> duckdb.DuckDBPyConnection:
    """duckdb.connect, retried with backoff (50 ms doubling to 1 s) while another process holds the
    file's DuckDB lock (one writing process, or readers only: a process that is not promo_assets, as
    every promo_assets process queues on the writer slot first), up to PROMO_WAREHOUSE_BUSY_SECONDS
    or `deadline` (time.monotonic)."""
    budget = settings.warehouse_busy_seconds()
    start = time.monotonic()
    deadline = start + budget if deadline is None else deadline
    delay = 0.05
    if path.is_dir():
        raise unusable(path, IsADirectoryError(21, "a directory, not a DuckDB file"))
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if "could not set lock" not in str(exc).lower():
                raise unusable(path, exc) from None
            if time.monotonic() + delay > deadline:
                holder = _LOCK_HOLDER.search(str(exc))
                raise _busy(path, time.monotonic() - start, holder.group(1) if holder else None) from None
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def _busy(path: Path, waited: float, holder: str | None) -> WarehouseBusyError:
    return WarehouseBusyError(
        f"the warehouse is busy (a run is writing it); try again. {path} stayed locked for {waited:.1f}s "
        f"(PROMO_WAREHOUSE_BUSY_SECONDS={settings.warehouse_busy_seconds():g})" + (f"; held by {holder}" if holder else ""))


def slot_path(path: Path) -> Path:
    """The file whose lock is the warehouse's writer slot: `<warehouse>.lock` beside it."""
    return path.with_name(path.name + ".lock")


class _WriterSlot:
    """The warehouse's writer slot among promo_assets processes: an flock on `<warehouse>.lock`,
    exclusive while a writing connection is open, shared while a read-only one is (DuckDB allows one
    writing process per file, or readers only). Held only for the connection, not for the step
    around it: the computation of a step runs outside it, so the steps of several runs (campaigns
    refreshed at once) run side by side and take turns only to read and write. The kernel releases
    it when its process ends, kill -9 included. Waiting for it: until `deadline` (time.monotonic;
    None: as long as it takes, for the steps of a run, which queue as Dagster's pool once did)."""

    def __init__(self, path: Path, read_only: bool, deadline: float | None):
        self.path, self.deadline, self.start = path, deadline, time.monotonic()
        self.fd: int | None = None
        try:
            self.fd = os.open(slot_path(path), os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if not read_only:
                raise unusable(path, exc) from None
            # a folder this process cannot write: reading is all it can do, DuckDB's lock guards that
        self.hold(read_only)

    def hold(self, read_only: bool) -> None:
        """Take the slot shared (read_only) or exclusive; from a held slot, convert it."""
        if self.fd is None:
            return
        mode = fcntl.LOCK_SH if read_only else fcntl.LOCK_EX
        if self.deadline is None:
            fcntl.flock(self.fd, mode)
        else:
            delay = 0.005
            while True:
                try:
                    fcntl.flock(self.fd, mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    left = self.deadline - time.monotonic()
                    if left <= 0:
                        raise _busy(self.path, time.monotonic() - self.start, self._holder()) from None
                    time.sleep(min(delay, left))
                    delay = min(delay * 2, 0.25)
        if not read_only:  # who holds it, for the message of a process that gives up waiting
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, f"promo_assets (PID {os.getpid()})".encode(), 0)

    def _holder(self) -> str | None:
        try:
            return os.pread(self.fd, 200, 0).decode(errors="replace") or None
        except OSError:
            return None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor releases the lock
            self.fd = None


_LOCK_HOLDER = re.compile(r"Conflicting lock is held in (.*?\(PID \d+\))")


def no_replacement_scans(con: duckdb.DuckDBPyConnection) -> None:
    """Turn off DuckDB's replacement scans of Python locals: a statement reads a DataFrame only when
    it was handed over explicitly with `registered` (a local that happens to share a table's name
    can never be read instead of, or into, the warehouse)."""
    con.execute("SET python_enable_replacements = false")


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """BEGIN … COMMIT around the block; ROLLBACK on any exception (KeyboardInterrupt included), so a
    block's writes are all stored or none. The one place promo_assets opens a transaction."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


class WarehouseError(DomainError, RuntimeError):
    """A statement of sql/ the warehouse refused, or a data frame that cannot be handed over: the
    message names the statement (`sql/<family>.sql <name>`) or the frame name, and DuckDB's reason."""


@contextmanager
def registered(con: duckdb.DuckDBPyConnection, name: str, frame: pd.DataFrame) -> Iterator[str]:
    """`frame` visible to SQL as the view `name` for the block (con.register / con.unregister). A
    name that a table or view already has is refused (a registered frame would shadow the table)."""
    if con.execute(sql("meta", "relation_exists"), [name]).fetchone()[0]:
        raise WarehouseError(
            f"cannot register a data frame as {name!r}: the warehouse already has a table or view of that "
            "name (a frame registered under it would hide it); choose another frame name")
    con.register(name, frame)
    try:
        yield name
    finally:
        con.unregister(name)


@contextmanager
def connect(path: Path | str | None = None, read_only: bool = False,
            queue: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the warehouse (creating it and its schema when writing) and close it afterwards. The
    connection holds the writer slot (`_WriterSlot`) while it is open; a connection that finds the
    slot or the file taken waits up to PROMO_WAREHOUSE_BUSY_SECONDS, then raises WarehouseBusyError,
    unless `queue` (the steps of a run: WarehouseResource), which waits for the slot as long as it
    takes. Used by the CLI and by every asset (WarehouseResource.connect)."""
    path = Path(path) if path is not None else settings.warehouse_path()
    if read_only and not path.exists():
        raise FileNotFoundError(f"warehouse {path} does not exist yet: run `promo run` (or materialize rct_events) first")
    if not read_only:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise unusable(path, exc) from None
    deadline = None if queue else time.monotonic() + settings.warehouse_busy_seconds()
    slot = _WriterSlot(path, read_only, deadline)
    # the file's own DuckDB lock, taken by a process that is not promo_assets: waited for up to
    # PROMO_WAREHOUSE_BUSY_SECONDS in every case
    opened_by = deadline if deadline is not None else time.monotonic() + settings.warehouse_busy_seconds()
    con = None
    try:
        con = _open(path, read_only, opened_by)
        try:
            if read_only:
                no_replacement_scans(con)
                # made by an earlier version (the marker's one-row read costs ~1 ms, the catalog
                # query of the renames ~45 ms of CPU): one write connection renames
                if not schema_is_current(con) and _pending_renames(con):
                    con.close()           # its columns (ensure_schema), then read as asked
                    slot.hold(read_only=False)
                    writer = _open(path, False, opened_by)
                    try:
                        ensure_schema(writer)
                    finally:
                        writer.close()
                    slot.hold(read_only=True)
                    con = _open(path, read_only, opened_by)
                    no_replacement_scans(con)
            else:
                ensure_schema(con)  # turns replacement scans off too
        except (duckdb.IOException, duckdb.InternalException) as exc:  # a damaged file shows here first
            raise unusable(path, exc) from None
        yield con
    finally:
        if con is not None:
            con.close()
        slot.release()


def row_counts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """{table: rows} of every table of the warehouse (an upgrade keeps every row: tests, benchmarks)."""
    return {table: con.execute(sql("meta", "table_row_count", table=quote_ident(table))).fetchone()[0]
            for (table,) in con.execute(sql("meta", "base_tables")).fetchall()}


def table_columns(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, str]:
    rows = con.execute(sql("meta", "table_columns"), [table]).fetchall()
    return {name: dtype for name, dtype in rows}


def _execute(con: duckdb.DuckDBPyConnection, statement: str, params, family: str, name: str) -> duckdb.DuckDBPyConnection:
    """Run `statement` (statement `name` of sql/<family>.sql) with `params` bound; a missing table or
    column, parameters that do not fit, a value the column's type or constraint refuses raise
    WarehouseError naming the statement and DuckDB's reason."""
    try:
        return con.execute(statement, list(params))
    except (duckdb.ProgrammingError, duckdb.DataError, duckdb.IntegrityError) as exc:
        reason = str(exc).splitlines()[0]
        raise WarehouseError(f"sql/{family}.sql {name}: {reason}") from None


def read_df(con: duckdb.DuckDBPyConnection, family: str, name: str, params=(), **identifiers: str) -> pd.DataFrame:
    """The result of statement `name` of sql/<family>.sql as a DataFrame (values bound from `params`;
    `identifiers` fill its placeholders, quoted with quote_ident by the caller)."""
    return _execute(con, sql(family, name, **identifiers), params, family, name).df()


def read_rows(con: duckdb.DuckDBPyConnection, family: str, name: str, params=(), **identifiers: str) -> list[tuple]:
    """The result of statement `name` of sql/<family>.sql as a list of tuples."""
    return _execute(con, sql(family, name, **identifiers), params, family, name).fetchall()


def write_df(con: duckdb.DuckDBPyConnection, family: str, name: str, frame: pd.DataFrame, params=(),
             frame_name: str = "frame_df", **identifiers: str) -> None:
    """Run statement `name` of sql/<family>.sql with `frame` registered as the view `frame_name` (the
    statement reads it by that name; never a Python local). Wrap in `transaction` to group writes."""
    statement = sql(family, name, **identifiers)
    with registered(con, frame_name, frame):
        _execute(con, statement, params, family, name)
