"""Shared by the model benchmarks: a simulated landing folder read the way the pipeline reads it.

Thin calls to the production code, so the benchmarks exercise the pipeline's path: the landing
files are loaded by `promo_assets.ingestion.frames.load_landing` (the ingestion loaders: typing,
validation, the treatment -> level mapping and the campaign's cost rule, into an in-memory
warehouse) and the training frame is `promo_assets.causal.build_training_frame` (propensity,
split, IPS weights, as the `propensity` and `training_frame` assets compute them).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from promo_assets.config.campaign import CampaignConfig
from promo_assets.causal import build_training_frame
from promo_assets.ingestion.frames import latest_day_file, load_landing


def load_events(campaign_dir: Path) -> tuple[pd.DataFrame, CampaignConfig, list[str], list[str]]:
    """(events, config, numeric, categorical): the campaign's rct_events rows (level, incentive,
    response, cost by the cost rule, propensity, event_date, user_id, features) as ingestion loads them."""
    campaign_dir = Path(campaign_dir)
    loaded = load_landing(campaign_dir.parent, campaign_dir.name, edges=False, merchants=False)
    return loaded.events, loaded.config, loaded.numeric, loaded.categorical


def load_training_frame(campaign_dir: Path) -> tuple[pd.DataFrame, CampaignConfig, list[str], list[str]]:
    """`load_events` plus the columns propensity, split and ips_weight of the training frame."""
    events, config, numeric, categorical = load_events(campaign_dir)
    return build_training_frame(events, config, numeric, categorical), config, numeric, categorical


def load_population(campaign_dir: Path) -> pd.DataFrame:
    """The users to allocate for: the latest population/ file (as the pipeline reads it)."""
    campaign_dir = Path(campaign_dir)
    frame, path = latest_day_file(campaign_dir.parent, campaign_dir.name, "population")
    if frame is None:
        raise FileNotFoundError(f"no population day file under {campaign_dir / 'population'}")
    frame["user_id"] = frame["user_id"].astype(str)
    return frame.drop_duplicates("user_id", keep="last").reset_index(drop=True)


EPOCH_CAPS = ("max_epochs", "bias_max_epochs", "epochs", "warm_max_epochs")


def train_model(name: str, frame: pd.DataFrame, config: CampaignConfig, numeric: list[str], categorical: list[str],
                *, seed: int = 0, max_epochs: int | None = None, weighted: bool = True, log=None, **params):
    """Registered model `name` constructed with `params`, `seed`, IPS weighting `weighted` and (when
    given) `max_epochs` as every epoch cap it has, fitted on `frame`; returns its fitted object
    (`model_`: `predict`, `version`, `metrics`, `history`)."""
    from promo_assets.models import TrainingData, registry

    names = registry.get(name).param_names()
    given = {"seed": seed, **({"ips_weighting": weighted} if "ips_weighting" in names else {})}
    if max_epochs is not None:
        given.update({k: int(max_epochs) for k in EPOCH_CAPS if k in names})
    model = registry.create(name, {**given, **params})
    return model.fit(TrainingData(config, frame, list(numeric), list(categorical)), log=log).model_
