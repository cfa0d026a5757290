"""Registry entry `logistic_s`: a regularized logistic S-learner from scikit-learn.

One L2-penalized logistic regression (`sklearn.linear_model.LogisticRegression`, lbfgs) on the
'train' rows, IPS-weighted, over the user features, the level (one-hot) and each feature x level
(so the uplift may differ per user). Features through the project's `FeatureEncoder` (numeric
standardized with missing indicators, categorical one-hot with the unknown bucket). Binary responses
only; costs by the campaign's rule ('redeemed' or 'assigned'). The artefact is data: the
coefficients, the encoder state and what prediction needs of the campaign config, stored in the
content-addressed store (kind 'model'). scikit-learn is imported inside `_fit_phase` only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from promo_assets.store import artifacts
from promo_assets.config.campaign import CampaignConfig
from promo_assets.core.coefficients import Coefficients
from promo_assets.models.base import TIMING_KEYS, check_frame, rule_costs
from promo_assets.models.encoder import FeatureEncoder
from promo_assets.models.errors import ModelInputError
from promo_assets.models.protocol import COUNT, FLAG, POSITIVE, SEED, ResponseModel, TrainingData

FORMAT = "promo_assets.logistic_s/1"


def _design(encoder: FeatureEncoder, users: pd.DataFrame, level: int, k: int) -> np.ndarray:
    """[features, one-hot level, features x one-hot level] of `users` at level `level`."""
    x_num, x_cat = encoder.transform(users)
    cats = [np.eye(card)[x_cat[:, j]] for j, card in enumerate(encoder.cardinalities)]
    base = np.hstack([x_num.astype(np.float64), *cats]) if cats else x_num.astype(np.float64)
    onehot = np.zeros((len(users), k))
    onehot[:, level] = 1.0
    return np.hstack([base, onehot, (base[:, :, None] * onehot[:, None, :]).reshape(len(users), -1)])


class LogisticFitted:
    """The fitted regression: `predict(users) -> (response, cost)`, `save(root) -> version`, `version`."""

    def __init__(self, name: str, config: CampaignConfig, encoder: FeatureEncoder, coef: np.ndarray,
                 intercept: float, metrics: dict[str, Any], estimator: dict | None = None):
        self.name, self.config, self.encoder = name, config, encoder
        self.coef, self.intercept = np.asarray(coef, dtype=np.float64), float(intercept)
        self.metrics, self.history, self.estimator = dict(metrics), [], estimator

    def predict(self, users: pd.DataFrame) -> Coefficients:
        k = self.config.n_levels
        logits = np.column_stack([_design(self.encoder, users, j, k) @ self.coef + self.intercept for j in range(k)])
        response = 1.0 / (1.0 + np.exp(-logits))
        return Coefficients(response, rule_costs(self.config, response, lambda: None))

    def payload(self) -> dict[str, Any]:
        c = self.config
        return {"format": FORMAT, "name": self.name, "encoder": self.encoder.to_state(), "coef": self.coef,
                "intercept": self.intercept, "estimator": self.estimator,
                "metrics": {k: v for k, v in self.metrics.items() if k not in TIMING_KEYS},
                "config": {"campaign": c.campaign, "incentives": list(c.incentives), "labels": list(c.labels),
                           "ordered": c.ordered, "cost": c.cost, "response": c.response}}

    @property
    def version(self) -> str:
        """Content hash of the artefact (what `save` stores it under)."""
        return artifacts.content_version(artifacts.to_bytes(self.payload()))

    def save(self, root=None) -> str:
        version, _ = artifacts.save_object(self.payload(), "model", root)
        return version

    @classmethod
    def load(cls, version: str, root=None) -> "LogisticFitted":
        try:
            p = artifacts.load_object("model", version, root)
        except artifacts.ArtifactFormatError as exc:
            raise ModelInputError(str(exc)) from None
        if not isinstance(p, dict) or p.get("format") != FORMAT:
            raise ModelInputError(f"model artefact {version!r} is not a logistic_s artefact")
        c = p["config"]
        config = CampaignConfig.from_record(c)
        return cls(p["name"], config, FeatureEncoder.from_state(p["encoder"]), p["coef"], p["intercept"],
                   p["metrics"], p["estimator"])


@dataclass(frozen=True)
class LogisticParams:
    """logistic_s's hyper-parameters (campaign.yaml `models.params.logistic_s`)."""

    C: float = 1.0
    max_iter: int = 200
    seed: int = 0
    ips_weighting: bool = True


class LogisticSLearner(ResponseModel):
    """Hyper-parameters: `C` (inverse L2 strength), `max_iter` (lbfgs iterations), `seed`,
    `ips_weighting` (the IPS weights as sample weights)."""

    name = "logistic_s"
    title = "Regularized logistic S-learner (scikit-learn): features, level and feature x level, L2 penalty"
    source = "baseline"
    kinds = frozenset({"sklearn"})
    applies = "binary responses with cost rule `redeemed` or `assigned`"
    default = False
    rules = {"C": POSITIVE, "max_iter": COUNT, "seed": SEED, "ips_weighting": FLAG}

    Params = LogisticParams

    @classmethod
    def applies_to(cls, config: CampaignConfig) -> str | None:
        if config.response != "binary":
            return f"needs a binary response (campaign.yaml response: {config.response})"
        if config.cost == "column":
            return "needs cost rule 'redeemed' or 'assigned' (it has no cost model for cost: column)"
        return None

    def _fit_phase(self, data: TrainingData, phase: str, previous, log) -> LogisticFitted:
        from sklearn.linear_model import LogisticRegression

        check_frame(data.frame, data.config, weighted=self.params.ips_weighting)
        train = data.frame[data.frame["split"].astype(str) == "train"]
        if train.empty or train["response"].nunique() < 2:
            raise ModelInputError(f"logistic_s: campaign {data.campaign!r} needs 'train' rows with both responses")
        t0 = time.perf_counter()
        encoder = FeatureEncoder(list(data.numeric), list(data.categorical)).fit(train)
        k, levels = data.config.n_levels, train["level"].to_numpy(dtype=np.int64)
        x = np.vstack([_design(encoder, train[levels == j], j, k) for j in range(k)])
        order = np.concatenate([np.flatnonzero(levels == j) for j in range(k)])
        y = train["response"].to_numpy(dtype=np.float64)[order]
        w = train["ips_weight"].to_numpy(dtype=np.float64)[order] if self.params.ips_weighting else None
        reg = LogisticRegression(C=self.params.C, max_iter=self.params.max_iter, random_state=self.params.seed).fit(x, y, sample_weight=w)
        metrics = {"n_train": int(len(train)), "n_features": int(x.shape[1]), "iterations": int(reg.n_iter_[0]),
                   "train_seconds": time.perf_counter() - t0}
        if log:
            log(f"logistic_s: {len(train)} training rows, {x.shape[1]} features, {metrics['iterations']} iterations")
        return LogisticFitted(self.name, data.config, encoder, reg.coef_[0], reg.intercept_[0], metrics)

    @classmethod
    def _load(cls, version: str, root=None) -> LogisticFitted:
        return LogisticFitted.load(version, root)
