"""The Dagster graph end to end, through the `promo` CLI (in-process, the same Definitions as the UI)."""

from __future__ import annotations

import base64
import datetime as dt

import dagster as dg
import duckdb
import pytest

from promo_assets.cli.main import main
from promo_assets.simulation import REFERENCE_START

START = REFERENCE_START


def simulate(days: int, users: int, campaign: str = "demo") -> None:
    assert main(["simulate", "--preset", "demo", "--campaign", campaign, "--days", str(days),
                 "--users", str(users), "--seed", "1", "--start", START.isoformat()]) == 0


def materialized_partitions(instance: dg.DagsterInstance, asset: str) -> set[str]:
    return set(instance.get_materialized_partitions(dg.AssetKey(asset)))


def test_cli_backfill_of_seven_days_and_idempotent_rematerialization(promo_env):
    simulate(days=9, users=300)
    first, last = START + dt.timedelta(days=1), START + dt.timedelta(days=7)
    assert main(["run", "--campaign", "demo", "--from", first.isoformat(), "--to", last.isoformat(),
                 "--ingest-only", "--no-progress"]) == 0
    instance = dg.DagsterInstance.get()
    assert materialized_partitions(instance, "rct_events") == {"demo"}  # campaigns are the partitions
    [run] = instance.get_runs()  # the seven days in one run
    days = instance.get_latest_materialization_event(dg.AssetKey("rct_events")).asset_materialization.metadata["days"]
    assert [(r.data["day"], r.data["status"]) for r in days.value.records] == [
        ((first + dt.timedelta(days=i)).isoformat(), "loaded") for i in range(7)]

    def counts():
        with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
            return con.execute("SELECT event_date, count(*) FROM rct_events GROUP BY 1 ORDER BY 1").fetchall()

    before = counts()
    assert len(before) == 7
    # load one day again (reload: true from the launchpad does the same): the row counts do not change
    from promo_assets.definitions import build_defs

    result = build_defs([]).resolve_job_def("ingest_job").execute_in_process(
        partition_key="demo", instance=instance,
        run_config={"ops": {"rct_events": {"config": {"first_day": first.isoformat(), "last_day": first.isoformat(),
                                                      "reload": True}}}})
    [mat] = result.asset_materializations_for_node("rct_events")
    assert mat.metadata["days_loaded_now"].value == 1 and mat.metadata["days_unchanged"].value == 0
    assert counts() == before
    # asset checks ran and passed for the campaign
    checks = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [dg.AssetCheckKey(dg.AssetKey("rct_events"), n) for n in ("row_count", "treatment_on_grid",
                                                                  "response_and_cost_range", "propensity_range",
                                                                  "day_files_loaded")]
    )
    assert len(checks) == 5 and all(c.status.value == "SUCCEEDED" for c in checks.values())


def test_cli_errors_have_exit_codes(promo_env, capsys):
    assert main(["run"]) == 2
    assert "no campaigns" in capsys.readouterr().err
    simulate(days=2, users=100)
    assert main(["run", "--campaign", "nope"]) == 2
    assert "no campaign nope" in capsys.readouterr().err
    # a malformed day file: exit 1, the failure names file and column; other days still load
    bad = promo_env["landing"] / "demo" / "events" / f"{START}.parquet"
    import pandas as pd

    frame = pd.read_parquet(bad)
    frame.loc[0, "treatment"] = 4.0  # not on the grid [0, 1, 2, 3, 5, 8]
    frame.to_parquet(bad)
    assert main(["run", "--campaign", "demo", "--ingest-only", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert str(bad) in err and "'treatment'" in err and "unknown treatment" in err
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
        assert con.execute("SELECT count(DISTINCT event_date) FROM rct_events").fetchone()[0] == 1
        assert con.execute("SELECT count(*) FROM rejected_events").fetchone()[0] == 1


@pytest.mark.slow
def test_promo_run_fills_the_leaderboard_for_every_model(demo_run, capsys):
    promo_env = demo_run  # simulate(days=4, users=1500) and `promo run`, shared (conftest.py)
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
        assert con.execute("SELECT count(DISTINCT event_date) FROM rct_events").fetchone()[0] == 4
        rows = con.execute(
            "SELECT model, count(*), count(eom_value), count(true_value), count(oracle_value) "
            "FROM policy_evaluation GROUP BY model ORDER BY model"
        ).fetchall()
        n_budgets = len(con.execute("SELECT DISTINCT budget_per_capita FROM policy_evaluation").fetchall())
        allocations = con.execute("SELECT count(DISTINCT model) FROM allocation").fetchone()[0]
    assert [r[0] for r in rows] == ["dipn", "lgbm_s", "lgbm_s_mono", "lgbm_t", "random", "s_learner"]
    for model, n, eom, truth, oracle in rows:
        assert n == eom == truth == oracle == n_budgets, (model, n, eom, truth, oracle)
    assert allocations == 5
    # the evaluation's materialization carries the leaderboard and two PNG plots (as the UI shows them)
    instance = dg.DagsterInstance.get()
    event = instance.get_latest_materialization_event(dg.AssetKey("leaderboard"))
    meta = event.asset_materialization.metadata
    board = meta["leaderboard_markdown"].value
    assert board.startswith("| ") and all(m in board for m in ("dipn", "s_learner", "random"))
    for key in ("frontier_plot", "response_per_level_plot"):
        data = meta[key].value.split("data:image/png;base64,")[1].rstrip(")")
        png = base64.b64decode(data)
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert main(["report", "--campaign", "demo"]) == 0
    out = capsys.readouterr().out
    assert "dipn" in out and "s_learner" in out and "random" in out
