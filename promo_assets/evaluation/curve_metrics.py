"""Response-curve metrics of a response model: LogLoss, AUC, RPR, EPR, MLSS (DIPN paper, §5).

Every metric takes the model's counterfactual predictions for the holdout users, one row per
observed user-incentive-response record and one column per incentive level
(`pred_values`, N x K, levels 0..K-1 in ascending incentive order), plus what was observed.

Definitions (DIPN §5, "Massive-scale personalized promotion", written here in our notation;
p_ij is the predicted response of row i at level j, c_j the incentive of level j, c_0 < ... < c_{K-1}):

- LogLoss: mean binary cross-entropy of the prediction at the *observed* level, p_{i,t_i}, against
  the observed binary response y_i (sklearn.metrics.log_loss; predictions clipped to [eps, 1-eps]).
- AUC: ROC AUC of p_{i,t_i} against y_i (sklearn.metrics.roc_auc_score).
- RPR (reverse pair rate): for each row, over the n(n-1)/2 pairs of levels a > b, count the
  reversed pairs rp_i = #{a > b : p_ia < p_ib}; RPR_i = 2 rp_i / (n(n-1)); RPR = mean_i RPR_i.
- EPR (equal pair rate): the same with equal predictions, #{a > b : p_ia == p_ib}.
  Equality is judged within an absolute tolerance `equal_atol` (our choice, default 1e-6: float32
  network outputs of a flat curve differ by rounding noise); a pair counted as equal is never also
  counted as reversed, so a pair is reversed when p_ia < p_ib - equal_atol.
- MLSS (max local slope standard deviation): local slopes between consecutive levels
  s_ik = (p_{i,k+1} - p_ik) / (c_{k+1} - c_k), k = 0..K-2. For every centre incentive c_m and a
  radius r, collect the slopes whose segment [c_k, c_{k+1}] lies inside [c_m - r, c_m + r] and
  take their standard deviation (population std, ddof=0; 0 when fewer than two slopes); the row's
  MLSS is the maximum over centres; MLSS = mean over rows. The paper does not give r: our
  documented default is twice the median spacing of the incentive grid (a window of up to four
  consecutive slopes), overridable with `radius`.

RPR, EPR and MLSS need ordered levels; for unordered arms (`ordered=False`) they are NaN.
LogLoss and AUC need a binary response; otherwise they are NaN and `rmse` (root mean squared error
of p_{i,t_i} against y_i) is the fit metric that is always reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from promo_assets.core.errors import DomainError

__all__ = [
    "CurveMetricsError",
    "LevelScale",
    "curve_metrics",
    "reverse_pair_rate",
    "equal_pair_rate",
    "max_local_slope_std",
    "CURVE_METRIC_NAMES",
]

CURVE_METRIC_NAMES = ("logloss", "auc", "rmse", "rpr", "epr", "mlss")


class CurveMetricsError(DomainError, ValueError):
    """Bad input to a response-curve metric (shapes, levels out of range, non-finite values)."""


@dataclass(frozen=True)
class LevelScale:
    """What the response-curve metrics need to know of a campaign's levels and response: the K
    `incentives` (amounts for the MLSS slopes; None: the level indices), whether the levels are
    `ordered` (False for unordered arms: RPR/EPR/MLSS become NaN) and whether the response is
    `binary` (None: inferred from the observed responses)."""

    incentives: Sequence[float] | None = None
    ordered: bool = True
    binary: bool | None = None


def _as_pred(pred_values) -> np.ndarray:
    pred = np.asarray(pred_values, dtype=np.float64)
    if pred.ndim != 2 or pred.shape[1] < 2:
        raise CurveMetricsError(
            f"pred_values must be a 2-D array N x K with K >= 2 levels, got shape {pred.shape}"
        )
    if not np.all(np.isfinite(pred)):
        raise CurveMetricsError("pred_values contains NaN or infinite predictions")
    return pred


def _as_incentives(incentives, k: int) -> np.ndarray:
    if incentives is None:
        return np.arange(k, dtype=np.float64)
    inc = np.asarray(incentives, dtype=np.float64).ravel()
    if inc.shape != (k,):
        raise CurveMetricsError(f"incentives must have one amount per level ({k}), got {inc.shape[0]}")
    if np.any(np.diff(inc) <= 0):
        raise CurveMetricsError(f"incentives must be strictly ascending, got {inc.tolist()}")
    return inc


def _pair_counts(pred: np.ndarray, equal_atol: float) -> tuple[np.ndarray, np.ndarray]:
    """Per row: (number of reversed pairs, number of equal pairs) over all level pairs a > b."""
    k = pred.shape[1]
    lo, hi = np.triu_indices(k, 1)  # all pairs lo < hi of level indices
    diff = pred[:, hi] - pred[:, lo]  # p(larger level) - p(smaller level), N x n_pairs
    equal = np.abs(diff) <= equal_atol
    reversed_ = diff < -equal_atol
    return reversed_.sum(axis=1), equal.sum(axis=1)


def reverse_pair_rate(pred_values, equal_atol: float = 1e-6) -> float:
    """RPR (DIPN §5): mean over rows of 2 rp / (K(K-1)), rp = #pairs a > b with p_a < p_b.

    Takes `pred_values` N x K (levels in ascending incentive order); returns a float in [0, 1].
    A monotone non-decreasing curve has RPR 0.
    """
    pred = _as_pred(pred_values)
    k = pred.shape[1]
    rev, _ = _pair_counts(pred, equal_atol)
    return float(np.mean(2.0 * rev / (k * (k - 1))))


def equal_pair_rate(pred_values, equal_atol: float = 1e-6) -> float:
    """EPR (DIPN §5): mean over rows of the share of level pairs with equal prediction.

    Takes `pred_values` N x K; returns a float in [0, 1]; a flat curve has EPR 1.
    """
    pred = _as_pred(pred_values)
    k = pred.shape[1]
    _, eq = _pair_counts(pred, equal_atol)
    return float(np.mean(2.0 * eq / (k * (k - 1))))


def max_local_slope_std(pred_values, incentives: Sequence[float] | None = None,
                        radius: float | None = None) -> float:
    """MLSS (DIPN §5): mean over rows of max over centres of the std of local slopes in a window.

    Takes `pred_values` N x K, `incentives` (K ascending amounts; default the level indices
    0..K-1) and `radius` r of the window [c_m - r, c_m + r] (default: 2 x median grid spacing,
    our choice since the paper leaves r open). Returns a float >= 0 (0 for straight lines).
    """
    pred = _as_pred(pred_values)
    k = pred.shape[1]
    inc = _as_incentives(incentives, k)
    gaps = np.diff(inc)
    if radius is None:
        radius = 2.0 * float(np.median(gaps))
    if not np.isfinite(radius) or radius <= 0:
        raise CurveMetricsError(f"radius must be a positive number, got {radius!r}")
    slopes = np.diff(pred, axis=1) / gaps  # N x (K-1)
    best = np.zeros(pred.shape[0])
    tol = 1e-12 * max(1.0, float(np.abs(inc).max()))
    for centre in inc:
        inside = (inc[:-1] >= centre - radius - tol) & (inc[1:] <= centre + radius + tol)
        if inside.sum() < 2:
            continue
        best = np.maximum(best, slopes[:, inside].std(axis=1))
    return float(best.mean())


def curve_metrics(
    pred_values,
    observed_levels,
    observed_responses,
    *,
    scale: LevelScale = LevelScale(),
    radius: float | None = None,
    equal_atol: float = 1e-6,
    sample_weight=None,
) -> dict[str, float]:
    """All response-curve metrics of one model on one data set (DIPN §5).

    Takes:
      pred_values: N x K predicted response per row and level (ascending incentive order).
      observed_levels: N ints in 0..K-1, the level each row actually received.
      observed_responses: N observed responses.
      scale: the levels' `LevelScale`: incentives, K amounts for MLSS slopes (default level indices);
      ordered, False for unordered arms (RPR/EPR/MLSS become NaN); binary, whether the response is 0/1
      (default: inferred from the observed responses); radius, equal_atol: see the module docstring; sample_weight:
      optional N weights (e.g. IPS weights) for LogLoss/AUC/RMSE.
    Returns a dict with keys "logloss", "auc", "rmse", "rpr", "epr", "mlss" (floats, NaN where
    a metric does not apply: LogLoss/AUC without a binary response or with one class only).
    """
    from sklearn.metrics import log_loss, roc_auc_score

    pred = _as_pred(pred_values)
    n, k = pred.shape
    levels = np.asarray(observed_levels)
    y = np.asarray(observed_responses, dtype=np.float64).ravel()
    if levels.shape != (n,) or y.shape != (n,):
        raise CurveMetricsError(
            f"observed_levels and observed_responses must have one entry per row of pred_values "
            f"({n}), got {levels.shape} and {y.shape}"
        )
    if n == 0:
        raise CurveMetricsError("curve_metrics needs at least one row")
    if not np.issubdtype(levels.dtype, np.integer):
        if not np.all(np.isfinite(levels.astype(float))) or np.any(levels != np.round(levels)):
            raise CurveMetricsError("observed_levels must be integer level indices")
        levels = levels.astype(np.int64)
    if levels.min() < 0 or levels.max() >= k:
        raise CurveMetricsError(f"observed_levels must lie in 0..{k - 1}, got {levels.min()}..{levels.max()}")
    if not np.all(np.isfinite(y)):
        raise CurveMetricsError("observed_responses contains NaN or infinite values")
    w = None
    if sample_weight is not None:
        w = np.asarray(sample_weight, dtype=np.float64).ravel()
        if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise CurveMetricsError("sample_weight must be N finite non-negative weights")

    p_obs = pred[np.arange(n), levels]
    binary = scale.binary
    if binary is None:
        binary = bool(np.all((y == 0) | (y == 1)))
    out: dict[str, float] = {name: float("nan") for name in CURVE_METRIC_NAMES}
    out["rmse"] = float(np.sqrt(np.average((p_obs - y) ** 2, weights=w)))
    if binary:
        if np.any((y != 0) & (y != 1)):
            raise CurveMetricsError("binary=True but observed_responses has values other than 0 and 1")
        eps = 1e-7
        p_clip = np.clip(p_obs, eps, 1 - eps)
        out["logloss"] = float(log_loss(y, p_clip, sample_weight=w, labels=[0.0, 1.0]))
        if 0 < y.sum() < n:
            out["auc"] = float(roc_auc_score(y, p_obs, sample_weight=w))
    if scale.ordered:
        out["rpr"] = reverse_pair_rate(pred, equal_atol)
        out["epr"] = equal_pair_rate(pred, equal_atol)
        out["mlss"] = max_local_slope_std(pred, scale.incentives, radius)
    return out
