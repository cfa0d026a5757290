"""The model chains' rows: the model registry and skips, the coefficients, λ* per budget, the
policy evaluations and the leaderboard's entries and data checks."""

from __future__ import annotations

import json
from typing import Mapping

import duckdb
import numpy as np
import pandas as pd

from promo_assets.store.warehouse import registered, sql


def record_skip(con: duckdb.DuckDBPyConnection, campaign: str, model: str, reason: str, run_id: str) -> None:
    """A model's chain skipped for the campaign, with the reason (table model_skips)."""
    con.execute(sql("frames", "insert_skip"), [campaign, model, reason, run_id])


def register_model(con: duckdb.DuckDBPyConnection, campaign: str, name: str, version: str, data_version: str | None,
                   metrics_json: str, run_id: str) -> None:
    """A saved model artefact registered for the campaign (table model_registry)."""
    con.execute(sql("frames", "insert_model"), [campaign, name, version, data_version, metrics_json, run_id])


def model_metrics(con: duckdb.DuckDBPyConnection, campaign: str, versions: Mapping[str, str]) -> dict[str, dict]:
    """{model: the metrics its version in `versions` ({model: version}) was registered with (e.g. a torch
    model's best_epoch)}; {} for a version that is not registered or recorded none."""
    out = {}
    for name, version in versions.items():
        row = con.execute(sql("frames", "model_metrics"), [campaign, name, version]).fetchone()
        metrics = json.loads(row[0]) if row and row[0] else {}
        out[name] = metrics if isinstance(metrics, dict) else {}
    return out


def clear_coefficients(con: duckdb.DuckDBPyConnection, campaign: str, model: str, version: str, target: str) -> None:
    """Remove the coefficients of a model version and target (before they are scored again)."""
    con.execute(sql("frames", "delete_coefficients"), [campaign, model, version, target])


def add_coefficients(con: duckdb.DuckDBPyConnection, campaign: str, model: str, version: str, target: str,
                     chunk: pd.DataFrame) -> None:
    """Append one chunk of coefficients (user_id, level, response, cost) of a model version and target."""
    with registered(con, "chunk_df", chunk):
        con.execute(sql("frames", "insert_coefficients"), [campaign, model, version, target])


def coefficient_arrays(con: duckdb.DuckDBPyConnection, campaign: str, model: str, version: str, target: str,
                       k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(users, response N x k, cost N x k) of a model version's stored coefficients for `target`;
    ValueError when the rows are not k levels per user (scored for another campaign.yaml)."""
    df = con.execute(sql("frames", "coefficients"), [campaign, model, version, target]).df()
    n = len(df) // k
    users = df["user_id"].to_numpy()[::k]
    return users, df["response"].to_numpy().reshape(n, k), df["cost"].to_numpy().reshape(n, k)


def coefficient_count(con: duckdb.DuckDBPyConnection, campaign: str, model: str, version: str,
                      target: str) -> tuple[int, int]:
    """(rows, users) of a model version's stored coefficients for `target`."""
    n_rows, n_users = con.execute(sql("frames", "coefficient_count"), [campaign, model, version, target]).fetchone()
    return int(n_rows), int(n_users)


def coefficient_batches(con: duckdb.DuckDBPyConnection, campaign: str, model: str, version: str, target: str,
                        rows: int):
    """The stored coefficients of `target` as Arrow record batches of `rows` rows, in user and level
    order (on the cursor `con`: its caller closes it)."""
    return con.execute(sql("frames", "coefficients"), [campaign, model, version, target]).to_arrow_reader(rows)


def record_dual(con: duckdb.DuckDBPyConnection, campaign: str, model: str, version: str, solved, run_id: str) -> None:
    """λ* of one budget: `solved` is an `allocation.plan.SolvedBudget` (budget_per_capita, n_users, tie_share
    and its `result`, an `allocation.Allocation`-like result: lambda_, response, cost, dual_bound)."""
    res = solved.result
    con.execute(sql("frames", "insert_dual"), [campaign, model, version, solved.budget_per_capita, float(res.lambda_),
                                               float(res.response), float(res.cost), float(res.dual_bound),
                                               solved.n_users, run_id, solved.tie_share])


def duals_of_run(con: duckdb.DuckDBPyConnection, campaign: str, model: str, version: str, run_id: str):
    """([(budget, λ*, tie share)], [(budget, message)] of the infeasible budgets) stored by budget_dual
    in run `run_id` for a model version."""
    duals = con.execute(sql("frames", "duals_of_run"), [campaign, model, version, run_id]).fetchall()
    infeasible = con.execute(sql("frames", "infeasible_of_run"), [campaign, model, version, run_id]).fetchall()
    return duals, infeasible


def write_evaluation(con: duckdb.DuckDBPyConnection, rows: pd.DataFrame, segments: pd.DataFrame | None = None,
                     campaign: str | None = None, run_id: str | None = None) -> None:
    """policy_evaluation rows (and a model's segment_evaluation rows of `campaign` / `run_id`)."""
    with registered(con, "eval_df", rows):
        con.execute(sql("frames", "insert_evaluation"))
    if segments is not None and len(segments):
        with registered(con, "segment_df", segments):
            con.execute(sql("frames", "insert_segment_evaluation"), [campaign, run_id])


def model_evaluation(con: duckdb.DuckDBPyConnection, campaign: str, model: str, run_id: str) -> pd.DataFrame:
    """A model's policy_evaluation rows written by run `run_id`."""
    return con.execute(sql("frames", "model_evaluation"), [campaign, model, run_id]).df()


def write_board(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str, random_rows: pd.DataFrame,
                entries: list[dict], checks) -> None:
    """The leaderboard's own rows: the random reference's evaluation, one entry per model (its status,
    version, evaluation run and reason) and the training frame's data checks."""
    write_evaluation(con, random_rows)
    for e in entries:
        con.execute(sql("frames", "insert_leaderboard_entry"), [campaign, run_id, e["model"], e["model_version"],
                                                                 e["evaluation_run_id"], e["status"], e["reason"]])
    for c in checks:
        con.execute(sql("frames", "insert_data_check"), [campaign, run_id, c.name, c.passed, c.severity, c.message])


def record_multipliers(con: duckdb.DuckDBPyConnection, campaign: str, model: str, version: str, target: str,
                       rows: pd.DataFrame, run_id: str) -> None:
    """Several budgets: each budget's multiplier and use for a model version and target (table
    budget_multipliers; `rows` as `allocation.budgets` gives them)."""
    rows = rows.copy()
    for c in ("true_use", "matched_true_use", "matched_scale"):
        if c not in rows:
            rows[c] = None
    with registered(con, "multipliers_df", rows):
        con.execute(sql("frames", "insert_multipliers"), [campaign, model, version, target, run_id])


def multipliers_of_run(con: duckdb.DuckDBPyConnection, campaign: str, model: str, version: str, run_id: str):
    """[(budget, budget name, multiplier)] that budget_dual stored in run `run_id` (several budgets)."""
    return con.execute(sql("frames", "multipliers_of_run"), [campaign, model, version, run_id]).fetchall()


def budget_use_of_evaluation(con: duckdb.DuckDBPyConnection, campaign: str, model: str, run_id: str) -> pd.DataFrame:
    """A model's policy_evaluation rows of budget_multipliers (target holdout) written by run `run_id`."""
    return con.execute(sql("frames", "evaluation_budget_use"), [campaign, model, run_id]).df()


def add_allocation(con: duckdb.DuckDBPyConnection, row: list, frame: pd.DataFrame) -> None:
    """Allocation rows (user_id, level, incentive) of one model version and budget (`row`: campaign,
    model, version, budget, run id)."""
    with registered(con, "alloc_df", frame):
        con.execute(sql("frames", "insert_allocation"), row)
