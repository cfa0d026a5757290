"""The previous release's warehouse file opened by this version: not a row lost.

tests/fixtures/warehouse-previous-release.duckdb.gz is a warehouse written by the code of the previous
release (d637776, before the monitoring tables) through its own `promo simulate` and `promo run`: two
small campaigns (`demo`; the customer-merchant `shops`), `demo` refreshed twice. It was made by
`benchmarks/warehouse_upgrade.py --fixture ...`, whose JSON (benchmarks/results/warehouse_upgrade.json)
also records this version's `promo run` on it."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import duckdb

import promo_assets.cli.main as cli
from promo_assets.store import warehouse

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "warehouse-previous-release.duckdb.gz"
# what this version's schema added since that release
NEW_TABLES = {"decision_coefficients", "outcomes", "outcome_levels", "outcome_effect", "population_drift",
              "monitoring_checks", "decision_exports"}


def previous_release(path: Path) -> dict[str, int]:
    """The fixture unpacked at `path`; its rows per table, read without this version's code."""
    with gzip.open(FIXTURE, "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    con = duckdb.connect(str(path), read_only=True)
    try:
        return warehouse.row_counts(con)
    finally:
        con.close()


def test_the_previous_release_warehouse_keeps_every_row(promo_env, capsys):
    path = promo_env["warehouse"]
    before = previous_release(path)
    # a warehouse of that release, with rows where an upgrade could lose them
    assert not NEW_TABLES & set(before)
    for table in ("rct_events", "payment_edges", "graph_edges", "response_coefficients", "leaderboard_entries",
                  "decisions", "champion", "result_runs"):
        assert before[table] > 0, table

    with warehouse.connect(path) as con:  # what every step and command does first
        assert warehouse.schema_is_current(con)
        after = warehouse.row_counts(con)
        assert "champion_level" in warehouse.table_columns(con, "decisions")
        old_decisions = con.execute("SELECT count(champion_level) FROM decisions").fetchone()[0]

    assert {table: after[table] for table in before} == before
    assert set(after) - set(before) == NEW_TABLES
    assert all(after[table] == 0 for table in NEW_TABLES)
    assert old_decisions == 0  # the column is new: the earlier decisions have no value for it

    # this version reads the old rows: every run of both campaigns, with its leaderboard
    assert cli.main(["report", "--history", "--format", "json"]) == cli.EXIT_OK
    reports = {r["campaign"]: r for r in json.loads(capsys.readouterr().out)["campaigns"]}
    assert set(reports) == {"demo", "shops"}
    assert [len(reports[c]["runs"]) for c in ("demo", "shops")] == [2, 1]
    assert all(run["leaderboard"] for r in reports.values() for run in r["runs"])
    assert reports["demo"]["champion"] is not None
