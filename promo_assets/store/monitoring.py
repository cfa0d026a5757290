"""The outcomes of the deployed decisions: reads of the decided days and their events, writes of the
outcomes, levels, effect, drift and checks tables (sql/monitoring.sql)."""

from __future__ import annotations

import datetime as dt
import json

import duckdb
import numpy as np
import pandas as pd

from promo_assets.store.warehouse import quote_ident, registered, sql


# The monitoring tables' column names for the short names the domain uses: a warehouse column name is
# reserved for every campaign (no feature may take it), so these tables avoid words a feature could be
# called (`events`, `days`, `low`, ...). Applied on write, undone on read.
COLUMNS = {"days": "deployed_days", "events": "n_events", "low": "effect_low", "high": "effect_high",
           "bin": "outcome_bin", "passed": "check_passed", "joined": "joined_events", "flagged": "drift_flagged",
           "predicted": "predicted_value", "realized": "realized_value", "psi": "drift_psi",
           "severity": "check_severity", "reaction": "check_reaction", "effect": "effect_estimate",
           "compliance": "compliance_share", "carried": "carried_over"}
_SHORT = {v: k for k, v in COLUMNS.items()}


def decided_days(con: duckdb.DuckDBPyConnection, campaign: str, own_run: str = "") -> pd.DataFrame:
    """decision_date, run_id, budget_per_capita, decision_manifest (JSON), decided_at of every visible
    decisions run's budgets and of run `own_run`'s (in progress)."""
    return con.execute(sql("monitoring", "decided_days"), [campaign, own_run]).df()


def decisions(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str, budget: float) -> pd.DataFrame:
    return con.execute(sql("monitoring", "decisions_with_champion_level"), [campaign, run_id, budget]).df()


def decision_coefficients(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str):
    """(user ids, response N x K, cost N x K) the decisions run stored, or None when it stored none."""
    frame = con.execute(sql("monitoring", "decision_coefficients_of_run"), [campaign, run_id]).df()
    if frame.empty:
        return None
    return (frame["user_id"].astype(str).to_numpy(), np.vstack(frame["response"].to_numpy()),
            np.vstack(frame["cost"].to_numpy()))


def day_events(con: duckdb.DuckDBPyConnection, campaign: str, day: dt.date, features: list[str] = ()) -> pd.DataFrame:
    """A day's events (user_id, level, response, cost, propensity) with `features`."""
    columns = "".join(f", {quote_ident(c)}" for c in features)
    return con.execute(sql("monitoring", "day_events", columns=columns), [campaign, day.isoformat()]).df()


def event_days(con: duckdb.DuckDBPyConnection, campaign: str) -> set[dt.date]:
    return {pd.Timestamp(d).date() for (d,) in con.execute(sql("monitoring", "event_days"), [campaign]).fetchall()}


def latest_run(con: duckdb.DuckDBPyConnection, campaign: str) -> str | None:
    row = con.execute(sql("monitoring", "latest_outcomes_run"), [campaign]).fetchone()
    return row[0] if row else None


def of_run(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str, what: str) -> pd.DataFrame:
    """One table of an outcomes run: 'outcomes', 'outcome_effect', 'outcome_levels', 'drift', 'checks'."""
    return con.execute(sql("monitoring", f"{what}_of_run"), [campaign, run_id]).df().rename(columns=_SHORT)


def training_change_day(con: duckdb.DuckDBPyConnection, campaign: str) -> dt.date | None:
    """The start of the training window set by the latest `retrain` reaction (None: none)."""
    try:
        value = con.execute(sql("monitoring", "training_change_day"), [campaign]).fetchone()[0]
    except duckdb.CatalogException:  # a warehouse from before the monitoring tables (read-only open)
        return None
    return None if value is None else pd.Timestamp(value).date()


def training_change_segments(con: duckdb.DuckDBPyConnection, campaign: str,
                             change_day: dt.date | None) -> tuple[tuple[str, str], ...]:
    """The (feature, value) segments whose response changed, of the training window that starts at
    `change_day` (the latest `retrain` reaction's); () for none known (then every event is stale)."""
    if change_day is None:
        return ()
    row = con.execute(sql("monitoring", "training_change_segments"), [campaign, change_day]).fetchone()
    try:
        pairs = json.loads(row[0]) if row and row[0] else []
    except ValueError:
        return ()
    return tuple((str(f), str(v)) for f, v in pairs)


def record(con: duckdb.DuckDBPyConnection, campaign: str, run_id: str, tables: dict[str, pd.DataFrame]) -> None:
    """The rows of one outcomes run: tables 'outcomes', 'levels', 'effect', 'drift', 'checks' (frames
    whose columns are the tables' names; missing columns are NULL)."""
    for name, statement in (("outcomes", "insert_outcomes"), ("levels", "insert_outcome_levels"),
                            ("effect", "insert_outcome_effect"), ("drift", "insert_population_drift"),
                            ("checks", "insert_monitoring_checks")):
        frame = tables.get(name)
        if frame is None or frame.empty:
            continue
        with registered(con, f"{name}_df", frame.rename(columns=COLUMNS)):
            con.execute(sql("monitoring", statement), [campaign, run_id])


def manifest_entry(text: str) -> dict:
    """The manifest entry of a decision_budgets row (its JSON has the entry under 'entry')."""
    try:
        return json.loads(text).get("entry", {})
    except (TypeError, ValueError):
        return {}


def active_reactions(con: duckdb.DuckDBPyConnection, campaign: str, or_run: str = "") -> pd.DataFrame:
    """check_name, reaction, change_day, message of the acting reactions of the latest outcomes run
    (visible, or run `or_run`); empty without one (or on a warehouse from before the monitoring tables)."""
    try:
        return con.execute(sql("monitoring", "active_reactions"), [campaign, or_run]).df()
    except duckdb.CatalogException:
        return pd.DataFrame(columns=["check_name", "reaction", "change_day", "message"])


def previous_champion(con: duckdb.DuckDBPyConnection, campaign: str, current: str) -> dict | None:
    """The members of the latest visible champion other than `current` (None: there was none)."""
    row = con.execute(sql("monitoring", "previous_champion"), [campaign, current]).fetchone()
    return None if row is None else json.loads(row[0])
