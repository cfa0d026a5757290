"""Read a bipartite campaign straight from its landing folder (simulator output or a real export).

The orchestration layer reads the same files through the warehouse; this reader is for benchmarks,
tests and notebooks, and returns the frames the training API takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml


class BipartiteLandingError(ValueError):
    """A bipartite campaign folder that lacks a file or a column."""


@dataclass
class BipartiteCampaign:
    """Frames of one bipartite campaign.

    customer_events: user_id, level, incentive, response, cost, propensity, merchant_id, features,
    event_date; merchant_events: merchant_id, level, incentive, response, cost, propensity,
    prev_shares, features, event_date; edges: the daily payment edges; customers / merchants: node
    tables (id + features); truth frames are None when the campaign is not simulated.
    """

    incentives: np.ndarray
    commissions: np.ndarray
    customer_events: pd.DataFrame
    merchant_events: pd.DataFrame
    edges: pd.DataFrame
    customers: pd.DataFrame
    merchants: pd.DataFrame
    customer_truth: pd.DataFrame | None
    merchant_truth: pd.DataFrame | None
    config: dict


def _read_days(folder: Path) -> pd.DataFrame:
    files = sorted(folder.glob("*.parquet"))
    if not files:
        raise BipartiteLandingError(f"{folder}: no parquet files")
    frames = []
    for f in files:
        frame = pd.read_parquet(f)
        frame["event_date"] = pd.Timestamp(f.stem).date() if "event_date" not in frame.columns else frame["event_date"]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _levels(frame: pd.DataFrame, amounts: np.ndarray, what: str) -> pd.DataFrame:
    treatment = pd.to_numeric(frame["treatment"], errors="coerce").to_numpy(dtype=float)
    level = np.searchsorted(amounts, treatment)
    ok = (level < amounts.size) & np.isclose(amounts[np.minimum(level, amounts.size - 1)], treatment)
    if not ok.all():
        raise BipartiteLandingError(f"{what}: {int((~ok).sum())} row(s) with a treatment not in {amounts.tolist()}")
    frame = frame.rename(columns={"treatment": "incentive"})
    frame.insert(1, "level", level.astype(np.int64))
    return frame


def load_bipartite_campaign(campaign_dir: Path) -> BipartiteCampaign:
    """Read campaign.yaml, events/, merchants/, edges/, the latest population files and truth/."""
    campaign_dir = Path(campaign_dir)
    cfg_path = campaign_dir / "campaign.yaml"
    if not cfg_path.exists():
        raise BipartiteLandingError(f"{cfg_path} not found")
    cfg = yaml.safe_load(cfg_path.read_text()) or {}
    try:
        incentives = np.asarray(cfg["treatments"]["levels"], dtype=float)
        commissions = np.asarray(cfg["merchants"]["treatments"]["levels"], dtype=float)
    except (KeyError, TypeError):
        raise BipartiteLandingError(
            f"{cfg_path}: needs treatments.levels and a merchants: block with treatments.levels"
        ) from None
    customer_events = _levels(_read_days(campaign_dir / "events"), incentives, "events")
    merchant_events = _levels(_read_days(campaign_dir / "merchants"), commissions, "merchants")
    edges = _read_days(campaign_dir / "edges")

    def latest(sub: str) -> pd.DataFrame:
        files = sorted((campaign_dir / sub).glob("*.parquet"))
        if not files:
            raise BipartiteLandingError(f"{campaign_dir / sub}: no parquet files")
        return pd.read_parquet(files[-1])

    truth_dir = campaign_dir / "truth"
    c_truth = pd.read_parquet(truth_dir / "response.parquet") if (truth_dir / "response.parquet").exists() else None
    m_path = truth_dir / "merchant_response.parquet"
    m_truth = pd.read_parquet(m_path) if m_path.exists() else None
    return BipartiteCampaign(
        incentives=incentives,
        commissions=commissions,
        customer_events=customer_events,
        merchant_events=merchant_events,
        edges=edges,
        customers=latest("population"),
        merchants=latest("merchant_population"),
        customer_truth=c_truth,
        merchant_truth=m_truth,
        config=cfg,
    )
