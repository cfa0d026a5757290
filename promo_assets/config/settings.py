"""Settings read from the environment, with documented defaults (docs/settings.md).

Relative paths are resolved against the current working directory at the time of the call, so
`promo` run from the repository root and `dagster dev` started there see the same files.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Callable, TypeVar

from promo_assets.core.errors import DomainError

T = TypeVar("T")

DEFAULT_LANDING_DIR = "data/landing"
DEFAULT_WAREHOUSE = "data/warehouse.duckdb"
DEFAULT_ARTIFACTS_DIR = "data/artifacts"
DEFAULT_OUTBOX_DIR = "data/outbox"
DEFAULT_REPORT_DIR = "data/reports"


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


def outbox_dir() -> Path:
    """Where decisions are exported for the systems that send incentives (PROMO_OUTBOX_DIR)."""
    return _path("PROMO_OUTBOX_DIR", DEFAULT_OUTBOX_DIR)


def report_dir() -> Path:
    """Where the campaign_report asset writes each campaign's HTML report (PROMO_REPORT_DIR)."""
    return _path("PROMO_REPORT_DIR", DEFAULT_REPORT_DIR)


class SettingsError(DomainError, ValueError):
    """An environment setting with a value of the wrong kind (names the variable and the value)."""


def _env(var: str, parse: Callable[[str], T], problem: str) -> T | None:
    """The value of environment variable `var` parsed by `parse` (None when unset or empty); a value
    `parse` refuses (ValueError) raises SettingsError "<var>='<value>'<problem>"."""
    text = os.environ.get(var, "").strip()
    if not text:
        return None
    try:
        return parse(text)
    except ValueError:
        raise SettingsError(f"{var}={text!r}{problem}") from None


def _at_least(minimum: float, convert: Callable[[str], T]) -> Callable[[str], T]:
    def parse(text: str) -> T:
        value = convert(text)
        if not minimum <= value < float("inf"):
            raise ValueError(text)
        return value
    return parse


def max_epochs() -> int | None:
    """Optional cap on training epochs for every model (PROMO_MAX_EPOCHS); None = model default."""
    return _env("PROMO_MAX_EPOCHS", _at_least(1, int), ": expected a whole number of epochs >= 1")


def warehouse_busy_seconds() -> float:
    """How long opening the warehouse retries while another process holds its lock
    (PROMO_WAREHOUSE_BUSY_SECONDS, default 10) before saying it is busy."""
    seconds = _env("PROMO_WAREHOUSE_BUSY_SECONDS", _at_least(0, float), ": expected a number of seconds >= 0")
    return 10.0 if seconds is None else seconds


def partitions_start() -> dt.date | None:
    """Optional first day to load (PROMO_PARTITIONS_START, YYYY-MM-DD): day files dated before it
    are skipped with a warning. Unset (the default): no lower bound."""
    return _env("PROMO_PARTITIONS_START", dt.date.fromisoformat, " is not a date (YYYY-MM-DD)")


DEFAULT_KEEP_RUNS = 3


def keep_runs() -> int:
    """How many runs' results each results table keeps per campaign (PROMO_KEEP_RUNS, default 3):
    the latest succeeded runs, the current run counted among them (see promo_assets.store.results)."""
    value = _env("PROMO_KEEP_RUNS", _at_least(1, int), f": expected a whole number of runs >= 1 (default {DEFAULT_KEEP_RUNS})")
    return DEFAULT_KEEP_RUNS if value is None else value


DEFAULT_MAX_SOLVE_CELLS = 500_000_000


def max_solve_cells() -> int:
    """The cap on users x levels of one allocation solve (PROMO_MAX_SOLVE_CELLS, default 500,000,000):
    each budget's exact solve passes over every user x level cell several times (about a microsecond
    per cell and pass on one core), so a larger problem is refused with this reason instead of running
    for hours. Campaigns also have at most `campaign.MAX_LEVELS` levels."""
    value = _env("PROMO_MAX_SOLVE_CELLS", _at_least(1, int),
                 f": expected a whole number of user x level cells >= 1 (default {DEFAULT_MAX_SOLVE_CELLS:,})")
    return DEFAULT_MAX_SOLVE_CELLS if value is None else value


def _scheduler(text: str) -> str:
    if text.startswith("local:"):
        workers = int(text[len("local:"):])  # ValueError: not a number
        if workers < 1:
            raise ValueError(text)
        return text
    host, sep, port = text.rpartition("://")[2].rpartition(":")
    if not (sep and host and port.isdigit()):
        raise ValueError(text)
    return text


def dask_scheduler() -> str | None:
    """Where the per-user work (scoring, allocation, evaluation's decisions) runs (PROMO_DASK_SCHEDULER):
    unset (the default) in the run's own process; `local:N` a Dask LocalCluster of N worker processes
    started for the run; otherwise the address of a running Dask scheduler (`tcp://host:8786` or
    `host:8786`)."""
    return _env("PROMO_DASK_SCHEDULER", _scheduler,
                ": expected local:N (N >= 1 worker processes) or a scheduler address such as tcp://host:8786")


def check() -> list[str]:
    """Every setting with a value of the wrong kind, one message each ([] when all are fine): what
    `promo run` checks before anything runs."""
    problems = []
    for read in (max_epochs, warehouse_busy_seconds, partitions_start, keep_runs, dask_scheduler, max_solve_cells):
        try:
            read()
        except SettingsError as exc:
            problems.append(str(exc))
    return problems
