"""Response models: per-user expected response and cost for every incentive level.

Public API (no dagster here; the orchestration layer calls these plain functions):

- `ResponseModel`, `TrainingData`, `Fitted`, `ModelSkipped` (the protocol) and `registry` (the one
  list of models: `registry.names()`, `registry.get(name)`; docs/models.md "Adding a model").
- `FeatureEncoder` — categorical vocabularies with an unknown bucket, numeric standardization.
- `fit_torch_model`, `TrainingConfig`, `FitResult` — the common training loop, with its hooks
  (`training.WeightedLoss`, `MiniBatches` / `FullBatch`, `ValidationLoss` / `Metric` / `SamePass`).
- `train_model(name, frame, config, numeric, categorical, weighted=True, seed=0, max_epochs=None,
  log=None, **hparams)` — every phase of registered model `name`, in order (library use, benchmarks).
- `train_s_learner(...)` (DNN S-learner, 2K heads), `train_dipn_bias(...)` / `train_dipn_uplift(...)`
  (DIPN's two phases), `train_dipn(...)` (both).
- `TrainedModel.predict(frame) -> (values N x K, costs N x K)`, `.save() -> version`,
  `load_model(version) -> TrainedModel`.
"""

from __future__ import annotations

from typing import Any, Callable

import pandas as pd

from promo_assets.campaign import CampaignConfig
from promo_assets.models import registry
from promo_assets.models.base import TrainedModel, load_model
from promo_assets.models.dipn import DIPNNet, train_dipn, train_dipn_bias, train_dipn_uplift
from promo_assets.models.encoder import FeatureEncoder
from promo_assets.models.errors import ModelInputError
from promo_assets.models.protocol import Fitted, ModelSkipped, ResponseModel, TrainingData
from promo_assets.models.s_learner import SLearnerNet, train_s_learner
from promo_assets.models.training import FitResult, TrainingConfig, fit_torch_model


def train_model(name: str, frame: pd.DataFrame, config: CampaignConfig, numeric: list[str],
                categorical: list[str], weighted: bool = True, seed: int = 0, max_epochs: int | None = None,
                log: Callable[[str], None] | None = None, **hparams: Any) -> Fitted:
    """Fit every phase of registered model `name` on `frame` ('train' rows; early stopping on
    'validation' rows) with IPS weights from its 'ips_weight' column when `weighted`. `max_epochs`
    overrides the model's default (and PROMO_MAX_EPOCHS caps it); `log` gets one line per epoch;
    `hparams` go to the model (DIPN: `bias={...}` for its bias phase). A model that does not apply
    to `config` raises ModelSkipped with the reason."""
    model = registry.get(name)
    reason = model.applies_to(config)
    if reason is not None:
        raise ModelSkipped(f"{name}: {reason}")
    bias = hparams.pop("bias", None)
    data = TrainingData(campaign=config.campaign, frame=frame, numeric=list(numeric), categorical=list(categorical),
                        extra={"weighted": weighted, "hparams": hparams, "bias_hparams": bias or {}})
    fitted = None
    for phase in model.phases:
        fitted = model.fit(data, config, phase=phase, previous=fitted, seed=seed, max_epochs=max_epochs, log=log)
    return fitted


__all__ = [
    "DIPNNet", "FeatureEncoder", "FitResult", "Fitted", "ModelInputError", "ModelSkipped", "ResponseModel",
    "SLearnerNet", "TrainedModel", "TrainingConfig", "TrainingData", "fit_torch_model", "load_model", "registry",
    "train_dipn", "train_dipn_bias", "train_dipn_uplift", "train_model", "train_s_learner",
]
