"""Frames the graph tables of the warehouse are built from and read back into: features as JSON
text per node, node tables merged from several feature sources, the node statistics stored with
them, the latest population files and the simulated truth files of a bipartite campaign.

Plain pandas; the Dagster definitions (promo_assets.defs) do the wiring, promo_assets.store the SQL.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd

from promo_assets.ingestion import check_landing_file
from promo_assets.ingestion.frames import latest_day_file


def features_json(frame: pd.DataFrame, id_col: str) -> list[str]:
    """One JSON object per row holding the row's feature columns (every column but `id_col`);
    '{}' per row when there are none."""
    cols = [c for c in frame.columns if c != id_col]
    if not cols or frame.empty:
        return ["{}"] * len(frame)
    return frame[cols].to_json(orient="records", lines=True, date_format="iso", double_precision=15).splitlines()


def features_frame(ids: pd.Series, features: pd.Series, id_col: str) -> pd.DataFrame:
    """Inverse of `features_json`: the ids (as strings) in column `id_col` + one column per feature."""
    parsed = pd.read_json(io.StringIO("\n".join(features)), lines=True, dtype=False, convert_dates=False) \
        if len(features) else pd.DataFrame()
    parsed.index = range(len(ids))
    return pd.concat([pd.DataFrame({id_col: ids.astype(str).to_numpy()}), parsed], axis=1)


def node_table(ids: np.ndarray, id_col: str, *sources: pd.DataFrame | None) -> pd.DataFrame:
    """One row per id (in the order of `ids`) with the features of the first source that knows it
    (later sources fill the gaps; None or empty sources are skipped; the last row per id counts)."""
    table = pd.DataFrame({id_col: ids}).set_index(id_col)
    for src in sources:
        if src is not None and not src.empty:
            src = src.assign(**{id_col: src[id_col].astype(str)}).drop_duplicates(id_col, keep="last").set_index(id_col)
            table = table.combine_first(src) if len(table.columns) else table.join(src, how="left")
    return table.reindex(ids).reset_index()


def node_stats(table: pd.DataFrame, id_col: str, edges: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """The stored row of each node of `table`: id, degree and n_payments (from the aggregated
    `edges`: id_col, n_payments), n_events (rows of `events` per id, or its `n_events` column when it
    has one) and its features as JSON (`features_json` of `table`)."""
    by = edges.groupby(id_col).agg(degree=("n_payments", "size"), n_payments=("n_payments", "sum"))
    counts = events.groupby(id_col).size() if "n_events" not in events else events.set_index(id_col)["n_events"]
    return pd.DataFrame({
        id_col: table[id_col],
        "degree": by["degree"].reindex(table[id_col]).fillna(0).astype(np.int64).to_numpy(),
        "n_payments": by["n_payments"].reindex(table[id_col]).fillna(0.0).to_numpy(),
        "n_events": counts.reindex(table[id_col]).fillna(0).astype(np.int64).to_numpy(),
        "features": features_json(table, id_col),
    })


def latest_landing_file(landing_dir: Path, campaign: str, kind: str) -> tuple[pd.DataFrame | None, str | None]:
    """(frame, path) of the latest `<landing_dir>/<campaign>/<kind>/<day>.parquet|csv`, or (None, None)
    (the one landing reader's `latest_day_file`)."""
    return latest_day_file(landing_dir, campaign, kind)


def read_truth(landing_dir: Path, campaign: str, merchant_truth: str) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """(customer truth, merchant truth) frames of a simulated campaign: truth/response.parquet and
    `merchant_truth` (relative to the campaign folder); None for a file that does not exist."""
    folder = Path(landing_dir) / campaign
    c_path, m_path = folder / "truth" / "response.parquet", folder / merchant_truth
    c = pd.read_parquet(check_landing_file(c_path, folder)) if c_path.exists() or c_path.is_symlink() else None
    m = pd.read_parquet(check_landing_file(m_path, folder)) if m_path.exists() or m_path.is_symlink() else None
    return c, m
