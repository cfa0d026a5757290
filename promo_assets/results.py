"""Which run wrote which results, which runs succeeded, and how many runs' results are kept.

Every results table with a `run_id` column (RUN_TABLES) is written by an asset in one transaction
(`warehouse.transaction`), and the run is recorded in `result_runs` ('started'). A run's rows are
read (by the next assets: `latest_models`; by `promo report`) only once the run is marked
'succeeded'; a run marked 'failed' has its rows deleted. `promo run` marks its own runs when they
end; the other runs (UI, daemon, a killed `promo run`) are marked at the next results write of their
campaign from Dagster's own run status (the orchestration layer passes it in: this module knows
nothing of Dagster).

Retention (`retain`), in the same transaction as each write: a results table keeps, per campaign,
the rows of its latest `keep - 1` succeeded runs (at least the latest one, so that a run that then
fails never leaves the campaign without results), of the writing run, and of runs still marked
'started' (model_registry counts the runs per model: a run that trained only some models never drops
another model's last registration); coefficients are kept for the model versions still in model_registry.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import duckdb

from promo_assets.warehouse import quote_ident, sql

RUN_TABLES = (
    "model_registry", "budget_dual", "infeasible_budget", "allocation", "policy_evaluation",
    "joint_allocation", "joint_allocation_evaluation",
)
VERSION_TABLES = ("response_coefficients", "merchant_coefficients")  # history by model version


def start(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str) -> None:
    """Record that `run_id` writes results of `campaign` (no-op when already recorded)."""
    con.execute(sql("results", "start_run"), [campaign, run_id])


def unfinished(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str) -> list[str]:
    """The campaign's runs marked 'started', other than `run_id`."""
    return [r[0] for r in con.execute(sql("results", "started_runs"), [campaign, run_id]).fetchall()]


def finish(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str, succeeded: bool) -> None:
    """Mark a started run succeeded or failed; a failed run's rows are deleted from every results
    table (and the coefficients of the model versions only it registered). Call inside a transaction."""
    status = "succeeded" if succeeded else "failed"
    if not con.execute(sql("results", "finish_run"), [status, campaign, run_id]).fetchall():
        return  # never wrote results, or already marked
    if not succeeded:
        for table in RUN_TABLES:
            con.execute(sql("results", "delete_run_rows", table=quote_ident(table)), [campaign, run_id])
        _retain_versions(con, campaign, VERSION_TABLES)


def reconcile(con: duckdb.DuckDBPyConnection, campaign: str, finished: Mapping[str, bool]) -> None:
    """Mark the runs of `finished` (run id -> succeeded) that are still 'started'."""
    for run_id, succeeded in finished.items():
        finish(con, campaign, run_id, succeeded)


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
        if table == "model_registry":  # per model: see sql/results.sql retain_model_runs
            con.execute(sql("results", "retain_model_runs"),
                        [campaign, run_id, campaign, campaign, run_id, max(keep - 1, 1)])
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
