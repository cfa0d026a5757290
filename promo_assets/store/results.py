"""Which run wrote which results, which runs succeeded, and how many runs' results are kept.

Every results table with a `run_id` column (RUN_TABLES) is written by an asset in one transaction
(`warehouse.transaction`), and the run is recorded in `result_runs` ('started'). A run's rows are
read (by `promo report`, through the leaderboard's entries) only once the run is marked
'succeeded' or 'partial'; a run marked 'failed' has its rows deleted. A run in which only some
models' chains failed (every failed step belongs to a model chain: `failed_models`) is 'partial':
the rows of those models are deleted, the other models' rows count (each model's chain succeeds or
fails on its own). `promo run` marks its own runs when they
end; the other runs (UI, daemon, a killed `promo run`) are marked at the next results write of their
campaign from Dagster's own run status (the Dagster definitions pass it in: this module knows
nothing of Dagster).

Retention (`retain`), in the same transaction as each write: a results table keeps, per campaign,
the rows of its latest `keep - 1` succeeded runs (at least the latest one, so that a run that then
fails never leaves the campaign without results), of the writing run, and of runs still marked
'started'. The per-model tables (MODEL_TABLES) count the runs per model: a model's chain can be
re-materialized alone (the UI), and that never drops another model's last results; coefficients are
kept for the model versions still in model_registry.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import duckdb

from promo_assets.store.warehouse import quote_ident, sql

RUN_TABLES = (
    "model_registry", "budget_dual", "infeasible_budget", "allocation", "policy_evaluation", "model_skips",
    "leaderboard_entries", "joint_allocation", "joint_allocation_evaluation", "segment_evaluation", "data_checks",
    "champion", "champion_evidence", "decisions", "decision_budgets", "pacing", "budget_multipliers",
    "decision_coefficients", "outcomes", "outcome_levels", "outcome_effect", "population_drift", "monitoring_checks",
)
# tables with a `model` column, retained per model (the `random` reference counts as one model)
MODEL_TABLES = ("model_registry", "budget_dual", "infeasible_budget", "allocation", "policy_evaluation", "model_skips",
                "segment_evaluation", "budget_multipliers")
VISIBLE = ("succeeded", "partial")  # statuses whose rows are read
VERSION_TABLES = ("response_coefficients", "merchant_coefficients")  # history by model version


def start(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str) -> None:
    """Record that `run_id` writes results of `campaign` (no-op when already recorded)."""
    con.execute(sql("results", "start_run"), [campaign, run_id])


def unfinished(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str) -> list[str]:
    """The campaign's runs marked 'started', other than `run_id`."""
    return [r[0] for r in con.execute(sql("results", "started_runs"), [campaign, run_id]).fetchall()]


def finish(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str, succeeded: bool,
           failed_models: Iterable[str] | None = None) -> None:
    """Mark a started run succeeded or failed; a failed run's rows are deleted from every results
    table (and the coefficients of the model versions only it registered). With `failed_models`
    (the run failed only inside those models' chains) the run is 'partial': only those models' rows
    are deleted. Call inside a transaction."""
    partial = not succeeded and failed_models is not None
    status = "succeeded" if succeeded else "partial" if partial else "failed"
    if not con.execute(sql("results", "finish_run"), [status, campaign, run_id]).fetchall():
        return  # never wrote results, or already marked
    if partial:
        for table in MODEL_TABLES:
            con.execute(sql("results", "delete_model_run_rows", table=quote_ident(table)),
                        [campaign, run_id, list(failed_models)])
    elif not succeeded:
        for table in RUN_TABLES:
            con.execute(sql("results", "delete_run_rows", table=quote_ident(table)), [campaign, run_id])
    if not succeeded:
        _retain_versions(con, campaign, VERSION_TABLES)


def reconcile(con: duckdb.DuckDBPyConnection, campaign: str,
              finished: Mapping[str, bool | tuple[bool, Iterable[str] | None]]) -> None:
    """Mark the runs of `finished` (run id -> succeeded, or (succeeded, failed_models)) that are
    still 'started'."""
    for run_id, outcome in finished.items():
        succeeded, failed_models = outcome if isinstance(outcome, tuple) else (outcome, None)
        finish(con, campaign, run_id, succeeded, failed_models)


def retain(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str, tables: Iterable[str], keep: int) -> None:
    """The retention rule for `tables` of `campaign`, written by `run_id` (see the module doc)."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1 run, got {keep}")
    tables = list(tables)
    for table in tables:
        if table in VERSION_TABLES:
            continue
        if table not in RUN_TABLES:
            raise ValueError(f"{table!r} is not a results table with runs ({', '.join(RUN_TABLES)})")
        if table in MODEL_TABLES:  # per model: see sql/results.sql retain_model_runs
            con.execute(sql("results", "retain_model_runs", table=quote_ident(table)),
                        [campaign, campaign, run_id, run_id, campaign, campaign, run_id, max(keep - 1, 1)])
            continue
        con.execute(sql("results", "retain_runs", table=quote_ident(table)),
                    [campaign, campaign, run_id, max(keep - 1, 1), run_id, campaign])
    _retain_versions(con, campaign, [t for t in tables if t in VERSION_TABLES])


def _retain_versions(con: duckdb.DuckDBPyConnection, campaign: str, tables: Iterable[str]) -> None:
    for table in tables:
        con.execute(sql("results", "retain_model_versions", table=quote_ident(table)), [campaign, campaign])


def record_infeasible(con: duckdb.DuckDBPyConnection, campaign: str, model: str, version: str, budget: float,
                      exc: Exception, run_id: str) -> dict:
    """Store an InfeasibleBudgetError of one model and budget; returns it as a metadata row."""
    minimum = float(getattr(exc, "minimum_budget", float("nan")))
    con.execute(sql("results", "insert_infeasible"), [campaign, model, version, float(budget), minimum, str(exc), run_id])
    return {"model": model, "budget_per_capita": float(budget), "minimum_budget": minimum, "message": str(exc)}
