"""The champion and the decisions: the models a leaderboard run assembled, the champion and its
evidence, the decisions per budget with their manifest entry, and what the decisions read back
(tables leaderboard_entries, champion, champion_evidence, decisions, decision_budgets,
policy_evaluation, rct_events). The pacing rows are written by `promo_assets.decisions.pacing`."""

from __future__ import annotations

import datetime as dt
import json
from typing import NamedTuple

import duckdb
import pandas as pd

from promo_assets.store.warehouse import registered, sql, table_columns


def board_models(con: duckdb.DuckDBPyConnection, campaign: str, board_run: str) -> list[tuple[str, str, str]]:
    """(model, model version, evaluation run) of every model leaderboard run `board_run` assembled
    with an evaluation (the random reference left out)."""
    return con.execute(sql("decisions", "board_models"), [campaign, board_run]).fetchall()


def latest_champion(con: duckdb.DuckDBPyConnection, campaign: str, or_run: str = "") -> pd.DataFrame:
    """The campaign's latest champion row of a visible run (succeeded or partial), or of run `or_run`
    itself (a run still in progress); empty without one."""
    return con.execute(sql("decisions", "latest_champion"), [campaign, or_run]).df()


def record_champion(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str, row: list,
                    evidence: pd.DataFrame) -> None:
    """A champion run's row of table champion (`row`: its columns after campaign and run, in the
    table's order) and its evidence rows (table champion_evidence)."""
    con.execute(sql("decisions", "insert_champion"), [campaign, run_id, *row])
    with registered(con, "evidence_df", evidence):
        con.execute(sql("decisions", "insert_champion_evidence"), [campaign, run_id])


def champion_of_run(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str) -> pd.DataFrame:
    """The champion row champion run `run_id` wrote (empty when that run's rows were removed)."""
    return con.execute(sql("decisions", "champion_of_run"), [campaign, run_id]).df()


def champion_evidence_of_run(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str) -> pd.DataFrame:
    """The evidence rows champion run `run_id` wrote."""
    return con.execute(sql("decisions", "champion_evidence_of_run"), [campaign, run_id]).df()


def champion_run_of_decisions(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str) -> str | None:
    """The champion run whose champion decisions run `run_id` decided with (None: not stored)."""
    return con.execute(sql("decisions", "champion_run_of_decisions"), [campaign, run_id]).fetchone()[0]


def last_event_day(con: duckdb.DuckDBPyConnection, campaign: str):
    """The newest event date loaded for the campaign (None without events)."""
    return con.execute(sql("decisions", "last_event_day"), [campaign]).fetchone()[0]


def latest_evaluations(con: duckdb.DuckDBPyConnection, campaign: str, or_run: str) -> list[tuple]:
    """(model, newest evaluation time) of every model of the campaign, over the visible runs and run
    `or_run`: a champion must not be older than any of them."""
    return con.execute(sql("decisions", "latest_evaluations"), [campaign, or_run]).fetchall()


def record_decision_coefficients(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str, day: dt.date, users,
                                 response, cost) -> None:
    """The champion's predicted response and cost at every level of each user decided for (N x K each),
    one row per user (table decision_coefficients)."""
    frame = pd.DataFrame({"user_id": pd.Series(users, dtype=str).to_numpy(), "response": list(response.astype(float)),
                          "cost": list(cost.astype(float))})
    with registered(con, "coefficients_df", frame):
        con.execute(sql("decisions", "insert_decision_coefficients"), [campaign, run_id, day.isoformat()])


def record_decisions(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str, day: dt.date, budget: float,
                     frame: pd.DataFrame, who: str, manifest: dict) -> None:
    """One budget's decisions of run `run_id` for `day` (table decisions: `frame`'s users, levels,
    incentives, predictions, policies and propensities) and its row of decision_budgets (the champion
    decided with, `manifest["champion"]`, whom the decisions are for, the manifest entry as JSON)."""
    champion = manifest["champion"]
    with registered(con, "decisions_df", frame.assign(budget_per_capita=budget)):
        con.execute(sql("decisions", "insert_decisions"), [campaign, run_id, day.isoformat()])
    con.execute(sql("decisions", "insert_decision_budget"), [
        campaign, run_id, day.isoformat(), budget, champion["name"], champion["version"], champion["run_id"], who,
        json.dumps(manifest)])


def decisions_of_run(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str, budget: float) -> pd.DataFrame:
    """The decision rows (one per user) decisions run `run_id` wrote for one budget."""
    return con.execute(sql("decisions", "decisions_of_run"), [campaign, run_id, budget]).df()


def paced_days(con: duckdb.DuckDBPyConnection, campaign: str) -> list[tuple]:
    """(run id, day, budget, decision manifest, decided at) of every paced decision of the campaign's
    visible decisions runs, oldest first."""
    return con.execute(sql("decisions", "paced_days"), [campaign]).fetchall()


def realized_spend(con: duckdb.DuckDBPyConnection, campaign: str, day: str, run_id: str, budget: float) -> float | None:
    """The spend the day's loaded events report for the users decisions run `run_id` decided for
    (None before the day is loaded)."""
    realized, _ = con.execute(sql("decisions", "realized_spend"), [campaign, day, run_id, budget]).fetchone()
    return realized


def carried_pacing_days(con: duckdb.DuckDBPyConnection, campaign: str) -> list[tuple]:
    """(day, plan, λ, predicted, realized, ratio) of the pacing rows of the latest visible run that paced."""
    return con.execute(sql("decisions", "carried_pacing_days"), [campaign]).fetchall()


def users_per_day(con: duckdb.DuckDBPyConnection, campaign: str) -> float | None:
    """The mean number of distinct users per loaded day of the campaign's events."""
    return con.execute(sql("decisions", "users_per_day"), [campaign]).fetchone()[0]


def record_pacing(con: duckdb.DuckDBPyConnection, row: list) -> None:
    """One row of table pacing (its columns in the table's order)."""
    con.execute(sql("decisions", "insert_pacing"), row)


class ExportRow(NamedTuple):
    """A row of decision_exports (after the campaign): what became of a decisions run's decision at the outbox."""

    decisions_run_id: str
    day: dt.date | str
    state: str                      # 'exported' | 'stopped'
    deployed_budget: float | None   # the budget whose file is applied (None: not known)
    budgets: list                   # the budgets written ([] when stopped)
    reason: str                     # stopped: the checks; exported: the outbox folder
    exported_by: str                # the Dagster run of the outbox asset, or 'promo export'


def record_export(con: duckdb.DuckDBPyConnection, campaign: str, row: ExportRow) -> None:
    """A row of decision_exports."""
    con.execute(sql("decisions", "insert_decision_export"), [
        campaign, row.decisions_run_id, str(row.day), row.state, row.deployed_budget,
        json.dumps([float(b) for b in row.budgets]), row.reason, row.exported_by])


def decision_exports(con: duckdb.DuckDBPyConnection, campaign: str) -> pd.DataFrame:
    """The latest decision_exports row of every decisions run of the campaign (empty for a warehouse from
    before the table)."""
    if not table_columns(con, "decision_exports"):
        return pd.DataFrame(columns=["decisions_run_id", "decision_date", "export_state", "deployed_budget",
                                     "export_budgets", "export_reason", "exported_by", "exported_at"])
    return con.execute(sql("decisions", "decision_exports"), [campaign]).df()


def decision_runs(con: duckdb.DuckDBPyConnection, campaign: str, own_run: str = "") -> pd.DataFrame:
    """run_id, decision_date, decided_at of every visible decisions run of the campaign and of run `own_run`
    (in progress), oldest first."""
    if not table_columns(con, "decision_budgets"):
        return pd.DataFrame(columns=["run_id", "decision_date", "decided_at"])
    return con.execute(sql("decisions", "decision_runs"), [campaign, own_run]).df()
