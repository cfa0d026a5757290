"""Response models: per-user expected response and cost for every incentive level.

Public API (no dagster here; the orchestration layer calls these plain functions):

- `FeatureEncoder` — categorical vocabularies with an unknown bucket, numeric standardization.
- `fit_torch_model`, `TrainingConfig`, `FitResult` — the common training loop.
- `train_model(name, frame, config, numeric, categorical, weighted=True, seed=0, max_epochs=None,
  log=None, **hparams) -> TrainedModel` for name in `MODEL_NAMES`.
- `train_s_learner(...)` (DNN S-learner, 2K heads), `train_dipn_bias(...)` / `train_dipn_uplift(...)`
  (DIPN's two phases), `train_dipn(...)` (both).
- `TrainedModel.predict(frame) -> (values N x K, costs N x K)`, `.save() -> version`,
  `load_model(version) -> TrainedModel`.
"""

from __future__ import annotations

from typing import Any, Callable

import pandas as pd

from promo_assets.campaign import CampaignConfig
from promo_assets.models.base import TrainedModel, load_model
from promo_assets.models.dipn import DIPNNet, train_dipn, train_dipn_bias, train_dipn_uplift
from promo_assets.models.encoder import FeatureEncoder
from promo_assets.models.errors import ModelInputError
from promo_assets.models.s_learner import SLearnerNet, train_s_learner
from promo_assets.models.training import FitResult, TrainingConfig, fit_torch_model

TRAINERS: dict[str, Callable[..., TrainedModel]] = {
    "s_learner": train_s_learner,
    "dipn": train_dipn,
}
MODEL_NAMES = tuple(TRAINERS)


def train_model(name: str, frame: pd.DataFrame, config: CampaignConfig, numeric: list[str],
                categorical: list[str], weighted: bool = True, seed: int = 0, max_epochs: int | None = None,
                log: Callable[[str], None] | None = None, **hparams: Any) -> TrainedModel:
    """Train response model `name` (one of MODEL_NAMES) on `frame` ('train' rows; early stopping on
    'validation' rows) with IPS weights from its 'ips_weight' column when `weighted`. `max_epochs`
    overrides the model's default (and PROMO_MAX_EPOCHS caps it); `log` gets one line per epoch."""
    if name not in TRAINERS:
        raise ModelInputError(f"unknown model {name!r}; known models: {list(MODEL_NAMES)}")
    return TRAINERS[name](frame, config, list(numeric), list(categorical), weighted=weighted, seed=seed,
                          max_epochs=max_epochs, log=log, **hparams)


__all__ = [
    "DIPNNet", "FeatureEncoder", "FitResult", "MODEL_NAMES", "ModelInputError", "SLearnerNet", "TRAINERS",
    "TrainedModel", "TrainingConfig", "fit_torch_model", "load_model", "train_dipn", "train_dipn_bias",
    "train_dipn_uplift", "train_model", "train_s_learner",
]
