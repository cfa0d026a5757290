"""Response-curve metrics (DIPN §5) on hand-made curves whose values are known."""

import math

import numpy as np
import pytest

from promo_assets.evaluation.curve_metrics import (
    CurveMetricsError,
    LevelScale,
    curve_metrics,
    equal_pair_rate,
    max_local_slope_std,
    reverse_pair_rate,
)


def test_monotone_curve_has_no_reversed_or_equal_pairs():
    pred = np.array([[0.1, 0.2, 0.3, 0.4], [0.0, 0.5, 0.6, 0.9]])
    assert reverse_pair_rate(pred) == 0.0
    assert equal_pair_rate(pred) == 0.0


def test_flat_curve_is_all_equal_pairs_and_decreasing_all_reversed():
    assert equal_pair_rate(np.full((3, 5), 0.2)) == 1.0
    assert reverse_pair_rate(np.full((3, 5), 0.2)) == 0.0
    assert reverse_pair_rate(np.array([[0.4, 0.3, 0.2, 0.1]])) == 1.0


def test_pair_rates_count_pairs_like_the_paper():
    # [0.1, 0.3, 0.2, 0.4]: one reversed pair (levels 2 > 1 with 0.2 < 0.3) of 6 -> 1/6.
    # [0.1, 0.1, 0.2, 0.2]: two equal pairs of 6 -> 1/3. Population value = mean over rows.
    pred = np.array([[0.1, 0.3, 0.2, 0.4], [0.1, 0.1, 0.2, 0.2]])
    assert reverse_pair_rate(pred) == pytest.approx((1 / 6 + 0) / 2)
    assert equal_pair_rate(pred) == pytest.approx((0 + 1 / 3) / 2)


def test_equal_tolerance_separates_noise_from_real_differences():
    pred = np.array([[0.2, 0.2 + 1e-9, 0.2 - 1e-9]])
    assert equal_pair_rate(pred) == 1.0 and reverse_pair_rate(pred) == 0.0
    assert equal_pair_rate(pred, equal_atol=0.0) == 0.0
    assert reverse_pair_rate(pred, equal_atol=0.0) == pytest.approx(2 / 3)


def test_mlss_zero_for_straight_lines_and_known_value_for_a_kink():
    straight = np.array([[0.1, 0.2, 0.3, 0.4], [1.0, 3.0, 5.0, 7.0]])
    assert max_local_slope_std(straight) == pytest.approx(0.0, abs=1e-12)
    # slopes 0.2, -0.1, 0.2 on levels 0..3; radius 2 -> windows hold slopes {0,1}, {0,1,2},
    # {0,1,2}, {1,2}; stds 0.15, 0.1414, 0.1414, 0.15 -> max 0.15.
    kink = np.array([[0.1, 0.3, 0.2, 0.4]])
    assert max_local_slope_std(kink) == pytest.approx(0.15)
    # slopes are per unit of incentive: doubling the grid spacing halves them
    assert max_local_slope_std(kink, incentives=[0, 2, 4, 6]) == pytest.approx(0.075)
    # a radius that only ever holds one slope gives 0
    assert max_local_slope_std(kink, radius=0.5) == 0.0


def test_curve_metrics_logloss_auc_against_sklearn_definitions():
    rng = np.random.default_rng(0)
    n, k = 400, 4
    pred = np.sort(rng.uniform(0.05, 0.95, size=(n, k)), axis=1)
    levels = rng.integers(0, k, n)
    p_obs = pred[np.arange(n), levels]
    y = (rng.uniform(size=n) < p_obs).astype(float)
    m = curve_metrics(pred, levels, y)
    expected_ll = -np.mean(y * np.log(p_obs) + (1 - y) * np.log(1 - p_obs))
    assert m["logloss"] == pytest.approx(expected_ll, rel=1e-9)
    # AUC by its pair definition: P(score of a positive > score of a negative)
    pos, neg = p_obs[y == 1], p_obs[y == 0]
    auc = np.mean(pos[:, None] > neg[None, :]) + 0.5 * np.mean(pos[:, None] == neg[None, :])
    assert m["auc"] == pytest.approx(auc, rel=1e-9)
    assert m["rpr"] == 0.0 and m["epr"] == 0.0
    assert m["rmse"] == pytest.approx(np.sqrt(np.mean((p_obs - y) ** 2)))


def test_curve_metrics_non_binary_and_unordered_give_nan_where_undefined():
    pred = np.array([[1.0, 2.0], [1.5, 1.0], [0.5, 2.5]])
    m = curve_metrics(pred, [0, 1, 1], [2.0, 0.0, 3.0])
    assert math.isnan(m["logloss"]) and math.isnan(m["auc"])
    assert m["rpr"] == pytest.approx(1 / 3)
    m2 = curve_metrics(pred, [0, 1, 1], [1.0, 0.0, 1.0], scale=LevelScale(ordered=False))
    assert math.isnan(m2["rpr"]) and math.isnan(m2["epr"]) and math.isnan(m2["mlss"])
    assert not math.isnan(m2["logloss"])


def test_curve_metrics_rejects_bad_input():
    with pytest.raises(CurveMetricsError, match="2-D"):
        curve_metrics(np.zeros(3), [0, 0, 0], [0, 0, 0])
    with pytest.raises(CurveMetricsError, match="0..1"):
        curve_metrics(np.zeros((2, 2)), [0, 2], [0, 1])
    with pytest.raises(CurveMetricsError, match="one entry per row"):
        curve_metrics(np.zeros((2, 2)), [0], [0, 1])
    with pytest.raises(CurveMetricsError, match="NaN"):
        curve_metrics(np.array([[np.nan, 0.1], [0.1, 0.2]]), [0, 1], [0, 1])
    with pytest.raises(CurveMetricsError, match="ascending"):
        max_local_slope_std(np.zeros((1, 3)), incentives=[0, 2, 1])
