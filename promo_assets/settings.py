"""Settings read from the environment, with documented defaults (see README, "Settings").

Relative paths are resolved against the current working directory at the time of the call, so
`promo` run from the repository root and `dagster dev` started there see the same files.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_LANDING_DIR = "data/landing"
DEFAULT_WAREHOUSE = "data/warehouse.duckdb"
DEFAULT_ARTIFACTS_DIR = "data/artifacts"


def _path(var: str, default: str) -> Path:
    return Path(os.environ.get(var) or default).expanduser().resolve()


def landing_dir() -> Path:
    """Root of the landing folder: one sub-folder per campaign (PROMO_LANDING_DIR)."""
    return _path("PROMO_LANDING_DIR", DEFAULT_LANDING_DIR)


def warehouse_path() -> Path:
    """The DuckDB warehouse file (PROMO_WAREHOUSE)."""
    return _path("PROMO_WAREHOUSE", DEFAULT_WAREHOUSE)


def artifacts_dir() -> Path:
    """Content-addressed store of trained artefacts and encoders (PROMO_ARTIFACTS_DIR)."""
    return _path("PROMO_ARTIFACTS_DIR", DEFAULT_ARTIFACTS_DIR)


def max_epochs() -> int | None:
    """Optional cap on training epochs for every model (PROMO_MAX_EPOCHS); None = model default."""
    value = os.environ.get("PROMO_MAX_EPOCHS")
    return int(value) if value else None


class SettingsError(ValueError):
    """An environment setting with a value of the wrong kind (names the variable and the value)."""


def warehouse_busy_seconds() -> float:
    """How long opening the warehouse retries while another process holds its lock
    (PROMO_WAREHOUSE_BUSY_SECONDS, default 10) before saying it is busy."""
    value = os.environ.get("PROMO_WAREHOUSE_BUSY_SECONDS")
    if not value:
        return 10.0
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise SettingsError(f"PROMO_WAREHOUSE_BUSY_SECONDS={value!r}: expected a number of seconds >= 0")
    return seconds


def partitions_start():
    """Optional first day to load (PROMO_PARTITIONS_START, YYYY-MM-DD): day files dated before it
    are skipped with a warning. Unset (the default): no lower bound."""
    import datetime as dt

    value = os.environ.get("PROMO_PARTITIONS_START")
    if not value:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise SettingsError(f"PROMO_PARTITIONS_START={value!r} is not a date (YYYY-MM-DD)") from None


DEFAULT_KEEP_RUNS = 3


def keep_runs() -> int:
    """How many runs' results each results table keeps per campaign (PROMO_KEEP_RUNS, default 3):
    the latest succeeded runs, the current run counted among them (see promo_assets.results)."""
    text = os.environ.get("PROMO_KEEP_RUNS", "").strip()
    if not text:
        return DEFAULT_KEEP_RUNS
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise SettingsError(f"PROMO_KEEP_RUNS={text!r}: expected a whole number of runs >= 1 (default {DEFAULT_KEEP_RUNS})")
    return value
