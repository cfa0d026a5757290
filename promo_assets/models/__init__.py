"""Response models: per-user expected response and cost for every incentive level.

Public API (no dagster here; the Dagster definitions in promo_assets.defs call these plain functions):

- `ResponseModel` (the estimator contract: `Model(**params)`, `get_params` / `set_params`,
  `fit(data) -> self`, `fit_phase(data, phase, previous)`, learned state in `model_`, `version_`,
  `metrics_`, `history_`, `predict(users) -> (response N x K, cost N x K)`, `save(root) -> version`,
  `Model.load(version, root)`), `TrainingData` (the training frame with its campaign config),
  `ModelSkipped`, `ModelInputError`.
- `registry`: the one list of models (`registry.names()`, `registry.get(name)` -> the class,
  `registry.create(name, params)` -> an unfitted model, `registry.for_campaign(name, config)` -> the
  model with campaign.yaml's `models.params.<name>`); docs/models.md "Adding a model".
- `FeatureEncoder` — categorical vocabularies with an unknown bucket, numeric standardization.
- `fit_torch_model`, `TrainingConfig`, `FitResult` — the common training loop, with its hooks
  (`training.WeightedLoss`, `MiniBatches` / `FullBatch`, `ValidationLoss` / `Metric` / `SamePass`).
- The torch models' training functions behind the estimators: `train_s_learner(...)` (DNN
  S-learner, 2K heads), `train_dipn_bias(...)` / `train_dipn_uplift(...)` (DIPN's two phases),
  `train_dipn(...)` (both), returning a `TrainedModel` (`load_model(version)` reads one back).
"""

from __future__ import annotations

from promo_assets.models import registry
from promo_assets.models.base import TrainedModel, load_model
from promo_assets.models.dipn import DIPNNet, train_dipn, train_dipn_bias, train_dipn_uplift
from promo_assets.models.encoder import FeatureEncoder
from promo_assets.models.errors import ModelInputError
from promo_assets.models.protocol import ModelSkipped, ResponseModel, TrainingData
from promo_assets.models.s_learner import SLearnerNet, train_s_learner
from promo_assets.models.training import FitResult, TrainingConfig, fit_torch_model

__all__ = [
    "DIPNNet", "FeatureEncoder", "FitResult", "ModelInputError", "ModelSkipped", "ResponseModel",
    "SLearnerNet", "TrainedModel", "TrainingConfig", "TrainingData", "fit_torch_model", "load_model", "registry",
    "train_dipn", "train_dipn_bias", "train_dipn_uplift", "train_s_learner",
]
