"""Merchant-side RCT files of a bipartite campaign: the `merchants:` block of campaign.yaml and the
validated, atomic load of one `merchants/<YYYY-MM-DD>.parquet|.csv` file into `merchant_events`.

Loading a day file:

1. reads its columns (a missing required column fails the file with a message naming it);
2. stages the rows typed against the commission grid (temp table `typed_merchants`; the cost
   follows `merchants.cost`; the feature columns become one JSON object per row);
3. summarizes the problems (unknown commission, bad response / cost / propensity, missing
   merchant_id) — any problem, or an empty file, fails the whole file: nothing is loaded, the
   failure is recorded in `ingest_log` and `IngestError` names the file, column and first row;
4. otherwise replaces exactly that (campaign, day) partition in one transaction (so re-loading
   never duplicates) and records the load in `ingest_log`.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import numpy as np

from promo_assets.config.campaign import CampaignConfig
from promo_assets.ingestion import (
    INTERNAL_COLUMNS,
    IngestError,
    IngestResult,
    _source_columns,
    check_column_names,
    format_problems,
    load_config,
)
from promo_assets.store import ingest as ingest_store

MERCHANT_REQUIRED = ("merchant_id", "treatment", "response")
MERCHANT_COLUMNS = (*MERCHANT_REQUIRED, "cost", "propensity", "event_date", "event_time")


class MerchantConfig:
    """The `merchants:` block of a bipartite campaign.yaml (`CampaignConfig.merchants`, validated by
    its schema: ascending non-negative commission levels, a known cost rule), as arrays.

    Takes the parsed `CampaignConfig` and the campaign.yaml path (kept for messages). Attributes:
    `present` (the block exists), `commissions` (float array of the commission amounts per level,
    None without the block), `cost` ('redeemed' | 'assigned' | 'column'), `normalizer` (merchant
    normalizer name, default 'prev_shares'), `truth` (path of the simulated merchant truth file,
    relative to the campaign folder).
    """

    def __init__(self, config: CampaignConfig, path: Path):
        block = config.merchants
        self.path = Path(path)
        self.present = block is not None
        self.commissions: np.ndarray | None = (
            np.asarray(block.treatments.levels, dtype=float) if block is not None else None)
        self.cost = block.cost if block is not None else "redeemed"
        self.normalizer = block.normalizer if block is not None else "prev_shares"
        self.truth = block.truth if block is not None else "truth/merchant_response.parquet"


def merchant_config(landing_dir: Path, campaign: str) -> tuple[CampaignConfig, MerchantConfig]:
    """(CampaignConfig, MerchantConfig) of `<landing_dir>/<campaign>/campaign.yaml`; raises
    CampaignConfigError for a missing or invalid file or `merchants:` block."""
    landing_dir = Path(landing_dir)
    config = load_config(landing_dir, campaign)
    return config, MerchantConfig(config, landing_dir / campaign / "campaign.yaml")


def _stage_merchants(con: duckdb.DuckDBPyConnection, path: Path, mconf: MerchantConfig) -> dict[str, str]:
    """Stage one merchants/ day file typed against the commission grid (temp table
    typed_merchants); returns its feature columns with their source types, in file order.
    IngestError names a missing column."""
    source = _source_columns(con, path)
    missing = [c for c in MERCHANT_REQUIRED if c not in source]
    if missing:
        raise IngestError(f"{path}: missing required column(s) {', '.join(map(repr, missing))} "
                          f"(required: {', '.join(MERCHANT_REQUIRED)}; found: {', '.join(source) or 'none'})")
    if mconf.cost == "column" and "cost" not in source:
        raise IngestError(f"{path}: missing column 'cost' (campaign.yaml says merchants.cost: column)")
    # features are stored as one JSON object, so only the staging query's own names are reserved
    check_column_names(path, source, landing=MERCHANT_COLUMNS, reserved=frozenset(INTERNAL_COLUMNS))
    features = {c: t for c, t in source.items() if c not in MERCHANT_COLUMNS}
    ingest_store.stage_merchants(con, path, list(features), cost=mconf.cost, commissions=mconf.commissions,
                                 propensity="propensity" in source)
    return features


def _as_date(day: dt.date | str) -> dt.date:
    return day if isinstance(day, dt.date) else dt.date.fromisoformat(str(day))


def clear_merchants_day(con: duckdb.DuckDBPyConnection, campaign: str, day: dt.date | str) -> None:
    """Empty the (campaign, day) partition of merchant_events (a day without a merchants/ file)."""
    ingest_store.clear_merchants(con, campaign, _as_date(day))


def ingest_merchants_day(
    con: duckdb.DuckDBPyConnection, campaign: str, day: dt.date | str, path: Path, mconf: MerchantConfig
) -> IngestResult:
    """Load one `merchants/<day>` file into `merchant_events`, replacing that (campaign, day) partition.

    Takes an open warehouse connection (schema in place), the campaign id, the day, the file and the
    campaign's `MerchantConfig`. Returns an IngestResult (rows_loaded, level_counts {level: rows},
    features {column: source type}; rows_rejected 0). Raises IngestError, with merchant_events
    unchanged, when the campaign has no `merchants:` block, the file is unreadable or lacks a
    column, has no rows, or has any bad row (the message names the file, column, problem, first row
    and an example); except for the missing block, the failure is first recorded in ingest_log.
    """
    path, day = Path(path), _as_date(day)
    if not mconf.present:
        raise IngestError(f"{path}: merchant events found but campaign.yaml of '{campaign}' has no merchants: block "
                          "(merchants.treatments.levels lists the commission amounts)")
    error, features, problems = None, {}, []
    try:
        features = _stage_merchants(con, path, mconf)
    except IngestError as exc:
        error = str(exc)
    except Exception as exc:  # duckdb errors: unreadable file, bad types
        error = f"{path}: cannot be read as merchant events: {str(exc).splitlines()[0]}"
    if error is None:
        problems = [
            {"column": c, "problem": p, "rows": int(k), "first_row": int(r), "example": e}
            for c, p, k, r, e in ingest_store.staged_merchant_problems(con)
        ]
        n = ingest_store.staged_merchant_count(con)
        if problems or n == 0:
            error = (format_problems(path, problems) if problems else f"{path}: the file has no rows") + \
                f"; nothing was loaded for campaign '{campaign}' day {day}"
    if error is not None:
        ingest_store.log_load(con, campaign, day, ingest_store.LoadLog("merchant_events", str(path), 0,
                                                                       sum(p["rows"] for p in problems), "failed", error))
        raise IngestError(error)
    ingest_store.replace_merchants(con, campaign, day, path, n)
    counts = ingest_store.merchant_level_counts(con, campaign, day)
    return IngestResult(campaign, day, str(path), int(n), 0, counts, [], features)
