"""A warehouse made by the previous release, upgraded by this version without losing a row.

The previous release is `--previous` (default d637776: main before the monitoring tables `outcomes`,
`outcome_levels`, `outcome_effect`, `population_drift`, `monitoring_checks`, `decision_coefficients`
and the column `decisions.champion_level` were added). Its code is taken with `git archive` into a
temporary folder and run with this checkout's virtual environment (the same pins of Dagster and
DuckDB), PYTHONPATH pointing at it: `promo simulate` of two small campaigns (`demo`, 3 days x 200
users; the customer-merchant preset `bipartite` as `shops`, 3 days x 150 users, so that the graph
tables have rows), then `promo run` of `demo` and `promo run` of both (a second refresh of `demo`).
Then with this version, on a copy of that file:

1. the rows of every table, read with a plain read-only DuckDB connection (`before`);
2. `warehouse.connect()` (what every step and command of this version does first: the schema brought
   up to date, new tables and columns, the renames), rows again (`after_upgrade`): every table of
   `before` with exactly its rows, the new tables empty;
3. `promo run` of this version on the same landing folder, artefact store and DAGSTER_HOME (the
   campaigns' history in Dagster), then `promo report`: rows again (`after_promo_run`), the report's
   exit status.

`--fixture PATH` also writes the previous release's file, gzipped, to PATH: the committed
`tests/fixtures/warehouse-previous-release.duckdb.gz`, which
tests/unit/store/test_upgrade_previous_release.py upgrades.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/warehouse_upgrade.py [--fixture tests/fixtures/warehouse-previous-release.duckdb.gz]
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import Recorder  # noqa: E402

import duckdb  # noqa: E402

from promo_assets.store import warehouse  # noqa: E402
from promo_assets.simulation import REFERENCE_START  # noqa: E402

CAMPAIGNS = (("demo", "demo", 3, 200), ("shops", "bipartite", 3, 150))


def checkout(commit: str, into: Path) -> Path:
    """The code of `commit` under `into` (git archive; no worktree, nothing in this repository changes).
    Its SQL folder is linked as `promo_assets/sql`: this checkout's editable install maps the package
    promo_assets.sql to its own sql/ folder, which the old code must not read."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"git archive {commit} failed: {archive.stderr.decode()[-500:]}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    (into / "promo_assets" / "sql").symlink_to(into / "sql", target_is_directory=True)
    return into


def environment(site: Path, code: Path) -> dict[str, str]:
    home = site / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(code / "dagster_home" / "dagster.yaml", home)
    return {**os.environ, "PYTHONPATH": str(code), "DAGSTER_HOME": str(home), "PROMO_MAX_EPOCHS": "1",
            "PROMO_LANDING_DIR": str(site / "landing"), "PROMO_WAREHOUSE": str(site / "warehouse.duckdb"),
            "PROMO_ARTIFACTS_DIR": str(site / "artifacts"), "PROMO_OUTBOX_DIR": str(site / "outbox"),
            "PROMO_REPORT_DIR": str(site / "reports")}


def promo(env: dict[str, str], code: Path, *args: str) -> float:
    """`promo ARGS` of the code under `code`; its seconds. A failure stops the benchmark with the output."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "promo_assets.cli", *args], env=env, cwd=code,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"promo {' '.join(args)} ({code}) exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return round(time.perf_counter() - start, 1)


def counts(path: Path) -> dict[str, int]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return warehouse.row_counts(con)
    finally:
        con.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--previous", default="d637776", help="the previous release's commit")
    ap.add_argument("--fixture", type=Path, help="also write the previous release's warehouse, gzipped, here")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    args = ap.parse_args()
    rec = Recorder("warehouse_upgrade")
    tmp = Path(tempfile.mkdtemp(prefix="promo-upgrade-"))
    site = tmp / "site"
    old = checkout(args.previous, tmp / "previous")
    env = environment(site, old)
    seconds = {}
    for campaign, preset, days, users in CAMPAIGNS:
        promo(env, old, "simulate", "--preset", preset, "--campaign", campaign, "--days", str(days),
              "--users", str(users), "--seed", "0", "--start", REFERENCE_START.isoformat())
    seconds["previous: promo run demo"] = promo(env, old, "run", "--campaign", "demo", "--no-progress")
    seconds["previous: promo run (both)"] = promo(env, old, "run", "--no-progress")
    path = site / "warehouse.duckdb"
    if args.fixture:
        args.fixture.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "rb") as src, gzip.GzipFile(args.fixture, "wb", compresslevel=9, mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    before = counts(path)

    start = time.perf_counter()
    with warehouse.connect(path) as con:
        columns = warehouse.table_columns(con, "decisions")
    seconds["this version: schema upgrade (warehouse.connect)"] = round(time.perf_counter() - start, 2)
    after_upgrade = counts(path)

    current = dict(env, PYTHONPATH=str(ROOT))
    seconds["this version: promo run (both)"] = promo(current, ROOT, "run", "--no-progress")
    seconds["this version: promo report"] = promo(current, ROOT, "report")
    after_run = counts(path)

    lost_on_upgrade = {t: (n, after_upgrade.get(t)) for t, n in before.items() if after_upgrade.get(t) != n}
    fewer_after_run = {t: (n, after_run.get(t)) for t, n in before.items() if (after_run.get(t) or 0) < n}
    tables = {t: {"before": before.get(t), "after_upgrade": after_upgrade.get(t), "after_promo_run": after_run.get(t)}
              for t in sorted(set(before) | set(after_upgrade) | set(after_run))}
    figures = {
        "previous_release": args.previous, "campaigns": [dict(zip(("campaign", "preset", "days", "users"), c))
                                                         for c in CAMPAIGNS],
        "warehouse_bytes": path.stat().st_size, "fixture": str(args.fixture) if args.fixture else None,
        "tables": tables, "new_tables": sorted(set(after_upgrade) - set(before)),
        "decisions_columns_after_upgrade": sorted(columns),
        "rows_before": sum(before.values()), "rows_after_upgrade": sum(after_upgrade[t] for t in before),
        "tables_whose_rows_changed_on_upgrade": lost_on_upgrade,
        "tables_with_fewer_rows_after_promo_run": fewer_after_run, "seconds": seconds,
    }
    print(figures, file=sys.stderr)
    rec.write(figures, headline={
        "tables of the previous release": len(before),
        "rows before / after the upgrade": [figures["rows_before"], figures["rows_after_upgrade"]],
        "tables whose rows changed on upgrade": len(lost_on_upgrade),
        "new tables (empty after the upgrade)": len(figures["new_tables"]),
        "tables with fewer rows after this version's promo run": len(fewer_after_run),
    })
    if args.keep:
        print(f"kept {tmp}", file=sys.stderr)
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
