"""The runs `promo report` shows: which leaderboard runs succeeded, the policy evaluations each one
assembled, its budgets not allocated, failed data checks, models not evaluated, and the chains a
`promo run` skipped (tables result_runs, leaderboard_entries, policy_evaluation, infeasible_budget,
data_checks, model_skips). Reads only; the bookkeeping itself is written by `promo_assets.store.results`."""

from __future__ import annotations

import duckdb
import pandas as pd

from promo_assets.store.warehouse import sql, table_columns


def report_campaigns(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every campaign that has run bookkeeping, by name."""
    return [r[0] for r in con.execute(sql("results", "report_campaigns")).fetchall()]


def started_run_ids(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The runs of every campaign still marked 'started' in the warehouse, oldest first."""
    return [r[1] for r in con.execute(sql("results", "all_started_runs")).fetchall()]


def succeeded_runs(con: duckdb.DuckDBPyConnection, campaign: str, finished: list[str]) -> list[tuple]:
    """(run_id, started_at) of the campaign's succeeded leaderboard runs, latest first; the run ids in
    `finished` count as succeeded (finished in Dagster, not yet marked in the warehouse)."""
    return con.execute(sql("results", "succeeded_runs"), [campaign, list(finished)]).fetchall()


def run_evaluation(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str) -> pd.DataFrame:
    """The policy_evaluation rows leaderboard run `run_id` assembled, best first per budget."""
    return con.execute(sql("results", "run_evaluation"), [campaign, run_id]).df()


def run_infeasible(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str) -> list[tuple]:
    """(model, budget per capita, minimum budget, message) of the budgets not allocated by the model
    versions leaderboard run `run_id` assembled."""
    return con.execute(sql("results", "run_infeasible"), [campaign, run_id]).fetchall()


def run_failed_checks(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str) -> list[tuple]:
    """(check, severity, message) of the failed data checks leaderboard run `run_id` saw, errors
    first; [] for a warehouse written before the data checks existed."""
    if not table_columns(con, "data_checks"):
        return []
    return con.execute(sql("results", "run_data_checks"), [campaign, run_id]).fetchall()


def run_not_evaluated(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str) -> list[tuple]:
    """(model, status, reason) of the models leaderboard run `run_id` lists without an evaluation."""
    return con.execute(sql("results", "run_not_evaluated"), [campaign, run_id]).fetchall()


def run_skips(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str) -> list[tuple]:
    """(model, reason) of the chains run `run_id` skipped for the campaign."""
    return con.execute(sql("frames", "run_skips"), [campaign, run_id]).fetchall()


def board_entries(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str) -> pd.DataFrame:
    """model, model_version, evaluation_run_id, status, reason of every model leaderboard run `run_id` listed."""
    return con.execute(sql("report", "board_entries"), [campaign, run_id]).df()


def run_segments(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str) -> pd.DataFrame:
    """The segment_evaluation rows of the model versions leaderboard run `run_id` assembled."""
    return con.execute(sql("report", "run_segments"), [campaign, run_id]).df()


def pacing_of_run(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str) -> pd.DataFrame:
    """The pacing rows decisions run `run_id` wrote (one per paced day); empty for a warehouse
    written before pacing existed."""
    if not table_columns(con, "pacing"):
        return pd.DataFrame()
    return con.execute(sql("report", "pacing_of_run"), [campaign, run_id]).df()


def latest_decisions_run(con: duckdb.DuckDBPyConnection, campaign: str) -> str | None:
    """The campaign's latest visible decisions run, or None (also for a warehouse written before the
    decisions existed)."""
    if not table_columns(con, "decision_budgets"):
        return None
    rows = con.execute(sql("decisions", "latest_decisions_run"), [campaign]).fetchall()
    return rows[0][0] if rows else None


def decision_budgets_of_run(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str) -> pd.DataFrame:
    """The decision_budgets rows (one per budget, with its manifest) decisions run `run_id` wrote."""
    return con.execute(sql("decisions", "decision_budgets_of_run"), [campaign, run_id]).df()


def decision_levels(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str) -> pd.DataFrame:
    """budget, level, label, policy, users of the decisions run `run_id` wrote."""
    return con.execute(sql("report", "decision_levels"), [campaign, run_id]).df()
