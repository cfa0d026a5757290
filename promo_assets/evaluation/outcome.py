"""The direct-method outcome model of the doubly robust EOM: E[response | x, level] and E[cost | x, level].

Fitted on the TRAINING days only (the `train` and `validation` splits; never the holdout the
policies are evaluated on), then asked for every holdout event x level (N x K).

Two kinds:
- "gbm" (default): scikit-learn's HistGradientBoostingRegressor on the user features plus the level
  (a numeric feature for ordered levels, a categorical one for unordered arms). Why: it handles mixed
  numeric / categorical features and missing values natively, learns the level x feature
  interactions that make responses differ between users without tuning, trains in seconds on
  ~100k rows on one core, and is already a dependency. The better it predicts each user's response,
  the smaller the DR residuals and so the narrower the interval (K = 100: only ~1 % of the holdout
  events match a policy's level, IPW alone sees only them).
- "level_means": the mean response and cost of each level on the training days (no features):
  removes only the between-level variance; for tests, and used instead of "gbm" when there are
  fewer than 200 training events.
Under `cost: redeemed` (cost = incentive x response) the cost model is incentive_k x the response
model, under `cost: assigned` the incentive itself, exactly as the campaign defines cost; with
`cost: column` a second regressor is fitted on the events' cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from promo_assets.core.coefficients import Coefficients
from promo_assets.evaluation.curve_metrics import LevelScale
from promo_assets.evaluation.eom import EvaluationError

__all__ = ["OutcomeModel", "OutcomeFit", "fit_outcome_model", "OUTCOME_MODEL_KINDS"]

OUTCOME_MODEL_KINDS = ("gbm", "level_means")
MIN_GBM_ROWS = 200  # fewer training events: "level_means" instead of "gbm"
_PREDICT_ROWS = 500_000  # rows (users x levels) per prediction block


@dataclass
class OutcomeModel:
    """A fitted outcome model; `predict(features)` -> (values N x K, costs N x K)."""

    kind: str
    n_levels: int
    ordered: bool
    numeric: list[str]
    categorical: list[str]
    incentives: np.ndarray | None  # with cost_rule redeemed / assigned: cost derived; None: cost fitted
    cost_rule: str = "redeemed"
    level_means: np.ndarray | None = None  # K x 2 (response, cost) for kind="level_means"
    categories: dict[str, list] = field(default_factory=dict)
    response_model: object = None
    cost_model: object = None
    n_train: int = 0

    def _matrix(self, features: pd.DataFrame) -> np.ndarray:
        cols = []
        for f in self.numeric:
            cols.append(pd.to_numeric(features[f], errors="coerce").to_numpy(dtype=np.float64))
        for f in self.categorical:
            codes = pd.Categorical(features[f].astype("string"), categories=self.categories[f]).codes
            cols.append(np.where(codes < 0, np.nan, codes).astype(np.float64))
        return np.column_stack(cols) if cols else np.empty((len(features), 0))

    def _costs(self, values: np.ndarray, fitted: np.ndarray | None) -> np.ndarray:
        """The cost per user x level: derived from the campaign's cost rule, else the fitted one."""
        if self.incentives is None:
            return np.maximum(fitted, 0.0)
        if self.cost_rule == "redeemed":
            return values * self.incentives[None, :]
        return np.tile(self.incentives, (values.shape[0], 1))

    def predict(self, features: pd.DataFrame) -> Coefficients:
        """Expected response and cost of every row of `features` at every level (N x K each), as
        Coefficients(response, cost)."""
        n, k = len(features), self.n_levels
        if self.kind == "level_means":
            m = self.level_means
            return Coefficients(np.tile(m[:, 0], (n, 1)), self._costs(np.tile(m[:, 0], (n, 1)), np.tile(m[:, 1], (n, 1))))
        missing = [c for c in self.numeric + self.categorical if c not in features.columns]
        if missing:
            raise EvaluationError(f"outcome model: feature columns missing from the holdout rows: {missing}")
        x = self._matrix(features)
        values = np.empty((n, k))
        costs = np.empty((n, k)) if self.cost_model is not None else None
        step = max(1, _PREDICT_ROWS // k)
        levels = np.arange(k, dtype=np.float64)
        for s in range(0, n, step):
            xs = x[s:s + step]
            rep = np.column_stack([np.repeat(xs, k, axis=0), np.tile(levels, xs.shape[0])])
            values[s:s + step] = self.response_model.predict(rep).reshape(-1, k)
            if costs is not None:
                costs[s:s + step] = self.cost_model.predict(rep).reshape(-1, k)
        return Coefficients(values, self._costs(values, costs))


@dataclass(frozen=True)
class OutcomeFit:
    """How the outcome model is fitted: its `kind` ("gbm" or "level_means"), the `seed` and the cap on
    boosting iterations `max_iter` (early stopping on a 10 % split of the rows)."""

    kind: str = "gbm"
    seed: int = 0
    max_iter: int = 300


def fit_outcome_model(frame: pd.DataFrame, numeric: Sequence[str], categorical: Sequence[str], n_levels: int, *,
                      scale: LevelScale = LevelScale(), cost_rule: str = "redeemed",
                      fit: OutcomeFit = OutcomeFit()) -> OutcomeModel:
    """Fit the outcome model on training-day events.

    Takes the training rows (columns `level`, `response`, `cost` and the feature columns; pass
    only the training days, never the holdout), the numeric and categorical feature names, K, the
    levels' `scale` (whether they are ordered, the incentive per level) with the campaign's cost rule
    ("redeemed": cost = incentive x response, derived from the response model), and how to `fit` it
    (`OutcomeFit`: the kind, a seed, the cap on boosting iterations). Raises EvaluationError naming
    the problem for an empty frame, a missing column, a level outside 0..K-1 or a non-finite response
    or cost.
    """
    kind, seed, max_iter = fit.kind, fit.seed, fit.max_iter
    ordered, incentives = scale.ordered, scale.incentives
    if kind not in OUTCOME_MODEL_KINDS:
        raise EvaluationError(f"unknown outcome model kind {kind!r}; expected one of {list(OUTCOME_MODEL_KINDS)}")
    if len(frame) == 0:
        raise EvaluationError("the outcome model needs training-day events; there are none "
                              "(every day is in the holdout?)")
    numeric, categorical = list(numeric), list(categorical)
    missing = [c for c in ["level", "response", "cost", *numeric, *categorical] if c not in frame.columns]
    if missing:
        raise EvaluationError(f"outcome model: training rows lack the column(s) {missing}")
    level = frame["level"].to_numpy()
    if level.min() < 0 or level.max() >= n_levels:
        raise EvaluationError(f"outcome model: training rows have level {int(level.max())} outside 0..{n_levels - 1}")
    y = frame["response"].to_numpy(dtype=np.float64)
    z = frame["cost"].to_numpy(dtype=np.float64)
    for name, a in (("response", y), ("cost", z)):
        if not np.all(np.isfinite(a)):
            raise EvaluationError(f"outcome model: column '{name}' of the training rows has NaN or infinite values")
    inc = None
    if cost_rule in ("redeemed", "assigned") and incentives is not None:
        inc = np.asarray(incentives, dtype=np.float64)
        if inc.shape != (n_levels,):
            raise EvaluationError(f"incentives has {inc.size} entries, expected one per level ({n_levels})")
    if kind == "gbm" and len(frame) < MIN_GBM_ROWS:
        kind = "level_means"  # too few rows to learn feature effects
    model = OutcomeModel(kind, int(n_levels), bool(ordered), numeric, categorical, inc, cost_rule, n_train=len(frame))
    if kind == "level_means":
        counts = np.bincount(level, minlength=n_levels)
        sums = np.stack([np.bincount(level, weights=y, minlength=n_levels),
                         np.bincount(level, weights=z, minlength=n_levels)], axis=1)
        overall = np.array([y.mean(), z.mean()])
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], overall[None])
        model.level_means = means
        return model
    from sklearn.ensemble import HistGradientBoostingRegressor

    model.categories = {f: sorted(frame[f].astype("string").dropna().unique().tolist()) for f in categorical}
    x = np.column_stack([model._matrix(frame), level.astype(np.float64)])
    cat_mask = [False] * len(numeric) + [True] * len(categorical) + [not ordered]
    too_many = [f for f in categorical if len(model.categories[f]) > 255]
    if too_many:  # HistGradientBoosting takes at most 255 categories: use the codes as numbers
        for f in too_many:
            cat_mask[len(numeric) + categorical.index(f)] = False

    def regressor():
        # small trees, L2 and early stopping on a 10 % split: binary responses are mostly noise, and
        # an overfitted outcome model only adds variance to the DR estimate
        return HistGradientBoostingRegressor(max_iter=max_iter, learning_rate=0.1, max_leaf_nodes=15,
                                             min_samples_leaf=50, l2_regularization=1.0,
                                             categorical_features=cat_mask, early_stopping=True,
                                             validation_fraction=0.1, n_iter_no_change=10, random_state=seed)

    model.response_model = regressor().fit(x, y)
    if inc is None:
        model.cost_model = regressor().fit(x, z)
    return model
