"""Events, propensities, the training frame and the outcome model's predictions of a campaign."""

from __future__ import annotations

import duckdb
import pandas as pd

from promo_assets.store.warehouse import quote_ident, registered, sql, table_columns, transaction


def loaded_features(con: duckdb.DuckDBPyConnection, campaign: str) -> dict[str, str]:
    """{feature: kind} of the campaign's registered feature columns that hold at least one value in
    its currently loaded rct_events partitions, sorted by name. A feature whose days were all
    forgotten or reloaded without it drops out; on a loaded day without the column it is NULL."""
    registrations = dict(con.execute(sql("ingest", "campaign_feature_kinds"), [campaign]).fetchall())
    if not registrations:
        return {}
    names = list(table_columns(con, "rct_events"))
    counts = con.execute(sql("ingest", "column_value_counts"), [campaign]).fetchone()
    present = {name for name, n in zip(names, counts) if n}
    return {f: kind for f, kind in sorted(registrations.items()) if f in present}


def feature_spec(con: duckdb.DuckDBPyConnection, campaign: str) -> tuple[list[str], list[str]]:
    """(numeric, categorical) feature columns of the campaign's currently loaded days."""
    kinds = loaded_features(con, campaign)
    return [f for f, k in kinds.items() if k == "numeric"], [f for f, k in kinds.items() if k == "categorical"]


def _columns(features: list[str], prefix: str = "e.") -> str:
    """', <prefix>"feature"' for every feature column, appended to a SELECT list."""
    return "".join(f", {prefix}{quote_ident(c)}" for c in features)


def events(con: duckdb.DuckDBPyConnection, campaign: str, features: list[str]) -> pd.DataFrame:
    """The campaign's loaded events (level, response, cost, logged propensity...) with `features`."""
    return con.execute(sql("frames", "events", columns=_columns(features, prefix="")), [campaign]).df()


def replace_propensity(con: duckdb.DuckDBPyConnection, campaign: str, version: str, frame: pd.DataFrame) -> None:
    """The campaign's propensity rows replaced by `frame` (event_date, source_row, propensity,
    source), in one transaction."""
    with transaction(con), registered(con, "frame_df", frame):
        con.execute(sql("frames", "delete_campaign", table="propensity"), [campaign])
        con.execute(sql("frames", "insert_propensity"), [campaign, version])


def propensity_events(con: duckdb.DuckDBPyConnection, campaign: str, features: list[str] = ()) -> pd.DataFrame:
    """The campaign's events with their propensity (the training frame's input) and `features`."""
    return con.execute(sql("frames", "propensity_events", columns=_columns(list(features))), [campaign]).df()


def replace_training_frame(con: duckdb.DuckDBPyConnection, campaign: str, version: str, frame: pd.DataFrame) -> None:
    """The campaign's training_frame rows replaced by `frame` (event_date, source_row, split,
    ips_weight), in one transaction."""
    with transaction(con), registered(con, "frame_df", frame):
        con.execute(sql("frames", "delete_campaign", table="training_frame"), [campaign])
        con.execute(sql("frames", "insert_training_frame"), [campaign, version])


def frame_version(con: duckdb.DuckDBPyConnection, campaign: str):
    """The version of the campaign's current training frame (None without one)."""
    return con.execute(sql("frames", "frame_version"), [campaign]).fetchone()[0]


def training_frame(con: duckdb.DuckDBPyConnection, campaign: str, features: list[str] = ()) -> pd.DataFrame:
    """The training frame's events (split, IPS weight, level, response, cost) with `features`."""
    return con.execute(sql("frames", "training_frame", columns=_columns(list(features))), [campaign]).df()


def holdout_events(con: duckdb.DuckDBPyConnection, campaign: str, features: list[str] = ()) -> pd.DataFrame:
    """The holdout events (one row per holdout event) with `features`."""
    return con.execute(sql("frames", "holdout_events", columns=_columns(list(features))), [campaign]).df()


def outcome_training_events(con: duckdb.DuckDBPyConnection, campaign: str, features: list[str]) -> pd.DataFrame:
    """The training days' events (train and validation splits) the outcome model is fitted on."""
    return con.execute(sql("frames", "outcome_training_events", columns=_columns(features)), [campaign]).df()


def replace_outcome_predictions(con: duckdb.DuckDBPyConnection, campaign: str, frame_version_: str,
                                frame: pd.DataFrame | None) -> None:
    """The campaign's outcome_predictions replaced by `frame` (none when None), in one transaction."""
    with transaction(con):
        con.execute(sql("frames", "delete_campaign", table="outcome_predictions"), [campaign])
        if frame is not None:
            with registered(con, "outcome_df", frame):
                con.execute(sql("frames", "insert_outcome_predictions"), [campaign, frame_version_])


def outcome_predictions(con: duckdb.DuckDBPyConnection, campaign: str) -> pd.DataFrame:
    """The outcome model's stored predictions for the holdout events × level."""
    return con.execute(sql("frames", "outcome_predictions"), [campaign]).df()


def holdout_segments(con: duckdb.DuckDBPyConnection, campaign: str, segments: list[str]) -> pd.DataFrame:
    """The holdout events' `segments` columns (and user_id)."""
    return con.execute(sql("frames", "holdout_segments", columns=_columns(list(segments))), [campaign]).df()
