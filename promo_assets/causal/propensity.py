"""Propensities P(level | user) of the logged treatment: randomized designs and a fitted model.

- randomized campaigns: the logged propensity, or the empirical per-day assignment frequency of
  the logged level where none is logged (:func:`randomized_propensity`, :func:`assignment_frequencies`);
- observational campaigns (`randomized: false`): a calibrated multinomial logistic regression
  P(level | features) (:class:`PropensityModel`), the propensity model behind the inverse
  propensity scoring of the DIPN paper (§2.2: IPS "to weight sample data when the data collection
  process is not randomized").
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, softmax
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    OneHotEncoder,
    QuantileTransformer,
    SplineTransformer,
    StandardScaler,
)

from promo_assets.core.errors import DomainError

Log = Callable[[str], None] | None

MISSING = "__missing__"


class PropensityError(DomainError, ValueError):
    """Bad input to a propensity function (missing column, level out of range, bad probability)."""


def _require(frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise PropensityError(f"{what}: frame has no column(s) {missing}; it has {list(frame.columns)}")


def _levels(frame: pd.DataFrame, n_levels: int, what: str) -> np.ndarray:
    if n_levels < 2:
        raise PropensityError(f"{what}: n_levels must be >= 2, got {n_levels}")
    level = frame["level"].to_numpy()
    if level.size and (pd.isna(level).any() or level.min() < 0 or level.max() >= n_levels
                       or np.any(np.asarray(level, dtype=np.float64) % 1 != 0)):
        raise PropensityError(f"{what}: column 'level' must hold integers in 0..{n_levels - 1}")
    return level.astype(np.int64)


def _day_codes(frame: pd.DataFrame) -> np.ndarray:
    return pd.factorize(pd.to_datetime(frame["event_date"]).dt.normalize())[0]


def assignment_frequencies(frame: pd.DataFrame, n_levels: int) -> np.ndarray:
    """Empirical assignment frequency of every level on each row's day: N x K (rows sum to 1).

    frame: columns event_date, level. This is the design an RCT ran on that day, estimated from
    the logged levels (used for overlap diagnostics and when no propensity is logged)."""
    _require(frame, ["event_date", "level"], "assignment_frequencies")
    level = _levels(frame, n_levels, "assignment_frequencies")
    day = _day_codes(frame)
    n_days = int(day.max()) + 1 if day.size else 0
    counts = np.zeros((n_days, n_levels))
    np.add.at(counts, (day, level), 1.0)
    freq = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1.0)
    return freq[day]


def randomized_propensity(frame: pd.DataFrame, n_levels: int) -> np.ndarray:
    """Propensity of each row's logged level in a randomized campaign (length N).

    frame: columns event_date, level (0..K-1) and optionally propensity. Uses the logged
    propensity where it is present, else the empirical frequency of the logged level on that day.
    Raises PropensityError for missing columns, levels out of range or logged values outside (0, 1].
    """
    _require(frame, ["event_date", "level"], "randomized_propensity")
    level = _levels(frame, n_levels, "randomized_propensity")
    empirical = assignment_frequencies(frame, n_levels)[np.arange(len(frame)), level]
    if "propensity" not in frame.columns:
        return empirical
    logged = pd.to_numeric(frame["propensity"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isnan(logged) & ~((logged > 0) & (logged <= 1))
    if bad.any():
        raise PropensityError(
            f"randomized_propensity: {int(bad.sum())} logged propensities outside (0, 1], e.g. {logged[bad][:3].tolist()}"
        )
    return np.where(np.isnan(logged), empirical, logged)


def _categorical_as_text(x: pd.DataFrame) -> pd.DataFrame:
    """Categorical columns as plain strings, missing values as one '__missing__' category."""
    return x.astype("string").fillna(MISSING).astype(object)


def _build_encoder(frame: pd.DataFrame, numeric: list[str], categorical: list[str], splines: bool, n_knots: int) -> ColumnTransformer:
    parts = []
    if numeric:
        parts.append(("num", Pipeline([("impute", SimpleImputer(strategy="median")), ("scale", StandardScaler())]), list(numeric)))
        varying = [c for c in numeric if pd.to_numeric(frame[c], errors="coerce").nunique(dropna=True) > n_knots]
        if splines and varying:
            parts.append((
                "spline",
                Pipeline([
                    ("impute", SimpleImputer(strategy="median")),
                    ("rank", QuantileTransformer(n_quantiles=200, subsample=20_000, random_state=0)),
                    ("spline", SplineTransformer(n_knots=n_knots, degree=3, knots="uniform", extrapolation="constant")),
                ]),
                varying,
            ))
    if categorical:
        parts.append((
            "cat",
            Pipeline([
                ("text", FunctionTransformer(_categorical_as_text)),
                ("onehot", OneHotEncoder(handle_unknown="ignore", sparse_output=False)),
            ]),
            list(categorical),
        ))
    if not parts:
        raise PropensityError("PropensityModel: no feature columns (numeric and categorical are both empty)")
    return ColumnTransformer(parts, remainder="drop")


def _nll(logits: np.ndarray, y: np.ndarray, temperature: float) -> float:
    return float(-log_softmax(logits / temperature, axis=1)[np.arange(y.size), y].mean())


def classwise_ece(proba: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Class-wise expected calibration error: mean over levels of sum_b (n_b / N) |mean P_k - freq_k| in bin b."""
    n, k = proba.shape
    edges = np.linspace(0.0, 1.0, bins + 1)
    total = 0.0
    for j in range(k):
        p = proba[:, j]
        hit = (y == j).astype(np.float64)
        b = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
        cnt = np.bincount(b, minlength=bins)
        sp = np.bincount(b, weights=p, minlength=bins)
        sh = np.bincount(b, weights=hit, minlength=bins)
        nz = cnt > 0
        total += float(np.abs(sp[nz] - sh[nz]).sum() / n)
    return total / k


class _fit_method:
    """`PropensityModel.fit(frame, ...)` on the class builds a default model and fits it;
    `PropensityModel(C=...).fit(frame, ...)` fits that instance. Both return the fitted model."""

    def __init__(self, func):
        self.func = func
        self.__doc__ = func.__doc__

    def __get__(self, obj, owner):
        target = owner() if obj is None else obj
        return self.func.__get__(target, owner)


class PropensityModel:
    """Calibrated multinomial model P(level | features) for observational campaigns.

    Encoder: numeric columns median-imputed and standardized, plus (when `splines`, off by default:
    it makes lbfgs 10-20x slower) a cubic B-spline basis of their empirical quantile rank; categorical columns one-hot with an ignored unknown bucket and
    a '__missing__' category. Classifier: sklearn multinomial LogisticRegression (L2, C).
    Calibration: temperature scaling of the logits (Guo et al. 2017) fitted on a held-out
    `calibration_fraction` of the rows, after which the classifier is refitted on all rows and
    the temperature kept; `calibration='none'` skips it. The log loss and class-wise ECE before
    and after calibration on the held-out rows are in `.metrics`. Picklable.
    """

    def __init__(
        self,
        C: float = 1.0,
        calibration: str = "temperature",
        splines: bool = False,
        n_knots: int = 5,
        calibration_fraction: float = 0.2,
        max_rows: int | None = 500_000,
        max_iter: int = 500,
    ) -> None:
        if calibration not in ("temperature", "none"):
            raise PropensityError(f"PropensityModel: calibration must be 'temperature' or 'none', got {calibration!r}")
        if not 0.0 < calibration_fraction < 1.0:
            raise PropensityError(f"PropensityModel: calibration_fraction must be in (0, 1), got {calibration_fraction}")
        self.C = float(C)
        self.calibration = calibration
        self.splines = bool(splines)
        self.n_knots = int(n_knots)
        self.calibration_fraction = float(calibration_fraction)
        self.max_rows = max_rows
        self.max_iter = int(max_iter)
        self.temperature = 1.0
        self.metrics: dict[str, float] = {}
        self.numeric: list[str] = []
        self.categorical: list[str] = []
        self.n_levels = 0
        self._encoder: ColumnTransformer | None = None
        self._classifier: LogisticRegression | None = None

    # -- fitting -------------------------------------------------------------------------------
    def _fit_once(self, frame: pd.DataFrame, level: np.ndarray) -> tuple[ColumnTransformer, LogisticRegression]:
        encoder = _build_encoder(frame, self.numeric, self.categorical, self.splines, self.n_knots)
        x = encoder.fit_transform(frame)
        clf = LogisticRegression(C=self.C, max_iter=self.max_iter)
        clf.fit(x, level)
        return encoder, clf

    def _logits(self, encoder: ColumnTransformer, clf: LogisticRegression, frame: pd.DataFrame) -> np.ndarray:
        x = encoder.transform(frame)
        raw = clf.decision_function(x)
        if raw.ndim == 1:  # two classes present: sklearn returns one logit
            raw = np.stack([np.zeros_like(raw), raw], axis=1)
        logits = np.full((len(frame), self.n_levels), -30.0)  # levels never logged: ~0 probability
        logits[:, clf.classes_.astype(np.int64)] = raw
        return logits

    @_fit_method
    def fit(
        self,
        frame: pd.DataFrame,
        numeric: Sequence[str],
        categorical: Sequence[str],
        n_levels: int,
        seed: int = 0,
        log: Log = None,
    ) -> "PropensityModel":
        """Fit on `frame` (columns level 0..K-1 + the feature columns); returns self.

        Rows beyond `max_rows` are subsampled (seeded). Raises PropensityError for missing columns,
        levels out of range, fewer than two logged levels or too few rows."""
        self.numeric, self.categorical, self.n_levels = list(numeric), list(categorical), int(n_levels)
        _require(frame, ["level", *self.numeric, *self.categorical], "PropensityModel.fit")
        level = _levels(frame, self.n_levels, "PropensityModel.fit")
        if np.unique(level).size < 2:
            raise PropensityError("PropensityModel.fit: fewer than two distinct logged levels")
        if len(frame) < 20:
            raise PropensityError(f"PropensityModel.fit: {len(frame)} rows are too few to fit a propensity model")
        rng = np.random.default_rng(seed)
        rows = np.arange(len(frame))
        if self.max_rows is not None and len(frame) > self.max_rows:
            rows = np.sort(rng.choice(len(frame), size=self.max_rows, replace=False))
        data = frame.iloc[rows].reset_index(drop=True)
        y = level[rows]
        metrics: dict[str, float] = {"n_rows": float(len(data))}
        if self.calibration == "temperature":
            perm = rng.permutation(len(data))
            n_cal = max(1, int(round(self.calibration_fraction * len(data))))
            cal, fit = np.sort(perm[:n_cal]), np.sort(perm[n_cal:])
            enc, clf = self._fit_once(data.iloc[fit], y[fit])
            logits = self._logits(enc, clf, data.iloc[cal])
            res = minimize_scalar(lambda t: _nll(logits, y[cal], float(np.exp(t))), bounds=(-3.0, 3.0), method="bounded")
            self.temperature = float(np.exp(res.x))
            raw_p, cal_p = softmax(logits, axis=1), softmax(logits / self.temperature, axis=1)
            metrics.update({
                "temperature": self.temperature,
                "log_loss_raw": _nll(logits, y[cal], 1.0),
                "log_loss_calibrated": _nll(logits, y[cal], self.temperature),
                "ece_raw": classwise_ece(raw_p, y[cal]),
                "ece_calibrated": classwise_ece(cal_p, y[cal]),
                "n_calibration": float(cal.size),
            })
            if log:
                log(f"propensity: temperature {self.temperature:.3f}, held-out log loss "
                    f"{metrics['log_loss_raw']:.4f} -> {metrics['log_loss_calibrated']:.4f}, "
                    f"ECE {metrics['ece_raw']:.4f} -> {metrics['ece_calibrated']:.4f}")
        self._encoder, self._classifier = self._fit_once(data, y)
        proba = self.predict_proba(data)
        metrics["log_loss_train"] = float(-np.log(np.clip(proba[np.arange(y.size), y], 1e-300, None)).mean())
        metrics["ece_train"] = classwise_ece(proba, y)
        self.metrics = metrics
        if log:
            log(f"propensity: fitted on {len(data)} rows, {self.n_levels} levels, train log loss {metrics['log_loss_train']:.4f}")
        return self

    # -- scoring -------------------------------------------------------------------------------
    def predict_proba(self, frame: pd.DataFrame) -> np.ndarray:
        """P(level | features) for every row: N x K, rows sum to 1."""
        if self._encoder is None or self._classifier is None:
            raise PropensityError("PropensityModel: call fit() before predict_proba()")
        _require(frame, [*self.numeric, *self.categorical], "PropensityModel.predict_proba")
        return softmax(self._logits(self._encoder, self._classifier, frame) / self.temperature, axis=1)

    def propensity_of(self, frame: pd.DataFrame, level: np.ndarray | None = None) -> np.ndarray:
        """P(logged level | features) per row (level: defaults to frame['level'])."""
        lv = _levels(frame, self.n_levels, "propensity_of") if level is None else np.asarray(level, dtype=np.int64)
        return self.predict_proba(frame)[np.arange(len(frame)), lv]


def fit_propensity(
    frame: pd.DataFrame,
    numeric: Sequence[str],
    categorical: Sequence[str],
    n_levels: int,
    seed: int = 0,
    log: Log = None,
    **params,
) -> PropensityModel:
    """Shorthand: PropensityModel(**params).fit(frame, numeric, categorical, n_levels, seed, log)."""
    return PropensityModel(**params).fit(frame, numeric, categorical, n_levels, seed=seed, log=log)
