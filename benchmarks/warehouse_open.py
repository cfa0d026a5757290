"""CPU cost of opening the warehouse (`promo_assets.store.warehouse.connect`), and of the checks an open does.

A read-only open must know whether the warehouse still has columns of an earlier version to rename.
Two ways are measured side by side on the same file: the catalog query over the renamed tables'
columns (`_pending_renames`, what every read-only open ran before) and the one-row read of the schema
marker (`schema_is_current`, what it runs now; the catalog query only when the marker differs).
Also the open itself (read-only and write, existing warehouse) and the creation of a new one.

    .venv/bin/python benchmarks/warehouse_open.py [--repeats 40]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckdb  # noqa: E402

from benchmarks._results import Recorder  # noqa: E402
from promo_assets.store import warehouse  # noqa: E402


def cpu_ms(action, repeats: int) -> float:
    """Median CPU milliseconds of `action()` over `repeats` calls (after one warm-up call)."""
    action()
    times = []
    for _ in range(repeats):
        start = time.process_time()
        action()
        times.append((time.process_time() - start) * 1000)
    return round(statistics.median(times), 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=40)
    args = parser.parse_args(argv)
    rec = Recorder("warehouse_open")
    folder = Path(tempfile.mkdtemp(prefix="warehouse-open-"))
    path = folder / "w.duckdb"
    with warehouse.connect(path):
        pass
    created = iter(range(10**6))

    def create_new():
        with warehouse.connect(folder / f"new{next(created)}.duckdb"):
            pass

    def with_fresh_connection(check):
        def action():
            con = duckdb.connect(str(path), read_only=True)
            try:
                check(con)
            finally:
                con.close()
        return action

    def open_read_only():
        with warehouse.connect(path, read_only=True):
            pass

    def open_write():
        with warehouse.connect(path):
            pass

    figures = {
        "read_only_open_ms": cpu_ms(open_read_only, args.repeats),
        "write_open_ms": cpu_ms(open_write, args.repeats),
        "create_new_ms": cpu_ms(create_new, args.repeats),
        "bare_read_only_connect_ms": cpu_ms(with_fresh_connection(lambda con: None), args.repeats),
        "connect_and_catalog_query_ms": cpu_ms(with_fresh_connection(warehouse._pending_renames), args.repeats),
        "connect_and_schema_marker_ms": cpu_ms(with_fresh_connection(warehouse.schema_is_current), args.repeats),
        "repeats": args.repeats,
        "duckdb": duckdb.__version__,
    }
    figures["catalog_query_ms"] = round(figures["connect_and_catalog_query_ms"] - figures["bare_read_only_connect_ms"], 2)
    figures["schema_marker_ms"] = round(figures["connect_and_schema_marker_ms"] - figures["bare_read_only_connect_ms"], 2)
    for key, value in figures.items():
        print(f"{key}: {value}")
    rec.write(figures, headline={"read-only open, ms CPU": figures["read_only_open_ms"],
                                 "catalog query, ms CPU": figures["catalog_query_ms"],
                                 "schema marker, ms CPU": figures["schema_marker_ms"]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
