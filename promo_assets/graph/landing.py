"""Read a bipartite campaign from its landing folder (simulator output or a real export).

Through the one landing reader, `promo_assets.ingestion.frames.load_landing`: the events, edges and
merchants day files are loaded by the pipeline's own loaders (validation, level mapping, cost
rules) and read back with the assets' queries; the latest population files and the simulated truth
files are read as the graph assets read them (`warehouse_io`). Returns the frames the training API
takes, for benchmarks, tests and notebooks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from promo_assets.config.campaign import read_campaign_yaml
from promo_assets.core.errors import DomainError
from promo_assets.graph.warehouse_io import features_frame, latest_landing_file, read_truth
from promo_assets.ingestion.frames import load_landing
from promo_assets.ingestion.merchants import merchant_config


class BipartiteLandingError(DomainError, ValueError):
    """A bipartite campaign folder that lacks a file or a column."""


@dataclass
class BipartiteCampaign:
    """Frames of one bipartite campaign.

    customer_events: the rct_events rows (event_date, source_row, user_id, level, incentive,
    response, cost, propensity, features); merchant_events: the merchant_events rows (event_date,
    source_row, merchant_id, level, incentive, response, cost, propensity, then the features, e.g.
    prev_shares); edges: the daily payment edges (user_id, merchant_id, n_payments); customers /
    merchants: node tables (id + features) from the latest population / merchant_population files;
    truth frames are None when the campaign is not simulated.
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


def load_bipartite_campaign(campaign_dir: Path) -> BipartiteCampaign:
    """Load events/, edges/, merchants/ (the pipeline's loaders), the latest population files and truth/."""
    campaign_dir = Path(campaign_dir)
    landing, campaign = campaign_dir.parent, campaign_dir.name
    cfg_path = campaign_dir / "campaign.yaml"
    if not cfg_path.exists():
        raise BipartiteLandingError(f"{cfg_path} not found")
    config, mconf = merchant_config(landing, campaign)
    if not mconf.present:
        raise BipartiteLandingError(f"{cfg_path}: needs a merchants: block with treatments.levels")
    loaded = load_landing(landing, campaign)
    if loaded.edges is None or loaded.merchant_events is None:
        missing = "edges/" if loaded.edges is None else "merchants/"
        raise BipartiteLandingError(f"{campaign_dir / missing}: no day files (a bipartite campaign needs them)")
    m = loaded.merchant_events
    merchant_events = pd.concat(
        [m.drop(columns=["features"]), features_frame(m["merchant_id"], m["features"], "merchant_id").drop(columns="merchant_id")],
        axis=1,
    )
    customers, _ = latest_landing_file(landing, campaign, "population")
    merchants, _ = latest_landing_file(landing, campaign, "merchant_population")
    if customers is None or merchants is None:
        missing = "population" if customers is None else "merchant_population"
        raise BipartiteLandingError(f"{campaign_dir / missing}: no day files")
    c_truth, m_truth = read_truth(landing, campaign, mconf.truth)
    return BipartiteCampaign(
        incentives=np.asarray(config.incentives, dtype=float),
        commissions=np.asarray(mconf.commissions, dtype=float),
        customer_events=loaded.events,
        merchant_events=merchant_events,
        edges=loaded.edges,
        customers=customers,
        merchants=merchants,
        customer_truth=c_truth,
        merchant_truth=m_truth,
        config=read_campaign_yaml(cfg_path) or {},
    )
