"""What a model trains on, read from the warehouse: the campaign's training frame with its feature
columns (`training_data`; the graph of a model that needs it is added by `promo_assets.graph.inputs`).
No dagster here (domain code).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from promo_assets.models.errors import ModelInputError
from promo_assets.models.protocol import TrainingData
from promo_assets.store import frames as frames_store


def training_frame(con, campaign: str) -> tuple[pd.DataFrame, list[str], list[str]]:
    """(training frame, numeric features, categorical features) of `campaign`; ModelInputError when it
    has none yet."""
    numeric, categorical = frames_store.feature_spec(con, campaign)
    frame = frames_store.training_frame(con, campaign, numeric + categorical)
    if frame.empty:
        raise ModelInputError(f"campaign '{campaign}' has no training frame: materialize rct_events and training_frame "
                              "first")
    return frame, numeric, categorical


def training_data(con, landing: Path, campaign: str, config) -> TrainingData:
    """The campaign's training frame as a model's `TrainingData` (without the graph)."""
    frame, numeric, categorical = training_frame(con, campaign)
    return TrainingData(config=config, frame=frame, numeric=numeric, categorical=categorical,
                        frame_version=frames_store.frame_version(con, campaign), campaign_dir=Path(landing) / campaign)
