"""Offline policy evaluation: EOM, Q(v, c), AUCC, ground truth, response-curve metrics, plots.

Domain code: never imports dagster.
"""

from promo_assets.evaluation.curve_metrics import (
    CURVE_METRIC_NAMES,
    CurveMetricsError,
    curve_metrics,
    equal_pair_rate,
    max_local_slope_std,
    reverse_pair_rate,
)

__all__ = [
    "CURVE_METRIC_NAMES",
    "CurveMetricsError",
    "curve_metrics",
    "equal_pair_rate",
    "max_local_slope_std",
    "reverse_pair_rate",
]
