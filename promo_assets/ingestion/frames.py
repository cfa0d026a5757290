"""The one landing reader: a campaign's landing folder as the frames the pipeline works on.

`load_landing` loads every day file of a campaign with the production loaders (`ingest_events_day`:
typing, validation, the treatment → level mapping and the campaign's cost rule;
`ingest_edges_day`; `merchants.ingest_merchants_day`) into a warehouse connection — by default a
fresh in-memory one — and reads the rows back with the same queries the assets use. Benchmarks,
notebooks and the graph code's `load_bipartite_campaign` read landing folders through it, so they
see exactly what `promo run` sees. `latest_day_file` reads a campaign's latest side file
(`population/`, `merchant_population/`): it is not loaded into the warehouse, the pipeline reads
the latest day's file as it is.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from promo_assets.config.campaign import CampaignConfig
from promo_assets.ingestion import (
    IngestError,
    check_landing_file,
    day_files,
    ingest_edges_day,
    ingest_events_day,
    load_config,
    loaded_features,
    merchants as ingest_merchants,
    read_problem,
)
from promo_assets.store import frames as frames_store, graph as graph_store, ingest as ingest_store
from promo_assets.store.warehouse import ensure_schema


@dataclass
class LandingFrames:
    """A campaign's landing files as loaded by the pipeline.

    `events`: the rct_events rows (event_date, source_row, user_id, level, incentive, response,
    cost by the campaign's cost rule, propensity (NULL when not logged), then the feature columns);
    `numeric` / `categorical`: the feature columns by kind; `edges`: payment edges (user_id,
    merchant_id, n_payments) or None; `merchant_events`: merchant RCT rows (event_date, source_row,
    merchant_id, level, incentive, response, cost, propensity, features as JSON) or None;
    `rejected`: rows refused at loading, per file (the count)."""

    config: CampaignConfig
    events: pd.DataFrame
    numeric: list[str]
    categorical: list[str]
    edges: pd.DataFrame | None = None
    merchant_events: pd.DataFrame | None = None
    rejected: dict[str, int] = field(default_factory=dict)


def load_landing(landing: Path, campaign: str, con: duckdb.DuckDBPyConnection | None = None, *,
                 edges: bool = True, merchants: bool = True) -> LandingFrames:
    """Load every day file of `<landing>/<campaign>/` (events; with `edges` / `merchants`, the
    edges/ and merchants/ files too) with the pipeline's loaders into `con` (default: an in-memory
    warehouse, discarded afterwards) and return the loaded rows. Raises IngestError naming the file
    for a file the pipeline refuses, and when the campaign has no events day file."""
    landing = Path(landing)
    config = load_config(landing, campaign)
    with contextlib.ExitStack() as stack:
        if con is None:
            con = stack.enter_context(contextlib.closing(duckdb.connect(":memory:")))
            ensure_schema(con)
        files = day_files(landing, campaign, "events")
        if not files:
            raise IngestError(f"{landing / campaign / 'events'}: no events day files (YYYY-MM-DD.parquet|csv)")
        rejected = {}
        for day, path in sorted(files.items()):
            rejected[str(path)] = ingest_events_day(con, config, day, path).rows_rejected
        kinds = loaded_features(con, campaign)
        numeric = [f for f, k in kinds.items() if k == "numeric"]
        categorical = [f for f, k in kinds.items() if k == "categorical"]
        events = frames_store.events(con, campaign, numeric + categorical)
        out = LandingFrames(config, events, numeric, categorical, rejected=rejected)
        if edges and (edge_files := day_files(landing, campaign, "edges")):
            for day, path in sorted(edge_files.items()):
                ingest_edges_day(con, campaign, day, path)
            out.edges = graph_store.campaign_edges(con, campaign)
        if merchants and (merchant_files := day_files(landing, campaign, "merchants")):
            _, mconf = ingest_merchants.merchant_config(landing, campaign)
            for day, path in sorted(merchant_files.items()):
                ingest_merchants.ingest_merchants_day(con, campaign, day, path, mconf)
            out.merchant_events = graph_store.campaign_merchant_events(con, campaign)
    return out


def read_day_file(path: Path) -> pd.DataFrame:
    """One landing day file (.parquet or .csv) as a DataFrame, for the side files the pipeline does
    not load into the warehouse (population/, merchant_population/)."""
    path = check_landing_file(Path(path))
    try:
        return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path, encoding="utf-8")
    except Exception as exc:  # pyarrow / pandas parser errors
        raise IngestError(read_problem(path, ingest_store.file_format(path), exc)) from None


def latest_day_file(landing: Path, campaign: str, kind: str) -> tuple[pd.DataFrame | None, str | None]:
    """(frame, path) of the latest `<landing>/<campaign>/<kind>/<day>.parquet|csv`, or (None, None)."""
    files: dict[dt.date, Path] = day_files(Path(landing), campaign, kind)
    if not files:
        return None, None
    path = files[max(files)]
    return read_day_file(path), str(path)


class PopulationFile:
    """A population/ file read through DuckDB in chunks, never whole in memory (scoring streams it):
    one row per user (the user's last row in file order, as a user listed again is updated), user_id
    as text (sql/frames.sql `population_parquet` / `population_csv`; DuckDB holds only each user's last
    row number, not the rows; the users' order is DuckDB's scan order). `absent`: the `features` the
    file lacks, added to every chunk as NULL (NaN). `n_users`: distinct users."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path, features: Sequence[str] = ()):
        self._con, self.path = con, check_landing_file(Path(path))
        self._fmt = ingest_store.file_format(self.path)
        try:
            columns = [name for name, _ in ingest_store.describe_file(con, self.path)]
            if "user_id" not in columns:
                raise IngestError(f"{self.path}: missing required column 'user_id'")
            n_users, no_id = ingest_store.population_count(con, self.path)
        except duckdb.Error as exc:
            raise IngestError(read_problem(self.path, self._fmt, exc)) from None
        if no_id:
            raise IngestError(f"{self.path}: {no_id} row(s) without a user_id")
        if not n_users:  # scoring it would leave budget_dual nothing to solve
            raise IngestError(f"{self.path}: the population file has no users (no rows); write the users to decide "
                              "for into it, or remove it (then the holdout users are scored)")
        self.n_users = int(n_users)
        self.absent = [c for c in features if c not in columns]

    def frames(self, rows: int) -> Iterator[pd.DataFrame]:
        """DataFrames of at most `rows` users: one streamed query on a cursor of its own."""
        cur = self._con.cursor()
        try:
            reader = ingest_store.population_batches(cur, self.path, rows)
            for batch in reader:
                if batch.num_rows:
                    frame = batch.to_pandas()
                    yield frame.assign(**{c: np.nan for c in self.absent}) if self.absent else frame
        finally:
            cur.close()


@dataclass
class FrameUsers:
    """Users already in memory (the holdout users) with the interface of `PopulationFile`."""

    frame: pd.DataFrame
    absent: list = field(default_factory=list)

    @property
    def n_users(self) -> int:
        return len(self.frame)

    def frames(self, rows: int) -> Iterator[pd.DataFrame]:
        rows = max(1, int(rows))
        for start in range(0, len(self.frame), rows):
            yield self.frame.iloc[start:start + rows]
