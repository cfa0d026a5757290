"""Shared by the model benchmarks: read a simulated landing folder into a training frame.

The frame has the warehouse's `rct_events` shape (level, incentive, response, cost, propensity,
event_date, user_id, features) so the benchmarks exercise the same code path as the pipeline. This
is a small pandas reader for simulated campaigns only, not the project's ingestion.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from promo_assets.campaign import CampaignConfig

RESERVED = {"user_id", "treatment", "response", "cost", "propensity", "merchant_id", "event_time"}


def read_days(folder: Path) -> pd.DataFrame:
    parts = []
    for path in sorted(folder.glob("*.parquet")):
        df = pd.read_parquet(path)
        df["event_date"] = pd.Timestamp(path.stem)
        parts.append(df)
    if not parts:
        raise FileNotFoundError(f"no parquet files under {folder}")
    return pd.concat(parts, ignore_index=True)


def feature_spec(frame: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(numeric, categorical) feature columns: every non-reserved column, numeric by dtype."""
    numeric, categorical = [], []
    for col in frame.columns:
        if col in RESERVED or col == "event_date":
            continue
        s = frame[col]
        if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
            numeric.append(col)
        else:
            categorical.append(col)
    return numeric, categorical


def load_events(campaign_dir: Path) -> tuple[pd.DataFrame, CampaignConfig, list[str], list[str]]:
    """Events of a landing campaign as a frame with level / incentive / cost per the cost rule."""
    config = CampaignConfig.load(campaign_dir)
    events = read_days(campaign_dir / "events")
    lookup = {t: config.level_of(t) for t in events["treatment"].unique()}
    level = events["treatment"].map(lambda t: -1 if lookup[t] is None else lookup[t]).to_numpy(dtype=np.int64)
    if (level < 0).any():
        raise ValueError(f"{campaign_dir}: unknown treatments {sorted(set(events['treatment'][level < 0]))[:5]}")
    numeric, categorical = feature_spec(events)
    events["level"] = level
    events["incentive"] = np.asarray(config.incentives)[level]
    if config.cost == "redeemed":
        events["cost"] = events["incentive"] * events["response"]
    elif config.cost == "assigned":
        events["cost"] = events["incentive"]
    return events, config, numeric, categorical


def load_population(campaign_dir: Path) -> pd.DataFrame:
    return read_days(campaign_dir / "population").drop(columns=["event_date"]).drop_duplicates("user_id", keep="last")

